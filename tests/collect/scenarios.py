"""One agent run that exercises what the processor and the receiver must agree on: our
instrumentation (sessions, activity blocks, siblings, a subagent, failure, cancellation, a
background call), other conventions (OpenInference, Traceloop, Langfuse, GenAI), an intent
learned from a model span, a business ``intent`` argument, a redacted tool, secrets."""

from __future__ import annotations

import asyncio
import json

from opentelemetry.trace import Status, StatusCode, Tracer

from redaction import RedactionPolicy
from tracing import IntentRegistry, activity, session, tool_call
from tracing import attributes as A

LABEL_BEARING = ("lookup", "fetch_doc", "read_page")
"""Foreign tools that had the intent injected (the in-process registry; ``--tool`` remotely)."""

POLICY = RedactionPolicy.from_toml(
    """
[tools.query_customers]
args = "redact"
output = "redact"

[tools.read_page]
output = "redact"
"""
)

GH_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def registry() -> IntentRegistry:
    return IntentRegistry(LABEL_BEARING)


def _args(intent: str | None, **kwargs: object) -> str:
    body = {"intent": intent, **kwargs} if intent is not None else dict(kwargs)
    return json.dumps(body, ensure_ascii=False)


def run(tracer: Tracer) -> None:
    """Emit the spans (call under ``deterministic_clock`` for reproducible times)."""
    with session("conv-eq", agent_id="coder", turn=1, user_id="u-42"):
        with activity("Exploring the auth flow", tracer=tracer):
            a = tool_call(
                "search_code",
                _args("Searching for OAuth handling", q="oauth"),
                call_id="call_a",
                label_bearing=True,
                tracer=tracer,
            ).start()
            b = tool_call(
                "search_code",
                _args("Searching for OAuth handling", q="oauth"),
                call_id="call_b",
                label_bearing=True,
                tracer=tracer,
            ).start()
            with b:
                b.set_result({"hits": 3}, outcome_patch={"from": "Searching for", "to": "Found"})
            with a:
                a.set_result({"hits": 12}, outcome="Found 12 OAuth handlers")
        with tracer.start_as_current_span("agent step"):
            try:
                with tool_call(
                    "read_file",
                    _args("Lecture du routeur", path="src/router.py"),
                    label_bearing=True,
                    tracer=tracer,
                ):
                    raise FileNotFoundError("src/router.py")
            except FileNotFoundError:
                pass
            try:
                with tool_call(
                    "run_tests", _args("テストを実行しています"), label_bearing=True, tracer=tracer
                ):
                    raise asyncio.CancelledError()
            except asyncio.CancelledError:
                pass
            background = tool_call(
                "run_tests", _args("Running the full suite"), label_bearing=True, tracer=tracer
            )
            with background:
                background.to_background()
        with tool_call(
            "spawn_agent", _args("Asking a reviewer"), label_bearing=True, tracer=tracer
        ) as spawn:
            with (
                session("conv-eq", agent_id="reviewer", turn=1),
                tracer.start_as_current_span("reviewer step"),
            ):
                with tool_call(
                    "git_diff", _args("Reviewing the diff"), label_bearing=True, tracer=tracer
                ) as d:
                    d.set_result({"files": 1}, outcome="Reviewed a one-line diff")
                with tool_call(
                    "run_shell",
                    _args("Checking the token", command=f"gh auth status --token {GH_TOKEN}"),
                    label_bearing=True,
                    tracer=tracer,
                ) as s:
                    s.set_result({"ok": True, "token": GH_TOKEN})
            spawn.set_result({"verdict": "approve"}, outcome="Approved")
        background.harvest({"passed": 10}, outcome="All 10 tests passed")
        with tool_call(
            "open_issue",
            json.dumps({"intent": "bug", "title": "Prefix match"}),
            label_bearing=False,
            tracer=tracer,
        ) as issue:
            issue.set_result({"number": 7})
        with tool_call(
            "query_customers",
            _args("Looking up the customer of order 4411", sql="SELECT * FROM customers"),
            label_bearing=True,
            tracer=tracer,
        ) as q:
            q.set_result({"rows": 1}, outcome="Found the customer")

    # other people's instrumentation: attributes only, sessions on the spans
    with tracer.start_as_current_span(
        "agent", attributes={A.OPENINFERENCE_SPAN_KIND: "AGENT", A.SESSION_ID_KEY: "conv-oi"}
    ):
        with tracer.start_as_current_span(  # noqa: SIM117 - the nesting is the point
            "lookup",
            attributes={
                A.OPENINFERENCE_SPAN_KIND: "TOOL",
                A.OI_TOOL_NAME: "lookup",
                A.SESSION_ID_KEY: "conv-oi",
                A.OI_USER_ID: "u-oi",
                A.OI_TAG_TAGS: ("prod", "beta", "prod"),
                A.OI_INPUT_VALUE: _args("Looking up the invoice", invoice=42),
                A.OI_OUTPUT_VALUE: json.dumps({"total": 10, "outcome": "Invoice 42 is paid"}),
            },
        ):
            # a nested GenAI tool span: its parent call is the OpenInference one
            with tracer.start_as_current_span(
                "execute_tool fetch_doc",
                attributes={
                    A.GEN_AI_OPERATION_NAME: A.GEN_AI_EXECUTE_TOOL,
                    A.GEN_AI_TOOL_NAME: "fetch_doc",
                    A.GEN_AI_TOOL_CALL_ARGUMENTS: _args("Fetching the invoice PDF", id=42),
                    A.SESSION_ID_KEY: "conv-oi",
                },
            ) as inner:
                inner.set_status(Status(StatusCode.ERROR, "HTTP 503"))
        with tracer.start_as_current_span(
            "read_page.tool",
            attributes={
                A.TRACELOOP_SPAN_KIND: "tool",
                A.TRACELOOP_ENTITY_NAME: "read_page",
                A.TRACELOOP_ENTITY_INPUT: json.dumps(
                    {"args": [], "kwargs": {"intent": "Reading the pricing page", "url": "/p"}}
                ),
                A.TRACELOOP_ENTITY_OUTPUT: json.dumps({"html": "<p>secret price</p>"}),
                A.SESSION_ID_KEY: "conv-oi",
            },
        ):
            pass
        with tracer.start_as_current_span(
            "summarize",
            attributes={
                A.LANGFUSE_OBSERVATION_TYPE: "tool",
                A.LANGFUSE_OBSERVATION_INPUT: json.dumps(
                    {"args": ["Summarizing the thread"], "kwargs": {}}
                ),
                A.LANGFUSE_OBSERVATION_LEVEL: "ERROR",
                A.LANGFUSE_OBSERVATION_STATUS_MESSAGE: "context too long",
                A.SESSION_ID_KEY: "conv-oi",
                A.LANGFUSE_USER_ID: "u-lf",
                A.LANGFUSE_TRACE_TAGS: (f"ticket {GH_TOKEN}", "tool-intent", "nightly"),
            },
        ):
            pass
        # a model span lists a call; the tool span that runs it starts with no attributes
        with tracer.start_as_current_span(
            "llm",
            attributes={
                A.OPENINFERENCE_SPAN_KIND: "LLM",
                "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_learned",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "lookup",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": _args(
                    "Looking up the refund policy", topic="refunds"
                ),
            },
        ):
            pass
        with tracer.start_as_current_span("lookup"):
            pass
        # two calls of one tool, listed by a model span; the spans start with no attributes
        # (matched by order) and learn their own args later: the args say which call each was
        prefix = "llm.output_messages.0.message.tool_calls."
        listed = {A.OPENINFERENCE_SPAN_KIND: "LLM"}
        for n in (1, 2):
            listed[f"{prefix}{n}.tool_call.id"] = f"call_p{n}"
            listed[f"{prefix}{n}.tool_call.function.name"] = "lookup"
            listed[f"{prefix}{n}.tool_call.function.arguments"] = _args(f"Looking up invoice {n}")
        with tracer.start_as_current_span("llm", attributes=listed):
            pass
        for n in (2, 1):
            with tracer.start_as_current_span("lookup") as late:
                late.set_attributes(
                    {
                        A.OPENINFERENCE_SPAN_KIND: "TOOL",
                        A.OI_TOOL_NAME: "lookup",
                        A.OI_INPUT_VALUE: _args(f"Looking up invoice {n}"),
                    }
                )
