"""Analytics fixtures: real ledgers (SQLite file and PostgreSQL) filled through ``Ledger.record``."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from tests.ledger.conftest import FAST, pg_schema_url
from tracing.analytics import Analytics, AnalyticsOptions
from tracing.ledger import ANCHOR_COLUMNS, AnchorWrite, Ledger, open_ledger
from tracing.status import Status

T0 = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z
MS = 1_000_000

KEEP = json.dumps({"args": "keep", "output": "keep", "intent_hidden": False})
HIDE = json.dumps({"args": "redact", "output": "keep", "intent_hidden": True})


def call(
    call_id: str,
    tool: str,
    intent: str | None,
    *,
    status: Status | str = Status.SUCCESS,
    session: str = "s1",
    batch: str | None = None,
    args: Any = None,
    start_ms: int = 0,
    duration_ms: int | None = 10,
    hidden: bool = False,
    agent: str | None = None,
    turn: int | None = None,
    parent: str | None = None,
    error: str | None = None,
) -> AnchorWrite:
    """One settled (or live) call as a writer would record it."""
    write: AnchorWrite = {
        "tool_call_id": call_id,
        "tool_name": tool,
        "status": Status(status),
        "session_id": session,
        "batch_id": batch,
        "intent": None if hidden else intent,
        "start_ns": T0 + start_ms * MS,
        "redaction": HIDE if hidden else KEEP,
    }
    if args is not None:
        write["args"] = args
    if agent is not None:
        write["agent_id"] = agent
    if turn is not None:
        write["turn"] = turn
    if parent is not None:
        write["parent_call_id"] = parent
    if error is not None:
        write["error"] = error
    if duration_ms is not None and status not in ("streaming", "in_flight", "background"):
        write["end_ns"] = T0 + (start_ms + duration_ms) * MS
    return write


def write_all(ledger: Ledger, writes: Sequence[AnchorWrite]) -> None:
    for w in writes:
        ledger.record(w)
    assert ledger.flush(10.0)


def all_anchors(ledger: Ledger) -> list[dict[str, Any]]:
    """Every anchor of the ledger, through the public read API."""
    rows = ledger.changed_since(-1, limit=1_000_000)
    return [{c: a[c] for c in ANCHOR_COLUMNS} for a in rows]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A fresh, empty ledger URL: a SQLite file, or a new schema on the PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path_factory.mktemp('ledger')}/ledger.db"
    return pg_schema_url(request.getfixturevalue("postgres_url"))


@pytest.fixture
def sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('ledger')}/ledger.db"


@pytest.fixture
def make_ledger() -> Iterator[Callable[[str], Ledger]]:
    opened: list[Ledger] = []

    def _open(url: str) -> Ledger:
        ledger = open_ledger(url, options=FAST)
        opened.append(ledger)
        return ledger

    yield _open
    for ledger in opened:
        ledger.close()


@pytest.fixture
def make_analytics(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Analytics]]:
    opened: list[Analytics] = []

    def _open(url: str, **options: Any) -> Analytics:
        options.setdefault("snapshot", str(tmp_path_factory.mktemp("snap") / "copy.parquet"))
        engine = Analytics(url, options=AnalyticsOptions(**options))
        opened.append(engine)
        return engine

    yield _open
    for engine in opened:
        engine.close()
