"""Calls lost before reaching the ledger are counted in it: what a span processor shed under
load (``record_dropped``) and what the ledger's own full queue dropped; the readers (the read
API, ``intentrace sessions``/``summary``) say so. Older ledgers without the table read as
nothing dropped."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

from tests.ledger.conftest import FAST
from tracing.cli import main
from tracing.ledger import Ledger, dropped_notes, open_ledger
from tracing.status import Status

T0 = 1_700_000_000_000_000_000


def _call(call_id: str, session_id: str) -> dict[str, object]:
    return {
        "tool_call_id": call_id,
        "tool_name": "search",
        "status": Status.SUCCESS,
        "session_id": session_id,
        "start_ns": T0,
        "end_ns": T0 + 1,
    }


def test_dropped_calls_are_counted_per_session(open_fresh: Callable[..., Ledger]) -> None:
    ledger = open_fresh()
    ledger.record(_call("c1", "conv-1"))  # pyright: ignore[reportArgumentType]
    ledger.record_dropped("conv-1", 2)
    ledger.record_dropped("conv-1")
    ledger.record_dropped("")
    assert ledger.flush()
    ledger.record_dropped("conv-1", 4)  # a later batch adds to the same row
    assert ledger.flush()
    rows = {(r["session_id"], r["source"]): r for r in ledger.dropped()}
    assert {k: r["count"] for k, r in rows.items()} == {
        ("conv-1", "processor"): 7,
        ("", "processor"): 1,
    }
    one = rows[("conv-1", "processor")]
    assert 0 < one["first_ns"] <= one["last_ns"]
    reader = open_fresh(read_only=True)
    (info,) = reader.sessions()
    assert info["session_id"] == "conv-1" and info["dropped"] == 7 and info["calls"] == 1
    assert [r["count"] for r in reader.dropped("conv-1")] == [7]
    assert dropped_notes(reader.dropped()) == [
        "8 tool calls were shed under load by the span processor (its queue was full) in "
        "1 session, 1 without a session: their anchors are missing or settled without outcome."
    ]


def test_the_ledgers_own_full_queue_is_counted(open_fresh: Callable[..., Ledger]) -> None:
    # a writer that waits long between batches: the second write finds the queue full
    ledger = open_fresh(
        options=dataclasses.replace(FAST, max_queue_size=1, flush_interval_millis=60_000)
    )
    for i in range(3):
        ledger.record(_call(f"c{i}", "conv-1"))  # pyright: ignore[reportArgumentType]
    assert ledger.flush()
    assert ledger.stats()["dropped"] == 2
    assert [(r["source"], r["count"]) for r in ledger.dropped()] == [("ledger", 2)]
    assert ledger.sessions()[0]["dropped"] == 0  # (writes, not calls: the column counts calls)
    assert dropped_notes(ledger.dropped("conv-1"), session=True) == [
        "2 anchor writes of this session were dropped by the ledger (its write queue was full)."
    ]


def test_a_ledger_from_before_the_table(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    url = f"sqlite:///{path}"
    with open_ledger(url, options=FAST) as ledger:
        ledger.record(_call("c1", "conv-1"))  # pyright: ignore[reportArgumentType]
    with sqlite3.connect(path) as conn:  # as the previous release left it
        conn.execute("DROP TABLE dropped")
        conn.execute("DELETE FROM schema_migrations WHERE name = '0002_dropped'")
    with open_ledger(url, read_only=True) as reader:
        assert reader.dropped() == []
        assert reader.sessions()[0]["dropped"] == 0
    with open_ledger(url, options=FAST) as ledger:  # a writer migrates it
        ledger.record_dropped("conv-1")
        assert ledger.flush()
        assert [r["count"] for r in ledger.dropped()] == [1]


def test_the_cli_says_what_was_shed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/cli.db"
    with open_ledger(url, options=FAST) as ledger:
        ledger.record(_call("c1", "conv-1"))  # pyright: ignore[reportArgumentType]
        ledger.record(_call("c2", "conv-2"))  # pyright: ignore[reportArgumentType]
        ledger.record_dropped("conv-2", 5)
    result = CliRunner().invoke(main, ["sessions", "--ledger", url])
    assert result.exit_code == 0, result.output
    table = result.stdout.splitlines()
    assert table[0].split()[:6] == ["SESSION", "CALLS", "ERRORS", "LIVE", "SHED", "TURN"]
    shed = {line.split()[0]: line.split()[4] for line in table[1:]}
    assert shed == {"conv-1": "0", "conv-2": "5"}
    assert result.stderr == (
        "warning: 5 tool calls were shed under load by the span processor (its queue was full) "
        "in 1 session: their anchors are missing or settled without outcome.\n"
    )
    result = CliRunner().invoke(main, ["summary", "conv-2", "--ledger", url])
    assert result.exit_code == 0, result.output
    assert "5 tool calls of this session were shed under load" in result.stderr
    result = CliRunner().invoke(main, ["summary", "conv-1", "--ledger", url])
    assert result.stderr == ""
