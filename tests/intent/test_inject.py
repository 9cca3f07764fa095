"""inject_intent over the tool shapes users have, strict mode, exclusions, the env switch,
and the registry (the label-bearing gate)."""

from __future__ import annotations

import copy
import threading
import warnings
from types import MappingProxyType
from typing import Any

import pytest

from tracing import (
    INTENT_DESCRIPTION,
    IntentRegistry,
    default_registry,
    has_intent_marker,
    inject_intent,
)
from tracing.environment_variables import INTENTRACE_TOOL_INTENT

PARAMS = {
    "type": "object",
    "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
    "required": ["query"],
}
STRICT_PARAMS = {**PARAMS, "required": ["query", "limit"], "additionalProperties": False}
CRM_PARAMS = {
    "type": "object",
    "properties": {"customer": {"type": "string"}, "intent": {"type": "string"}},
}

CHAT = {
    "type": "function",
    "function": {"name": "search", "description": "Search.", "parameters": PARAMS},
}
RESPONSES = {"type": "function", "name": "search", "parameters": PARAMS, "strict": False}
ANTHROPIC = {"name": "search", "description": "Search.", "input_schema": PARAMS}
MCP = {"name": "search", "description": "Search.", "inputSchema": PARAMS}


def schema_of(tool: dict[str, Any]) -> dict[str, Any]:
    if "function" in tool:
        return tool["function"]["parameters"]
    for key in ("parameters", "input_schema", "inputSchema"):
        if key in tool:
            return tool[key]
    raise AssertionError(tool)


@pytest.fixture(autouse=True)
def _injection_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(INTENTRACE_TOOL_INTENT, raising=False)


@pytest.mark.parametrize(
    "tool", [CHAT, RESPONSES, ANTHROPIC, MCP], ids=["chat", "responses", "anthropic", "mcp"]
)
def test_each_shape(tool: dict[str, Any]) -> None:
    before = copy.deepcopy(tool)
    registry = IntentRegistry()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (out,) = inject_intent([tool], registry=registry)
    assert tool == before  # not mutated
    schema = schema_of(out)
    assert list(schema["properties"]) == ["intent", "query", "limit"]
    assert schema["properties"]["intent"]["description"] == INTENT_DESCRIPTION
    assert schema["required"] == ["query"]  # not strict: intent is not forced into `required`
    assert has_intent_marker(schema)
    # everything but the schema is kept
    expected = copy.deepcopy(tool)
    if "function" in expected:
        expected["function"]["parameters"] = schema
    else:
        key = next(k for k in ("parameters", "input_schema", "inputSchema") if k in tool)
        expected[key] = schema
    assert out == expected
    assert registry.names() == frozenset({"search"})
    assert registry.is_label_bearing("search")
    # injecting again changes nothing and does not warn
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert inject_intent([out], registry=registry) == [out]


def test_chat_function_keeps_its_other_keys() -> None:
    (out,) = inject_intent([CHAT], registry=IntentRegistry())
    assert out["type"] == "function"
    assert out["function"]["name"] == "search"
    assert out["function"]["description"] == "Search."


@pytest.mark.parametrize(
    "tool",
    [
        {
            "type": "function",
            "function": {"name": "s", "parameters": STRICT_PARAMS, "strict": True},
        },
        {"type": "function", "name": "s", "parameters": STRICT_PARAMS, "strict": True},
        {"name": "s", "input_schema": STRICT_PARAMS, "strict": True},
        # strict set per request: the schema is already closed and requires every property
        {"type": "function", "function": {"name": "s", "parameters": STRICT_PARAMS}},
    ],
    ids=["chat", "responses", "anthropic", "strict-shaped"],
)
@pytest.mark.parametrize("required", [None, False])
def test_strict_mode_requires_every_property(tool: dict[str, Any], required: bool | None) -> None:
    (out,) = inject_intent([tool], registry=IntentRegistry(), required=required)
    schema = schema_of(out)
    assert set(schema["required"]) == set(schema["properties"]) == {"intent", "query", "limit"}
    assert schema["required"][0] == "intent"
    assert schema["additionalProperties"] is False


def test_required_true_everywhere() -> None:
    out = inject_intent([CHAT, ANTHROPIC], registry=IntentRegistry(), required=True)
    assert [schema_of(t)["required"] for t in out] == [["intent", "query"]] * 2


def test_function_without_parameters() -> None:
    tool = {"type": "function", "function": {"name": "now"}}
    (out,) = inject_intent([tool], registry=IntentRegistry())
    assert out["function"]["parameters"]["properties"]["intent"]["type"] == "string"
    assert out["function"]["parameters"]["type"] == "object"


