"""The story model (pure Python): labels, headers, nesting, turns, pages."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracing.ledger import Anchor, BlockInfo
from viewer._story import build_story, call_label, count_text, format_duration, one_line, turns


def anchor(cid: str, seq: int, **kw: Any) -> Anchor:
    row: dict[str, Any] = {
        "tool_call_id": cid,
        "session_id": "s",
        "seq": seq,
        "settle_seq": None,
        "turn": 1,
        "batch_id": None,
        "parent_call_id": None,
        "agent_id": None,
        "tool_name": "search_code",
        "intent": None,
        "outcome": None,
        "label": "",
        "status": "success",
        "start_ns": seq * 1_000_000,
        "end_ns": None,
        "duration_ms": None,
        "trace_id": None,
        "span_id": None,
        "error": None,
        "args": None,
        "result": None,
        "redaction": None,
        "updated_ns": seq,
    }
    row.update(kw)
    return Anchor(**row)


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({"status": "streaming", "intent": "Searching for OAuth"}, "Searching for OAuth"),
        ({"status": "in_flight", "intent": None}, "Running search_code"),
        ({"status": "success", "intent": "Searching", "outcome": "Found 3"}, "Found 3"),
        ({"status": "success"}, "Ran search_code"),
        ({"status": "error", "intent": "Reading"}, "Reading · failed"),
        ({"status": "cancelled", "intent": "Reading"}, "Reading · cancelled"),
        ({"status": "background", "intent": "Indexing"}, "Indexing · in background"),
        ({"status": "abandoned", "intent": "Indexing"}, "Indexing · abandoned"),
        # a background call that never returned keeps its stored "timed out" framing
        (
            {"status": "error", "intent": "Indexing", "label": "Indexing · timed out"},
            "Indexing · timed out",
        ),
        # a stale stored label does not win over the resolution rules
        ({"status": "success", "intent": "A", "outcome": "B", "label": "A"}, "B"),
    ],
)
def test_call_label(kw: dict[str, Any], expected: str) -> None:
    assert call_label(anchor("c", 1, **kw)) == expected


def test_header_by_settle_sequence_and_activity_label() -> None:
    rows = [
        anchor("a", 1, batch_id="b", intent="A", outcome="A done", settle_seq=9),
        anchor("b", 2, batch_id="b", intent="B", outcome="B done", settle_seq=4),
        anchor("c", 3, batch_id="c", intent="C", status="in_flight"),
        anchor("d", 4, batch_id="c", intent="D", outcome="D done", settle_seq=5),
    ]
    story = build_story("s", rows)
    assert [b.header for b in story.blocks] == ["A done", "C"]
    labelled = build_story(
        "s",
        rows,
        [BlockInfo(session_id="s", batch_id="b", turn=1, activity_label="Exploring", seq=1)],
    )
    assert labelled.blocks[0].header == "Exploring"


def test_calls_without_batch_are_blocks_of_one_and_turns_group_in_order() -> None:
    rows = [
        anchor("a", 1, turn=1),
        anchor("b", 2, turn=1),
        anchor("c", 3, turn=2, batch_id="x"),
        anchor("d", 4, turn=2, batch_id="x"),
        anchor("e", 5, turn=None),
    ]
    story = build_story("s", reversed(rows))  # any input order
    assert [[c.id for c in b.calls] for b in story.blocks] == [["a"], ["b"], ["c", "d"], ["e"]]
    assert [(t, len(bs)) for t, bs in turns(story.blocks)] == [(1, 2), (2, 1), (None, 1)]


def test_subagents_nest_with_collapsed_line() -> None:
    rows = [
        anchor("p", 1, intent="Delegating the review", status="in_flight", batch_id="b1"),
        anchor("k1", 2, intent="Reading x", parent_call_id="p", batch_id="k", settle_seq=4),
        anchor("k2", 3, intent="Reading y", parent_call_id="p", batch_id="k", status="in_flight"),
        anchor("g", 5, intent="Grandchild", parent_call_id="k2", status="in_flight"),
        anchor("orphan", 6, intent="Lost", parent_call_id="missing"),
    ]
    story = build_story("s", rows)
    assert [c.id for b in story.blocks for c in b.calls] == ["p", "orphan"]
    parent = story.calls["p"]
    # the latest live intent anywhere under the parent (by sequence)
    assert parent.line == "Delegating the review · Grandchild"
    assert [c.id for b in parent.children for c in b.calls] == ["k1", "k2"]
    assert story.calls["g"].depth == 2
    assert story.ancestors("g") == ["p", "k2"]
    assert story.top_of["g"] == 0
    assert story.calls["orphan"].line == "Lost"


def test_parent_cycles_do_not_hide_calls() -> None:
    rows = [anchor("a", 1, parent_call_id="b"), anchor("b", 2, parent_call_id="a")]
    story = build_story("s", rows)
    assert sorted(c.id for b in story.blocks for c in b.calls) == ["a", "b"]


def test_pages_hold_whole_blocks_and_find_a_call() -> None:
    rows = [anchor(f"c{i}", i + 1, batch_id=f"b{i // 5}") for i in range(250)]
    story = build_story("s", rows, page_calls=100)
    assert len(story.pages) == 3
    assert [sum(b.size for b in story.page_blocks(n)) for n in range(3)] == [100, 100, 50]
    assert story.page_of("c0") == 0
    assert story.page_of("c249") == 2
    assert story.page_of("nope") is None


@st.composite
def sessions(draw: st.DrawFn) -> list[Anchor]:
    n = draw(st.integers(min_value=0, max_value=30))

    def column(values: st.SearchStrategy[Any]) -> list[Any]:
        return draw(st.lists(values, min_size=n, max_size=n))

    parents = column(st.none() | st.integers(0, n + 1))
    batches = column(st.sampled_from([None, "x", "y", "z"]))
    turn_numbers = column(st.sampled_from([None, 1, 2, 3]))
    statuses = column(st.sampled_from(["in_flight", "success", "error", "streaming"]))
    intents = column(st.sampled_from([None, "", "Reading", "Searching"]))
    return [
        anchor(
            f"c{i}",
            i + 1,
            batch_id=batches[i],
            turn=turn_numbers[i],
            parent_call_id=None if parents[i] is None else f"c{parents[i]}",
            status=statuses[i],
            intent=intents[i],
        )
        for i in range(n)
    ]


@given(sessions(), st.integers(min_value=1, max_value=20))
def test_every_call_appears_exactly_once(rows: list[Anchor], page_calls: int) -> None:
    story = build_story("s", rows, page_calls=page_calls)
    shown = [c.id for b in story.blocks for top in b.calls for c in top.walk()]
    assert sorted(shown) == sorted(r["tool_call_id"] for r in rows)
    paged = [c.id for n in range(len(story.pages)) for b in story.page_blocks(n)
             for top in b.calls for c in top.walk()]  # fmt: skip
    assert sorted(paged) == sorted(shown)
    for row in rows:
        page = story.page_of(row["tool_call_id"])
        assert page is not None
        on_page = {c.id for b in story.page_blocks(page) for top in b.calls for c in top.walk()}
        assert row["tool_call_id"] in on_page


@given(st.text(max_size=400))
def test_one_line_is_one_plain_line(text: str) -> None:
    line = one_line(text, 50)
    assert "\n" not in line and "\r" not in line
    assert len(line) <= 50
    assert one_line(line, 50) == line


def test_counts_and_durations() -> None:
    assert count_text(1) == "1 call"
    assert (
        count_text(3, failed=1, cancelled=1, live=1) == "3 calls · 1 failed · 1 cancelled · 1 live"
    )
    assert [format_duration(v) for v in (None, 0.5, 12, 400, 65_000, 7_500_000)] == [
        "", "<1 ms", "12 ms", "0.4 s", "1 min 5 s", "2 h 5 min",
    ]  # fmt: skip


def test_block_keys_stay_unique_when_a_subagent_reuses_a_batch_id() -> None:
    rows = [
        anchor("p", 1, batch_id="b"),
        anchor("k", 2, batch_id="b", parent_call_id="p"),
    ]
    story = build_story("s", rows)
    keys = [story.blocks[0].key, story.calls["p"].children[0].key]
    assert len(set(keys)) == 2
