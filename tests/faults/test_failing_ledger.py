"""A ledger that fails after it opened: its SQLite file deleted under the writer, its
PostgreSQL database dropped. Nothing is lost silently: the loss is logged and counted,
``stats()`` tells the truth, the receiver answers 503 (exporters keep the spans and retry),
and ``intentrace import``/``collect`` exit non-zero."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.collect.test_collect_cli import send, start_collect
from tests.collect.test_receiver import make_spans, protobuf_body
from tests.faults.conftest import drop_database
from tests.faults.test_postgres_outage import disk_full
from tests.ledger.conftest import FAST, pg_schema_url
from tests.ledger.test_write import settle, start
from tests.support.wire import post, spans_to_json
from tracing.cli import main
from tracing.collect._feed import SpanFeed
from tracing.collect._receiver import CollectOptions, CollectReceiver
from tracing.ledger import open_ledger


def rows(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {r[0] for r in conn.execute("SELECT tool_call_id FROM anchors")}


@pytest.mark.parametrize("what", ["file", "directory"])
def test_sqlite_file_deleted_under_a_running_writer(
    tmp_path: Path, what: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "data" / "ledger.db"
    ledger = open_ledger(f"sqlite:///{path}", options=FAST)
    try:
        for i in range(200):
            ledger.record(start(f"old{i}"))
        assert ledger.flush()
        assert ledger.stats()["written"] == 200
        if what == "file":
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        else:
            shutil.rmtree(path.parent)

        # Four app threads go on writing (starts, then their settles).
        def work(t: int) -> None:
            for i in range(50):
                ledger.record(start(f"new{t}-{i}"))
            for i in range(50):
                ledger.record(settle(f"new{t}-{i}", session_id="s1"))

        with caplog.at_level(logging.ERROR, logger="tracing.ledger"):
            threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert ledger.flush()
        stats = ledger.stats()
        assert stats["files_lost"] == 1
        assert any("deleted under the writer" in r.getMessage() for r in caplog.records)
        assert any("deleted under the writer" in e for e in ledger.recent_errors())
        # What is counted written since is in the file at the path, every call settled.
        assert path.exists()
        expected = {f"new{t}-{i}" for t in range(4) for i in range(50)}
        assert rows(path) == expected
        assert stats["written"] == 200 + 400 and stats["dropped"] == 0
        found = ledger.anchor("new0-0")
        assert found is not None and found["status"] == "success"
    finally:
        ledger.close()


def test_sqlite_file_replaced_under_a_running_writer(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    ledger = open_ledger(f"sqlite:///{path}", options=FAST)
    try:
        ledger.record(start("a"))
        assert ledger.flush()
        moved = tmp_path / "moved.db"
        os.rename(path, moved)  # (a log rotation, a restore from backup...)
        for suffix in ("-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        sqlite3.connect(path).close()  # an empty file where the ledger was
        ledger.record(start("b"))
        assert ledger.flush()
        assert ledger.stats()["files_lost"] == 1
        assert rows(path) == {"b"}
    finally:
        ledger.close()


def wait_for(predicate: object, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # pyright: ignore[reportCallIssue]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.postgres
@pytest.mark.usefixtures("caplog")
def test_receiver_answers_503_while_the_database_refuses(
    postgres_url: str, scratch_db: str
) -> None:
    url = postgres_url.rpartition("/")[0] + f"/{scratch_db}"
    ledger = open_ledger(url, options=FAST)
    feed = SpanFeed(ledger)
    receiver = CollectReceiver(feed, CollectOptions(port=0), ledger_stats=ledger.stats)
    try:
        with receiver:
            first = post(receiver.traces_url, protobuf_body(make_spans(2)))
            assert first.status == 200 and ledger.flush()
            assert ledger.stats()["written"] == 2
            drop_database(postgres_url, scratch_db)  # (terminates our connections too)
            # The next spans are taken (the queue is the buffer) but cannot be written: the
            # reconnect is refused for good (the database does not exist).
            assert post(receiver.traces_url, protobuf_body(make_spans(2))).status == 200
            wait_for(lambda: ledger.stats()["failing_permanently"] == 1)
            refused = post(receiver.traces_url, protobuf_body(make_spans(2)))
            assert refused.status == 503 and refused.headers["retry-after"] == "1"
            assert b"refuses writes" in refused.body
            stats = ledger.stats()
            assert stats["written"] == 2 and stats["dropped"] >= 2
    finally:
        ledger.close()


def test_import_and_collect_exit_non_zero_on_a_bad_ledger(tmp_path: Path) -> None:
    lines = tmp_path / "spans.jsonl"
    import json

    lines.write_text(json.dumps(spans_to_json(make_spans(2))) + "\n")
    runner = CliRunner()
    for ledger in (
        f"sqlite:///{tmp_path}",  # a directory
        "sqlite:///",
        "postgresql://postgres@127.0.0.1:1/test",  # nothing listens: required here
    ):
        for args in (["import", str(lines)], ["collect", "--port", "0"]):
            result = runner.invoke(main, [*args, "--ledger", ledger])
            assert result.exit_code != 0, (args, ledger, result.output)
            assert "Traceback" not in result.output
            assert result.output.startswith("Error: ") and result.output.count("\n") == 1, (
                result.output
            )


_REFUSE_ANCHORS = """
CREATE FUNCTION fault_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'this database takes no anchors' USING ERRCODE = '22023';
END $$;
CREATE TRIGGER fault_refuse BEFORE INSERT OR UPDATE ON anchors
    FOR EACH ROW EXECUTE FUNCTION fault_refuse();
"""


@pytest.mark.postgres
def test_import_exits_non_zero_when_writes_were_dropped(postgres_url: str, tmp_path: Path) -> None:
    """A database that takes the connection but refuses every anchor (a trigger of our own
    schema): the writes are dropped and counted, and the command says so and exits 1."""
    import psycopg  # (lazy: the postgres extra)

    url = pg_schema_url(postgres_url)
    open_ledger(url).close()  # (a ledger, migrated)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(_REFUSE_ANCHORS)
    lines = tmp_path / "spans.jsonl"
    lines.write_text(json.dumps(spans_to_json(make_spans(2))) + "\n")
    result = CliRunner().invoke(main, ["import", str(lines), "--ledger", url])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert "ledger writes dropped" in result.output


@pytest.mark.postgres
def test_collect_counts_the_writes_its_close_drops(postgres_url: str) -> None:
    """Stopped while its database is full (every write failing, the retry window not spent):
    the writes still queued are dropped when the ledger closes; the summary counts them and the
    command exits 1 (it used to read the count before the close, and exit 0)."""
    url = pg_schema_url(postgres_url)
    open_ledger(url).close()  # (a ledger, migrated)
    disk_full(url, True)
    proc, endpoint = start_collect("--ledger", url)
    try:
        send(endpoint, None, 2)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, (out, err)
    assert "2 tool calls written" in out  # (taken: queued for the ledger)
    assert "ledger writes dropped" in out
    assert "Traceback" not in err
