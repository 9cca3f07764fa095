"""Two real processes, clocks minutes apart, writing one PostgreSQL ledger; then a report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.analytics.reference import reference
from tests.ledger.conftest import pg_schema_url
from tracing.analytics import Analytics, AnalyticsOptions
from tracing.cli import main
from tracing.ledger import open_ledger

WRITER = str(Path(__file__).with_name("_skewed_writer.py"))
CALLS = 240


@pytest.mark.postgres
def test_two_processes_with_skewed_clocks_then_a_report_equal_to_the_ledger(
    postgres_url: str, tmp_path: Path
) -> None:
    url = pg_schema_url(postgres_url)
    open_ledger(url).close()  # the schema, before two migrators race for it
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    children = [
        subprocess.Popen(
            [sys.executable, WRITER, url, str(offset), name, str(CALLS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for name, offset in (("behind", -600), ("ahead", 240))  # 10 min slow, 4 min fast
    ]
    # a copy kept in step while they write (its syncs see their commits interleaved)
    options = AnalyticsOptions(snapshot=False, recount_seconds=0)
    engine = Analytics(url, options=options)
    try:
        while any(c.poll() is None for c in children):
            engine.sync()
            time.sleep(0.05)
        made: list[dict[str, Any]] = []
        for child in children:
            out, err = child.communicate(timeout=60)
            assert child.returncode == 0, err
            lines = [json.loads(line) for line in out.splitlines()]
            assert lines[-1] == {"done": CALLS}
            made += lines[:-1]
        engine.sync()
        copied = engine.query("SELECT tool_call_id, version FROM calls ORDER BY 1").rows
    finally:
        engine.close()

    reader = open_ledger(url, read_only=True)
    try:
        sessions = [s["session_id"] for s in reader.sessions(limit=10)]
        anchors = [a for s in sessions for a in reader.session_anchors(s)]
    finally:
        reader.close()
    # every call is one row with its own data, though both reused call_0..call_2 all along
    assert len(made) == 2 * CALLS
    by_span = {a["span_id"]: a for a in anchors}
    assert len(anchors) == len(by_span) == len(made)
    for call in made:
        row = by_span[call["span_id"]]
        assert (row["session_id"], row["turn"], row["provider_call_id"], row["intent"]) == (
            call["session"],
            call["turn"],
            call["provider"],
            call["intent"],
        )
        assert row["outcome"] == call["intent"].replace("looking at", "found")
    assert len({a["tool_call_id"] for a in anchors}) == len(anchors)
    # the copy kept in step while they wrote is the ledger
    assert copied == sorted((a["tool_call_id"], a["version"]) for a in anchors)
    # and so is a report, from a new process's point of view (the CLI, cold)
    env_cache = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    result = CliRunner().invoke(
        main, ["report", "tools", "--format", "json", "--ledger", url], env=env_cache
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)  # one table: a list of rows
    expected = reference("tools", anchors)
    assert [tuple(r.values()) for r in rows] == [tuple(r) for r in expected]
