"""The OpenTelemetry SDK side: the span processor, its setup, our own instrumentation.

* :class:`IntentSpanProcessor` (a ``SpanProcessor`` that wraps the exporting processors) and its
  :class:`IntentOptions`;
* :func:`configure` / :func:`wrap_provider`: the four setups of docs/tracing.md;
* ``session``, ``activity``, ``tool_call``, ``tool``, ``harvest``, ``current_call``: tool calls
  as GenAI semconv ``execute_tool`` spans for apps without a framework;
* :func:`langfuse_span_mask`: the Langfuse SDK's ``mask_otel_spans`` hook by the policy;
* :class:`MCPToolArgs`: mcp 2.x server middleware recording each tool call's args and result.

Every public name here is also importable from ``tracing``.
"""

from __future__ import annotations

from tracing.otel._instrument import (
    ToolCall,
    activity,
    current_call,
    harvest,
    session,
    tool,
    tool_call,
    turn,
)
from tracing.otel._langfuse import langfuse_span_mask
from tracing.otel._mcp import MCPToolArgs
from tracing.otel._options import ConfigError, IntentOptions
from tracing.otel._processor import IntentSpanProcessor
from tracing.otel._setup import TracingSetup, configure, wrap_provider

__all__ = [
    "ConfigError",
    "IntentOptions",
    "IntentSpanProcessor",
    "MCPToolArgs",
    "ToolCall",
    "TracingSetup",
    "activity",
    "configure",
    "current_call",
    "harvest",
    "langfuse_span_mask",
    "session",
    "tool",
    "tool_call",
    "turn",
    "wrap_provider",
]
