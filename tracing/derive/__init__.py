"""From a span, seen as plain data, to a tool call: its label, its anchor and its redacted copy.

No OpenTelemetry SDK here: the span processor (``tracing.otel``) builds a :class:`SpanView` of a
live or ended SDK span, the OTLP receiver (``tracing.collect``) of a decoded protobuf span, and
both derive the same calls with the same functions:

* conventions: :class:`Convention`, :class:`AttributeConvention`, ``DEFAULT_CONVENTIONS`` (OTel
  GenAI semconv, OpenInference, OpenLLMetry/Traceloop, Langfuse): recognising tool spans and
  finding their args and results;
* :func:`derive_start` / :func:`derive_call`: the label, the anchor and the shaped attributes of
  a call at start and at settle;
* :class:`RequestedCalls`: intents learned from model spans before the tool spans start;
* :class:`SpanRedactor`: the policy applied to every attribute and event of a span.
"""

from __future__ import annotations

from tracing.derive._call import (
    NAMINGS,
    CallContext,
    DerivedCall,
    Naming,
    PolicyLike,
    RegistryLike,
    StartCall,
    derive_call,
    derive_start,
    settle_status,
)
from tracing.derive._conventions import (
    DEFAULT_CONVENTIONS,
    AttributeConvention,
    Convention,
    EventView,
    RequestedCall,
    SpanView,
    ToolFacts,
    is_model_span,
    match_convention,
    recognise,
    requested_calls,
)
from tracing.derive._learn import RequestedCalls
from tracing.derive._redact import SpanRedactor, redact_span_data

__all__ = [
    "DEFAULT_CONVENTIONS",
    "NAMINGS",
    "AttributeConvention",
    "CallContext",
    "Convention",
    "DerivedCall",
    "EventView",
    "Naming",
    "PolicyLike",
    "RegistryLike",
    "RequestedCall",
    "RequestedCalls",
    "SpanRedactor",
    "SpanView",
    "StartCall",
    "ToolFacts",
    "derive_call",
    "derive_start",
    "is_model_span",
    "match_convention",
    "recognise",
    "redact_span_data",
    "requested_calls",
    "settle_status",
]
