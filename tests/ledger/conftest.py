"""Ledger fixtures: every store test runs on SQLite (a file) and on the real PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest

from tracing.ledger import Ledger, LedgerOptions, open_ledger

FAST = LedgerOptions(
    retry_backoff_millis=5,
    max_retry_backoff_millis=50,
    retry_attempts=3,
    retry_window_seconds=0,
    busy_timeout_millis=100,
    connect_timeout_seconds=2,
    open_wait_seconds=5.0,
)


def pg_schema_url(base: str) -> str:
    """A fresh schema in the run's PostgreSQL database, as a ledger URL."""
    import psycopg
    from psycopg import sql

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    return f"{base}?options=-csearch_path%3D{schema}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def ledger_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A fresh, empty ledger URL: a SQLite file, or a new schema on the PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path_factory.mktemp('ledger')}/ledger.db"
    return pg_schema_url(request.getfixturevalue("postgres_url"))


@pytest.fixture
def open_fresh(ledger_url: str) -> Iterator[Callable[..., Ledger]]:
    """Open ledgers on ``ledger_url`` (closed at the end of the test)."""
    opened: list[Ledger] = []

    def _open(*, read_only: bool = False, options: LedgerOptions = FAST) -> Ledger:
        ledger = open_ledger(ledger_url, read_only=read_only, options=options)
        opened.append(ledger)
        return ledger

    yield _open
    for ledger in opened:
        ledger.close()


@pytest.fixture
def ledger(open_fresh: Callable[..., Ledger]) -> Ledger:
    return open_fresh()
