"""Environment variables read by intentrace. Each is defined once (here, or the redaction ones in
``redaction.environment_variables``) and imported elsewhere.

Precedence everywhere: explicit argument > environment variable > default.
"""

from __future__ import annotations

from redaction.environment_variables import (
    INTENTRACE_REDACTION_HASH_KEY,
    INTENTRACE_REDACTION_POLICY,
    INTENTRACE_SCRUB_ENGINE,
)

__all__ = [
    "INTENTRACE_ACTIVITY_TAG",
    "INTENTRACE_COLLECT_TOKEN",
    "INTENTRACE_DASHBOARDS",
    "INTENTRACE_LANGFUSE_TAG",
    "INTENTRACE_LEDGER_URL",
    "INTENTRACE_NAMING",
    "INTENTRACE_REDACTION_HASH_KEY",
    "INTENTRACE_REDACTION_POLICY",
    "INTENTRACE_SCRUB_ENGINE",
    "INTENTRACE_TEST_PHOENIX",
    "INTENTRACE_TEST_POSTGRES_URL",
    "INTENTRACE_TOOL_INTENT",
    "INTENTRACE_TRACE_URL",
]

INTENTRACE_TOOL_INTENT = "INTENTRACE_TOOL_INTENT"
"""``0``/``false``/``off`` turns intent injection off without a code change (tools pass through)."""

INTENTRACE_LEDGER_URL = "INTENTRACE_LEDGER_URL"
"""Ledger URL: ``sqlite:///path.db``, ``sqlite:///:memory:`` or ``postgresql://...``."""

INTENTRACE_NAMING = "INTENTRACE_NAMING"
"""Span naming mode: ``intent`` (default) or ``stable``."""

INTENTRACE_LANGFUSE_TAG = "INTENTRACE_LANGFUSE_TAG"
"""Tag added to ``langfuse.trace.tags`` on intent-labelled spans.

Default ``tool-intent``; an empty value adds none.
"""

INTENTRACE_ACTIVITY_TAG = "INTENTRACE_ACTIVITY_TAG"
"""Tag added to ``langfuse.trace.tags`` on activity-label spans (``activity(...)``).

Default ``activity-label``; an empty value adds none.
"""

INTENTRACE_COLLECT_TOKEN = "INTENTRACE_COLLECT_TOKEN"
"""Bearer token required by ``intentrace collect`` when set."""

INTENTRACE_DASHBOARDS = "INTENTRACE_DASHBOARDS"
"""Extra folder of user dashboards (``*.toml``) shown beside the built-in ones."""

INTENTRACE_TRACE_URL = "INTENTRACE_TRACE_URL"
"""The viewer's link out to a call's trace in your tracing backend: an ``http(s)`` URL template
with ``{trace_id}`` (and optionally ``{span_id}``), e.g. a Langfuse or Phoenix trace URL."""

INTENTRACE_TEST_POSTGRES_URL = "INTENTRACE_TEST_POSTGRES_URL"
"""Tests only: the PostgreSQL server used by the PostgreSQL tests (default 127.0.0.1:5432/test)."""

INTENTRACE_TEST_PHOENIX = "INTENTRACE_TEST_PHOENIX"
"""Tests only: the ``phoenix`` command the Phoenix tests run (default ``.venv-phoenix``'s)."""
