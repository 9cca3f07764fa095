"""Anchor identity: every call ever recorded is one row with its own data, whatever the writers.

Writers here are several ``Ledger`` objects on one database (as processes sharing it would be),
each with its own clock skew, writing interleaved batches: the span processor's in-flight and
settle writes, a stream tap's writes (no span), reused provider ids across turns, sessions and
writers, restarts and deletes. After each round the analytics copy must equal a copy rebuilt
from the ledger from scratch. On SQLite and on PostgreSQL.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.ledger.conftest import FAST, pg_schema_url
from tracing.anchor import AnchorWrite, anchor_id
from tracing.ledger import Ledger, _plan, _writer, open_ledger
from tracing.status import Status

MINUTE = 60 * 10**9


# --- the identity rule --------------------------------------------------------------------
def test_anchor_id_is_the_call_in_its_session_and_turn() -> None:
    one = anchor_id("call_0", session_id="conv-a", turn=1)
    assert len(one) == 24 and int(one, 16) >= 0
    assert one == anchor_id("call_0", session_id="conv-a", turn=1)  # stable: same input
    assert one != anchor_id("call_0", session_id="conv-a", turn=2)  # another turn
    assert one != anchor_id("call_0", session_id="conv-b", turn=1)  # another session
    assert one != anchor_id("call_1", session_id="conv-a", turn=1)
    assert anchor_id("call_0") == anchor_id("call_0", session_id="") != anchor_id("call_0", turn=0)
    # the span does not enter when the provider gave an id: a stream tap, which knows no span,
    # and the span processor give the same call the same id
    assert one == anchor_id("call_0", session_id="conv-a", turn=1, trace_id="a" * 32, span_id="b")
    # without one, the span is the identity
    span = anchor_id(None, trace_id="a" * 32, span_id="b" * 16)
    assert span == anchor_id("", session_id="x", trace_id="a" * 32, span_id="b" * 16)
    assert span != anchor_id(None, trace_id="a" * 32, span_id="c" * 16)
    # separators cannot be forged by the parts
    assert anchor_id("1", session_id="a\x1f1") != anchor_id("1\x1f1", session_id="a")


def _write(cid: str, status: Status, **kw: Any) -> AnchorWrite:
    return cast(
        AnchorWrite, {"tool_call_id": cid, "tool_name": "search_code", "status": status, **kw}
    )


def test_a_span_never_continues_a_call_settled_under_another_span() -> None:
    base = anchor_id("call_0", session_id="s")
    first = {"trace_id": "1" * 32, "span_id": "1" * 16}
    second = {"trace_id": "2" * 32, "span_id": "2" * 16}
    with open_ledger("sqlite:///:memory:") as ledger:
        ledger.record(_write(base, Status.IN_FLIGHT, session_id="s", intent="Reading A", **first))
        ledger.record(_write(base, Status.SUCCESS, outcome="Read A", **first))
        # the next response restarts at call_0: the tap's preview (no span) then the processor
        ledger.record(_write(base, Status.STREAMING, session_id="s", intent="Reading"))
        ledger.record(_write(base, Status.IN_FLIGHT, session_id="s", intent="Reading B", **second))
        assert ledger.flush()
        ledger.record(_write(base, Status.SUCCESS, outcome="Read B", **second))
        ledger.record(_write(base, Status.ABANDONED, error="stream cut"))  # a tap, cut short
        assert ledger.flush()
        rows = {r["span_id"]: r for r in ledger.session_anchors("s")}
    moved = anchor_id(None, trace_id=second["trace_id"], span_id=second["span_id"])
    assert {s: (r["tool_call_id"], r["label"]) for s, r in rows.items()} == {
        "1" * 16: (base, "Read A"),
        "2" * 16: (moved, "Read B"),
    }
    assert rows["1" * 16]["status"] == Status.SUCCESS  # (the cut stream only fills gaps)


def test_a_live_call_is_taken_over_by_the_span_that_settles_it() -> None:
    """Parallel calls of one tool matched by order at start and traded at settle: the settle
    of the other span finishes the row (nothing settled was overwritten)."""
    cid = anchor_id("c1", session_id="s")
    with open_ledger("sqlite:///:memory:") as ledger:
        ledger.record(
            _write(
                cid,
                Status.IN_FLIGHT,
                session_id="s",
                intent="Doing",
                trace_id="1" * 32,
                span_id="a",
            )
        )
        ledger.record(_write(cid, Status.SUCCESS, outcome="Done", trace_id="1" * 32, span_id="b"))
        assert ledger.flush()
        (row,) = ledger.session_anchors("s")
    assert (row["tool_call_id"], row["span_id"], row["label"]) == (cid, "b", "Done")


# --- interleaved writers: the property ----------------------------------------------------
class SkewedClock:
    """``time`` for the ledger's modules: each writer's threads see their own offset."""

    def __init__(self) -> None:
        self.offsets: dict[int, int] = {}

    def time_ns(self) -> int:
        return time.time_ns() + self.offsets.get(threading.get_ident(), 0)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@pytest.fixture
def skewed(monkeypatch: pytest.MonkeyPatch) -> SkewedClock:
    clock = SkewedClock()
    monkeypatch.setattr(_plan, "time", clock)
    monkeypatch.setattr(_writer, "time", clock)
    return clock


@dataclass(frozen=True)
class Call:
    """One tool call as the app made it (what its row must say)."""

    n: int
    session: str
    turn: int | None
    provider: str | None
    tapped: bool

    @property
    def span(self) -> dict[str, str]:
        return {"trace_id": f"{self.n + 1:032x}", "span_id": f"{self.n + 1:016x}"}

    @property
    def key(self) -> tuple[str, int | None, str | None]:
        return (self.session, self.turn, self.provider)

    @property
    def id(self) -> str:
        return anchor_id(self.provider, session_id=self.session, turn=self.turn, **self.span)

    def writes(self) -> list[tuple[str, dict[str, Any]]]:
        """(kind, write) in the order the app makes them: the tap's preview first."""
        out: list[tuple[str, dict[str, Any]]] = []
        common: dict[str, Any] = {"session_id": self.session, "provider_call_id": self.provider}
        if self.turn is not None:
            common["turn"] = self.turn
        if self.tapped:
            out.append(
                ("tap", dict(_write(self.id, Status.STREAMING, intent=f"Doing {self.n}", **common)))
            )
        start = _write(self.id, Status.IN_FLIGHT, intent=f"Doing {self.n}", start_ns=self.n + 1)
        out.append(("start", {**start, **common, **self.span}))
        settle = _write(self.id, Status.SUCCESS, outcome=f"Did {self.n}", end_ns=self.n + 9)
        out.append(("settle", {**settle, **common, **self.span, "intent": f"Doing {self.n}"}))
        return out


