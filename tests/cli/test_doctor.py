"""``intentrace doctor``: the scrubber engine, the policy, the ledger and the extras, reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracing.cli import main
from tracing.ledger import open_ledger


def _checks(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, dict[str, str]]]:
    result = CliRunner().invoke(main, ["doctor", "--json", *args], env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    rows = [json.loads(line) for line in result.output.splitlines()]
    return result.exit_code, {r["name"]: r for r in rows}


def test_reports_the_engine_ledger_and_extras(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    open_ledger(str(db)).close()  # a writing ledger creates the database
    code, checks = _checks("--ledger", str(db), env={"INTENTRACE_SCRUB_ENGINE": ""})
    assert code == 0
    assert checks["scrubber engine"]["level"] == "ok"
    assert checks["scrubber engine"]["detail"].startswith("hyperscan")
    assert checks["ledger"] == {
        "name": "ledger",
        "level": "ok",
        "detail": checks["ledger"]["detail"],
    }
    assert "(0 sessions)" in checks["ledger"]["detail"]
    assert checks["extra [langfuse]"]["level"] == "ok"  # the test environment has every extra


def test_the_python_fallback_is_a_warning(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    open_ledger(str(db)).close()
    code, checks = _checks("--ledger", str(db), env={"INTENTRACE_SCRUB_ENGINE": "python"})
    assert code == 0
    engine = checks["scrubber engine"]
    assert engine["level"] == "warn" and "pure Python" in engine["detail"]


def test_a_missing_ledger_or_a_broken_policy_fails(tmp_path: Path) -> None:
    code, checks = _checks("--ledger", str(tmp_path / "none.db"))
    assert code == 1 and checks["ledger"]["level"] == "fail"
    bad = tmp_path / "policy.toml"
    bad.write_text("[scrub]\nengine = 'fastest'\n", encoding="utf-8")
    code, checks = _checks("--policy", str(bad), "--ledger", str(tmp_path / "none.db"))
    assert code == 1
    assert checks["redaction policy"]["level"] == "fail"
    assert "engine" in checks["redaction policy"]["detail"]


def test_table_output_and_no_password(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = "postgresql://app:s3cr3t-pw@127.0.0.1:1/nope"
    result = CliRunner().invoke(main, ["doctor", "--ledger", url])
    assert "s3cr3t-pw" not in result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("OK    runtime")
    assert any(line.startswith("FAIL  ledger") for line in lines)
    assert result.exit_code == 1