def test_read_only_definitions_survive() -> None:
    props: MappingProxyType[str, Any] = MappingProxyType({})
    schema: MappingProxyType[str, Any] = MappingProxyType({"type": "object", "properties": props})
    tool: MappingProxyType[str, Any] = MappingProxyType({"name": "search", "input_schema": schema})
    (out,) = inject_intent([tool], registry=IntentRegistry())
    assert list(out["input_schema"]["properties"]) == ["intent"]
    assert dict(props) == {}
    assert isinstance(out, dict)


def test_ineligible_tools_pass_through_with_one_warning_each() -> None:
    crm = {"name": "crm_update", "input_schema": CRM_PARAMS}
    scalar = {"name": "echo", "inputSchema": {"type": "string"}}
    builtin = {"type": "web_search"}
    server_tool = {"type": "bash_20250124", "name": "bash"}
    tools = [crm, MCP, scalar, builtin, server_tool, "not a tool"]
    registry = IntentRegistry()
    with pytest.warns(UserWarning) as record:
        out = inject_intent(tools, registry=registry)
    messages = [str(w.message) for w in record]
    assert len(messages) == 5, messages
    assert "'crm_update' has its own 'intent' parameter" in messages[0]
    assert "'echo' has no object schema" in messages[1]
    assert "'web_search' has no known shape" in messages[2]
    assert "'bash' has no known shape" in messages[3]
    assert "not a mapping" in messages[4]
    assert out[0] is crm and out[2] is scalar and out[3] is builtin and out[5] == "not a tool"
    assert "intent" in out[0]["input_schema"]["properties"]  # the business parameter is untouched
    assert out[0]["input_schema"] == CRM_PARAMS
    assert registry.names() == frozenset({"search"})


def test_exclusions_by_name_prefix_and_predicate() -> None:
    def tool(name: str) -> dict[str, Any]:
        return {"name": name, "inputSchema": {"type": "object"}}

    tools = [
        tool("search"),
        tool("mcp_fs_read"),
        tool("mcp_fs_write"),
        tool("secret_tool"),
        tool("read"),
    ]
    registry = IntentRegistry()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # exclusions are silent
        out = inject_intent(
            tools,
            registry=registry,
            exclude=["search", "mcp_*", lambda name: name.startswith("secret")],
        )
    assert [has_intent_marker(t["inputSchema"]) for t in out] == [False, False, False, False, True]
    assert out[0] is tools[0]
    assert registry.names() == frozenset({"read"})
    # a single name or a single predicate works too
    assert not has_intent_marker(
        inject_intent([tool("x")], registry=registry, exclude="x")[0]["inputSchema"]
    )
    only = inject_intent([tool("x"), tool("y")], registry=registry, exclude=lambda n: n == "y")
    assert [has_intent_marker(t["inputSchema"]) for t in only] == [True, False]


@pytest.mark.parametrize("value", ["0", "false", "OFF", " no "])
def test_env_switch_turns_injection_off(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(INTENTRACE_TOOL_INTENT, value)
    registry = IntentRegistry()
    tools = [CHAT, MCP]
    out = inject_intent(tools, registry=registry)
    assert out == tools and out[0] is CHAT and out is not tools
    assert len(registry) == 0


@pytest.mark.parametrize("value", ["1", "true", ""])
def test_env_switch_on_values(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(INTENTRACE_TOOL_INTENT, value)
    (out,) = inject_intent([MCP], registry=IntentRegistry())
    assert has_intent_marker(out["inputSchema"])


def test_default_registry_is_filled_by_default() -> None:
    name = "default_registry_probe_tool"
    try:
        inject_intent([{"name": name, "inputSchema": {"type": "object"}}])
        assert name in default_registry()
        assert default_registry().is_label_bearing(name)
    finally:
        default_registry().discard(name)
    assert name not in default_registry()
    assert default_registry() is default_registry()


def test_registry_basics() -> None:
    registry = IntentRegistry(["a"])
    registry.add("b")
    registry.add("b")
    assert registry.names() == frozenset({"a", "b"})
    snapshot = registry.names()
    registry.discard("a")
    registry.discard("missing")
    assert snapshot == frozenset({"a", "b"})  # snapshots do not change under you
    assert "a" not in registry and "b" in registry
    assert not registry.is_label_bearing(None)
    assert not registry.is_label_bearing("a")
    registry.clear()
    assert len(registry) == 0


def test_registry_is_thread_safe() -> None:
    registry = IntentRegistry()
    barrier = threading.Barrier(8)

    def work(k: int) -> None:
        barrier.wait()
        for i in range(300):
            registry.add(f"t{k}-{i}")
            if i % 3 == 0:
                registry.discard(f"t{k}-{i}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(registry) == 8 * 200
