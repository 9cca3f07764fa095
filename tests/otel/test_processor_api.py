"""Our instrumentation API (``@tool`` sync/async, ``current_call``) and the test helpers, with a
whole span list compared against expected data (deterministic ids and clock)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tracing import IntentOptions, current_call, tool
from tracing import attributes as A
from tracing.anchor import anchor_id
from tracing.testing import capture, deterministic_clock


def test_tool_decorator_sync_strips_intent_and_takes_outcome_from_return() -> None:
    seen: dict[str, Any] = {}
    with capture() as cap:

        @tool(label_bearing=True, tracer=cap.tracer)
        def search_code(query: str, limit: int = 5) -> dict[str, Any]:
            seen["query"] = query
            call = current_call()
            assert call is not None and call.intent == "Searching for OAuth"
            return {"hits": limit, "outcome": f"Found {limit} hits"}

        # the model's arguments, intent included: the body never sees it
        model_args: dict[str, Any] = {"intent": "Searching for OAuth", "query": "oauth", "limit": 3}
        assert search_code(**model_args) == {
            "hits": 3,
            "outcome": "Found 3 hits",
        }
        assert current_call() is None
        (span,) = cap.dicts()
    assert seen == {"query": "oauth"}
    assert span["name"] == "Found 3 hits"
    assert span["attributes"][A.TOOL_NAME] == "search_code"


def test_tool_decorator_async_errors_and_declared_intent() -> None:
    with capture() as cap:

        @tool(name="fetch", label_bearing=True, tracer=cap.tracer)
        async def fetch_page(intent: str, url: str) -> str:  # declares intent: receives it
            assert intent == "Fetching the changelog"
            if "missing" in url:
                raise LookupError(url)
            return "<html>"

        async def main() -> None:
            assert await fetch_page(intent="Fetching the changelog", url="/changes") == "<html>"
            with pytest.raises(LookupError):
                await fetch_page(intent="Fetching the changelog", url="/missing")

        asyncio.run(main())
        names = [s["name"] for s in cap.dicts()]
    assert names == ["Fetching the changelog", "Fetching the changelog · failed"]


def test_whole_span_list_with_deterministic_ids_and_clock() -> None:
    with deterministic_clock(), capture(options=IntentOptions(in_thread=False)) as cap:

        @tool(label_bearing=True, tracer=cap.tracer)
        def read_file(path: str) -> dict[str, str]:
            return {"text": "...", "outcome": f"Read {path}"}

        with cap.tracer.start_as_current_span("agent step"):
            read_file(**{"intent": "Reading the router", "path": "router.py"})
        spans = cap.dicts(ids=True, times=True)
    step = "0000000000000001"
    assert spans == [
        {
            "name": "Read router.py",
            "attributes": {
                A.GEN_AI_OPERATION_NAME: "execute_tool",
                A.GEN_AI_TOOL_NAME: "read_file",
                A.GEN_AI_TOOL_CALL_ARGUMENTS: '{"intent": "Reading the router", "path": "router.py"}',
                A.LABEL_BEARING: True,
                A.GEN_AI_TOOL_CALL_RESULT: '{"text": "...", "outcome": "Read router.py"}',
                A.TOOL_NAME: "read_file",
                A.CONVENTION: "genai",
                A.STATUS: "success",
                A.LABEL: "Read router.py",
                A.ORIGINAL_NAME: "execute_tool read_file",
                A.TOOL_CALL_ID: anchor_id(
                    None, trace_id="00000000000000000000000000000001", span_id="0000000000000002"
                ),
                A.INTENT: "Reading the router",
                A.OUTCOME: "Read router.py",
                A.BATCH_ID: step,
                A.REDACTION_ARGS: "keep",
                A.REDACTION_OUTPUT: "keep",
                A.REDACTION_INTENT_HIDDEN: False,
                A.REDACTION_OUTCOME_HIDDEN: False,
                A.REDACTION_SCRUBBED: 0,
                A.LANGFUSE_TRACE_TAGS: ["tool-intent"],
            },
            "events": [],
            "status": "UNSET",
            "parent": "agent step",
            "trace_id": "00000000000000000000000000000001",
            "span_id": "0000000000000002",
            "parent_id": step,
            "start_ns": 1_700_000_000_002_000_000,
            "end_ns": 1_700_000_000_003_000_000,
        },
        {
            "name": "agent step",
            "attributes": {},
            "events": [],
            "status": "UNSET",
            "parent": None,
            "trace_id": "00000000000000000000000000000001",
            "span_id": step,
            "parent_id": None,
            "start_ns": 1_700_000_000_001_000_000,
            "end_ns": 1_700_000_000_004_000_000,
        },
    ]


def test_activity_attribute_set_on_the_model_step_span_later() -> None:
    with capture() as cap:
        with cap.tracer.start_as_current_span("model step") as step:
            step.set_attribute(A.ACTIVITY, "Reviewing the diff")
        cap.dicts()
    (activity,) = cap.ledger.activities
    assert activity["label"] == "Reviewing the diff"
    assert activity["batch_id"] == format(step.get_span_context().span_id, "016x")
