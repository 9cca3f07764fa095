"""``without_intent`` takes every shape ``inject_intent`` takes: OpenAI Chat Completions and
Responses, Anthropic and MCP tool definitions, and lists of them; the round trip gives the
tools back as they were (examples, and hypothesis over lists of every shape)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracing import IntentRegistry, has_intent_marker, inject_intent, without_intent

PARAMS = {
    "type": "object",
    "properties": {"query": {"type": "string"}},
    "required": ["query"],
}
CHAT = {"type": "function", "function": {"name": "search", "parameters": PARAMS}}
RESPONSES = {"type": "function", "name": "search", "parameters": PARAMS, "strict": True}
ANTHROPIC = {"name": "search", "input_schema": PARAMS}
MCP = {"name": "search", "inputSchema": PARAMS}
CRM = {
    "name": "crm",
    "input_schema": {"type": "object", "properties": {"intent": {"type": "string"}}},
}
SHAPES = [CHAT, RESPONSES, ANTHROPIC, MCP]


@pytest.mark.parametrize("tool", SHAPES, ids=["chat", "responses", "anthropic", "mcp"])
def test_a_whole_tool_definition_loses_our_property(tool: dict[str, Any]) -> None:
    (injected,) = inject_intent([tool], registry=IntentRegistry())
    before = copy.deepcopy(injected)
    assert without_intent(injected) == tool
    assert injected == before  # never mutated


def test_a_list_of_definitions_of_every_shape() -> None:
    tools = [*SHAPES, CRM, PARAMS]
    with pytest.warns(UserWarning):  # (CRM has its own intent, PARAMS is no tool)
        injected = inject_intent(tools, registry=IntentRegistry())
    assert any(has_intent_marker(t.get("input_schema")) for t in injected)
    assert without_intent(injected) == tools
    assert without_intent(tuple(injected)) == tools


def test_a_business_intent_and_unknown_things_stay() -> None:
    assert without_intent(CRM) == CRM
    assert without_intent({"type": "function"}) == {"type": "function"}
    assert without_intent([]) == []


_names = st.from_regex(r"[a-z_]{1,12}", fullmatch=True).filter(lambda n: n != "intent")
_params = st.dictionaries(_names, st.just({"type": "string"}), max_size=4).map(
    lambda props: {"type": "object", "properties": props, "required": sorted(props)[:1]}
)


@st.composite
def tool_lists(draw: st.DrawFn) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, (shape, strict) in enumerate(
        draw(st.lists(st.tuples(st.sampled_from(range(4)), st.booleans()), max_size=5))
    ):
        params, name = draw(_params), f"tool_{i}"
        out.append(
            [
                {"type": "function", "function": {"name": name, "parameters": params}},
                {"type": "function", "name": name, "parameters": params, "strict": strict},
                {"name": name, "input_schema": params},
                {"name": name, "inputSchema": params},
            ][shape]
        )
    return out


@given(tool_lists(), st.booleans())
def test_round_trip_over_any_list(tools: list[dict[str, Any]], required: bool) -> None:
    before = copy.deepcopy(tools)
    injected = inject_intent(tools, registry=IntentRegistry(), required=required)
    assert without_intent(injected) == tools == before
    assert without_intent(without_intent(injected)) == tools  # idempotent