sessions = st.sampled_from(["conv-a", "conv-b", ""])
turns = st.sampled_from([None, 1, 2])
providers = st.sampled_from([None, "call_0", "call_1", "0"])  # ids providers reuse


@st.composite
def rounds(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Rounds of calls with distinct (session, turn, provider id) in a round (a provider never
    has two calls of one id in flight in one turn), each written by a random writer in an
    interleaved order; between rounds, restarts and deletes."""
    out: list[dict[str, Any]] = []
    n = 0
    for _ in range(draw(st.integers(1, 3))):
        calls: dict[tuple[str, int | None, str | None], tuple[Call, int]] = {}
        for _ in range(draw(st.integers(1, 6))):
            provider = draw(providers)
            call = Call(
                n,
                draw(sessions),
                draw(turns),
                provider,
                provider is not None and draw(st.booleans()),
            )
            n += 1
            if call.key not in calls or call.provider is None:
                calls[call.key if call.provider else ("span", n, None)] = (
                    call,
                    draw(st.integers(0, 2)),
                )
        queues = [[(w, wr) for _, wr in c.writes()] for c, w in calls.values()]
        order: list[tuple[int, dict[str, Any]]] = []
        while any(queues):
            live = [q for q in queues if q]
            order.append(live[draw(st.integers(0, len(live) - 1))].pop(0))
        out.append(
            {
                "calls": [c for c, _ in calls.values()],
                "order": order,
                "restart": draw(st.sets(st.integers(0, 2), max_size=2)),
                "delete": draw(st.integers(0, 2)),
            }
        )
    return out


def _columns(anchor: Any) -> tuple[Any, ...]:
    return (
        anchor["session_id"],
        anchor["turn"],
        anchor["provider_call_id"],
        anchor["span_id"],
        anchor["intent"],
        anchor["outcome"],
        anchor["status"],
    )


def _expected(call: Call) -> tuple[Any, ...]:
    return (
        call.session,
        call.turn,
        call.provider,
        call.span["span_id"],
        f"Doing {call.n}",
        f"Did {call.n}",
        Status.SUCCESS,
    )


class Writers:
    """Three writers on one database, each with its own clock skew."""

    SKEWS = (0, -7 * MINUTE, 4 * MINUTE)

    def __init__(self, url: str, clock: SkewedClock) -> None:
        self.url = url
        self.clock = clock
        self.ledgers: list[Ledger] = [self._open(i) for i in range(3)]

    def _open(self, i: int) -> Ledger:
        ledger = open_ledger(self.url, options=replace(FAST, reap_after_seconds=None))
        writer = ledger._writer
        assert writer is not None
        for thread in writer.threads:
            assert thread.ident is not None
            self.clock.offsets[thread.ident] = self.SKEWS[i]
        return ledger

    def restart(self, i: int) -> None:
        self.ledgers[i].close()
        self.ledgers[i] = self._open(i)

    def flush(self) -> None:
        for ledger in self.ledgers:
            assert ledger.flush(30), ledger.recent_errors()

    def close(self) -> None:
        for ledger in self.ledgers:
            ledger.close()


def _delete(url: str, ids: list[str]) -> None:
    if url.startswith("sqlite"):
        import sqlite3

        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        with conn:
            conn.executemany("DELETE FROM anchors WHERE tool_call_id = ?", [(i,) for i in ids])
        conn.close()
    else:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DELETE FROM anchors WHERE tool_call_id = ANY(%s)", (ids,))


def _copy(engine: Any) -> list[tuple[Any, ...]]:
    return engine.query("SELECT * FROM calls ORDER BY tool_call_id").rows


def check_interleavings(url: str, clock: SkewedClock, plan: list[dict[str, Any]]) -> None:
    from tracing.analytics import Analytics, AnalyticsOptions

    writers = Writers(url, clock)
    kept: dict[int, Call] = {}
    options = AnalyticsOptions(snapshot=False, recount_seconds=0)
    engine = Analytics(url, options=options)
    try:
        for step in plan:
            for writer, write in step["order"]:
                writers.ledgers[writer].record(dict(write))
            writers.flush()
            for call in step["calls"]:
                kept[call.n] = call
            reader = writers.ledgers[0]
            rows = [a for s in ("conv-a", "conv-b", "") for a in reader.session_anchors(s)]
            by_span = {a["span_id"]: a for a in rows}
            # every call ever recorded (and not deleted) is one row with its own data
            assert len(rows) == len(by_span) == len(kept), (rows, kept)
            for call in kept.values():
                assert _columns(by_span[call.span["span_id"]]) == _expected(call)
            ids = [a["tool_call_id"] for a in rows]
            assert len(set(ids)) == len(ids)
            # the copy equals a recomputation from the ledger, after every step
            engine.sync()
            with Analytics(url, options=options) as fresh:
                assert _copy(engine) == _copy(fresh)
            for i in sorted(step["restart"]):
                writers.restart(i)
            gone = sorted(kept)[: step["delete"]]
            if gone:
                _delete(url, [by_span[kept[g].span["span_id"]]["tool_call_id"] for g in gone])
                for g in gone:
                    del kept[g]
        engine.sync()
        with Analytics(url, options=options) as fresh:
            assert _copy(engine) == _copy(fresh)
            assert len(_copy(fresh)) == len(kept)
    finally:
        engine.close()
        writers.close()


@pytest.fixture
def store_urls(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    kind = request.param

    def fresh() -> str:
        if kind == "sqlite":
            return f"sqlite:///{tmp_path_factory.mktemp('identity')}/ledger.db"
        return pg_schema_url(request.getfixturevalue("postgres_url"))

    yield fresh


@pytest.mark.parametrize(
    "store_urls", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plan=rounds())
def test_every_call_is_one_row_and_the_copy_is_the_ledger(
    store_urls: Any, skewed: SkewedClock, plan: list[dict[str, Any]]
) -> None:
    check_interleavings(store_urls(), skewed, plan)


def test_written_after_sees_a_writer_whose_clock_is_behind(
    skewed: SkewedClock, tmp_path_factory: pytest.TempPathFactory
) -> None:
    url = f"sqlite:///{tmp_path_factory.mktemp('clock')}/ledger.db"
    writers = Writers(url, skewed)  # the second writer's clock is 7 minutes behind
    try:
        first, behind = writers.ledgers[0], writers.ledgers[1]
        first.record(_write("a", Status.SUCCESS, session_id="s"))
        writers.flush()
        (seen,) = first.written_after(0)
        behind.record(_write("b", Status.SUCCESS, session_id="s"))
        writers.flush()
        assert first.changed_since(seen["updated_ns"]) == []  # by the clock: missed
        (late,) = first.written_after(seen["version"], session_id="s")  # by version: seen
        assert late["tool_call_id"] == "b" and late["updated_ns"] < seen["updated_ns"]
        assert first.written_after(seen["version"], session_id="other") == []
    finally:
        writers.close()
