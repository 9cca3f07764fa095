"""Span attribute keys: ours (``intentrace.*``) and the conventions we read and write.

Every key is defined once here and imported elsewhere (never re-typed as a literal). The table
of our own keys is documented in ``docs/tracing.md``; a test fails when the two drift apart.

Our keys (the values the processor writes on the shaped copy it exports, unless a key says it
is also read as an input from the app or from our own instrumentation):

=============================  =============================================================
key                            meaning
=============================  =============================================================
``intentrace.intent``          the intent as shown (redacted, sanitized); absent when hidden
``intentrace.outcome``         input: the tool-authored outcome; output: the outcome as shown
``intentrace.outcome_patch``   input only: JSON ``{"from": ..., "to": ...}`` (edits the intent)
``intentrace.label``           the resolved label (``frame_label``) of the call
``intentrace.status``          input: ``background``/``cancelled`` hints; output: the status
``intentrace.original_name``   the span name before intent naming (scrubbed)
``intentrace.tool.name``       the code-level tool name (always; Langfuse copies keep it here)
``intentrace.tool_call.id``    the anchor id: provider call id, else ``<trace_id>:<span_id>``
``intentrace.provider_call.id`` the provider's own tool call id (the anchor id is made from it)
``intentrace.parent_call.id``  the tool call that spawned this one (subagents)
``intentrace.batch.id``        input/output: the block of sibling calls (default: parent span)
``intentrace.session.id``      session (conversation) id from ``session(...)``
``intentrace.agent.id``        agent id from ``session(...)``
``intentrace.turn``            turn number from ``session(...)``
``intentrace.label_bearing``   input: True when the tool had the intent injected (the gate)
``intentrace.activity``        input: activity label of a block, on the model step's span
``intentrace.background``      True when the call was dispatched to the background
``intentrace.timed_out``       True when a background call never returned in time
``intentrace.shed``            True on a stub exported for a span the processor had no room for
``intentrace.convention``      which convention recognised the tool span
``intentrace.redaction.args``  the policy's action on the args (keep/redact/hash)
``intentrace.redaction.output``  the policy's action on the output
``intentrace.redaction.intent_hidden``  True when the policy hid the intent
``intentrace.redaction.outcome_hidden``  True when the policy hid the outcome
``intentrace.redaction.scrubbed``  number of secrets scrubbed from this span
=============================  =============================================================
"""

from __future__ import annotations

from typing import Final

# --------------------------------------------------------------------------------------------
# ours

