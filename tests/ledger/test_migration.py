"""Ledgers made by the previous release migrate without losing a row (SQLite and PostgreSQL)."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.ledger.conftest import FAST, pg_schema_url
from tests.ledger.previous_release import (
    BEFORE_USERS,
    CALLS,
    SPAN_ID,
    SQLITE_FIXTURE,
    load_postgres_fixture,
    sqlite_fixture,
)
from tracing.anchor import anchor_id
from tracing.ledger import open_ledger
from tracing.status import Status

OLD_COLUMNS = (
    "tool_call_id", "session_id", "seq", "settle_seq", "turn", "batch_id", "parent_call_id",
    "agent_id", "tool_name", "intent", "outcome", "label", "status", "start_ns", "end_ns",
    "duration_ms", "trace_id", "span_id", "error", "args", "result", "redaction", "updated_ns",
)  # fmt: skip


def _sqlite_ledger(
    tmp_path: Path, fixture: Path = SQLITE_FIXTURE
) -> tuple[str, Callable[[str], list[tuple[Any, ...]]]]:
    path = tmp_path / "previous.db"
    shutil.copyfile(fixture, path)

    def query(sql: str) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(path)
        try:
            return conn.execute(sql).fetchall()
        finally:
            conn.close()

    return f"sqlite:///{path}", query


def _postgres_ledger(
    base: str, commit: str | None = None
) -> tuple[str, Callable[[str], list[tuple[Any, ...]]]]:
    import psycopg

    url = pg_schema_url(base)
    if commit is None:
        load_postgres_fixture(url)
    else:
        load_postgres_fixture(url, commit)

    def query(sql: str) -> list[tuple[Any, ...]]:
        with psycopg.connect(url, autocommit=True) as conn:
            return conn.execute(sql).fetchall()  # pyright: ignore[reportArgumentType, reportCallIssue]

    return url, query


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def previous(
    request: pytest.FixtureRequest, tmp_path: Path
) -> tuple[str, Callable[[str], list[tuple[Any, ...]]]]:
    """A ledger written by the previous release (commit f5db6e4), and a raw query on it."""
    if request.param == "sqlite":
        return _sqlite_ledger(tmp_path)
    return _postgres_ledger(request.getfixturevalue("postgres_url"))


def test_every_row_survives_and_new_calls_never_overwrite_old_ones(
    previous: tuple[str, Callable[[str], list[tuple[Any, ...]]]],
) -> None:
    url, query = previous
    columns = ", ".join(OLD_COLUMNS)
    before = {r[0]: r for r in query(f"SELECT {columns} FROM anchors")}
    assert sorted(before) == sorted(c[0] for c in CALLS)  # as the old release wrote them
    assert [r[0] for r in query("SELECT name FROM schema_migrations")] == [
        "0001_anchors_sessions_blocks"
    ]

    ledger = open_ledger(url, options=replace(FAST, reap_after_seconds=None))
    try:
        assert ledger.flush(), ledger.recent_errors()
        after = {r[0]: r for r in query(f"SELECT {columns} FROM anchors")}
        assert after == before  # every row, every value, every id (links keep working)
        migrated = {
            a["tool_call_id"]: a
            for s in ("conv-a", "conv-b", "conv-c", "")
            for a in ledger.session_anchors(s)
        }
        assert sorted(migrated) == sorted(before)
        # the provider's id is a column of its own now; the old ids made from a span were not
        assert {cid: a["provider_call_id"] for cid, a in migrated.items()} == {
            cid: (None if cid == SPAN_ID else cid) for cid in before
        }
        versions = [a["version"] for a in migrated.values()]
        assert len(set(versions)) == len(versions) and min(versions) >= 1
        assert ledger.anchor("toolu_01B")["parent_call_id"] == "toolu_01A"  # pyright: ignore[reportOptionalSubscript]
        assert [b["activity_label"] for b in ledger.blocks("conv-b")] == [
            "Reviewing the change",
            None,
        ]

        # the same provider id in a later turn is another call now: a row of its own
        ledger.record(
            {
                "tool_call_id": anchor_id("call_0", session_id="conv-a", turn=2),
                "provider_call_id": "call_0",
                "tool_name": "search_code",
                "status": Status.SUCCESS,
                "session_id": "conv-a",
                "turn": 2,
                "intent": "Searching for MCP",
                "outcome": "Found 1 server",
            }
        )
        assert ledger.flush(), ledger.recent_errors()
        assert {r[0]: r for r in query(f"SELECT {columns} FROM anchors")}.items() >= before.items()
        found = ledger.by_provider_id("call_0")
        assert [(a["turn"], a["intent"]) for a in found] == [
            (2, "Searching for MCP"),
            (1, "Searching for OAuth"),
        ]
        newest = max(a["version"] for a in found)
        assert newest > max(versions)  # the counter continues above the migrated rows
        names = [r[0] for r in query("SELECT name FROM schema_migrations ORDER BY name")]
        assert names == [
            "0001_anchors_sessions_blocks",
            "0002_dropped",
            "0003_provider_call_id_and_row_versions",
            "0004_user_and_tags",
        ]
    finally:
        ledger.close()
    reader = open_ledger(url, read_only=True)
    try:
        assert len(reader.session_anchors("conv-a")) == 3
    finally:
        reader.close()


def test_the_analytics_copy_of_a_migrated_ledger_is_the_ledger(
    previous: tuple[str, Callable[[str], list[tuple[Any, ...]]]],
) -> None:
    from tracing.analytics import Analytics, AnalyticsOptions

    url, query = previous
    open_ledger(url, options=replace(FAST, reap_after_seconds=0)).close()  # migrate, reap: writes
    with Analytics(url, options=AnalyticsOptions(snapshot=False)) as engine:
        report = engine.sync()
        copied = engine.query("SELECT tool_call_id, status, version FROM calls ORDER BY 1").rows
    stored = query("SELECT tool_call_id, status, version FROM anchors ORDER BY 1")
    assert report.rows == len(stored) == len(CALLS)
    assert copied == [tuple(r) for r in stored]
    assert dict((r[0], r[1]) for r in stored)["call_live"] == Status.ABANDONED


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def before_users(
    request: pytest.FixtureRequest, tmp_path: Path
) -> tuple[str, Callable[[str], list[tuple[Any, ...]]]]:
    """A ledger written by the release before users and tags (commit 84178cb, schema 0003)."""
    if request.param == "sqlite":
        return _sqlite_ledger(tmp_path, sqlite_fixture(BEFORE_USERS))
    return _postgres_ledger(request.getfixturevalue("postgres_url"), BEFORE_USERS)


def test_users_and_tags_migrate_in_and_are_read_as_none_before(
    before_users: tuple[str, Callable[[str], list[tuple[Any, ...]]]],
) -> None:
    url, query = before_users
    all_old = ", ".join((*OLD_COLUMNS, "provider_call_id", "version"))
    before = {r[0]: r for r in query(f"SELECT {all_old} FROM anchors")}
    assert sorted(before) == sorted(c[0] for c in CALLS)
    # a reader (the viewer) never migrates: it reads the new columns as NULL, filters find none
    reader = open_ledger(url, read_only=True)
    try:
        assert [a["user_id"] for a in reader.session_anchors("conv-a")] == [None, None]
        assert reader.users() == [] and reader.tags() == []
        assert reader.sessions(user="u-1") == [] and reader.count_sessions(tag="beta") == 0
        assert {s["session_id"]: s["users"] for s in reader.sessions()}["conv-a"] == []
        ledger = open_ledger(url, options=replace(FAST, reap_after_seconds=None))
        try:
            assert ledger.flush(), ledger.recent_errors()
            after = {r[0]: r for r in query(f"SELECT {all_old} FROM anchors")}
            assert after == before  # every row, every value
            assert query(
                "SELECT count(*) FROM anchors WHERE user_id IS NOT NULL OR tags IS NOT NULL"
            ) == [(0,)]
            ledger.record(
                {
                    "tool_call_id": anchor_id("call_9", session_id="conv-a", turn=2),
                    "tool_name": "search_code",
                    "status": Status.SUCCESS,
                    "session_id": "conv-a",
                    "turn": 2,
                    "user_id": "u-1",
                    "tags": '["beta","prod"]',
                }
            )
            assert ledger.flush(), ledger.recent_errors()
            names = [r[0] for r in query("SELECT name FROM schema_migrations ORDER BY name")]
            assert names[-1] == "0004_user_and_tags"
        finally:
            ledger.close()
        # the same reader, once a writer migrated the ledger, sees them
        assert [s["session_id"] for s in reader.sessions(user="u-1")] == ["conv-a"]
        assert [s["session_id"] for s in reader.sessions(tag="prod")] == ["conv-a"]
        assert reader.sessions(tag="pro") == [] and reader.sessions(user="u") == []
        assert reader.users() == ["u-1"] and reader.tags() == ["beta", "prod"]
        info = reader.session("conv-a")
        assert info is not None and info["users"] == ["u-1"] and info["tags"] == ["beta", "prod"]
    finally:
        reader.close()
