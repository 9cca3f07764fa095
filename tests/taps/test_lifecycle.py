"""A row's life for every way a stream ends, with the real SDKs and the real span processor:
read mid-stream through the ledger's public read API while the server holds the stream, then
after it ends, is cut, errors, is closed or broken out of, and with eager tool execution."""

from __future__ import annotations

import gc
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import openai
import pytest
from opentelemetry.sdk.trace import TracerProvider

import tracing
from tests.support.sse import (
    SSEServer,
    anthropic_stream,
    chat_error,
    chat_finish,
    chat_stream,
    chat_tool_delta,
    chat_tool_start,
    responses_stream,
    sse,
)
from tests.taps.conftest import Spy, one_by_provider, sdk_client
from tracing import IntentRegistry
from tracing.ledger import Anchor, Ledger
from tracing.otel._processor import IntentSpanProcessor
from tracing.status import Status
from tracing.taps import StreamTap, TapOptions

pytestmark = pytest.mark.usefixtures("no_internal_errors")

A = (
    "call_Aa1",
    "search_code",
    json.dumps({"intent": "Searching for OAuth handling", "q": "oauth"}),
)
B = ("call_Bb2", "read_file", json.dumps({"intent": "Reading the callback router", "path": "r.py"}))
MESSAGES: Any = [{"role": "user", "content": "Where is OAuth handled?"}]


def chat(server: SSEServer) -> Any:
    return sdk_client("openai", server).chat.completions.create(
        model="gpt-4o", messages=MESSAGES, stream=True
    )


