"""MCP tool calls: the `mcp` package's client calling an in-process `MCPServer` (mcp 2.x makes
its own OpenTelemetry spans: a SERVER span ``tools/call <tool>`` with
``gen_ai.operation.name=execute_tool`` per call), with OpenInference's MCP instrumentation
propagating the context, and the scenario of tests/support/frameworks.py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.frameworks import (
    FAILING,
    SEARCHES,
    SESSION,
    FrameworkRun,
    check,
    instrumented_run,
    search_result,
)
from tests.support.langfuse_server import langfuse_session, langfuse_type
from tracing import MCPToolArgs
from tracing import attributes as A


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FrameworkRun]:
    import mcp.shared._otel
    from openinference.instrumentation.mcp import MCPInstrumentor

    with instrumented_run(tmp_path, MCPInstrumentor()) as fw:
        # mcp takes its tracer from the global provider (configure() sets it; tests do not)
        monkeypatch.setattr(mcp.shared._otel, "_tracer", fw.provider.get_tracer("mcp-python-sdk"))
        yield fw


def _drive(fw: FrameworkRun, *, middleware: list[Any] | None = None) -> list[Any]:
    from mcp import Client
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("code", middleware=middleware)

    @server.tool()
    def search_code(intent: str, query: str) -> dict[str, Any]:
        """Search the code base."""
        return search_result(query)

    @server.tool()
    def read_file(intent: str, path: str) -> str:
        """Read one file."""
        raise FileNotFoundError(path)

    async def main() -> list[Any]:
        async with Client(server) as client:
            results = list(
                await asyncio.gather(
                    *(
                        client.call_tool("search_code", {"intent": i, "query": q})
                        for i, q in SEARCHES
                    )
                )
            )
            intent, path = FAILING
            results.append(await client.call_tool("read_file", {"intent": intent, "path": path}))
            return results

    with fw.session():
        return asyncio.run(main())


def test_mcp_tool_spans_reach_every_destination(run: FrameworkRun) -> None:
    results = _drive(run)
    assert [r.is_error for r in results] == [False, False, True]
    got = run.finish()
    assert not got.internal_errors
    assert sorted(s.attributes[A.TOOL_NAME] for s in got.otlp) == [
        "read_file",
        "search_code",
        "search_code",
    ]
    assert [s.status_code for s in got.otlp if s.attributes[A.TOOL_NAME] == "read_file"] == [2]
    assert len(got.langfuse) == 3
    for span in got.langfuse:
        assert langfuse_type(span) == "TOOL"
        assert langfuse_session(span.attributes) == SESSION
    rows = sorted((a["tool_name"], a["status"], a["session_id"]) for a in got.anchors)
    assert rows == [
        ("read_file", "error", SESSION),
        ("search_code", "success", SESSION),
        ("search_code", "success", SESSION),
    ]


def test_without_the_middleware_mcp_calls_are_not_named(run: FrameworkRun) -> None:
    # mcp 2.x's own tool spans carry no arguments or result (only gen_ai.tool.name): the calls
    # keep their `tools/call <tool>` names (Traceloop's MCP instrumentation, which records
    # them, patches mcp 1.x's mcp.shared.session, gone in 2.x)
    _drive(run)
    got = run.finish()
    assert sorted(s.name for s in got.otlp) == [
        "tools/call read_file",
        "tools/call search_code",
        "tools/call search_code",
    ]
    assert not any(a["intent"] for a in got.anchors)


def test_mcp_tool_calls_named_by_intent_with_the_server_middleware(run: FrameworkRun) -> None:
    results = _drive(run, middleware=[MCPToolArgs()])
    assert [r.is_error for r in results] == [False, False, True]
    # each call is its own client request: no model step groups the two searches
    check(run.finish(), parallel_batch=False)