INTENT: Final = "intentrace.intent"
"""The intent as shown (redacted by the policy, then ``sanitize_label``), whole up to
``INTENT_MAX_CHARS``; absent when hidden."""
OUTCOME: Final = "intentrace.outcome"
"""Input: the tool-authored outcome (full replacement). Output: the outcome as shown."""
OUTCOME_PATCH: Final = "intentrace.outcome_patch"
"""Input only: JSON ``{"from": ..., "to": ...}``, an in-place edit of the intent."""
LABEL: Final = "intentrace.label"
"""The resolved label of the call (``tracing.status.frame_label``)."""
STATUS: Final = "intentrace.status"
"""Input: ``background``/``cancelled`` hints from the app. Output: the call's status."""
ORIGINAL_NAME: Final = "intentrace.original_name"
"""The span name before intent naming (scrubbed)."""
TOOL_NAME: Final = "intentrace.tool.name"
"""The code-level tool name (Langfuse copies keep it here instead of ``gen_ai.tool.name``)."""
TOOL_CALL_ID: Final = "intentrace.tool_call.id"
"""The anchor id (``tracing.anchor.anchor_id``); the provider's id is ``gen_ai.tool.call.id``."""
PROVIDER_CALL_ID: Final = "intentrace.provider_call.id"
"""The provider's call id as shown (the span's own, or learned from a model span): copies for
non-Langfuse destinations keep it here, gaining no ``gen_ai.tool.call.id`` the span lacked."""
PARENT_CALL_ID: Final = "intentrace.parent_call.id"
"""The tool call that spawned this one (subagents)."""
BATCH_ID: Final = "intentrace.batch.id"
"""Input/output: the block of sibling calls of one model step (default: the parent span id)."""
SESSION_ID: Final = "intentrace.session.id"
"""Session (conversation) id from ``session(...)``."""
AGENT_ID: Final = "intentrace.agent.id"
"""Agent id from ``session(...)``."""
TURN: Final = "intentrace.turn"
"""Turn number from ``session(...)``."""
LABEL_BEARING: Final = "intentrace.label_bearing"
"""Input: True when the tool had the intent injected (the label-bearing gate, per span)."""
ACTIVITY: Final = "intentrace.activity"
"""Input: the activity label of a block of sibling calls, on the model step's span."""
BACKGROUND: Final = "intentrace.background"
"""True when the call was dispatched to the background."""
TIMED_OUT: Final = "intentrace.timed_out"
"""True when a background call never returned in time (an error)."""
SHED: Final = "intentrace.shed"
"""True on the stub exported for a span whose processing was shed (the processor's queue was
full): its name scrubbed, identifiers only, no data."""
CONVENTION: Final = "intentrace.convention"
"""Which convention recognised the tool span (``genai``, ``openinference``, ...)."""
REDACTION_ARGS: Final = "intentrace.redaction.args"
"""The policy's action on the args: ``keep``, ``redact`` or ``hash``."""
REDACTION_OUTPUT: Final = "intentrace.redaction.output"
"""The policy's action on the output: ``keep``, ``redact`` or ``hash``."""
REDACTION_INTENT_HIDDEN: Final = "intentrace.redaction.intent_hidden"
"""True when the policy hid the intent (args not kept)."""
REDACTION_OUTCOME_HIDDEN: Final = "intentrace.redaction.outcome_hidden"
"""True when the policy hid the tool-authored outcome (output not kept)."""
REDACTION_SCRUBBED: Final = "intentrace.redaction.scrubbed"
"""Number of secrets scrubbed from this span's data."""

OURS: Final[tuple[str, ...]] = (
    INTENT,
    OUTCOME,
    OUTCOME_PATCH,
    LABEL,
    STATUS,
    ORIGINAL_NAME,
    TOOL_NAME,
    TOOL_CALL_ID,
    PROVIDER_CALL_ID,
    PARENT_CALL_ID,
    BATCH_ID,
    SESSION_ID,
    AGENT_ID,
    TURN,
    LABEL_BEARING,
    ACTIVITY,
    BACKGROUND,
    TIMED_OUT,
    SHED,
    CONVENTION,
    REDACTION_ARGS,
    REDACTION_OUTPUT,
    REDACTION_INTENT_HIDDEN,
    REDACTION_OUTCOME_HIDDEN,
    REDACTION_SCRUBBED,
)
"""All our keys, in table order."""

DEFAULT_LANGFUSE_TAG: Final = "tool-intent"
"""Tag added to ``langfuse.trace.tags`` on intent-labelled spans (``INTENTRACE_LANGFUSE_TAG``)."""
DEFAULT_ACTIVITY_TAG: Final = "activity-label"
"""Tag added to ``langfuse.trace.tags`` on activity-label spans (``INTENTRACE_ACTIVITY_TAG``):
the second label layer, filterable as a family."""

# --------------------------------------------------------------------------------------------
# OpenTelemetry GenAI semantic conventions

GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_EXECUTE_TOOL: Final = "execute_tool"
"""The ``gen_ai.operation.name`` value of a tool execution span."""
GEN_AI_INVOKE_AGENT: Final = "invoke_agent"
"""The ``gen_ai.operation.name`` value of an agent invocation (our turn span)."""
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_AGENT_ID: Final = "gen_ai.agent.id"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_TOOL_MESSAGE_EVENT: Final = "gen_ai.tool.message"
GEN_AI_CHOICE_EVENT: Final = "gen_ai.choice"
PYDANTIC_AI_TOOL_ARGUMENTS: Final = "tool_arguments"
"""pydantic-ai before instrumentation version 3: the args of a tool span."""
PYDANTIC_AI_TOOL_RESPONSE: Final = "tool_response"
"""pydantic-ai before instrumentation version 3: the result of a tool span."""
ADK_TOOL_CALL_ARGS: Final = "gcp.vertex.agent.tool_call_args"
"""Google ADK: the args of its ``execute_tool <tool>`` span (JSON text, set at the span's end)."""
ADK_TOOL_RESPONSE: Final = "gcp.vertex.agent.tool_response"
"""Google ADK: the result of its ``execute_tool <tool>`` span (JSON text; a return value that is
not a dict wrapped as ``{"result": ...}``), set at the span's end."""
ADK_MERGED_TOOLS: Final = "(merged tools)"
"""Google ADK: the ``gen_ai.tool.name`` of its ``execute_tool (merged)`` span, which repeats the
responses of a model step's parallel calls (for its web UI): not a tool call."""
LOGFIRE_MSG: Final = "logfire.msg"
"""Logfire's message; the Langfuse server names an observation from it (after the tool name)."""

# --------------------------------------------------------------------------------------------
# OpenInference

OPENINFERENCE_SPAN_KIND: Final = "openinference.span.kind"
OPENINFERENCE_TOOL: Final = "TOOL"
OPENINFERENCE_LLM: Final = "LLM"
OPENINFERENCE_AGENT: Final = "AGENT"
OI_TOOL_NAME: Final = "tool.name"
OI_TOOL_CALL_ID: Final = "tool_call.id"
OI_TOOL_CALL_FUNCTION_ARGUMENTS: Final = "tool_call.function.arguments"
OI_INPUT_VALUE: Final = "input.value"
OI_OUTPUT_VALUE: Final = "output.value"
OI_SESSION_ID: Final = "session.id"
OI_USER_ID: Final = "user.id"
"""The user key read by OpenInference readers (Phoenix) and the Langfuse server."""
OI_AGENT_NAME: Final = "agent.name"
OI_TAG_TAGS: Final = "tag.tags"
"""OpenInference's trace tags (a list of strings; ``using_attributes(tags=...)``)."""
ENDUSER_ID: Final = "enduser.id"
"""The OpenTelemetry semantic conventions' end user."""
OI_OUTPUT_MESSAGES_PREFIX: Final = "llm.output_messages."
"""``llm.output_messages.<i>.message.tool_calls.<j>.tool_call.{id,function.name,function.arguments}``"""

# --------------------------------------------------------------------------------------------
# OpenLLMetry / Traceloop

TRACELOOP_SPAN_KIND: Final = "traceloop.span.kind"
TRACELOOP_TOOL: Final = "tool"
TRACELOOP_ENTITY_NAME: Final = "traceloop.entity.name"
TRACELOOP_ENTITY_INPUT: Final = "traceloop.entity.input"
TRACELOOP_ENTITY_OUTPUT: Final = "traceloop.entity.output"
TRACELOOP_SESSION_ID: Final = "traceloop.association.properties.session_id"

# --------------------------------------------------------------------------------------------
# Langfuse SDK (and what its server reads)

LANGFUSE_OBSERVATION_TYPE: Final = "langfuse.observation.type"
LANGFUSE_TOOL: Final = "tool"
LANGFUSE_OBSERVATION_INPUT: Final = "langfuse.observation.input"
LANGFUSE_OBSERVATION_OUTPUT: Final = "langfuse.observation.output"
LANGFUSE_OBSERVATION_LEVEL: Final = "langfuse.observation.level"
LANGFUSE_OBSERVATION_STATUS_MESSAGE: Final = "langfuse.observation.status_message"
LANGFUSE_TRACE_TAGS: Final = "langfuse.trace.tags"
LANGFUSE_SESSION_ID: Final = "langfuse.session.id"
LANGFUSE_USER_ID: Final = "langfuse.user.id"
SESSION_ID_KEY: Final = "session.id"
"""The session key read by Langfuse and OpenInference."""

# --------------------------------------------------------------------------------------------
# exceptions (OpenTelemetry semantic conventions)

EXCEPTION_EVENT: Final = "exception"
EXCEPTION_TYPE: Final = "exception.type"
EXCEPTION_MESSAGE: Final = "exception.message"
EXCEPTION_STACKTRACE: Final = "exception.stacktrace"
