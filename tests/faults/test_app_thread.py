"""The app's thread is never held by the ledger or left without a deadline: ``next_turn``
while another process holds the database's write lock (a real second process holding a write
transaction), and background calls timing out with ``IntentOptions(in_thread=False)``."""

from __future__ import annotations

import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.ledger.conftest import FAST, pg_schema_url
from tracing import IntentOptions, IntentSpanProcessor, session, tool_call
from tracing.ledger import Ledger, LedgerOptions, open_ledger

HANG_S = 30.0
"""Only a hang detector: what is tested returns in milliseconds."""

PATIENT = LedgerOptions(
    retry_backoff_millis=5,
    max_retry_backoff_millis=50,
    busy_timeout_millis=600_000,  # a statement waiting for the lock would wait ten minutes
    statement_timeout_millis=600_000,
)

_HOLD_SQLITE = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE sessions SET last_ns = last_ns")
print("holding", flush=True)
sys.stdin.read()  # until the test closes our stdin
conn.execute("COMMIT")
"""

_HOLD_POSTGRES = """
import sys
import psycopg
conn = psycopg.connect(sys.argv[1])
conn.execute("UPDATE sessions SET last_ns = last_ns WHERE session_id = %s", (sys.argv[2],))
print("holding", flush=True)
sys.stdin.read()
conn.commit()
"""


class Holder:
    """A second process holding a write transaction on the ledger until ``release()``."""

    def __init__(self, script: str, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", script, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.strip() == "holding", line

    def holding(self) -> bool:
        return self.proc.poll() is None

    def release(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(HANG_S) == 0


def _in_thread(fn: Callable[[], int]) -> tuple[threading.Thread, list[int]]:
    out: list[int] = []
    thread = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    thread.start()
    return thread, out


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    if request.param == "sqlite":
        yield "sqlite", f"sqlite:///{tmp_path}/ledger.db"
    else:
        yield "postgres", pg_schema_url(request.getfixturevalue("postgres_url"))


def test_next_turn_does_not_wait_for_another_process_write_lock(
    backend: tuple[str, str],
) -> None:
    kind, url = backend
    session_id = f"conv-{uuid.uuid4().hex[:6]}"
    ledger: Ledger = open_ledger(url, options=PATIENT)
    try:
        assert ledger.next_turn(session_id) == 1
        assert ledger.next_turn(session_id) == 2
        assert ledger.flush()
        if kind == "sqlite":
            holder = Holder(_HOLD_SQLITE, url.removeprefix("sqlite:///"))
        else:
            holder = Holder(_HOLD_POSTGRES, ledger.connect_url, session_id)
        try:
            thread, out = _in_thread(lambda: ledger.next_turn(session_id))
            thread.join(HANG_S)
            assert not thread.is_alive(), "next_turn waited for the other process's lock"
            assert holder.holding()
            assert out == [3]
            # Another session's turn: no stored row to read, none to wait for either.
            thread, out = _in_thread(lambda: ledger.next_turn(session_id + "-b"))
            thread.join(HANG_S)
            assert not thread.is_alive() and out == [1]
        finally:
            holder.release()
        assert ledger.flush()
        # The turn handed out meanwhile is recorded: the numbers go on from it.
        assert ledger.next_turn(session_id) == 4
        found = ledger.session(session_id)
        assert found is not None and found["last_turn"] == 4
        assert ledger.stats()["dropped"] == 0
    finally:
        ledger.close()


def test_background_calls_time_out_without_the_processor_thread(tmp_path: Path) -> None:
    """``IntentOptions(in_thread=False)``: spans are handled on the app's threads, yet a
    background call given ``to_background(timeout_s=...)`` still settles as timed out, in the
    exported span and in the ledger."""
    ledger = open_ledger(f"sqlite:///{tmp_path}/ledger.db", options=FAST)
    exported = threading.Event()

    class Seen(InMemorySpanExporter):
        def export(self, spans):  # type: ignore[no-untyped-def]
            result = super().export(spans)
            if any("timed out" in s.name for s in spans):
                exported.set()
            return result

    exporter = Seen()
    provider = TracerProvider()
    processor = IntentSpanProcessor(
        SimpleSpanProcessor(exporter),
        ledger=ledger,
        options=IntentOptions(in_thread=False, background_timeout_s=3600),
    )
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("app")
    try:
        with session("conv-bg", turn=1):
            with tool_call(
                "crawl", {"intent": "Crawling the docs"}, tracer=tracer, label_bearing=True
            ) as c:
                c.to_background(timeout_s=0.05)
            with tool_call("search", {"intent": "Searching"}, tracer=tracer):
                pass
        assert exported.wait(HANG_S), "the background call never timed out"
        assert processor.stats()["background_timed_out"] == 1
        assert ledger.flush()
        rows = {r["tool_name"]: r for r in ledger.session_anchors("conv-bg")}
        assert rows["crawl"]["status"] == "error"
        assert rows["crawl"]["label"] == "Crawling the docs · timed out"
        assert rows["search"]["status"] == "success"
    finally:
        provider.shutdown()
        ledger.close()
