"""The tap on the real ``openai`` SDK, Responses API, against a loopback SSE server."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import openai
import pytest

from tests.support.sse import RESP_ID, SSEServer, responses_stream
from tests.taps.conftest import sdk_client
from tracing import IntentRegistry
from tracing.ledger import Ledger
from tracing.taps import StreamTap

pytestmark = pytest.mark.usefixtures("no_internal_errors")

A = (
    "call_r1",
    "search_code",
    json.dumps({"intent": "Searching for “naïve” parsers 🐍", "query": "parse"}),
)
B = ("call_r2", "read_file", json.dumps({"intent": "Reading the lexer", "path": "lex.py"}))


def create(server: SSEServer) -> Any:
    c: openai.OpenAI = sdk_client("openai", server)
    return c.responses.create(model="gpt-4.1", input="Find the parsers", stream=True)


def test_parallel_function_calls_identical_events(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    # a message item (every event of a text part) before the parallel function calls
    parts = responses_stream([A, B], size=4, interleaved=True, text="Let me look.")
    sse_server.respond(parts)
    plain = list(create(sse_server))
    sse_server.respond(parts)
    stream = create(sse_server)
    tap = StreamTap(ledger=ledger, registry=registry, session_id="r-1", turn=1)
    assert tap.wrap(stream) is stream
    tapped = list(stream)
    assert [(type(e), e.model_dump()) for e in tapped] == [(type(e), e.model_dump()) for e in plain]
    assert ledger.flush()
    rows = ledger.session_anchors("r-1")
    assert [(r["provider_call_id"], r["status"], r["intent"], r["batch_id"]) for r in rows] == [
        ("call_r1", "streaming", "Searching for “naïve” parsers 🐍", RESP_ID),
        ("call_r2", "streaming", "Reading the lexer", RESP_ID),
    ]


def test_async_stream_helper_with_final_response(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    tap = StreamTap(ledger=ledger, registry=registry, session_id="r-2")

    async def main() -> Any:
        c: openai.AsyncOpenAI = sdk_client("openai-async", sse_server)
        sse_server.respond(responses_stream([B, A], size=6))
        async with tap.wrap(c.responses.stream(model="gpt-4.1", input="x")) as stream:
            assert type(stream).__name__ == "AsyncResponseStream"
            return await stream.get_final_response()

    final = asyncio.run(main())
    assert [o.call_id for o in final.output if o.type == "function_call"] == ["call_r2", "call_r1"]
    assert ledger.flush()
    assert {r["provider_call_id"]: r["intent"] for r in ledger.session_anchors("r-2")} == {
        "call_r1": "Searching for “naïve” parsers 🐍",
        "call_r2": "Reading the lexer",
    }


def test_error_event_mid_stream_abandons_unfinished_calls(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    # An `error` event after 24 deltas (12 per call, 36 characters of each call's arguments):
    # the SDK yields it and the stream ends.
    parts = responses_stream([A, B], size=3, error_after=24)
    sse_server.respond(parts)
    events = list(
        StreamTap(ledger=ledger, registry=registry, session_id="r-3").wrap(create(sse_server))
    )
    assert events[-1].type == "error"
    assert ledger.flush()
    rows = ledger.session_anchors("r-3")
    # A stopped inside `\u00ef` after "na" (the row keeps all that the model wrote: nothing
    # there could become a secret); B's intent was complete, its other arguments were not.
    assert [(r["status"], r["intent"]) for r in rows] == [
        ("abandoned", "Searching for “na"),
        ("abandoned", "Reading the lexer"),
    ]
    for r in rows:  # the provider's message, not "the stream ended early"
        assert "server_error: The server had an error" in (r["error"] or ""), r["error"]


def test_whole_arguments_without_deltas(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    # Some calls arrive in one piece: `arguments.done` with no delta before it.
    parts = [p for p in responses_stream([B]) if b"function_call_arguments.delta" not in p]
    sse_server.respond(parts)
    list(StreamTap(ledger=ledger, registry=registry, session_id="r-4").wrap(create(sse_server)))
    assert ledger.flush()
    (row,) = ledger.session_anchors("r-4")
    assert (row["status"], row["intent"]) == ("streaming", "Reading the lexer")
