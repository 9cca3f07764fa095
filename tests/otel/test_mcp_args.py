"""``MCPToolArgs`` (mcp 2.x server middleware) on its own: the args and result of a
``tools/call`` land on the current span; anything else passes through untouched, and nothing
it meets makes it raise into the server."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracing import MCPToolArgs
from tracing import attributes as A


@dataclass
class Ctx:  # the attributes of mcp's ServerRequestContext the middleware reads
    method: str
    params: Any


def _through(ctx: Ctx, result: Any) -> tuple[Any, dict[str, Any]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    async def call_next(_: Any) -> Any:
        return result

    async def main() -> Any:
        with provider.get_tracer("mcp-python-sdk").start_as_current_span("tools/call x"):
            return await MCPToolArgs()(ctx, call_next)

    out = asyncio.run(main())
    (span,) = exporter.get_finished_spans()
    return out, dict(span.attributes or {})


def test_a_tool_call_gets_its_arguments_and_result() -> None:
    args = {"intent": "Searching for OAuth handling", "query": "oauth"}
    result = {"content": [{"type": "text", "text": '{"outcome": "Found 2"}'}], "isError": False}
    out, attrs = _through(Ctx("tools/call", {"name": "search_code", "arguments": args}), result)
    assert out is result
    assert json.loads(attrs[A.GEN_AI_TOOL_CALL_ARGUMENTS]) == args
    assert json.loads(attrs[A.GEN_AI_TOOL_CALL_RESULT]) == result


@pytest.mark.parametrize(
    "ctx",
    [
        Ctx("tools/list", {}),
        Ctx("tools/call", None),
        Ctx("tools/call", "not a mapping"),
        Ctx("prompts/get", {"name": "p", "arguments": {"a": 1}}),
    ],
)
def test_anything_else_passes_through(ctx: Ctx) -> None:
    out, attrs = _through(ctx, {"ok": True})
    assert out == {"ok": True}
    assert A.GEN_AI_TOOL_CALL_ARGUMENTS not in attrs and A.GEN_AI_TOOL_CALL_RESULT not in attrs


def test_odd_values_are_written_as_text() -> None:
    args = {"intent": "Reading", "when": object(), "deep": [[[1]]]}
    _, attrs = _through(Ctx("tools/call", {"name": "t", "arguments": args}), object())
    assert json.loads(attrs[A.GEN_AI_TOOL_CALL_ARGUMENTS])["intent"] == "Reading"
    assert isinstance(attrs[A.GEN_AI_TOOL_CALL_RESULT], str)
