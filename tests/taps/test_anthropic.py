"""The tap on the real ``anthropic`` SDK (Messages) against a loopback SSE server."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anthropic
import pytest

from tests.support.sse import MSG_ID, SSEServer, anthropic_stream, split
from tests.taps.conftest import one_by_provider, sdk_client
from tracing import IntentRegistry
from tracing.ledger import Ledger
from tracing.taps import StreamTap

pytestmark = pytest.mark.usefixtures("no_internal_errors")

A = (
    "toolu_01A",
    "search_code",
    json.dumps({"intent": "Looking for the retry policy", "query": "retry"}),
)
B = (
    "toolu_01B",
    "read_file",
    json.dumps({"intent": "Opening config/retry.toml", "path": "config/retry.toml"}),
)
INTENT_A = json.loads(A[2])["intent"]
MESSAGES: Any = [{"role": "user", "content": "How do retries work?"}]


def client(server: SSEServer) -> anthropic.Anthropic:
    return sdk_client("anthropic", server)


def create(server: SSEServer) -> Any:
    return client(server).messages.create(
        model="claude-sonnet-4-5", max_tokens=1024, messages=MESSAGES, stream=True
    )


def test_raw_stream_identical_events_and_rows(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    # every event type of a Messages stream: thinking (and its signature), text, tool_use
    parts = anthropic_stream([A, B], size=5, thinking="The user asks about retries; search.")
    sse_server.respond(parts)
    plain = list(create(sse_server))
    sse_server.respond(parts)
    stream = create(sse_server)
    assert (
        StreamTap(ledger=ledger, registry=registry, session_id="a-1", agent_id="claude").wrap(
            stream
        )
        is stream
    )
    tapped = list(stream)
    assert [(type(e), e.model_dump()) for e in tapped] == [(type(e), e.model_dump()) for e in plain]
    assert ledger.flush()
    rows = ledger.session_anchors("a-1")
    assert [
        (r["provider_call_id"], r["status"], r["intent"], r["batch_id"], r["agent_id"])
        for r in rows
    ] == [
        ("toolu_01A", "streaming", "Looking for the retry policy", MSG_ID, "claude"),
        ("toolu_01B", "streaming", "Opening config/retry.toml", MSG_ID, "claude"),
    ]


def test_message_stream_text_stream_and_final_message(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    # `text_stream` and `get_final_message()` consume the stream without the app seeing events.
    parts = anthropic_stream([A, B], size=4, interleaved=True)
    sse_server.respond(parts)
    with client(sse_server).messages.stream(model="m", max_tokens=10, messages=MESSAGES) as s:
        plain = s.get_final_message()
    sse_server.respond(parts)
    tap = StreamTap(ledger=ledger, registry=registry, session_id="a-2")
    with tap.wrap(
        client(sse_server).messages.stream(model="m", max_tokens=10, messages=MESSAGES)
    ) as s:
        assert type(s).__name__ == "MessageStream"
        text = "".join(s.text_stream)
        final = s.get_final_message()
    assert text == "Let me look into that."
    assert final.model_dump() == plain.model_dump()
    assert [b.input for b in final.content if b.type == "tool_use"] == [
        json.loads(A[2]),
        json.loads(B[2]),
    ]
    assert ledger.flush()
    assert {r["provider_call_id"]: r["intent"] for r in ledger.session_anchors("a-2")} == {
        "toolu_01A": "Looking for the retry policy",
        "toolu_01B": "Opening config/retry.toml",
    }


def test_async_message_stream(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    tap = StreamTap(ledger=ledger, registry=registry, session_id="a-3")

    async def main() -> list[str]:
        c: anthropic.AsyncAnthropic = sdk_client("anthropic-async", sse_server)
        sse_server.respond(anthropic_stream([B], size=2, text=None))
        async with tap.wrap(c.messages.stream(model="m", max_tokens=10, messages=MESSAGES)) as s:
            return [e.type async for e in s]

    types = asyncio.run(main())
    assert "input_json" in types and types[-1] == "message_stop"
    assert ledger.flush()
    (row,) = ledger.session_anchors("a-3")
    assert (row["provider_call_id"], row["intent"]) == ("toolu_01B", "Opening config/retry.toml")


def test_error_event_mid_stream(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    # A's block is complete (its deltas, then content_block_stop), B has 3 deltas ("" first)
    parts = anthropic_stream([A, B], size=6, error_after=1 + len(split(A[2], 6)) + 3)
    errors: list[str] = []
    for tapped in (False, True):
        sse_server.respond(parts)
        stream = create(sse_server)
        if tapped:
            stream = StreamTap(ledger=ledger, registry=registry, session_id="a-4").wrap(stream)
        with pytest.raises(anthropic.APIStatusError) as info:
            list(stream)
        errors.append(f"{type(info.value).__name__}: {info.value}")
    assert errors[0] == errors[1] and "Overloaded" in errors[0]
    assert ledger.flush()
    rows = {r["provider_call_id"]: r for r in ledger.session_anchors("a-4")}
    assert (rows["toolu_01A"]["status"], rows["toolu_01A"]["intent"]) == (
        "streaming",
        "Looking for the retry policy",
    )
    b = rows["toolu_01B"]
    assert (b["status"], b["intent"], b["label"]) == ("abandoned", None, "read_file · abandoned")


def test_input_json_cut_mid_surrogate_pair(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    args = json.dumps(
        {"intent": "Grepping for 😀 in 日本語 docs", "q": "😀"}
    )  # \ud83d\ude00 escapes
    sse_server.respond(anthropic_stream([("toolu_E", "search_code", args)], size=1, text=None))
    list(StreamTap(ledger=ledger, registry=registry).wrap(create(sse_server)))
    assert ledger.flush()
    row = one_by_provider(ledger, "toolu_E")
    assert row is not None and row["intent"] == "Grepping for 😀 in 日本語 docs"


def test_leaving_the_stream_block_early_finishes_the_tap(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    tap = StreamTap(ledger=ledger, registry=registry, session_id="a-5")
    sse_server.respond(anthropic_stream([A, B], size=6, text=None))
    with tap.wrap(
        client(sse_server).messages.stream(model="m", max_tokens=9, messages=MESSAGES)
    ) as s:
        for event in s:
            # stop right after A's block is complete: that last event is still read at exit
            if event.type == "content_block_stop" and event.index == 0:
                break
        kept = s  # the application still holds the stream: no garbage collection involved
    assert ledger.flush()
    rows = {r["provider_call_id"]: r for r in ledger.session_anchors("a-5")}
    assert kept is s and set(rows) == {"toolu_01A"}  # B never started
    assert (rows["toolu_01A"]["status"], rows["toolu_01A"]["intent"]) == (
        "streaming", "Looking for the retry policy",
    )  # fmt: skip
    c = ("toolu_01C", "search_code", A[2])
    sse_server.respond(anthropic_stream([c], size=6, text=None))
    with tap.wrap(
        client(sse_server).messages.stream(model="m", max_tokens=9, messages=MESSAGES)
    ) as s:
        for event in s:  # stop inside C's arguments, once its intent is complete
            snapshot: Any = getattr(event, "snapshot", None)
            if event.type == "input_json" and snapshot.get("intent") == INTENT_A:
                break
    assert ledger.flush()
    row = one_by_provider(ledger, "toolu_01C")
    assert row is not None and (row["status"], row["intent"]) == (
        "abandoned",
        "Looking for the retry policy",
    )
    assert "closed before" in (row["error"] or "")
