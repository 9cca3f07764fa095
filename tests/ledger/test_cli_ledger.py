"""``intentrace sessions`` and ``intentrace summary`` through click's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracing.cli import main
from tracing.ledger import open_ledger
from tracing.status import Status

T0 = 1_700_000_000_000_000_000


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/cli.db"
    with open_ledger(url) as ledger:
        for i in range(3):
            ledger.record({
                "tool_call_id": f"c{i}", "tool_name": "search_code" if i else "read_file",
                "status": Status.SUCCESS if i != 1 else Status.ERROR, "session_id": f"conv-{i % 2}",
                "agent_id": "coder", "intent": f"Searching for thing {i}", "turn": 1,
                "start_ns": T0 + i * 10**9, "end_ns": T0 + i * 10**9 + 5 * 10**8,
                "error": "timeout" if i == 1 else None,
            })  # fmt: skip
        assert ledger.flush()
    return url


def test_sessions_table_and_json(db: str) -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["sessions", "--ledger", db])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == [
        "SESSION", "CALLS", "ERRORS", "LIVE", "TURN", "AGENTS", "TOOLS", "LAST", "ACTIVITY"
    ]  # fmt: skip
    assert lines[1].split()[:4] == ["conv-0", "2", "0", "0"]  # most recent activity first
    assert lines[2].split()[:4] == ["conv-1", "1", "1", "0"]
    result = runner.invoke(
        main, ["sessions", "--ledger", db, "--format", "json", "--status", "error"]
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [r["session_id"] for r in rows] == ["conv-1"]
    assert rows[0]["tools"] == ["search_code"] and rows[0]["agents"] == ["coder"]


def test_summary(db: str) -> None:
    result = CliRunner().invoke(main, ["summary", "conv-0", "--ledger", db])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "session conv-0: 2 settled calls.",
        "t1 #1 read_file ok 500ms: Searching for thing 0",
        "t1 #3 search_code ok 500ms: Searching for thing 2",
    ]
    result = CliRunner().invoke(main, ["summary", "conv-0", "--ledger", db, "--max-chars", "60"])
    assert result.exit_code == 0 and len(result.output.rstrip("\n")) <= 60


def test_domain_errors_are_one_line(tmp_path: Path, db: str) -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["sessions", "--ledger", str(tmp_path / "nope.db")])
    assert result.exit_code == 1
    assert (
        result.output.startswith("Error: no ledger database at ") and result.output.count("\n") == 1
    )
    result = runner.invoke(main, ["summary", "missing", "--ledger", db])
    assert result.exit_code == 1 and result.output.startswith("Error: no session 'missing'")
    result = runner.invoke(main, ["sessions", "--ledger", "mysql://x"])
    assert result.exit_code == 1 and "unsupported ledger URL" in result.output
    assert "Traceback" not in result.output
