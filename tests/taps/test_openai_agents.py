"""The tap on openai-agents: ``Runner.run_streamed(...).stream_events()`` against a loopback
server speaking the Responses (and Chat Completions) wire format; the tool itself records its
span with ``tracing.tool_call``, so one row goes streaming -> in flight -> settled."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import agents
import openai
import pytest
from agents.tool_context import ToolContext
from opentelemetry.sdk.trace import TracerProvider

import tracing
from tests.support.sse import SSEServer, chat_stream, responses_stream
from tests.taps.conftest import one_by_provider
from tracing import IntentRegistry
from tracing.ledger import Ledger
from tracing.otel._processor import IntentSpanProcessor
from tracing.status import Status
from tracing.taps import StreamTap

pytestmark = pytest.mark.usefixtures("no_internal_errors")

A = (
    "call_ag1",
    "search_code",
    json.dumps({"intent": "Searching for OAuth handling", "query": "oauth"}),
)
B = ("call_ag2", "read_file", json.dumps({"intent": "Reading the callback router", "path": "r.py"}))


@pytest.fixture(scope="module", autouse=True)
def no_agents_tracing() -> Iterator[None]:
    agents.set_tracing_disabled(True)  # its own exporter would post to the provider's cloud
    yield


@pytest.fixture
def provider(ledger: Ledger, registry: IntentRegistry) -> Iterator[TracerProvider]:
    tp = TracerProvider()
    tp.add_span_processor(IntentSpanProcessor(registry=registry, ledger=ledger))
    yield tp
    tp.shutdown()


def make_agent(
    server: SSEServer, tracer: Any, *, chat: bool = False, seen: list[Any] | None = None
) -> Any:
    @agents.function_tool
    async def search_code(ctx: ToolContext[Any], intent: str, query: str) -> str:
        """Search the code."""
        args = {"intent": intent, "query": query}
        with tracing.tool_call(
            "search_code", args, call_id=ctx.tool_call_id, tracer=tracer
        ) as call:
            if seen is not None:
                seen.append(ctx.tool_call_id)
            call.set_result({"hits": 3}, outcome="Found 3 OAuth handlers")
        return "3 hits"

    @agents.function_tool
    async def read_file(ctx: ToolContext[Any], intent: str, path: str) -> str:
        """Read a file."""
        with tracing.tool_call(
            "read_file", {"intent": intent, "path": path}, call_id=ctx.tool_call_id, tracer=tracer
        ):
            pass
        return "def callback(): ..."

    client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="sk-test", max_retries=0)
    model: Any = (
        agents.OpenAIChatCompletionsModel(model="gpt-4o", openai_client=client)
        if chat
        else agents.OpenAIResponsesModel(model="gpt-4.1", openai_client=client)
    )
    return agents.Agent(
        name="coder", instructions="Find things.", tools=[search_code, read_file], model=model
    )


def test_run_streamed_rows_go_streaming_in_flight_settled(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry, provider: TracerProvider
) -> None:
    sse_server.respond(responses_stream([A, B], size=5, text="Let me look."))
    sse_server.respond(responses_stream([], text="The handler is in r.py."))
    agent = make_agent(sse_server, provider.get_tracer("agent"))
    tap = StreamTap(ledger=ledger, registry=registry)
    kinds: list[str] = []
    mid: dict[str, Any] = {}

    async def main() -> Any:
        result = agents.Runner.run_streamed(agent, input="Where is OAuth handled?")
        async for event in tap.wrap(result.stream_events()):
            kinds.append(event.type)
            if event.type == "run_item_stream_event" and event.name == "tool_called" and not mid:
                assert ledger.flush()  # the model's response is over, no tool has run yet
                mid.update({c: one_by_provider(ledger, c) for c in ("call_ag1", "call_ag2")})
        return result.final_output

    with tracing.session("ag-1", turn=1):  # the tap's rows and the processor's share it
        assert asyncio.run(main()) == "The handler is in r.py."
    assert {"raw_response_event", "run_item_stream_event", "agent_updated_stream_event"} <= set(
        kinds
    )
    assert mid["call_ag1"]["status"] == Status.STREAMING
    assert mid["call_ag1"]["intent"] == "Searching for OAuth handling"
    assert mid["call_ag2"]["intent"] == "Reading the callback router"
    assert mid["call_ag1"]["batch_id"] == mid["call_ag2"]["batch_id"]  # one model response
    assert provider.force_flush() and ledger.flush()
    rows = {r["provider_call_id"]: r for r in ledger.session_anchors("ag-1")}
    assert set(rows) == {"call_ag1", "call_ag2"}
    assert (rows["call_ag1"]["status"], rows["call_ag1"]["label"]) == (
        Status.SUCCESS,
        "Found 3 OAuth handlers",
    )
    assert rows["call_ag2"]["status"] == Status.SUCCESS
    assert rows["call_ag1"]["seq"] == mid["call_ag1"]["seq"]  # the same row, updated in place


def test_the_next_model_response_of_the_run_is_a_new_batch(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry, provider: TracerProvider
) -> None:
    # Two model turns with tool calls: output index 0 is reused by another call id.
    sse_server.respond(responses_stream([A], size=8))
    sse_server.respond(responses_stream([("call_ag3", *A[1:])], size=8))
    sse_server.respond(responses_stream([], text="Done."))
    agent = make_agent(sse_server, provider.get_tracer("agent"))
    tap = StreamTap(ledger=ledger, registry=registry)

    async def main() -> None:
        result = agents.Runner.run_streamed(agent, input="Search twice")
        async for _ in tap.wrap(result.stream_events()):
            pass

    with tracing.session("ag-2"):
        asyncio.run(main())
    assert provider.force_flush() and ledger.flush()
    rows = ledger.session_anchors("ag-2")
    assert [(r["provider_call_id"], r["status"]) for r in rows] == [
        ("call_ag1", Status.SUCCESS),
        ("call_ag3", Status.SUCCESS),
    ]


def test_mid_stream_and_a_cut_stream(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry, provider: TracerProvider
) -> None:
    # The server holds the model's stream inside B's arguments: A's row is complete and B's
    # grows, read through the ledger while the run waits; then the connection is cut.
    parts = responses_stream([A, B], size=5, interleaved=False)
    b_delta = [
        i for i, p in enumerate(parts) if b'"output_index":1' in p and b"arguments.delta" in p
    ][3]
    script = sse_server.respond(parts[:b_delta], cut=True, hold_at=b_delta)
    agent = make_agent(sse_server, provider.get_tracer("agent"))
    tap = StreamTap(ledger=ledger, registry=registry, session_id="ag-3")
    errors: list[BaseException] = []

    def run() -> None:
        async def main() -> None:
            result = agents.Runner.run_streamed(agent, input="x")
            async for _ in tap.wrap(result.stream_events()):
                pass

        try:
            asyncio.run(main())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert script.reached.wait(20)

    def both() -> Any:
        ledger.flush()
        a, b = one_by_provider(ledger, "call_ag1"), one_by_provider(ledger, "call_ag2")
        return a and b and a["intent"] == "Searching for OAuth handling" and b["intent"] and (a, b)

    from tests.taps.test_lifecycle import until

    got = until(both)
    assert got, (one_by_provider(ledger, "call_ag1"), one_by_provider(ledger, "call_ag2"))
    assert got[1]["status"] == Status.STREAMING and "Reading the callback router".startswith(
        got[1]["intent"]
    )
    script.release.set()
    thread.join(20)
    assert errors  # the run failed: the model's connection was cut
    assert ledger.flush()
    a, b = one_by_provider(ledger, "call_ag1"), one_by_provider(ledger, "call_ag2")
    assert a is not None and b is not None
    assert (
        a["status"] == Status.STREAMING
    )  # complete (its `arguments.done` came): not ours to settle
    assert b["status"] == Status.ABANDONED and b["error"]


def test_chat_completions_model_of_the_agents_sdk(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry, provider: TracerProvider
) -> None:
    # Its Chat Completions model turns chunks into Responses events: tapped the same way.
    sse_server.respond(chat_stream([A], size=6))
    sse_server.respond(chat_stream([], text="Found it."))
    agent = make_agent(sse_server, provider.get_tracer("agent"), chat=True)
    tap = StreamTap(ledger=ledger, registry=registry)

    async def main() -> None:
        result = agents.Runner.run_streamed(agent, input="x")
        async for _ in tap.wrap(result.stream_events()):
            pass

    with tracing.session("ag-4"):
        asyncio.run(main())
    assert provider.force_flush() and ledger.flush()
    (r,) = ledger.session_anchors("ag-4")
    assert (r["provider_call_id"], r["status"], r["intent"]) == (
        "call_ag1", Status.SUCCESS, "Searching for OAuth handling",
    )  # fmt: skip
