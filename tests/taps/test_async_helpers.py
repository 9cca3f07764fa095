"""The async clients' helper streams (``AsyncAnthropic().messages.stream``, ``AsyncOpenAI()
.chat.completions.stream`` and ``.responses.stream``): rows read mid-stream while the server
holds the stream, then after errors and cuts."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import anthropic
import openai
import pytest

from tests.support.sse import SSEServer, anthropic_stream, chat_stream, responses_stream
from tests.taps.conftest import one_by_provider, sdk_client
from tests.taps.test_lifecycle import until
from tracing import IntentRegistry
from tracing.ledger import Ledger
from tracing.status import Status
from tracing.taps import StreamTap

pytestmark = pytest.mark.usefixtures("no_internal_errors")

A = (
    "id_1",
    "search_code",
    json.dumps({"intent": "Searching for OAuth handling", "query": "oauth"}),
)
B = ("id_2", "read_file", json.dumps({"intent": "Reading the callback router", "path": "r.py"}))
MESSAGES: Any = [{"role": "user", "content": "Where is OAuth handled?"}]


def in_thread(coro_fn: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(asyncio.run(coro_fn()))
        except BaseException as exc:
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def test_async_message_stream_held_then_final_message(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    calls = [("toolu_h1", *A[1:]), ("toolu_h2", *B[1:])]
    parts = anthropic_stream(calls, size=5)
    stop_a = next(i for i, p in enumerate(parts) if b'"content_block_stop","index":1' in p)
    script = sse_server.respond(parts, hold_at=stop_a + 4)  # A whole, B begun
    tap = StreamTap(ledger=ledger, registry=registry)

    async def app() -> Any:
        c: anthropic.AsyncAnthropic = sdk_client("anthropic-async", sse_server)
        async with tap.wrap(c.messages.stream(model="m", max_tokens=64, messages=MESSAGES)) as s:
            text = "".join([t async for t in s.text_stream])
            return text, await s.get_final_message()

    thread, out = in_thread(app)
    assert script.reached.wait(10)
    a = until(
        lambda: (
            ledger.flush()
            and (r := one_by_provider(ledger, "toolu_h1"))
            and r["intent"] == "Searching for OAuth handling"
            and r
        )
    )
    b = until(lambda: ledger.flush() and (r := one_by_provider(ledger, "toolu_h2")) and r)
    assert a and b and (a["status"], b["status"]) == (Status.STREAMING, Status.STREAMING)
    script.release.set()
    thread.join(10)
    text, final = out[0]
    assert text == "Let me look into that." and [
        blk.id for blk in final.content if blk.type == "tool_use"
    ] == ["toolu_h1", "toolu_h2"]
    assert ledger.flush()
    row = one_by_provider(ledger, "toolu_h2")
    assert row is not None and row["intent"] == "Reading the callback router"


def test_async_message_stream_error_event_keeps_the_providers_message(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    sse_server.respond(anthropic_stream([("toolu_e1", *A[1:])], size=6, error_after=4, text=None))
    tap = StreamTap(ledger=ledger, registry=registry)

    async def app() -> None:
        c: anthropic.AsyncAnthropic = sdk_client("anthropic-async", sse_server)
        async with tap.wrap(c.messages.stream(model="m", max_tokens=64, messages=MESSAGES)) as s:
            await s.until_done()

    with pytest.raises(anthropic.APIStatusError, match="Overloaded"):
        asyncio.run(app())
    assert ledger.flush()
    row = one_by_provider(ledger, "toolu_e1")
    assert row is not None and row["status"] == Status.ABANDONED
    assert "Overloaded" in (row["error"] or "") and "Searching".startswith(row["intent"] or "-")


def test_async_chat_completion_stream_cut(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    calls = [("call_c1", *A[1:]), ("call_c2", *B[1:])]
    parts = chat_stream(calls, size=5, interleaved=False, done=False)
    b_start = next(i for i, p in enumerate(parts) if b'"call_c2"' in p)
    sse_server.respond(parts[: b_start + 3], cut=True)
    tap = StreamTap(ledger=ledger, registry=registry)

    async def app() -> None:
        c: openai.AsyncOpenAI = sdk_client("openai-async", sse_server)
        async with tap.wrap(c.chat.completions.stream(model="m", messages=MESSAGES)) as s:
            await s.get_final_completion()

    with pytest.raises(openai.APIConnectionError):
        asyncio.run(app())
    assert ledger.flush()
    a, b = one_by_provider(ledger, "call_c1"), one_by_provider(ledger, "call_c2")
    assert a is not None and a["status"] == Status.STREAMING  # complete: call_c2 had started
    assert (
        b is not None
        and b["status"] == Status.ABANDONED
        and "APIConnectionError" in (b["error"] or "")
    )


def test_async_response_stream_error_event(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    calls: list[tuple[str, str, str]] = [("call_r1", A[1], A[2])]
    sse_server.respond(responses_stream(calls, size=5, error_after=6, text="Looking."))
    tap = StreamTap(ledger=ledger, registry=registry)

    async def app() -> list[str]:
        c: openai.AsyncOpenAI = sdk_client("openai-async", sse_server)
        async with tap.wrap(c.responses.stream(model="m", input="x")) as s:
            return [e.type async for e in s]

    try:
        types = asyncio.run(app())
    except openai.APIError as exc:  # (the helper stream may raise the error event instead)
        types = [f"raised {type(exc).__name__}"]
    assert types[-1] in ("error", "raised APIError"), types
    assert ledger.flush()
    row = one_by_provider(ledger, "call_r1")
    assert row is not None and row["status"] == Status.ABANDONED
    assert "The server had an error" in (row["error"] or "")
