"""Tool-span shapes of framework instrumentations read by the default conventions: DSPy's
OpenInference TOOL spans (no ``tool.name``, named ``<tool>.acall``/``<tool>.__call__``; the
tool's return value JSON-encoded once more in ``output.value``)."""

from __future__ import annotations

import json

import pytest

from redaction import RedactionPolicy
from tracing import attributes as A
from tracing.derive._call import derive_call
from tracing.derive._conventions import SpanView
from tracing.intent import IntentRegistry
from tracing.intent._args import result_outcome

INTENT = "Searching for OAuth handling"


@pytest.mark.parametrize("suffix", [".acall", ".__call__"])
def test_a_dspy_tool_span_is_named_by_intent_and_outcome(suffix: str) -> None:
    result = json.dumps({"hits": 2, "outcome": "Found 2 results"})
    view = SpanView(
        name=f"search_code{suffix}",
        attributes={
            A.OPENINFERENCE_SPAN_KIND: A.OPENINFERENCE_TOOL,
            A.OI_INPUT_VALUE: json.dumps({"kwargs": {"intent": INTENT, "query": "oauth"}}),
            A.OI_OUTPUT_VALUE: json.dumps(result),  # a JSON string of the JSON text
        },
        trace_id="ab" * 16,
        span_id="cd" * 8,
        start_ns=1,
        end_ns=2,
    )
    derived = derive_call(
        view, policy=RedactionPolicy.default(), registry=IntentRegistry(["search_code"])
    )
    assert derived is not None
    assert derived.anchor.get("tool_name") == "search_code"
    assert derived.anchor.get("intent") == INTENT
    assert derived.name == "Found 2 results"


@pytest.mark.parametrize(
    "raw",
    ['"not json at all"', '"{\\"outcome\\": 3}"', '"\\"{}\\""', '"{\\"outcome', "plain text"],
)
def test_json_strings_without_an_outcome_give_none(raw: str) -> None:
    assert result_outcome(raw) == (None, None)


def test_an_adk_wrapped_json_text_result_gives_its_outcome() -> None:
    """Google ADK wraps a tool's non-mapping return as ``{"result": <value>}``: a JSON text
    there is read like a result of its own; other members or non-JSON text give none."""
    text = json.dumps({"hits": 2, "outcome": "Found 2 results"})
    assert result_outcome(json.dumps({"result": text})) == ("Found 2 results", None)
    assert result_outcome({"result": text}) == ("Found 2 results", None)
    assert result_outcome(json.dumps({"result": "Found 2 results"})) == (None, None)
    assert result_outcome(json.dumps({"result": text, "status": "ok"})) == (None, None)
