"""A writer killed with SIGKILL mid-write, then reopened; reaping of stale live calls."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from tests.ledger.conftest import FAST
from tests.ledger.test_faults import CHILD
from tests.ledger.test_write import settle, start, written
from tracing.ledger import Ledger, LedgerOptions


def test_sigkill_mid_write_then_reopen(ledger_url: str, open_fresh: Callable[..., Ledger]) -> None:
    proc = subprocess.Popen(
        [sys.executable, CHILD, "writer", ledger_url], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and '"ready": true' in proc.stdout.readline()
        time.sleep(0.3)  # keep writing for a while, then die without any cleanup
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    if ledger_url.startswith("sqlite"):
        path = ledger_url.removeprefix("sqlite:///")
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    ledger = open_fresh(options=LedgerOptions(reap_after_seconds=0, retry_backoff_millis=5))
    assert ledger.flush()
    rows = ledger.session_anchors("crash")
    assert len(rows) >= 200  # what was flushed before "ready" survived
    assert ledger.stats()["reaped"] >= 1
    assert ledger.in_flight() == []
    abandoned = [r for r in rows if r["status"] == "abandoned"]
    assert abandoned and all(
        r["label"] == f"{r['intent']} · abandoned" and r["settle_seq"] is not None
        for r in abandoned
    )
    assert {r["status"] for r in rows} == {"success", "abandoned"}
    seqs = [r["seq"] for r in rows]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    # Numbering continues above everything the dead process used.
    top = max(*seqs, *(r["settle_seq"] or 0 for r in rows))
    ledger.record(start("after-crash", "crash"))
    written(ledger)
    again = ledger.anchor("after-crash")
    assert again is not None and again["seq"] > top


def test_reaping_respects_the_timeout(open_fresh: Callable[..., Ledger]) -> None:
    first = open_fresh()
    first.record(start("live", intent="Indexing the repo"))
    first.record(start("bg", status="background"))
    first.record(start("done"))
    first.record(settle("done"))
    written(first)
    first.close()
    kept = open_fresh(options=FAST)  # default timeout: one hour, nothing is that old
    assert kept.flush() and kept.stats()["reaped"] == 0
    assert len(kept.in_flight()) == 2
    kept.close()
    off = open_fresh(options=LedgerOptions(reap_after_seconds=None))
    assert off.flush() and off.stats()["reaped"] == 0
    off.close()
    reaper = open_fresh(options=LedgerOptions(reap_after_seconds=0))
    assert reaper.flush() and reaper.stats()["reaped"] == 2
    live = reaper.anchor("live")
    assert live is not None and live["status"] == "abandoned"
    assert live["label"] == "Indexing the repo · abandoned"
    bg = reaper.anchor("bg")
    assert bg is not None and bg["label"] == "search_code · abandoned"
    done = reaper.anchor("done")
    assert done is not None and done["status"] == "success"
    # A call that does settle later replaces "abandoned" (it was alive after all).
    reaper.record(settle("live", outcome="Indexed 40 files"))
    written(reaper)
    live = reaper.anchor("live")
    assert live is not None and (live["status"], live["label"]) == ("success", "Indexed 40 files")


def test_read_only_open_never_reaps(open_fresh: Callable[..., Ledger]) -> None:
    first = open_fresh()
    first.record(start("live"))
    written(first)
    first.close()
    reader = open_fresh(read_only=True, options=LedgerOptions(reap_after_seconds=0))
    assert [a["status"] for a in reader.in_flight()] == ["in_flight"]


pytestmark = pytest.mark.timeout(120)
