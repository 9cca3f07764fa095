"""PostgreSQL behind a TCP proxy of ours (never the shared server itself): a connection that
goes silent mid-batch (half-open: the peer keeps the socket and answers nothing) errors and
is retried instead of stalling the writer, and a 10 s outage loses nothing (the queue is the
buffer, the retry window outlasts it)."""

from __future__ import annotations

import threading
import time
from urllib.parse import urlsplit

import pytest

from tests.ledger.conftest import pg_schema_url
from tests.ledger.test_write import settle, start
from tests.support.tcp import tcp_proxy
from tracing.ledger import LedgerOptions, open_ledger

pytestmark = pytest.mark.postgres


def via(proxy_port: int, url: str) -> str:
    parts = urlsplit(url)
    return url.replace(f"{parts.hostname}:{parts.port}", f"127.0.0.1:{proxy_port}", 1)


def test_a_silent_connection_errors_and_is_retried(postgres_url: str) -> None:
    url = pg_schema_url(postgres_url)
    target = urlsplit(postgres_url)
    options = LedgerOptions(
        statement_timeout_millis=1_000,
        keepalive_idle_seconds=1,
        connect_timeout_seconds=1,
        retry_backoff_millis=20,
        max_retry_backoff_millis=200,
        retry_window_seconds=30,
    )
    with tcp_proxy((target.hostname or "127.0.0.1", target.port or 5432)) as proxy:
        ledger = open_ledger(via(proxy.port, url), options=options)
        try:
            ledger.record(start("a"))
            assert ledger.flush(10)
            proxy.pause()  # the writer's next statement goes nowhere, and nothing comes back
            ledger.record(settle("a"))
            ledger.record(start("b"))
            deadline = time.monotonic() + 10
            while ledger.stats()["errors"] == 0:
                assert time.monotonic() < deadline, "the writer stalled on a silent connection"
                time.sleep(0.05)
            proxy.cut()  # (what is held is thrown away)
            proxy.resume()
            assert ledger.flush(20)
            stats = ledger.stats()
            assert stats["dropped"] == 0 and stats["written"] == 3 and stats["retries"] >= 1
            found = ledger.anchor("a")
            assert found is not None and found["status"] == "success"
        finally:
            ledger.close(2)


def test_a_ten_second_outage_loses_nothing(postgres_url: str) -> None:
    url = pg_schema_url(postgres_url)
    target = urlsplit(postgres_url)
    options = LedgerOptions(connect_timeout_seconds=1, keepalive_idle_seconds=1)  # defaults else
    with tcp_proxy((target.hostname or "127.0.0.1", target.port or 5432)) as proxy:
        ledger = open_ledger(via(proxy.port, url), options=options)
        try:
            ledger.record(start("before"))
            assert ledger.flush(10)
            proxy.down()
            stop = threading.Event()
            sent: list[str] = []

            def app() -> None:  # an app thread that goes on making calls meanwhile
                i = 0
                while not stop.is_set():
                    cid = f"during{i}"
                    ledger.record(start(cid))
                    ledger.record(settle(cid))
                    sent.append(cid)
                    i += 1
                    time.sleep(0.01)

            thread = threading.Thread(target=app)
            thread.start()
            time.sleep(10)
            proxy.up()
            stop.set()
            thread.join()
            assert ledger.flush(30)
            stats = ledger.stats()
            assert stats["errors"] >= 1 and stats["retries"] >= 1
            assert stats["dropped"] == 0, stats
            assert stats["written"] == 1 + 2 * len(sent)
            stored = {a["tool_call_id"] for a in ledger.session_anchors("s1")}
            assert stored == {"before", *sent}
        finally:
            ledger.close(2)
