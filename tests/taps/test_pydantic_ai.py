"""The tap on pydantic-ai: ``agent.iter`` node streams and ``run_stream`` (through its
``event_stream_handler``), with its real OpenAI model against a loopback server speaking the
Chat Completions wire format, and its own OpenTelemetry instrumentation feeding the span
processor: one row per call goes streaming -> in flight -> settled."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from pydantic_ai import Agent
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

import tracing
from tests.support.sse import SSEServer, anthropic_stream, chat_stream
from tests.taps.conftest import one_by_provider
from tests.taps.test_lifecycle import until
from tracing import IntentRegistry
from tracing.ledger import Ledger
from tracing.otel._processor import IntentSpanProcessor
from tracing.status import Status
from tracing.taps import StreamTap

pytestmark = pytest.mark.usefixtures("no_internal_errors")

A = (
    "call_pa1",
    "search_code",
    json.dumps({"intent": "Searching for OAuth handling", "query": "oauth"}),
)
B = ("call_pa2", "read_file", json.dumps({"intent": "Reading the callback router", "path": "r.py"}))


@pytest.fixture
def provider(ledger: Ledger, registry: IntentRegistry) -> Iterator[TracerProvider]:
    tp = TracerProvider()
    tp.add_span_processor(IntentSpanProcessor(registry=registry, ledger=ledger))
    yield tp
    tp.shutdown()


def make_agent(server: SSEServer, tp: TracerProvider) -> Agent[None, str]:
    model = OpenAIChatModel(
        "gpt-4o", provider=OpenAIProvider(base_url=server.url + "/v1", api_key="sk-test")
    )
    settings = InstrumentationSettings(tracer_provider=tp)
    agent: Agent[None, str] = Agent(model, capabilities=[Instrumentation(settings=settings)])

    @agent.tool_plain
    def search_code(intent: str, query: str) -> str:
        """Search the code."""
        return "3 hits"

    @agent.tool_plain
    def read_file(intent: str, path: str) -> str:
        """Read a file."""
        return "def callback(): ..."

    return agent


def test_iter_node_streams(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry, provider: TracerProvider
) -> None:
    sse_server.respond(chat_stream([A, B], size=5, interleaved=False, text="Looking."))
    sse_server.respond(chat_stream([], text="It is in r.py."))
    agent = make_agent(sse_server, provider)
    tap = StreamTap(ledger=ledger, registry=registry)
    kinds: list[str] = []
    before_tools: dict[str, Any] = {}

    async def main() -> str:
        async with agent.iter("Where is OAuth handled?") as run:
            async for node in run:
                if Agent.is_model_request_node(node):
                    async with tap.wrap(node.stream(run.ctx)) as events:
                        async for event in events:
                            kinds.append(event.event_kind)
                elif Agent.is_call_tools_node(node) and not before_tools:
                    assert ledger.flush()
                    before_tools.update(
                        {c: one_by_provider(ledger, c) for c in ("call_pa1", "call_pa2")}
                    )
        assert run.result is not None
        return run.result.output

    with tracing.session("pa-1"):  # the tap's rows and the processor's share it
        assert asyncio.run(main()) == "It is in r.py."
    assert {"part_start", "part_delta", "part_end"} <= set(kinds)
    assert {c: (r["status"], r["intent"]) for c, r in before_tools.items()} == {
        "call_pa1": (Status.STREAMING, "Searching for OAuth handling"),
        "call_pa2": (Status.STREAMING, "Reading the callback router"),
    }
    assert provider.force_flush() and ledger.flush()
    rows = {str(r["provider_call_id"]): r for r in ledger.session_anchors("pa-1")}
    assert {c: r["status"] for c, r in rows.items()} == {
        "call_pa1": Status.SUCCESS,
        "call_pa2": Status.SUCCESS,
    }
    for cid, r in rows.items():
        assert r["seq"] == before_tools[cid]["seq"] and r["intent"] == before_tools[cid]["intent"]


def test_run_stream_event_stream_handler(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry, provider: TracerProvider
) -> None:
    sse_server.respond(chat_stream([A], size=7))
    sse_server.respond(chat_stream([], text="Found 3."))
    agent = make_agent(sse_server, provider)
    tap = StreamTap(ledger=ledger, registry=registry)

    async def handler(ctx: Any, events: AsyncIterable[Any]) -> None:
        async for _ in tap.wrap(events):
            pass

    async def main() -> str:
        async with agent.run_stream("Search", event_stream_handler=handler) as result:
            return "".join([t async for t in result.stream_text(delta=True)])

    with tracing.session("pa-2"):
        assert asyncio.run(main()) == "Found 3."
    assert provider.force_flush() and ledger.flush()
    (r,) = ledger.session_anchors("pa-2")
    assert (r["provider_call_id"], r["status"], r["intent"]) == (
        "call_pa1", Status.SUCCESS, "Searching for OAuth handling",
    )  # fmt: skip


def test_a_model_stream_cut_mid_call(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry, provider: TracerProvider
) -> None:
    # A complete when B starts; the connection is cut inside B; pydantic-ai raises.
    parts = chat_stream([A, B], size=5, interleaved=False, done=False)
    b_start = next(i for i, p in enumerate(parts) if b'"call_pa2"' in p)
    script = sse_server.respond(parts[: b_start + 5], cut=True, hold_at=b_start + 5)
    agent = make_agent(sse_server, provider)
    tap = StreamTap(ledger=ledger, registry=registry, session_id="pa-3")
    import threading

    errors: list[BaseException] = []

    def run() -> None:
        async def main() -> None:
            async with agent.iter("x") as run:
                async for node in run:
                    if Agent.is_model_request_node(node):
                        async with tap.wrap(node.stream(run.ctx)) as events:
                            async for _ in events:
                                pass

        try:
            asyncio.run(main())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert script.reached.wait(20)
    mid = until(
        lambda: (
            ledger.flush()
            and (r := one_by_provider(ledger, "call_pa2")) is not None
            and r["intent"]
            and r
        )
    )
    assert mid and mid["status"] == Status.STREAMING  # read while the server holds the stream
    script.release.set()
    thread.join(20)
    assert errors
    assert ledger.flush()
    a, b = one_by_provider(ledger, "call_pa1"), one_by_provider(ledger, "call_pa2")
    assert a is not None and a["status"] == Status.STREAMING  # complete: B had started
    assert b is not None and b["status"] == Status.ABANDONED and b["error"]


def test_anthropic_model_node_stream(
    sse_server: SSEServer, ledger: Ledger, registry: IntentRegistry, provider: TracerProvider
) -> None:
    # The same tap reads pydantic-ai's events whatever its model: here Anthropic's wire format.
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    ids: list[tuple[str, str, str]] = [("toolu_pa1", A[1], A[2])]
    sse_server.respond(anthropic_stream(ids, size=6))
    sse_server.respond(anthropic_stream([], text="Done."))
    model = AnthropicModel(
        "claude-sonnet-4-5",
        provider=AnthropicProvider(base_url=sse_server.url, api_key="sk-ant-test"),
    )
    agent: Agent[None, str] = Agent(
        model,
        capabilities=[Instrumentation(settings=InstrumentationSettings(tracer_provider=provider))],
    )

    @agent.tool_plain
    def search_code(intent: str, query: str) -> str:
        """Search the code."""
        return "3 hits"

    tap = StreamTap(ledger=ledger, registry=registry)

    async def main() -> None:
        async with agent.iter("x") as run:
            async for node in run:
                if Agent.is_model_request_node(node):
                    async with tap.wrap(node.stream(run.ctx)) as events:
                        async for _ in events:
                            pass

    with tracing.session("pa-4"):
        asyncio.run(main())
    assert provider.force_flush() and ledger.flush()
    (r,) = ledger.session_anchors("pa-4")
    assert (r["provider_call_id"], r["status"], r["intent"]) == (
        "toolu_pa1", Status.SUCCESS, "Searching for OAuth handling",
    )  # fmt: skip
