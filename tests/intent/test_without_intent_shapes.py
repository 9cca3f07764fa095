"""``without_intent`` takes every shape ``inject_intent`` takes: OpenAI Chat Completions and
Responses, Anthropic and MCP tool definitions, and lists of them; the round trip gives the
tools back as they were."""

from __future__ import annotations

import copy
from typing import Any

import pytest

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
