"""Faults, for real: a database locked by another process, a read-only file, a full disk
(a file-size limit), a PostgreSQL database that is missing or whose connection is killed
(more in tests/faults).

The app never sees an exception; failing batches are retried with backoff, then dropped and
counted; writes resume when the database comes back.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.ledger.conftest import FAST
from tests.ledger.test_write import settle, start
from tracing.ledger import LedgerOptions, open_ledger

CHILD = str(Path(__file__).with_name("_child.py"))


def run_child(*args: str, prefix: list[str] | None = None, **kw: object) -> dict[str, object]:
    out = subprocess.run(
        [*(prefix or []), sys.executable, CHILD, *args],
        capture_output=True, text=True, timeout=60, check=False, **kw,  # pyright: ignore[reportCallIssue, reportArgumentType]
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


class Locker:
    """Another process holding the SQLite write lock (BEGIN IMMEDIATE) until released."""

    def __init__(self, path: Path) -> None:
        code = (
            "import sqlite3, sys\n"
            f"c = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
            "c.execute('BEGIN IMMEDIATE')\n"
            "print('locked', flush=True)\n"
            "sys.stdin.readline()\n"
            "c.execute('ROLLBACK')\n"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "locked"

    def release(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        assert self.proc.wait(10) == 0


def test_locked_by_another_process(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/locked.db"
    ledger = open_ledger(url, options=FAST)
    ledger.record(start("before"))
    assert ledger.flush()
    locker = Locker(tmp_path / "locked.db")
    try:
        # Locked for longer than the retries last: dropped and counted, never raised.
        for i in range(5):
            ledger.record(start(f"lost{i}"))
        assert ledger.flush()
        stats = ledger.stats()
        assert stats["dropped"] == 5 and stats["retries"] >= FAST.retry_attempts
        assert any("locked" in e for e in ledger.recent_errors())
        # The lock goes away while a batch is being retried: it lands.
        patient = open_ledger(url, options=LedgerOptions(
            retry_attempts=200, retry_window_seconds=0, retry_backoff_millis=5, max_retry_backoff_millis=20,
            busy_timeout_millis=20,
        ))  # fmt: skip
        patient.record(start("patient"))
        time.sleep(0.3)
        assert patient.stats()["retries"] > 0 and patient.stats()["written"] == 0
    finally:
        locker.release()
    assert patient.flush()
    assert patient.stats()["written"] == 1 and patient.stats()["dropped"] == 0
    patient.close()
    # And the first ledger recovers by itself with the next batch.
    ledger.record(settle("before"))
    assert ledger.flush()
    assert ledger.stats()["written"] == 2
    found = ledger.anchor("before")
    assert found is not None and found["status"] == "success"
    assert ledger.anchor("lost0") is None and ledger.anchor("patient") is not None
    ledger.close()


def _without_dac_override() -> list[str] | None:
    """Command prefix that makes file permissions apply (root ignores them otherwise)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search"]


def test_read_only_file(tmp_path: Path) -> None:
    prefix = _without_dac_override()
    if prefix is None:
        pytest.skip("running as root without setpriv: file permissions cannot be enforced")
    result = run_child("read_only", f"sqlite:///{tmp_path}/ro.db", prefix=prefix)
    assert any("readonly database" in e for e in result["errors"])  # pyright: ignore[reportGeneralTypeIssues]
    during, after = result["during"], result["after"]
    assert during["dropped"] == 10 and during["written"] == 0 and during["errors"] > 0  # pyright: ignore[reportIndexIssue]
    assert after["written"] == 5 and after["dropped"] == 10  # pyright: ignore[reportIndexIssue]
    assert result["ids"] == ["ro-0", *(f"ro-{i}" for i in range(11, 16))]


def test_disk_full(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/full.db"
    result = run_child(
        "disk_full", url, preexec_fn=lambda: signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    )
    during, after = result["during"], result["after"]
    assert during["dropped"] > 0 and during["written"] > 0  # pyright: ignore[reportIndexIssue]
    assert any("full" in e or "I/O" in e for e in result["errors"])  # pyright: ignore[reportGeneralTypeIssues]
    assert result["recovered"] is True and after["written"] == during["written"] + 1  # pyright: ignore[reportIndexIssue]
    with sqlite3.connect(tmp_path / "full.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_sqlite_directory_missing_then_created(tmp_path: Path) -> None:
    blocker = tmp_path / "data"
    blocker.write_text("a file where the directory should be")
    ledger = open_ledger(f"sqlite:///{blocker}/ledger.db", options=FAST)  # no exception
    ledger.record(start("a"))
    assert ledger.flush()
    assert ledger.stats()["dropped"] == 1
    blocker.unlink()
    ledger.record(start("b"))
    assert ledger.flush()
    assert ledger.stats()["written"] == 1
    assert [a["tool_call_id"] for a in ledger.session_anchors("s1")] == ["b"]
    ledger.close()


@pytest.mark.postgres
def test_postgres_database_missing_is_an_error_at_open(postgres_url: str) -> None:
    import uuid

    from tracing.ledger import LedgerError

    base = postgres_url.rpartition("/")[0]
    name = f"intentrace_missing_{uuid.uuid4().hex[:8]}"
    with pytest.raises(LedgerError, match="does not exist"):
        open_ledger(f"{base}/{name}", options=FAST)  # (retrying cannot create it)


@pytest.mark.postgres
def test_postgres_connection_killed_mid_run(postgres_url: str) -> None:
    import psycopg

    from tests.ledger.conftest import pg_schema_url

    ledger = open_ledger(pg_schema_url(postgres_url), options=FAST)
    ledger.record(start("a"))
    assert ledger.flush()
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        killed = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = 'intentrace-ledger-writer' "
            "AND datname = current_database()"
        ).fetchone()
    assert killed is not None and killed[0] >= 1
    ledger.record(settle("a"))
    assert ledger.flush()
    stats = ledger.stats()
    assert stats["written"] == 2 and stats["dropped"] == 0 and stats["retries"] >= 1
    found = ledger.anchor("a")
    assert found is not None and found["status"] == "success"
    ledger.close()


@pytest.mark.postgres
def test_postgres_unreachable(tmp_path: Path) -> None:
    ledger = open_ledger("postgresql://postgres@127.0.0.1:1/nothing", options=FAST)
    for i in range(3):
        ledger.record(start(f"c{i}"))
    assert ledger.flush()
    stats = ledger.stats()
    assert stats["dropped"] == 3 and stats["written"] == 0 and stats["errors"] >= 1
    assert ledger.next_turn("s1") == 1 and ledger.next_turn("s1") == 2  # local fallback
    ledger.close()
