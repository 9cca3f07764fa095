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


def test_intent_tools_fill_the_setups_registry_not_the_default_one() -> None:
    exporter = InMemorySpanExporter()
    setup = configure(
        provider=TracerProvider(),
        set_global=False,
        ledger=False,
        intent_tools=["zz_tool"],
        processors=[SimpleSpanProcessor(exporter)],
    )
    other = configure(provider=TracerProvider(), set_global=False, ledger=False)
    try:
        assert setup.registry is not default_registry()
        assert "zz_tool" not in default_registry()  # another setup in the process is unaffected
        assert other.registry is default_registry()
        assert isinstance(setup.registry, IntentRegistry)
        assert "zz_tool" in setup.registry
        # what inject_intent registers (the default registry), now or later, still counts
        default_registry().add("zz_injected")
        assert setup.registry.is_label_bearing("zz_injected")
        assert setup.registry.names() >= {"zz_tool", "zz_injected"}
        for tool in ("zz_tool", "zz_injected", "zz_not_ours"):
            _tool_span(setup.provider, tool)
        setup.force_flush()
        assert [s.name for s in exporter.get_finished_spans()] == [
            "Using zz_tool",
            "Using zz_injected",
            "execute_tool zz_not_ours",
        ]
    finally:
        default_registry().discard("zz_injected")
        setup.shutdown()
        other.shutdown()


def test_framework_tools_and_agents_give_their_tool_names() -> None:
    import agents
    import mcp.types
    from langchain_core.tools import tool as lc_tool
    from pydantic_ai import Agent, Tool
    from pydantic_ai.models.test import TestModel

    def search_code(intent: str, query: str) -> str:
        """Search."""
        return query

    def grep(intent: str, pattern: str) -> str:
        """Grep."""
        return pattern

    registry = IntentRegistry()
    configure(
        provider=TracerProvider(),
        set_global=False,
        ledger=False,
        registry=registry,
        intent_tools=[
            Tool(read_file, name="pyd_read"),  # pydantic-ai Tool
            lc_tool(grep),  # LangChain BaseTool
            agents.function_tool(search_code, name_override="oa_search"),  # OpenAI Agents
            mcp.types.Tool(name="mcp_tool", input_schema={"type": "object"}),  # MCP Tool
            read_file,  # a plain function
        ],
    ).shutdown()
    assert registry.names() == {"pyd_read", "grep", "oa_search", "mcp_tool", "read_file"}
    # an agent stands for its tools, never for its own name
    for agent, expected in [
        (
            Agent(TestModel(), name="coder", tools=[search_code, Tool(grep)]),
            {"search_code", "grep"},
        ),
        (agents.Agent(name="Assistant", tools=[agents.function_tool(grep)]), {"grep"}),
    ]:
        own = IntentRegistry()
        configure(
            provider=TracerProvider(),
            set_global=False,
            ledger=False,
            registry=own,
            intent_tools=[agent],
        ).shutdown()
        assert own.names() == expected


@pytest.mark.parametrize("bad", [[42], [{"type": "object"}], [""]])
def test_a_tool_without_a_name_is_a_one_line_error(bad: list[Any]) -> None:
    with pytest.raises(ConfigError) as err:
        configure(provider=TracerProvider(), set_global=False, ledger=False, intent_tools=bad)
    assert "\n" not in str(err.value) and "intent_tools" in str(err.value)
