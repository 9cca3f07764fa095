"""Many app threads, one writer: nothing lost, nothing duplicated, never blocking."""

from __future__ import annotations

import logging
import threading
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.ledger.test_write import T0, written
from tracing.ledger import Ledger, LedgerOptions, open_ledger
from tracing.status import Status

THREADS = 32
CALLS = 1000


def test_32_threads_x_1000_calls(ledger: Ledger) -> None:
    barrier = threading.Barrier(THREADS)

    def app(t: int) -> None:
        barrier.wait()
        for i in range(CALLS):
            cid = f"t{t}-c{i}"
            ledger.record({"tool_call_id": cid, "tool_name": "search_code", "status": Status.IN_FLIGHT,
                           "session_id": f"session-{t}", "intent": f"Searching {i}",
                           "start_ns": T0 + i})  # fmt: skip
            ledger.record({"tool_call_id": cid, "tool_name": "search_code",
                           "status": Status.SUCCESS if i % 10 else Status.ERROR, "end_ns": T0 + i + 5})  # fmt: skip

    threads = [threading.Thread(target=app, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    # 64 000 writes: a generous bound (a loaded CI machine), flush returns as soon as they land
    assert ledger.flush(120), ledger.recent_errors()
    stats = ledger.stats()
    assert stats["enqueued"] == stats["written"] == 2 * THREADS * CALLS and stats["dropped"] == 0
    assert ledger.count_sessions() == THREADS
    total = 0
    for info in ledger.sessions(limit=THREADS):
        t = int(info["session_id"].removeprefix("session-"))
        assert (info["calls"], info["errors"], info["in_flight"]) == (CALLS, CALLS // 10, 0)
        rows = ledger.session_anchors(info["session_id"])
        assert [r["tool_call_id"] for r in rows] == [f"t{t}-c{i}" for i in range(CALLS)]
        numbers = [r["seq"] for r in rows] + [r["settle_seq"] for r in rows]
        assert len(set(numbers)) == 2 * CALLS
        total += len(rows)
    assert total == THREADS * CALLS


def test_full_queue_drops_are_counted_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    ledger = open_ledger(
        "sqlite:///:memory:", options=LedgerOptions(max_queue_size=10, flush_interval_millis=0)
    )
    store_lock = ledger._store.guard()  # test hook: hold the in-memory database
    caplog.set_level(logging.WARNING, "tracing.ledger")
    with store_lock:  # the writer thread blocks on it; record() must not
        for i in range(100):
            ledger.record({"tool_call_id": f"c{i}", "tool_name": "t", "status": Status.IN_FLIGHT})
        dropped = ledger.stats()["dropped"]
    assert dropped >= 80
    written(ledger)
    stats = ledger.stats()
    assert stats["written"] + stats["dropped"] == 100 and stats["dropped"] == dropped
    assert len(ledger.session_anchors("")) == stats["written"]
    assert sum("dropping writes" in r.getMessage() for r in caplog.records) == 1
    ledger.close()
    ledger.record({"tool_call_id": "late", "tool_name": "t", "status": Status.IN_FLIGHT})
    assert ledger.stats()["dropped"] == dropped + 1


any_write = st.fixed_dictionaries(
    {
        "tool_call_id": st.sampled_from(["a", "b", "c"]),
        "tool_name": st.just("search_code"),
        "status": st.sampled_from(["streaming", "in_flight", "background", "success", "error"]),
    },
    optional={
        "session_id": st.sampled_from(["s1", "s2"]),
        "intent": st.sampled_from(["Searching", "Reading", None]),
        "outcome": st.sampled_from(["Found it", None]),
        "label": st.sampled_from(["L1", "L2"]),
        "turn": st.integers(1, 3),
        "end_ns": st.integers(T0, T0 + 10**9),
        "args": st.sampled_from(['{"q": 1}', None]),
    },
)


@given(writes=st.lists(any_write, max_size=12), cuts=st.sets(st.integers(1, 11), max_size=4))
def test_batching_never_changes_the_result(writes: list[dict[str, object]], cuts: set[int]) -> None:
    """The same writes applied as one batch, one per batch, or split anywhere: same rows
    (only write times differ), and the rules hold: settled never goes back to live."""

    def run(split: set[int]) -> list[dict[str, object]]:
        with open_ledger("sqlite:///:memory:") as ledger:
            for i, w in enumerate(writes):
                if i in split:
                    written(ledger)
                ledger.record(dict(w))  # pyright: ignore[reportArgumentType]
            written(ledger)
            rows = [dict(r) for s in ("", "s1", "s2") for r in ledger.session_anchors(s)]
        for r in rows:
            r.pop("updated_ns")
            r.pop("version")
            r.pop("start_ns")  # defaulted to the write time when no write gave it
            r.pop("duration_ms")
        return sorted(rows, key=lambda r: str(r["tool_call_id"]))

    one = run(set())
    assert run(set(range(1, len(writes)))) == one
    assert run(cuts) == one
    for row in one:
        mine = [w for w in writes if w["tool_call_id"] == row["tool_call_id"]]
        statuses = [str(w["status"]) for w in mine]
        settled = [s for s in statuses if s in ("success", "error")]
        # a streaming write (a stream tap) never rewinds a call past streaming
        live = [s for i, s in enumerate(statuses) if s != "streaming" or set(statuses[:i]) <= {s}]
        assert row["status"] == (settled[-1] if settled else live[-1])
        assert (row["settle_seq"] is None) == (not settled)
    assert Counter(str(r["tool_call_id"]) for r in one) == Counter(
        {str(w["tool_call_id"]) for w in writes}
    )
