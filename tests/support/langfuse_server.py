"""How the Langfuse server reads an OTLP span (its ``OtelIngestionProcessor`` rules, as
docs/tracing.md and /work/shared/DESIGN.md record them): the observation's name, type and
session, and the trace's tags. Used wherever a test judges what Langfuse would show."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tests.support.otlp_receiver import WireSpan
from tracing import attributes as A

__all__ = ["langfuse_name", "langfuse_session", "langfuse_tags", "langfuse_type"]


def langfuse_name(span: WireSpan) -> str:
    """The observation's name: ``gen_ai.tool.name`` first, then ``logfire.msg``, then the span's."""
    for key in (A.GEN_AI_TOOL_NAME, A.LOGFIRE_MSG, "ai.toolCall.name"):
        value = span.attributes.get(key)
        if value:
            return value if isinstance(value, str) else json.dumps(value)
    return span.name


def langfuse_type(span: WireSpan) -> str:
    attrs = span.attributes
    simple = {
        A.LANGFUSE_OBSERVATION_TYPE: {"tool": "TOOL", "span": "SPAN", "generation": "GENERATION"},
        A.OPENINFERENCE_SPAN_KIND: {"TOOL": "TOOL", "LLM": "GENERATION", "CHAIN": "CHAIN"},
        A.GEN_AI_OPERATION_NAME: {"execute_tool": "TOOL", "chat": "GENERATION"},
    }
    for key, mapping in simple.items():
        if attrs.get(key) in mapping:
            return mapping[attrs[key]]
    if attrs.get(A.GEN_AI_TOOL_NAME) or attrs.get(A.GEN_AI_TOOL_CALL_ID):
        return "TOOL"
    return "SPAN"


def langfuse_session(attrs: Mapping[str, Any]) -> str | None:
    for key in (A.LANGFUSE_SESSION_ID, A.SESSION_ID_KEY, A.GEN_AI_CONVERSATION_ID):
        if attrs.get(key):
            return str(attrs[key])
    return None


def langfuse_tags(attrs: Mapping[str, Any]) -> list[str]:
    tags = attrs.get(A.LANGFUSE_TRACE_TAGS)
    if isinstance(tags, str):
        return [tags]
    return list(tags or [])
