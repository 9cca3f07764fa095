"""The registry step in one line: ``configure(intent_tools=[...])`` (names, schemas, tool
objects, functions) makes those tools label-bearing in the registry ``configure`` uses."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracing import ConfigError, IntentRegistry, configure, default_registry
from tracing import attributes as A


class FrameworkTool:  # the shape of LangChain/CrewAI/ADK/Agno/AutoGen/DSPy tool objects
    def __init__(self, name: str, qualified: str | None = None) -> None:
        self.name = name
        if qualified:
            self.fully_qualified_name = qualified


class Toolset:
    def __init__(self, *tools: Any) -> None:
        self.tools = list(tools)


def read_file(intent: str, path: str) -> str:
    return path


def _tool_span(provider: TracerProvider, tool: str) -> None:
    with provider.get_tracer("app").start_as_current_span(
        f"execute_tool {tool}",
        attributes={
            A.GEN_AI_OPERATION_NAME: A.GEN_AI_EXECUTE_TOOL,
            A.GEN_AI_TOOL_NAME: tool,
            A.GEN_AI_TOOL_CALL_ARGUMENTS: json.dumps({"intent": f"Using {tool}", "q": 1}),
        },
    ):
        pass


def test_intent_tools_of_every_kind_are_named() -> None:
    registry = IntentRegistry()
    exporter = InMemorySpanExporter()
    setup = configure(
        provider=TracerProvider(),
        set_global=False,
        ledger=False,
        registry=registry,
        intent_tools=[
            "search_code",
            {"type": "function", "function": {"name": "grep", "parameters": {}}},
            {"name": "fetch_url", "input_schema": {"type": "object"}},
            {"name": "mcp_list", "inputSchema": {"type": "object"}},
            FrameworkTool("lookup"),
            FrameworkTool("get_weather", "weather-get_weather"),
            read_file,
            Toolset(FrameworkTool("in_a_set")),
        ],
        processors=[SimpleSpanProcessor(exporter)],
    )
    assert setup.registry is registry
    expected = {
        "search_code",
        "grep",
        "fetch_url",
        "mcp_list",
        "lookup",
        "get_weather",
        "weather-get_weather",
        "read_file",
        "in_a_set",
    }
    assert registry.names() == expected
    for tool in ("search_code", "weather-get_weather", "read_file", "not_ours"):
        _tool_span(setup.provider, tool)
    setup.force_flush()
    names = [s.name for s in exporter.get_finished_spans()]
    assert names == [
        "Using search_code",
        "Using weather-get_weather",
        "Using read_file",
        "execute_tool not_ours",
    ]
    setup.shutdown()
    assert "search_code" not in default_registry()  # the registry passed, not the default one


def test_intent_tools_default_to_the_default_registry() -> None:
    setup = configure(
        provider=TracerProvider(), set_global=False, ledger=False, intent_tools=["zz_tool"]
    )
    try:
        assert setup.registry is default_registry()
        assert "zz_tool" in default_registry()
    finally:
        default_registry().discard("zz_tool")
        setup.shutdown()


@pytest.mark.parametrize("bad", [[42], [{"type": "object"}], [""]])
def test_a_tool_without_a_name_is_a_one_line_error(bad: list[Any]) -> None:
    with pytest.raises(ConfigError) as err:
        configure(provider=TracerProvider(), set_global=False, ledger=False, intent_tools=bad)
    assert "\n" not in str(err.value) and "intent_tools" in str(err.value)
