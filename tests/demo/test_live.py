"""The live demo agent (``intentrace demo --view --live``): in real time, through the real
pipeline, it keeps the ledger showing what the Live page must show, and stops when told."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tracing.demo._live import live_session_id, run_live
from tracing.ledger import Anchor, Ledger, LedgerError, open_ledger
from tracing.status import LIVE_STATUSES, Status


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    found = open_ledger(f"sqlite:///{tmp_path}/live.db")
    yield found
    found.close()


def test_live_agent_shows_streaming_in_flight_background_and_a_subagent(ledger: Ledger) -> None:
    reader = open_ledger(ledger.url, read_only=True)
    stop = threading.Event()
    made: list[int] = []
    runner = threading.Thread(
        target=lambda: made.append(run_live(ledger, stop, pace=0.15)), daemon=True
    )
    seen: dict[str, Anchor] = {}  # what the Live page would have shown, by status or kind
    runner.start()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(seen) < 4:
            for row in reader.in_flight(limit=50):
                if row["status"] != Status.STREAMING or row["intent"]:
                    seen.setdefault(row["status"], row)  # (a streamed intent, once it shows)
                if row["parent_call_id"] is not None:
                    seen.setdefault("subagent", row)
            time.sleep(0.02)
    finally:
        stop.set()
        runner.join(60)
        reader.close()
    assert not runner.is_alive()
    assert set(seen) == {Status.STREAMING, Status.IN_FLIGHT, Status.BACKGROUND, "subagent"}
    assert seen[Status.STREAMING]["intent"]  # an intent being written, already shown
    assert seen["subagent"]["agent_id"] == "reviewer"
    # once stopped, nothing is left live (a call in the background was harvested)
    assert ledger.flush(10.0)
    assert [a for a in ledger.in_flight(limit=50)] == []
    anchors = ledger.session_anchors(live_session_id())
    assert made and made[0] == len(anchors)  # the tap's and the processor's rows met
    assert all(a["intent"] for a in anchors)
    assert {a["status"] for a in anchors} <= {Status.SUCCESS, Status.ERROR}
    assert not [a for a in anchors if a["status"] in LIVE_STATUSES]
    assert ledger.stats()["errors"] == 0


def test_live_agent_turns_and_the_streamed_intent_grows(ledger: Ledger) -> None:
    turns: list[tuple[str, int]] = []
    intents: list[str] = []
    stop = threading.Event()

    def watch() -> None:
        reader = open_ledger(ledger.url, read_only=True)
        try:
            while not stop.is_set():
                intents.extend(
                    r["intent"] or "" for r in reader.in_flight(limit=50)
                    if r["status"] == Status.STREAMING
                )  # fmt: skip
                time.sleep(0.01)
        finally:
            reader.close()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        run_live(ledger, stop, pace=0.3, max_turns=2, on_turn=lambda s, t: turns.append((s, t)))
    finally:
        stop.set()
        watcher.join(10)
    assert turns == [(live_session_id(), 1), (live_session_id(), 2)]
    full = "Searching for where payment retries are scheduled"
    grown = [i for i in dict.fromkeys(intents) if full.startswith(i)]
    assert len(grown) >= 2 and grown[-1] != grown[0]  # a prefix first, then more of it
    rows = ledger.session_anchors(live_session_id())
    assert {r["turn"] for r in rows} == {1, 2}
    assert any(r["parent_call_id"] for r in rows if r["turn"] == 2)  # the subagent's calls


def test_demo_command_live_runs_until_ctrl_c(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/cli.db"
    cmd = [sys.executable, "-c", "from tracing.cli import main; main()", "demo",
           "--ledger", url, "--sessions", "1", "--live"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        live: list[Anchor] = []
        while time.monotonic() < deadline and not live:
            time.sleep(0.2)
            if not Path(f"{tmp_path}/cli.db").exists():
                continue
            try:  # the file exists a moment before the demo's writer has made its tables
                reader = open_ledger(url, read_only=True)
            except LedgerError:
                continue
            try:
                live = reader.in_flight(limit=10)
            finally:
                reader.close()
        assert live, "no live call was written"
        assert live[0]["session_id"] == live_session_id()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
    assert "Traceback" not in out
    assert f"Live: a simulated agent keeps writing {live_session_id()}" in out
    reader = open_ledger(url, read_only=True)
    try:
        assert reader.in_flight(limit=10) == []  # stopped with nothing left live
    finally:
        reader.close()
