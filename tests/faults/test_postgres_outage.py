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


# ------------------------------------------------------------------- a full disk (class 53)

_FULL = """
CREATE TABLE fault_switch (disk_full boolean NOT NULL);
INSERT INTO fault_switch VALUES (false);
CREATE FUNCTION fault_disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT disk_full FROM fault_switch) THEN
        RAISE EXCEPTION 'could not extend file: No space left on device'
            USING ERRCODE = '53100';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER fault_disk_full BEFORE INSERT OR UPDATE ON anchors
    FOR EACH ROW EXECUTE FUNCTION fault_disk_full();
"""


def disk_full(url: str, on: bool) -> None:
    """What the server answers when its disk (or a quota) is full, SQLSTATE 53100, raised by a
    trigger in our own schema while the switch is on (the shared server is not touched)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        (exists,) = conn.execute("SELECT to_regclass('fault_switch') IS NOT NULL").fetchall()[0]
        if not exists:
            conn.execute(_FULL)
        conn.execute("UPDATE fault_switch SET disk_full = %s", (on,))


@pytest.mark.parametrize("window_s", [60, 0], ids=["within the window", "past the window"])
def test_a_full_disk_is_retried_and_nothing_is_lost_silently(
    postgres_url: str, window_s: int
) -> None:
    """Within the retry window the writes queued while the disk is full all land once it is
    freed; past it they are dropped, counted, and put on record (the ``dropped`` table, which
    ``intentrace sessions``/``summary`` and the viewer read)."""
    url = pg_schema_url(postgres_url)
    options = LedgerOptions(
        retry_backoff_millis=20,
        max_retry_backoff_millis=200,
        retry_attempts=2,
        retry_window_seconds=window_s,
    )
    ledger = open_ledger(url, options=options)
    try:
        ledger.record(start("a"))
        assert ledger.flush(10)
        disk_full(url, True)
        ledger.record(settle("a"))
        ledger.record(start("b"))
        deadline = time.monotonic() + 30
        while ledger.stats()["disk_full"] < 3:
            assert time.monotonic() < deadline, ledger.stats()
            time.sleep(0.05)
        assert any("No space" in e for e in ledger.recent_errors())
        assert ledger.stats()["dropped"] == (0 if window_s else 2)
        disk_full(url, False)  # space freed
        ledger.record(start("c"))
        assert ledger.flush(20)
        stats = ledger.stats()
        found = ledger.anchor("a")
        assert found is not None and ledger.anchor("c") is not None
        lost = sum(d["count"] for d in ledger.dropped() if d["source"] == "ledger")
        if window_s:
            assert stats["dropped"] == 0 and stats["written"] == 4, stats
            assert found["status"] == "success" and ledger.anchor("b") is not None
            assert lost == 0
        else:
            assert stats["dropped"] == 2 and stats["written"] == 2, stats
            assert found["status"] == "in_flight" and ledger.anchor("b") is None
            assert lost == 2
    finally:
        ledger.close(2)


# ------------------------------------------------- next_turn when the server does not answer


def test_next_turn_does_not_wait_for_a_first_connect_that_hangs(postgres_url: str) -> None:
    """The server black-holed (a proxy that accepts and then says nothing) when ``next_turn``
    first connects: the app's thread gets the process's own number within
    ``turn_timeout_millis`` instead of waiting ``connect_timeout_seconds`` (here 60 s), and
    the number is recorded as a floor once the server answers again."""
    url = pg_schema_url(postgres_url)
    target = urlsplit(postgres_url)
    options = LedgerOptions(connect_timeout_seconds=60, turn_timeout_millis=200)
    with tcp_proxy((target.hostname or "127.0.0.1", target.port or 5432)) as proxy:
        ledger = open_ledger(via(proxy.port, url), options=options)
        try:
            proxy.pause()
            out: list[int] = []
            thread = threading.Thread(target=lambda: out.append(ledger.next_turn("s1")))
            thread.start()
            thread.join(20)  # (a hang detector only; before the fix: 60 s)
            assert not thread.is_alive(), "next_turn waited for the connection"
            assert out == [1]
            out.clear()
            thread = threading.Thread(target=lambda: out.append(ledger.next_turn("s1")))
            thread.start()
            thread.join(20)  # the first one still hangs: this one does not wait for it
            assert not thread.is_alive() and out == [2]
            proxy.cut()
            proxy.resume()
            assert ledger.flush(30)
            assert ledger.next_turn("s1") == 3
            found = ledger.session("s1")
            assert found is not None and found["last_turn"] == 3
        finally:
            ledger.close(2)


def test_close_does_not_wait_for_a_turn_that_hangs(postgres_url: str) -> None:
    url = pg_schema_url(postgres_url)
    target = urlsplit(postgres_url)
    options = LedgerOptions(connect_timeout_seconds=60, turn_timeout_millis=100)
    with tcp_proxy((target.hostname or "127.0.0.1", target.port or 5432)) as proxy:
        ledger = open_ledger(via(proxy.port, url), options=options)
        proxy.pause()
        assert ledger.next_turn("s1") == 1  # (its attempt still waits for the server)
        closing = threading.Thread(target=lambda: ledger.close(1))
        closing.start()
        closing.join(20)  # (a hang detector only; before the fix: the 60 s connect)
        assert not closing.is_alive(), "close waited for the turn's connection"
        proxy.cut()
        proxy.resume()
