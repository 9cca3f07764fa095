"""Permanent failures are errors at open (one line), not a ledger that drops every write:
a wrong password, a missing role or database, a bad parameter, a directory, another app's
SQLite database, a newer schema, an empty ``sqlite:///``. An unreachable server is retried
in the background (an app may start before its database), unless the caller requires it
(``open_requires_database``: the CLI's import and collect)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from tests.ledger.conftest import FAST
from tests.ledger.test_write import start
from tests.support.tcp import refusing_postgres
from tracing.ledger import LedgerError, LedgerOptions, open_ledger

STRICT = LedgerOptions(**{**FAST.__dict__, "open_requires_database": True})


def refused(url: str, options: LedgerOptions = FAST) -> str:
    """The one-line message ``open_ledger`` raises for ``url`` (quickly)."""
    began = time.monotonic()
    with pytest.raises(LedgerError) as info:
        open_ledger(url, options=options).close()
    assert time.monotonic() - began < 4  # at open, not after retries
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def test_wrong_password() -> None:
    with refusing_postgres() as port:
        message = refused(f"postgresql://app:wrong@127.0.0.1:{port}/app")
    assert "password authentication failed" in message
    assert "wrong" not in message  # (the password is never shown)


@pytest.mark.postgres
def test_missing_role_and_database(postgres_url: str) -> None:
    base = postgres_url.rpartition("@")[2].rpartition("/")[0]
    assert 'role "nosuchrole" does not exist' in refused(f"postgresql://nosuchrole@{base}/test")
    db = refused(postgres_url.rpartition("/")[0] + "/intentrace_no_such_db")
    assert 'database "intentrace_no_such_db" does not exist' in db


@pytest.mark.postgres
def test_bad_parameter(postgres_url: str) -> None:
    assert "sslmode" in refused(postgres_url + "?sslmode=bogus")


def test_bad_port_is_an_error_when_required_and_retried_otherwise() -> None:
    url = "postgresql://postgres@127.0.0.1:1/test"
    assert "refused" in refused(url, STRICT).lower()
    ledger = open_ledger(url, options=FAST)  # an app's ledger: retried in the background
    try:
        assert ledger.stats()["failing"] == 1
        assert ledger.stats()["failing_permanently"] == 0
    finally:
        ledger.close()


def test_directory_given_as_the_file(tmp_path: Path) -> None:
    assert "is a directory" in refused(f"sqlite:///{tmp_path}")


def test_another_apps_database_is_refused_an_empty_one_is_not(tmp_path: Path) -> None:
    other = tmp_path / "app.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO users (name) VALUES ('ada')")
    assert "another application's SQLite database" in refused(f"sqlite:///{other}")
    with sqlite3.connect(other) as conn:  # untouched: no ledger tables were added
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables == {"users"}
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()  # an empty database file (0 bytes) is fine
    with open_ledger(f"sqlite:///{empty}", options=FAST) as ledger:
        ledger.record(start("a"))
        assert ledger.flush() and ledger.stats()["written"] == 1


def test_not_a_database_file(tmp_path: Path) -> None:
    junk = tmp_path / "notes.db"
    junk.write_bytes(b"these are my notes, not a database\n" * 200)
    assert "not a database" in refused(f"sqlite:///{junk}")


def test_newer_schema(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with open_ledger(f"sqlite:///{path}", options=FAST) as ledger:
        ledger.record(start("a"))
        assert ledger.flush()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO schema_migrations VALUES ('0099_from_the_future', 1)")
    message = refused(f"sqlite:///{path}")
    assert "newer ledger schema (0099_from_the_future)" in message and "upgrade" in message


@pytest.mark.parametrize("url", ["sqlite:///", "sqlite://"])
def test_empty_sqlite_path(url: str) -> None:
    with pytest.raises(LedgerError, match="no database file"):
        open_ledger(url)
    with open_ledger("sqlite:///:memory:") as ledger:  # (said explicitly, memory is fine)
        assert ledger.stats()["failing"] == 0
