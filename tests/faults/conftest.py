"""Fault tests: real files, processes, threads, sockets and the real PostgreSQL server (cut
with a proxy of ours or by terminating our own backends: never the server itself)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest


@pytest.fixture
def scratch_db(postgres_url: str) -> Iterator[str]:
    """A database of its own on the test server (dropped at the end, FORCE)."""
    import psycopg
    from psycopg import sql

    name = f"intentrace_fault_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield name
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def drop_database(postgres_url: str, name: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
