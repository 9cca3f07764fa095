"""Google ADK's tool-span shape (``google-adk`` 1.14, ``google/adk/telemetry.py``), read by the
GenAI convention without ADK installed (tests/frameworks_compat/test_google_adk.py drives the
real package): an ``execute_tool <tool>`` span that gets everything at its end, the args as JSON
text in ``gcp.vertex.agent.tool_call_args`` and the result in ``gcp.vertex.agent.tool_response``
(a return value that is not a dict wrapped as ``{"result": ...}``); and its
``execute_tool (merged)`` span, which repeats a model step's responses and is no call."""

from __future__ import annotations

import json
from typing import Any

import pytest

from redaction import RedactionPolicy
from tracing import attributes as A
from tracing.derive import recognise
from tracing.derive._call import DerivedCall, derive_call
from tracing.derive._conventions import SpanView
from tracing.intent import IntentRegistry

INTENT = "Searching for OAuth handling"
OUTCOME = "Found 2 results for oauth"


def _adk_tool_span(
    tool: str, args: dict[str, Any], response: dict[str, Any], *, status: int = 0
) -> SpanView:
    """The span as ADK ends it (``trace_tool_call``: ``json.dumps(..., ensure_ascii=False)``)."""
    return SpanView(
        name=f"execute_tool {tool}",
        attributes={
            "gen_ai.system": "gcp.vertex.agent",
            A.GEN_AI_OPERATION_NAME: A.GEN_AI_EXECUTE_TOOL,
            A.GEN_AI_TOOL_NAME: tool,
            "gen_ai.tool.description": "Search the code base.",
            A.GEN_AI_TOOL_CALL_ID: "adk-7f3c",
            A.ADK_TOOL_CALL_ARGS: json.dumps(args, ensure_ascii=False),
            "gcp.vertex.agent.event_id": "e-1",
            A.ADK_TOOL_RESPONSE: json.dumps(response, ensure_ascii=False),
            "gcp.vertex.agent.llm_request": "{}",
            "gcp.vertex.agent.llm_response": "{}",
            A.SESSION_ID: "conv-1",
        },
        status_code=status,
        trace_id="ab" * 16,
        span_id="cd" * 8,
        start_ns=1,
        end_ns=2,
    )


def _derive(view: SpanView) -> DerivedCall:
    derived = derive_call(
        view, policy=RedactionPolicy.default(), registry=IntentRegistry(["search_code"])
    )
    assert derived is not None
    return derived


def test_an_adk_tool_span_is_named_by_intent_and_outcome() -> None:
    args = {"intent": INTENT, "query": "oauth, ünïcode"}
    derived = _derive(_adk_tool_span("search_code", args, {"hits": 2, "outcome": OUTCOME}))
    assert derived.facts.convention == "genai"
    assert derived.anchor.get("tool_name") == "search_code"
    assert derived.anchor.get("provider_call_id") == "adk-7f3c"
    assert derived.anchor.get("session_id") == "conv-1"
    assert (derived.intent, derived.outcome, derived.name) == (INTENT, OUTCOME, OUTCOME)
    assert derived.anchor.get("status") == "success"
    # the ledger's args lose the intent, and keep the rest as ADK wrote it
    assert json.loads(derived.anchor.get("args") or "null") == {"query": "oauth, ünïcode"}
    # the exported attributes keep the args and result (the default policy keeps both)
    assert INTENT in derived.attributes[A.ADK_TOOL_CALL_ARGS]
    assert OUTCOME in derived.attributes[A.ADK_TOOL_RESPONSE]


def test_a_failed_adk_tool_span_is_framed_failed() -> None:
    args = {"intent": "Reading the missing router", "path": "nope.py"}
    view = _adk_tool_span("search_code", args, {"error": "FileNotFoundError: nope.py"}, status=2)
    derived = _derive(view)
    assert derived.name == "Reading the missing router · failed"
    assert derived.anchor.get("status") == "error"


def test_a_json_text_return_wrapped_by_adk_gives_its_outcome() -> None:
    # ADK wraps a non-mapping return as {"result": ...}: a JSON text there is read as the result
    result = {"result": json.dumps({"outcome": OUTCOME})}
    derived = _derive(_adk_tool_span("search_code", {"intent": INTENT, "query": "q"}, result))
    assert (derived.intent, derived.outcome, derived.name) == (INTENT, OUTCOME, OUTCOME)
    # plain text there is no outcome: the call settles under its intent
    plain = _derive(_adk_tool_span("search_code", {"intent": INTENT}, {"result": OUTCOME}))
    assert (plain.outcome, plain.name) == (None, INTENT)


@pytest.mark.parametrize("redact", ["args", "output"])
def test_adk_args_and_result_follow_the_policy(redact: str) -> None:
    policy = RedactionPolicy.from_toml(f'[tools.search_code]\n{redact} = "redact"\n')
    view = _adk_tool_span("search_code", {"intent": INTENT, "query": "oauth"}, {"outcome": OUTCOME})
    derived = derive_call(view, policy=policy, registry=IntentRegistry(["search_code"]))
    assert derived is not None
    key = A.ADK_TOOL_CALL_ARGS if redact == "args" else A.ADK_TOOL_RESPONSE
    hidden = INTENT if redact == "args" else OUTCOME
    assert hidden not in str(derived.attributes.get(key)), derived.attributes
    assert hidden not in derived.name


def test_adks_merged_span_is_no_tool_call() -> None:
    view = SpanView(
        name="execute_tool (merged)",
        attributes={
            "gen_ai.system": "gcp.vertex.agent",
            A.GEN_AI_OPERATION_NAME: A.GEN_AI_EXECUTE_TOOL,
            A.GEN_AI_TOOL_NAME: A.ADK_MERGED_TOOLS,
            "gen_ai.tool.description": A.ADK_MERGED_TOOLS,
            A.GEN_AI_TOOL_CALL_ID: "e-9",
            A.ADK_TOOL_CALL_ARGS: "N/A",
            A.ADK_TOOL_RESPONSE: json.dumps({"content": {"parts": []}}),
        },
    )
    assert recognise(view) is None