def until(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    """Poll ``check`` until it returns something truthy (the ledger is written by threads)."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.02)


def row(ledger: Ledger, call_id: str) -> Anchor:
    assert ledger.flush()
    found = one_by_provider(ledger, call_id)
    assert found is not None, call_id
    return found


def sequential_then_b_partial() -> list[bytes]:
    """A complete, then B started with half its arguments: no finish_reason yet."""
    parts = chat_stream([A, B], size=6, interleaved=False, done=False)
    b_start = next(i for i, p in enumerate(parts) if b'"call_Bb2"' in p)
    return parts[: b_start + 4]  # B's start and 3 deltas: {"inte nt": " Readin


ENDINGS = ["eof", "cut", "error", "close", "with", "gc"]


def consume(server: SSEServer, tap: StreamTap, ending: str) -> None:
    stream = tap.wrap(chat(server))
    if ending in ("eof", "cut"):
        with pytest.raises(openai.APIConnectionError) if ending == "cut" else _nothing():
            list(stream)
    elif ending == "error":
        with pytest.raises(openai.APIError, match="server had an error"):
            list(stream)
    elif ending == "close":
        for n, _ in enumerate(stream):
            if n == 15:  # every event sent: B's start and its three deltas
                break
        stream.close()  # the application keeps `stream`: no garbage collection involved
    elif ending == "with":
        with stream:
            for n, _ in enumerate(stream):
                if n == 15:
                    break
    else:
        for n, _ in enumerate(stream):
            if n == 15:
                break
        del stream
        gc.collect()


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


@pytest.mark.parametrize("ending", ENDINGS)
def test_chat_a_call_followed_by_another_is_complete_whatever_ends_the_stream(
    ending: str, sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    parts = sequential_then_b_partial()
    if ending == "error":
        parts = [*parts, chat_error()]
    sse_server.respond(
        parts,
        cut=ending == "cut",
        hold_at=len(parts) if ending in ("close", "with", "gc") else None,
    )
    tap = StreamTap(ledger=ledger, registry=registry, session_id=f"s-{ending}")
    consume(sse_server, tap, ending)
    a, b = row(ledger, "call_Aa1"), row(ledger, "call_Bb2")
    # A's arguments were complete when B started: it stays for the processor
    assert (a["status"], a["intent"]) == (Status.STREAMING, "Searching for OAuth handling")
    assert b["status"] == Status.ABANDONED and b["end_ns"] is not None
    assert b["intent"] == "Readin"  # all the model wrote of it (nothing there is a secret)
    expected = {
        "eof": "ended before",
        "cut": "APIConnectionError",
        "error": "The server had an error while processing your request",
        "close": "closed before",
        "with": "closed before",
        "gc": "closed before",
    }[ending]
    assert expected in (b["error"] or ""), b["error"]


def test_chat_interleaving_provider_still_abandons_an_incomplete_call(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    # Some OpenAI-compatible servers interleave parallel calls' deltas: a later call starting
    # then proves nothing about an earlier one.
    parts = chat_stream([A, B], size=6, interleaved=True, done=False)[:9]
    sse_server.respond(parts)
    list(StreamTap(ledger=ledger, registry=registry).wrap(chat(sse_server)))
    assert [row(ledger, c)["status"] for c in ("call_Aa1", "call_Bb2")] == [
        Status.ABANDONED,
        Status.ABANDONED,
    ]


def test_chat_finish_reason_length_abandons_the_cut_call(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    parts = [*sequential_then_b_partial(), chat_finish("length"), sse("[DONE]")]
    sse_server.respond(parts)
    list(StreamTap(ledger=ledger, registry=registry).wrap(chat(sse_server)))
    assert row(ledger, "call_Aa1")["status"] == Status.STREAMING
    b = row(ledger, "call_Bb2")
    assert b["status"] == Status.ABANDONED and "finish_reason length" in (b["error"] or "")


@pytest.fixture
def processor(ledger: Ledger, registry: IntentRegistry) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(IntentSpanProcessor(registry=registry, ledger=ledger))
    yield provider
    provider.shutdown()


def test_chat_eager_execution_the_app_runs_a_call_before_the_stream_ends(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry, processor: TracerProvider
) -> None:
    # The app starts A's tool as soon as B starts (A's arguments are complete), then the
    # connection is cut: A stays in flight and settles by its tool, B is abandoned.
    sse_server.respond(sequential_then_b_partial(), cut=True)
    tap = StreamTap(ledger=ledger, registry=registry, session_id="eager")
    tracer = processor.get_tracer("agent")
    running: list[Any] = []
    with tracing.session("eager"):
        stream = tap.wrap(chat(sse_server))
        with pytest.raises(openai.APIConnectionError):
            for chunk in stream:
                tc = chunk.choices[0].delta.tool_calls if chunk.choices else None
                if tc and tc[0].id == "call_Bb2":
                    cm = tracing.tool_call(
                        "search_code", json.loads(A[2]), call_id="call_Aa1", tracer=tracer
                    )
                    running.append((cm, cm.__enter__()))
        assert processor.force_flush()  # (the processor writes from its own thread)
        flying = row(ledger, "call_Aa1")
        assert flying["status"] == Status.IN_FLIGHT, flying  # never "· abandoned"
        cm, call = running[0]
        call.set_result({"hits": 3}, outcome="Found 3 OAuth handlers")
        cm.__exit__(None, None, None)
    assert processor.force_flush()
    done = row(ledger, "call_Aa1")
    assert (done["status"], done["label"]) == (Status.SUCCESS, "Found 3 OAuth handlers")
    assert done["seq"] == flying["seq"]
    assert row(ledger, "call_Bb2")["status"] == Status.ABANDONED


def test_a_late_abandon_never_downgrades_a_call_the_app_took_over(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry, processor: TracerProvider
) -> None:
    # An app that parses the last call's arguments itself and starts it before the stream
    # says they are complete; then the stream is cut. The tap abandons B, but B is the app's.
    parts = chat_stream([A, B], size=6, interleaved=False, done=False)
    sse_server.respond(parts, cut=True)
    tap = StreamTap(ledger=ledger, registry=registry, session_id="late")
    tracer = processor.get_tracer("agent")
    args = ""
    with pytest.raises(openai.APIConnectionError):
        for chunk in tap.wrap(chat(sse_server)):
            tc = chunk.choices[0].delta.tool_calls if chunk.choices else None
            if tc and tc[0].index == 1 and tc[0].function and tc[0].function.arguments:
                args += tc[0].function.arguments
                if args == B[2]:
                    with tracing.session("late"):  # the tap's session: the same anchor id
                        tracing.tool_call(
                            "read_file", json.loads(args), call_id="call_Bb2", tracer=tracer
                        ).__enter__()
    assert processor.force_flush()
    b = row(ledger, "call_Bb2")
    assert b["status"] == Status.IN_FLIGHT and b["label"] == "Reading the callback router"


def held_chat(server: SSEServer, hold_at: int) -> Any:
    parts = [
        chat_tool_start(0, "call_P", "search_code"),
        chat_tool_delta(0, '{"intent": "Searching'),
        chat_tool_delta(0, " for the OAuth token"),
        chat_tool_delta(0, ' refresh", "q": "refresh"}'),
        chat_finish(),
        sse("[DONE]"),
    ]
    return server.respond(parts, hold_at=hold_at)


def test_mid_stream_rows_and_a_pause_shows_what_was_written(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    # The model pauses mid-intent (the server holds the stream): within the interval the
    # ledger shows what the application received, though no further delta arrives.
    script = held_chat(sse_server, hold_at=3)
    seen: list[tuple[float, str]] = []
    tap = StreamTap(
        ledger=ledger,
        registry=registry,
        session_id="pause",
        on_intent=lambda c, t, i: seen.append((time.monotonic(), i.text)),
        options=TapOptions(publish_interval_millis=300),
    )
    done = threading.Event()

    def agent() -> None:
        for _ in tap.wrap(chat(sse_server)):
            pass
        done.set()

    threading.Thread(target=agent, daemon=True).start()
    assert script.reached.wait(10)
    label = until(
        lambda: (
            (r := one_by_provider(ledger, "call_P")) is not None
            and r["label"] == "Searching for the OAuth token"
            and r
        )
    )
    assert label, one_by_provider(ledger, "call_P")
    assert not done.is_set()  # still held: no delta came after the pause began
    got_at = next(t for t, text in seen if text == "Searching for the OAuth token")
    assert label["status"] == Status.STREAMING
    assert time.monotonic() - got_at < 10  # (bounded; the flush waits for the interval only)
    script.release.set()
    assert done.wait(10)
    assert row(ledger, "call_P")["intent"] == "Searching for the OAuth token refresh"


def test_pause_flush_respects_the_interval(registry: IntentRegistry) -> None:
    # The flush comes no sooner than the interval after the last write.
    spy = Spy()
    writes: list[float] = []
    arrived = threading.Event()

    class Timed(Spy):
        def record(self, write: Any) -> None:
            writes.append(time.monotonic())
            super().record(write)
            if write.get("intent") == "Saving the report":
                arrived.set()

    spy = Timed()
    tap = StreamTap(ledger=spy, registry=registry, options=TapOptions(publish_interval_millis=200))
    tr = tap.tracker()
    tr.start(0, "call_f", "search_code")
    tr.feed(0, '{"intent": "Saving ')  # first growth: written at once
    fed = time.monotonic()
    tr.feed(0, "the report")  # too soon: pending
    assert arrived.wait(10)
    assert [w["intent"] for w in spy.writes] == [None, "Saving", "Saving the report"]
    assert writes[-1] - fed >= 0.15  # not before the interval (less the time between feeds)
    tr.feed(0, ' now", "x": 1}')
    tr.close()
    assert spy.writes[-1]["intent"] == "Saving the report now"


@pytest.mark.parametrize("end", ["failed", "incomplete", "error"])
def test_responses_provider_errors_are_recorded(
    end: str, sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    if end == "error":
        parts = responses_stream([A, B], size=5, interleaved=False, error_after=10)
    else:
        parts = responses_stream([A, B], size=5, interleaved=False, end_after=10, end=end)
    sse_server.respond(parts)
    client: openai.OpenAI = sdk_client("openai", sse_server)
    events = list(
        StreamTap(ledger=ledger, registry=registry).wrap(
            client.responses.create(model="gpt-4.1", input="x", stream=True)
        )
    )
    assert (
        events[-1].type
        == {"failed": "response.failed", "incomplete": "response.incomplete", "error": "error"}[end]
    )
    a = row(ledger, "call_Aa1")
    assert a["status"] == Status.ABANDONED  # 10 deltas of 5: A's other arguments were cut
    assert a["intent"] == "Searching for OAuth handling"
    message = {
        "failed": "server_error: The model crashed",
        "incomplete": "max_output_tokens",
        "error": "server_error: The server had an error",
    }[end]
    assert message in (a["error"] or ""), a["error"]


@pytest.mark.parametrize("kind", ["openai-chat", "openai-responses", "anthropic"])
def test_closing_a_raw_stream_settles_at_once(
    kind: str, sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    # `stream.close()` with the stream still referenced: no garbage collection needed.
    if kind == "openai-chat":
        sse_server.respond(chat_stream([A], size=4))
        stream: Any = chat(sse_server)
    elif kind == "openai-responses":
        sse_server.respond(responses_stream([A], size=4))
        stream = sdk_client("openai", sse_server).responses.create(
            model="m", input="x", stream=True
        )
    else:
        sse_server.respond(anthropic_stream([A], size=4, text=None))
        stream = sdk_client("anthropic", sse_server).messages.create(
            model="m", max_tokens=9, messages=MESSAGES, stream=True
        )
    gc.disable()  # prove it is the close, not a collection
    try:
        tapped = StreamTap(ledger=ledger, registry=registry).wrap(stream)
        for n, _ in enumerate(tapped):
            if n == 12:  # inside A's intent (4-character deltas)
                break
        tapped.close()
        a = row(ledger, "call_Aa1")
        assert a["status"] == Status.ABANDONED and "closed before" in (a["error"] or "")
        assert a["intent"] and "Searching for OAuth handling".startswith(a["intent"])
    finally:
        gc.enable()


def test_async_raw_and_helper_streams_settle_when_closed_or_left(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    import asyncio

    tap = StreamTap(ledger=ledger, registry=registry)

    async def main() -> None:
        oai: openai.AsyncOpenAI = sdk_client("openai-async", sse_server)
        ant: anthropic.AsyncAnthropic = sdk_client("anthropic-async", sse_server)
        sse_server.respond(chat_stream([("call_as1", *A[1:])], size=4))
        stream = tap.wrap(
            await oai.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        )
        n = 0
        async for _ in stream:
            n += 1
            if n == 10:
                break
        await stream.close()
        sse_server.respond(responses_stream([("call_as2", *A[1:])], size=4))
        async with tap.wrap(oai.responses.stream(model="m", input="x")) as rs:
            async for event in rs:
                if event.type == "response.function_call_arguments.delta":
                    break
        sse_server.respond(anthropic_stream([("toolu_as3", *A[1:])], size=4, text=None))
        async with tap.wrap(ant.messages.stream(model="m", max_tokens=9, messages=MESSAGES)) as ms:
            async for event in ms:
                if event.type == "input_json":
                    break
        sse_server.respond(chat_stream([("call_as4", *A[1:])], size=4))
        async with tap.wrap(oai.chat.completions.stream(model="m", messages=MESSAGES)) as cs:
            final = await cs.get_final_completion()
        assert final.choices[0].message.tool_calls

    gc.disable()
    try:
        asyncio.run(main())
    finally:
        gc.enable()
    for cid in ("call_as1", "call_as2", "toolu_as3"):
        r = row(ledger, cid)
        assert r["status"] == Status.ABANDONED and "closed before" in (r["error"] or ""), r
    done = row(ledger, "call_as4")
    assert (done["status"], done["intent"]) == (Status.STREAMING, "Searching for OAuth handling")


@pytest.mark.parametrize("kind", ["openai-responses", "anthropic", "openai-chat-async"])
def test_a_pause_mid_intent_in_every_raw_stream(
    kind: str, sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry
) -> None:
    # The same pause as above in the other wire formats: the row catches up while held.
    import asyncio

    args = json.dumps({"intent": "Searching for the OAuth token refresh", "q": "refresh"})
    cut = args.index(" refresh")
    call = ("id_pause", "search_code", args)
    if kind == "openai-responses":
        parts = responses_stream([call], size=cut)
        hold = next(i for i, p in enumerate(parts) if b"arguments.delta" in p) + 1
    elif kind == "anthropic":
        parts = anthropic_stream([call], size=cut, text=None)
        hold = next(i for i, p in enumerate(parts) if b"input_json_delta" in p) + 2  # "" first
    else:
        parts = chat_stream([call], size=cut)
        hold = next(i for i, p in enumerate(parts) if b'"arguments":"{' in p) + 1
    script = sse_server.respond(parts, hold_at=hold)
    tap = StreamTap(
        ledger=ledger, registry=registry, options=TapOptions(publish_interval_millis=200)
    )

    def app() -> None:
        if kind == "openai-responses":
            client: Any = sdk_client("openai", sse_server)
            list(tap.wrap(client.responses.create(model="m", input="x", stream=True)))
        elif kind == "anthropic":
            client = sdk_client("anthropic", sse_server)
            list(
                tap.wrap(
                    client.messages.create(model="m", max_tokens=9, messages=MESSAGES, stream=True)
                )
            )
        else:

            async def main() -> None:
                client = sdk_client("openai-async", sse_server)
                stream = await tap.wrap(
                    client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
                )
                async for _ in stream:
                    pass

            asyncio.run(main())

    thread = threading.Thread(target=app, daemon=True)
    thread.start()
    assert script.reached.wait(10)
    held = until(
        lambda: (
            ledger.flush()
            and (r := one_by_provider(ledger, "id_pause")) is not None
            and r["intent"] == "Searching for the OAuth token"
            and r
        )
    )
    assert held and held["status"] == Status.STREAMING, one_by_provider(ledger, "id_pause")
    script.release.set()
    thread.join(10)
    assert row(ledger, "id_pause")["intent"] == "Searching for the OAuth token refresh"
