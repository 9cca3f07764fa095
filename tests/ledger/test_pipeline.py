"""The preparing thread plans batch N+1 while the writer writes batch N: never a different result.

The pipeline is driven here step by step (``_plan_ahead`` as the preparer runs it, with the writer
still on the batch before, then ``_apply_safely`` as the writer runs it), with another writer
changing rows and taking numbers in between; and once with the real threads.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.ledger.conftest import FAST
from tests.ledger.test_concurrency import any_write
from tests.ledger.test_write import T0, get, settle, start, written
from tracing.ledger import Ledger, LedgerOptions, open_ledger
from tracing.ledger._writer import Prepared, Writer

# pyright: reportPrivateUsage=false


@contextmanager
def pipeline(url: str, *, plan_ahead: bool = True) -> Iterator[tuple[Writer, Ledger]]:
    """A writer driven by hand (its threads not started) and, on the same database, another
    ledger (another writer)."""
    other = open_ledger(url, options=FAST)
    w = Writer(other._store, dataclasses.replace(FAST, plan_ahead=plan_ahead), reap=False)
    w._ensure_conn()
    try:
        yield w, other
    finally:
        w._drop_conn(force=True)
        other.close()


def step(w: Writer, items: Sequence[Any], between: Callable[[], None] = lambda: None) -> Prepared:
    """One batch through the pipeline: planned while the writer is (as if) still on the batch
    before, then ``between`` (another writer), then written."""
    w._number += 1
    prepared = Prepared(list(items), w._number)
    w._applied = prepared.number - 2  # the writer is busy with the batch before
    w._plan_ahead(prepared)
    between()
    w._apply_safely(prepared)
    return prepared


def rows(ledger: Ledger, sessions: Sequence[str]) -> list[dict[str, object]]:
    out = [dict(r) for s in sessions for r in ledger.session_anchors(s)]
    for r in out:
        r.pop("updated_ns")
        r.pop("version")
        r.pop("start_ns")  # defaulted to the write time when no write gave it
        r.pop("duration_ms")
    return sorted(out, key=lambda r: str(r["tool_call_id"]))


_other = st.fixed_dictionaries(
    {
        "tool_call_id": st.sampled_from(["a", "b", "z"]),
        "tool_name": st.just("search_code"),
        "status": st.sampled_from(["in_flight", "success"]),
        "session_id": st.sampled_from(["s1", "s2"]),
        "outcome": st.sampled_from(["Other writer", None]),
    }
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=st.lists(st.lists(any_write, min_size=1, max_size=5), min_size=1, max_size=5),
    others=st.lists(st.lists(_other, max_size=2), min_size=5, max_size=5),
)
def test_planning_ahead_never_changes_the_result(
    batches: list[list[dict[str, object]]], others: list[list[dict[str, object]]]
) -> None:
    """The same batches, with another writer writing between planning and writing each one:
    planned ahead or planned by the writer, the same rows and numbers."""

    def run(ahead: bool) -> tuple[list[dict[str, object]], Writer]:
        with (
            tempfile.TemporaryDirectory() as tmp,
            pipeline(f"sqlite:///{tmp}/l.db", plan_ahead=ahead) as (w, o),
        ):
            for batch, theirs in zip(batches, others, strict=False):

                def between(theirs: list[dict[str, object]] = theirs) -> None:
                    for write in theirs:
                        o.record(dict(write))  # pyright: ignore[reportArgumentType]
                    written(o)

                step(w, [dict(x) for x in batch], between)
            return rows(o, ("", "s1", "s2")), w

    mine, w = run(True)
    theirs, _ = run(False)
    assert mine == theirs
    assert w.dropped == 0 and w.invalid == 0
    if not any(others[: len(batches)]):
        # Alone, every batch after the first goes ahead, unless it writes a call again that
        # the batch before did not write (left to the writer).
        ids = [{str(x["tool_call_id"]) for x in batch} for batch in batches]
        expected = sum(
            1 for k in range(1, len(ids)) if ids[k] & set().union(*ids[:k]) <= ids[k - 1]
        )
        assert w.ahead == expected
        assert w.replanned == w.renumbered == 0


def test_a_row_another_writer_changed_is_planned_again(ledger_url: str) -> None:
    with pipeline(ledger_url) as (w, other):
        step(w, [start("x", intent="Searching")])

        def meanwhile() -> None:
            other.record(settle("x", outcome="Found by the other"))
            written(other)

        prepared = step(w, [settle("x", outcome="Found it"), start("y")], meanwhile)
        assert prepared.expect  # x was planned on the row batch 1 left
        assert (w.replanned, w.ahead) == (1, 0)
        x = get(other, "x")
        # last settle wins; settle_seq is the first settle's (the other writer's) number
        assert (x["status"], x["outcome"], x["settle_seq"]) == ("success", "Found it", 2)
        assert get(other, "y")["seq"] == 3


def test_numbers_another_writer_took_are_not_handed_out_again(ledger_url: str) -> None:
    with pipeline(ledger_url) as (w, other):
        step(w, [start("x")])

        def meanwhile() -> None:
            other.record(start("z"))
            written(other)

        prepared = step(w, [start("y")], meanwhile)
        assert prepared.bases == {"s1": 2}  # numbered ahead from what batch 1 left...
        assert (w.renumbered, w.ahead) == (1, 0)  # ...which the other writer took
        assert [(r["tool_call_id"], r["seq"]) for r in other.session_anchors("s1")] == [
            ("x", 1),
            ("z", 2),
            ("y", 3),
        ]


@pytest.mark.parametrize("second", ["settle x", "start y"])
def test_a_batch_retried_after_numbering_makes_the_next_plan_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, second: str
) -> None:
    # Batch 1 is numbered, batch 2 is planned on it while batch 1 is written; then batch 1's
    # transaction fails and is retried with new write times. Batch 2 assumed the first ones:
    # the row it settles is not as planned, or its write times would be older than batch 1's.
    with pipeline(f"sqlite:///{tmp_path}/l.db") as (w, other):
        write = settle("x", outcome="Found it") if second == "settle x" else start("y")
        later = Prepared([write], 2)
        insert = w.store.insert
        failures = [sqlite3.OperationalError("database is locked")]

        def flaky(conn: Any, rows: Sequence[tuple[Any, ...]]) -> None:
            if failures:
                w._number, w._applied = 2, 0
                w._plan_ahead(later)  # the preparer, while batch 1 is written
                raise failures.pop()
            insert(conn, rows)

        monkeypatch.setattr(w.store, "insert", flaky)
        step(w, [start("x", intent="Searching")])
        assert w.retries == 1 and later.plan is not None
        w._apply_safely(later)
        assert w.ahead == 0 and (w.replanned, w.renumbered) == (
            (1, 0) if second == "settle x" else (0, 1)
        )
        x = get(other, "x")
        if second == "settle x":
            assert (x["status"], x["intent"], x["outcome"], x["seq"], x["settle_seq"]) == (
                "success",
                "Searching",
                "Found it",
                1,
                2,
            )
        else:
            y = get(other, "y")
            assert (x["seq"], y["seq"]) == (1, 2)
            assert y["updated_ns"] > x["updated_ns"]  # write times follow the commits


def test_a_batch_planned_ahead_that_the_database_refuses_is_replayed_carefully(
    tmp_path: Path,
) -> None:
    # Planned ahead on the fast path (no text coercion, new ids not looked up): a lone
    # surrogate and a dict in a text column, and an id stored by another writer, fail the
    # batch; the careful replay looks every id up and writes every row once.
    with pipeline(f"sqlite:///{tmp_path}/l.db") as (w, other):
        step(w, [start("x", intent="Searching")])
        other.record(start("stored", intent="Stored elsewhere"))
        written(other)
        prepared = step(
            w,
            [
                settle("x", outcome="Found \ud800 it"),
                start("y", args={"q": 1}),
                start("stored", intent="Replayed", agent_id="coder"),
            ],
        )
        assert set(prepared.expect) == {"x"}  # planned ahead, on the row batch 1 left
        assert w.ahead == 0  # ...and replayed carefully
        x, y, stored = get(other, "x"), get(other, "y"), get(other, "stored")
        assert (x["status"], x["outcome"], x["settle_seq"]) == ("success", "Found ? it", 3)
        assert y["args"] == '{"q": 1}' and y["seq"] == 4
        assert (stored["intent"], stored["agent_id"], stored["seq"]) == ("Replayed", "coder", 2)
        assert w.dropped == 0 and w.written == 4


def test_a_busy_writer_gets_its_batches_planned_ahead(open_fresh: Callable[..., Ledger]) -> None:
    # The real threads, on both stores: small batches arrive faster than they are written.
    ledger = open_fresh(options=LedgerOptions(**{**FAST.__dict__, "max_batch_size": 50}))
    n = 1500
    for i in range(n):
        ledger.record(start(f"c{i}", session=f"s{i % 3}", start_ns=T0 + i))
        if i >= 8:
            ledger.record(settle(f"c{i - 8}", end_ns=T0 + i))
    for i in range(n - 8, n):
        ledger.record(settle(f"c{i}", end_ns=T0 + n))
    assert ledger.flush(60), ledger.recent_errors()
    w = ledger._writer
    assert w is not None
    assert ledger.stats()["written"] == 2 * n and ledger.stats()["dropped"] == 0
    assert w.ahead > 0, "no batch was planned ahead"
    assert w.replanned == w.renumbered == 0  # alone, every prediction holds
    for s in range(3):
        mine = ledger.session_anchors(f"s{s}")
        assert all(r["status"] == "success" for r in mine)
        numbers = [r["seq"] for r in mine] + [r["settle_seq"] or 0 for r in mine]
        assert sorted(numbers) == list(range(1, 2 * len(mine) + 1))
        stamps = [r["updated_ns"] for r in ledger.session_anchors(f"s{s}")]
        assert len(set(stamps)) == len(stamps)


def break_(monkeypatch: pytest.MonkeyPatch, method: str, message: str) -> None:
    """Make ``Writer.<method>`` raise (a bug)."""

    def broken(self: Writer, prepared: Prepared) -> None:
        raise RuntimeError(message)

    monkeypatch.setattr(Writer, method, broken)


@pytest.mark.internal_errors
def test_a_preparer_bug_leaves_the_batch_to_the_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    break_(monkeypatch, "_plan_ahead", "a bug in planning ahead")
    with open_ledger(f"sqlite:///{tmp_path}/l.db", options=FAST) as ledger:
        ledger.record(start("x"))
        ledger.record(settle("x"))
        written(ledger)
        assert get(ledger, "x")["status"] == "success"
        assert any("a bug in planning ahead" in e for e in ledger.recent_errors())


@pytest.mark.internal_errors
def test_a_writer_bug_drops_and_counts_everything_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    break_(monkeypatch, "_apply_safely", "a bug in the writer")
    with open_ledger(f"sqlite:///{tmp_path}/l.db", options=FAST) as ledger:
        for i in range(100):
            ledger.record(start(f"c{i}"))  # never raises into the app
        deadline = time.monotonic() + 10
        while ledger.stats()["dropped"] < 100 and time.monotonic() < deadline:
            ledger.flush(0.1)
            ledger.record(start("late"))
            time.sleep(0.01)
        stats = ledger.stats()
        assert stats["written"] == 0
        assert (
            stats["dropped"] >= 100 and stats["dropped"] == stats["enqueued"] - stats["queue_depth"]
        )
        assert any("a bug in the writer" in e for e in ledger.recent_errors())
