"""Write semantics on both stores: upsert rules, sequence numbers, replay, turns, blocks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tracing.ledger import Anchor, AnchorWrite, Ledger
from tracing.status import Status

T0 = 1_700_000_000_000_000_000


def start(cid: str, session: str = "s1", **kw: Any) -> AnchorWrite:
    w: dict[str, Any] = {
        "tool_call_id": cid,
        "tool_name": kw.pop("tool_name", "search_code"),
        "status": kw.pop("status", "in_flight"),
        "session_id": session,
        "start_ns": kw.pop("start_ns", T0),
        **kw,
    }
    return w  # pyright: ignore[reportReturnType]


def settle(cid: str, status: str = "success", **kw: Any) -> AnchorWrite:
    w: dict[str, Any] = {
        "tool_call_id": cid,
        "tool_name": kw.pop("tool_name", "search_code"),
        "status": status,
        "end_ns": kw.pop("end_ns", T0 + 400_000_000),
        **kw,
    }
    return w  # pyright: ignore[reportReturnType]


def written(ledger: Ledger) -> None:
    assert ledger.flush(10), ledger.recent_errors()


def get(ledger: Ledger, cid: str) -> Anchor:
    found = ledger.anchor(cid)
    assert found is not None, ledger.recent_errors()
    return found


def test_in_flight_then_settled_is_one_row_either_way(ledger: Ledger) -> None:
    # Same batch (coalesced) and separate batches end in the same row.
    ledger.record(start("a", intent="Searching for OAuth", turn=1, batch_id="b1", agent_id="coder"))
    ledger.record(settle("a", outcome="Found 12 results", label="Found 12 results"))
    ledger.record(start("b", intent="Reading the router", turn=1, batch_id="b1"))
    written(ledger)
    ledger.record(settle("b", "error", error="FileNotFoundError: router.py"))
    written(ledger)
    rows = ledger.session_anchors("s1")
    assert [r["tool_call_id"] for r in rows] == ["a", "b"]
    a, b = rows
    assert (a["status"], a["label"], a["outcome"], a["intent"]) == (
        "success", "Found 12 results", "Found 12 results", "Searching for OAuth",
    )  # fmt: skip
    assert a["agent_id"] == "coder" and a["turn"] == 1 and a["batch_id"] == "b1"
    assert a["duration_ms"] == 400.0 and a["end_ns"] == T0 + 400_000_000
    # No label given at settle: resolved with frame_label from the stored intent.
    assert (b["status"], b["label"], b["error"]) == (
        "error", "Reading the router · failed", "FileNotFoundError: router.py",
    )  # fmt: skip
    assert a["seq"] < b["seq"] and a["settle_seq"] is not None and b["settle_seq"] is not None
    assert a["settle_seq"] > a["seq"] and b["settle_seq"] > b["seq"]
    stats = ledger.stats()
    assert stats["written"] == 4 and stats["dropped"] == 0 and stats["errors"] == 0


def test_absent_fields_keep_their_stored_values(ledger: Ledger) -> None:
    ledger.record(start("a", intent="Searching", args='{"q": "x"}', trace_id="t" * 32, turn=2))
    written(ledger)
    ledger.record(settle("a", result='{"n": 1}'))
    written(ledger)
    a = get(ledger, "a")
    assert a["args"] == '{"q": "x"}' and a["trace_id"] == "t" * 32 and a["turn"] == 2
    assert a["result"] == '{"n": 1}' and a["intent"] == "Searching" and a["session_id"] == "s1"
    # An explicit None clears a field; a given value replaces it.
    ledger.record(settle("a", result=None, outcome="Found it"))
    written(ledger)
    a = get(ledger, "a")
    assert a["result"] is None and a["outcome"] == "Found it" and a["label"] == "Found it"


def test_settled_is_never_overwritten_by_a_live_write(ledger: Ledger) -> None:
    ledger.record(start("a", intent="Searching"))
    ledger.record(settle("a", outcome="Found 3", label="Found 3"))
    # In the same batch as the settle, then in a later batch: a late/replayed in-flight write.
    ledger.record(start("a", intent="Searching (late)", args='{"q": 1}', label="Searching"))
    written(ledger)
    ledger.record(start("a", status=Status.STREAMING, intent="x", label="x", span_id="s" * 16))
    written(ledger)
    a = get(ledger, "a")
    assert (a["status"], a["label"], a["intent"]) == ("success", "Found 3", "Searching")
    # ... but it may fill what was still unknown.
    assert a["args"] == '{"q": 1}' and a["span_id"] == "s" * 16
    # A settled write after a settled one replaces it (last settle wins), settle_seq stays.
    first_settle = a["settle_seq"]
    ledger.record(settle("a", "error", error="late failure"))
    written(ledger)
    a = get(ledger, "a")
    assert a["status"] == "error" and a["settle_seq"] == first_settle


def test_seq_and_settle_seq_follow_event_order_per_session(ledger: Ledger) -> None:
    events: list[tuple[str, str, str]] = []  # (session, id, kind) in the order recorded
    for i in range(30):
        session = f"s{i % 3}"
        ledger.record(start(f"c{i}", session))
        events.append((session, f"c{i}", "seq"))
        if i % 4 == 3:
            written(ledger)  # some settles land in later batches, some in the same one
        if i >= 2:
            j = i - 2
            ledger.record(settle(f"c{j}"))
            events.append((f"s{j % 3}", f"c{j}", "settle_seq"))
    written(ledger)
    for session in ("s0", "s1", "s2"):
        rows = {r["tool_call_id"]: r for r in ledger.session_anchors(session)}
        numbers = [rows[cid][kind] for s, cid, kind in events if s == session]
        assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
        assert numbers[0] == 1


def test_replay_does_not_duplicate_or_renumber(ledger: Ledger) -> None:
    writes = [start("a", intent="A"), start("b", intent="B"), settle("a"), settle("b", "error")]
    for w in writes:
        ledger.record(dict(w))  # pyright: ignore[reportArgumentType]
    written(ledger)
    before = ledger.session_anchors("s1")
    for _ in range(2):
        for w in writes:
            ledger.record(dict(w))  # pyright: ignore[reportArgumentType]
        written(ledger)
    after = ledger.session_anchors("s1")
    assert after == before  # same rows, same seq/settle_seq, not even updated_ns moved
    assert len(ledger.changed_since(0)) == 2


def test_next_turn_continues_across_reopen(open_fresh: Callable[..., Ledger]) -> None:
    first = open_fresh()
    assert [first.next_turn("s1"), first.next_turn("s1"), first.next_turn("s2")] == [1, 2, 1]
    first.record(start("a", "s1", turn=7))  # a turn written on an anchor raises the floor
    written(first)
    first.close()
    second = open_fresh()
    assert second.next_turn("s1") == 8
    assert second.next_turn("s2") == 2
    assert second.session("s1") is not None and second.session("s1")["last_turn"] == 8  # pyright: ignore[reportOptionalSubscript]


def test_activity_label_heads_its_block(ledger: Ledger) -> None:
    ledger.record(start("a", batch_id="b1", turn=1))
    ledger.record(start("b", batch_id="b1", turn=1))
    ledger.record(start("c", batch_id="b2", turn=2))
    ledger.set_activity("s1", "b1", "Looking for the OAuth wiring", turn=1)
    ledger.set_activity("s1", "b9", "Planning", turn=3)  # a block with no calls yet
    written(ledger)
    blocks = ledger.blocks("s1")
    assert [(b["batch_id"], b["activity_label"], b["turn"]) for b in blocks] == [
        ("b1", "Looking for the OAuth wiring", 1),
        ("b2", None, 2),
        ("b9", "Planning", 3),
    ]
    assert blocks[0]["seq"] == 1


def test_invalid_writes_are_counted_not_raised(ledger: Ledger) -> None:
    ledger.record({"tool_call_id": "", "tool_name": "x", "status": Status.SUCCESS})
    ledger.record({"tool_call_id": "a", "tool_name": "x", "status": "done"})  # pyright: ignore[reportArgumentType]
    ledger.record({"tool_name": "x", "status": Status.SUCCESS})  # pyright: ignore[reportArgumentType]
    ledger.record(start("ok", args={"q": "dict args become JSON"}, error="\ud800 lone surrogate",
                        result="nul\x00byte", turn="3"))  # fmt: skip
    ledger.record(start("fine", intent="Searching"))  # same batch: not lost with the bad one
    ledger.record(start("bad-turn", turn="soon", end_ns=1.5))
    written(ledger)
    stats = ledger.stats()
    assert stats["invalid"] == 3 and stats["dropped"] == 3 and stats["written"] == 3
    assert stats["errors"] == 0  # coerced on the careful replay, not failed
    ok = get(ledger, "ok")
    assert ok["args"] == '{"q": "dict args become JSON"}' and ok["turn"] == 3
    assert ok["error"] is not None and "lone surrogate" in ok["error"]
    assert ok["result"] in ("nul\x00byte", "nul\ufffdbyte")  # PostgreSQL text cannot hold NUL
    assert get(ledger, "fine")["intent"] == "Searching"
    bad = get(ledger, "bad-turn")  # wrong types never reach a column: coerced or NULL
    assert bad["turn"] is None and bad["end_ns"] == 1


def test_replay_after_reopen_is_still_idempotent(open_fresh: Callable[..., Ledger]) -> None:
    # A new writer does not know the ids: its first try inserts them, the database refuses the
    # duplicates, and the batch is replayed with every id looked up. Nothing is duplicated,
    # nothing is dropped, nothing changes.
    writes = [start("a", intent="A"), start("b", intent="B"), settle("a"), settle("b", "error")]
    first = open_fresh()
    for w in writes:
        first.record(dict(w))  # pyright: ignore[reportArgumentType]
    written(first)
    before = first.session_anchors("s1")
    first.close()
    second = open_fresh()
    for w in [*writes, start("c")]:
        second.record(dict(w))  # pyright: ignore[reportArgumentType]
    written(second)
    after = second.session_anchors("s1")
    assert after[:2] == before and after[2]["tool_call_id"] == "c"
    stats = second.stats()
    assert stats["written"] == 5 and stats["dropped"] == 0 and stats["errors"] == 0


def test_a_large_batch_with_replayed_and_badly_typed_rows(
    open_fresh: Callable[..., Ledger],
) -> None:
    # One batch of 100 new calls (inserted many rows a statement), two of them already
    # stored by an earlier writer and one with a value of the wrong type: the batch fails on
    # the fast path, the careful replay writes every row once.
    from tracing.ledger import LedgerOptions

    first = open_fresh()
    first.record(start("n10", intent="Stored"))
    first.record(start("n90", intent="Stored"))
    written(first)
    first.close()
    second = open_fresh(options=LedgerOptions(flush_interval_millis=60_000))
    for i in range(100):
        second.record(start(f"n{i}", turn="7" if i == 50 else i // 10, intent=f"Call {i}"))
    written(second)
    rows = second.session_anchors("s1")
    assert sorted(r["tool_call_id"] for r in rows) == sorted(f"n{i}" for i in range(100))
    got = {r["tool_call_id"]: r for r in rows}
    assert got["n50"]["turn"] == 7 and got["n49"]["turn"] == 4
    assert got["n10"]["intent"] == "Call 10"  # a stored live call takes the later write
    assert len({r["seq"] for r in rows}) == 100
    stats = second.stats()
    assert stats["written"] == 100 and stats["dropped"] == 0


def test_many_rows_a_statement_both_ways(open_fresh: Callable[..., Ledger]) -> None:
    # 1 500 new calls in one batch (statements of 1 024, 256, 128, ... rows), then their settles
    # in the next (two sets of changed columns, each updated many rows a statement).
    from tracing.ledger import LedgerOptions

    ledger = open_fresh(options=LedgerOptions(flush_interval_millis=60_000))
    n = 1_500
    for i in range(n):
        ledger.record(start(f"m{i}", session=f"s{i % 3}", intent=f"Call {i}", turn=1))
    written(ledger)
    for i in range(n):
        if i % 2:
            ledger.record(settle(f"m{i}", outcome=f"Done {i}", end_ns=T0 + i))
        else:
            ledger.record(settle(f"m{i}", "error", error=f"Failed {i}"))
    written(ledger)
    rows = [r for s in ("s0", "s1", "s2") for r in ledger.session_anchors(s)]
    assert len(rows) == n
    for r in rows:
        i = int(r["tool_call_id"][1:])
        assert r["intent"] == f"Call {i}" and r["session_id"] == f"s{i % 3}"
        if i % 2:
            assert (r["status"], r["outcome"], r["end_ns"]) == ("success", f"Done {i}", T0 + i)
        else:
            assert (r["status"], r["error"]) == ("error", f"Failed {i}")
    for s in ("s0", "s1", "s2"):
        mine = ledger.session_anchors(s)
        numbers = [r["seq"] for r in mine] + [r["settle_seq"] or 0 for r in mine]
        assert sorted(numbers) == list(range(1, 2 * len(mine) + 1))
    assert ledger.stats()["written"] == 2 * n


def test_a_row_another_writer_changed_is_read_again(open_fresh: Callable[..., Ledger]) -> None:
    # The first writer keeps the rows of its last batch in memory; another writer settles one
    # of them meanwhile. A late live write from the first must see the settled row, not the
    # one it remembers: it only fills what is still empty.
    first, second = open_fresh(), open_fresh()
    first.record(start("x", intent="Searching"))
    written(first)
    second.record(settle("x", outcome="Found it"))
    written(second)
    first.record(start("x", intent="Searching again", agent_id="coder"))
    written(first)
    row = get(first, "x")
    assert (row["status"], row["intent"], row["outcome"]) == ("success", "Searching", "Found it")
    assert row["agent_id"] == "coder"
    assert row["settle_seq"] == 2


def test_keys_a_writer_may_not_set_are_ignored(ledger: Ledger) -> None:
    # Unknown keys and the columns the ledger computes, on a new call, its settle in the same
    # batch, and a later write of the stored call.
    extra: dict[str, Any] = {"no_such_column": "x", "seq": 99, "settle_seq": 98}
    ledger.record({**start("k", intent="Searching"), **extra})  # pyright: ignore[reportArgumentType]
    ledger.record({**settle("k"), "duration_ms": 5.0, "updated_ns": 1, **extra})  # pyright: ignore[reportArgumentType]
    ledger.record({**start("k2"), "no_such_column": "x"})  # pyright: ignore[reportArgumentType]
    written(ledger)
    ledger.record({**settle("k2"), **extra})  # pyright: ignore[reportArgumentType]
    written(ledger)
    k, k2 = get(ledger, "k"), get(ledger, "k2")
    assert (k["seq"], k["settle_seq"], k["duration_ms"]) == (1, 2, 400.0)
    assert k["updated_ns"] > 1
    assert (k2["seq"], k2["settle_seq"], k2["status"]) == (3, 4, "success")
