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
    CALLS,
    SPAN_ID,
    SQLITE_FIXTURE,
    load_postgres_fixture,
)
from tracing.anchor import anchor_id
from tracing.ledger import open_ledger
from tracing.status import Status

OLD_COLUMNS = (
    "tool_call_id", "session_id", "seq", "settle_seq", "turn", "batch_id", "parent_call_id",
    "agent_id", "tool_name", "intent", "outcome", "label", "status", "start_ns", "end_ns",
    "duration_ms", "trace_id", "span_id", "error", "args", "result", "redaction", "updated_ns",
)  # fmt: skip


def _sqlite_ledger(tmp_path: Path) -> tuple[str, Callable[[str], list[tuple[Any, ...]]]]:
    path = tmp_path / "previous.db"
    shutil.copyfile(SQLITE_FIXTURE, path)

    def query(sql: str) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(path)
        try:
            return conn.execute(sql).fetchall()
        finally:
            conn.close()

    return f"sqlite:///{path}", query


def _postgres_ledger(base: str) -> tuple[str, Callable[[str], list[tuple[Any, ...]]]]:
    import psycopg

    url = pg_schema_url(base)
    load_postgres_fixture(url)

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
