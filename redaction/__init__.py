"""intentrace redaction: one policy for args, outputs, intents and outcomes, and a secret
scrubber that fails closed. Imports no OpenTelemetry.

    policy = RedactionPolicy.load()          # argument > $INTENTRACE_REDACTION_POLICY > default
    call = policy.redact_call(tool_name="search", args=args, intent=intent, output=result)
    label = call.intent or tool_name          # hidden intent -> the neutral default label
"""

from __future__ import annotations

from redaction._base import TrailEntry, placeholder
from redaction._errors import PolicyError, RedactionError
from redaction._partial import secret_tail
from redaction._patterns import BUILTIN_PATTERNS, KEY_CATEGORIES
from redaction._policy import (
    Action,
    AgentOverlay,
    CallRedactor,
    Decision,
    RedactedCall,
    RedactionPolicy,
    Rule,
    ToolRule,
)
from redaction._scrubber import Scrubbed, ScrubOptions, UserPattern

__all__ = [
    "BUILTIN_PATTERNS",
    "KEY_CATEGORIES",
    "Action",
    "AgentOverlay",
    "CallRedactor",
    "Decision",
    "PolicyError",
    "RedactedCall",
    "RedactionError",
    "RedactionPolicy",
    "Rule",
    "ScrubOptions",
    "Scrubbed",
    "ToolRule",
    "TrailEntry",
    "UserPattern",
    "placeholder",
    "secret_tail",
]
