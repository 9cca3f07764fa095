"""The provider-neutral tracker: bounded writes whatever the chunking, properties."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from redaction import RedactionPolicy
from tests.taps.conftest import Spy
from tracing import IntentRegistry, read_intent, sanitize_label
from tracing.taps import StreamTap, TapOptions, ToolCallTracker

POLICY = RedactionPolicy.default()


def registry() -> IntentRegistry:
    reg = IntentRegistry()
    reg.add("write_file")
    return reg


def tracker(spy: Spy, **options: Any) -> ToolCallTracker:
    tap = StreamTap(ledger=spy, registry=registry(), policy=POLICY, options=TapOptions(**options))
    return tap.tracker(session_id="s")


def ten_kb_args() -> str:
    body = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(200))
    args = json.dumps(
        {
            "intent": "Writing the parser's regression tests for nested quotes",
            "path": "t.py",
            "content": body,
        }
    )
    assert 10_000 <= len(args) <= 12_000
    return args


@pytest.mark.parametrize("size", [1, 4, 16, 64])
@pytest.mark.parametrize("paced", [False, True])
def test_writes_per_10kb_stream_are_bounded(size: int, paced: bool) -> None:
    args = ten_kb_args()
    now = [0.0]

    def clock() -> float:
        now[0] += 0.02 if paced else 0.0  # paced: 50 deltas per second, like a real model
        return now[0]

    spy = Spy()
    tr = tracker(spy, clock=clock, max_updates_per_call=8)
    tr.start(0, "call_w", "write_file")
    for i in range(0, len(args), size):
        tr.feed(0, args[i : i + size])
    tr.end(0)
    tr.close()
    intents = [w["intent"] for w in spy.writes]
    assert (
        intents[0] is None
        and intents[-1] == "Writing the parser's regression tests for nested quotes"
    )
    assert len(spy.writes) <= 2 + 8
    if not paced:
        assert len(spy.writes) == 3  # sighting, first whole word (no earlier write), complete
    # nothing after the intent is complete: the 10 KB of content cost no write
    assert all(w["status"] == "streaming" for w in spy.writes)


@given(
    intent=st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40),
    rest=st.dictionaries(
        st.sampled_from(["a", "path", "n"]), st.integers() | st.text(max_size=10), max_size=3
    ),
    cuts=st.lists(st.integers(min_value=1, max_value=12), min_size=1, max_size=60),
    ensure_ascii=st.booleans(),
    as_bytes=st.booleans(),
)
def test_any_chunking_publishes_the_intent_once_complete(
    intent: str, rest: dict[str, object], cuts: list[int], ensure_ascii: bool, as_bytes: bool
) -> None:
    text = json.dumps({"intent": intent, **rest}, ensure_ascii=ensure_ascii)
    args: str | bytes = text.encode() if as_bytes else text  # bytes: cuts split UTF-8 sequences
    spy = Spy()
    tr = tracker(spy, max_updates_per_call=4, publish_interval_millis=0)
    tr.start(("c", 0), "call_p", "write_file")
    pos, i = 0, 0
    while pos < len(args):
        n = cuts[i % len(cuts)]
        tr.feed(("c", 0), args[pos : pos + n])
        pos, i = pos + n, i + 1
    tr.end(("c", 0))
    tr.close()
    raw = read_intent(text) or ""
    expected = sanitize_label(POLICY.scrub_text(raw)) or None
    assert spy.writes[-1]["intent"] == expected
    assert 1 <= len(spy.writes) <= 2 + 4
    if expected == sanitize_label(raw):  # (nothing scrubbed) every partial label is a prefix
        for w in spy.writes[1:-1]:
            assert expected is not None and expected.startswith(w["intent"])


def test_identity_arriving_after_arguments() -> None:
    # A provider that sends the arguments before the call's id and name (buffered, then read).
    spy = Spy()
    tr = tracker(spy)
    tr.feed(0, '{"intent": "Saving the ')
    tr.start(0, call_id="call_late")
    tr.feed(0, 'report", "x": 1}')
    tr.start(0, tool_name="write_file")
    tr.end(0)
    tr.close()
    assert [w["intent"] for w in spy.writes] == [None, "Saving the", "Saving the report"]


def test_bytes_split_inside_utf8_and_a_closed_tracker_is_inert() -> None:
    spy = Spy()
    tr = tracker(spy)
    tr.start(1, "call_b", "write_file")
    data = '{"intent": "Saving été data"}'.encode()
    for piece in [data[:5], data[5:18], data[18:20], data[20:]]:  # 18: inside "é"
        tr.feed(1, piece)
    tr.close()
    tr.close()  # idempotent: nothing more is written (the call did not end: abandoned once)
    assert [w["status"] for w in spy.writes] == ["streaming"] * 3 + ["abandoned"]
    assert [w["intent"] for w in spy.writes[:3]] == [None, "Saving", "Saving été data"]
    assert spy.writes[-1]["intent"] == "Saving été data"


CARD_INTENT = "Paying the invoice with 4111 1111 1111 1111 and 5500 0000 0000 0004 today"


@given(
    cuts=st.lists(st.integers(min_value=1, max_value=7), min_size=1, max_size=40),
    stop=st.integers(min_value=0, max_value=120),
    words=st.booleans(),
)
def test_a_spaced_card_number_is_never_published_in_part(
    cuts: list[int], stop: int, words: bool
) -> None:
    # Every growth may be written (no interval); the stream may stop anywhere: no write ever
    # holds a digit of either card (each is whole for the scrubber, or not there at all).
    args = json.dumps({"intent": CARD_INTENT, "amount": 12})
    spy = Spy()
    tr = tracker(spy, publish_interval_millis=0, max_updates_per_call=1000, whole_words=words)
    tr.start(0, "call_card", "write_file")
    pos, i = 0, 0
    while pos < min(stop, len(args)):
        n = cuts[i % len(cuts)]
        tr.feed(0, args[pos : pos + n])
        pos, i = pos + n, i + 1
    tr.close()  # mid-number: abandoned with what is safe to show
    for w in spy.writes:
        assert not any(c.isdigit() for c in w["intent"] or ""), w
    if pos >= len(args):
        assert spy.writes[-1]["intent"] == (
            "Paying the invoice with [redacted:credit_card] and [redacted:credit_card] today"
        )
