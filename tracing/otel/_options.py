"""The span processor's options (one frozen object) and its configuration error."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Final, cast

from tracing import attributes as A
from tracing.derive._call import NAMINGS, Naming
from tracing.environment_variables import (
    INTENTRACE_ACTIVITY_TAG,
    INTENTRACE_LANGFUSE_TAG,
    INTENTRACE_NAMING,
)


class ConfigError(ValueError):
    """A tracing configuration error; the message (one line) says how to fix it."""


DEFAULT_BACKGROUND_TIMEOUT_S: Final = 600.0
DEFAULT_MAX_QUEUE: Final = 8192


@dataclass(frozen=True)
class IntentOptions:
    """How ``IntentSpanProcessor`` shapes spans. Precedence: argument > environment > default."""

    naming: Naming | None = None
    """``intent`` (default): a tool span's name becomes its label, the original name stays in
    ``intentrace.original_name``. ``stable``: names untouched, intent/outcome/label in
    attributes only (for backends that need low-cardinality names). Env: ``INTENTRACE_NAMING``."""
    langfuse_tag: str | bool | None = None
    """Tag added to ``langfuse.trace.tags`` on intent-labelled spans; ``False`` or ``""`` adds
    none. Env: ``INTENTRACE_LANGFUSE_TAG``; default ``tool-intent``."""
    activity_tag: str | bool | None = None
    """Tag added to ``langfuse.trace.tags`` on activity-label spans (``activity(...)``, the
    second label layer); ``False`` or ``""`` adds none. Env: ``INTENTRACE_ACTIVITY_TAG``;
    default ``activity-label``."""
    learn_from_model_spans: bool = True
    """Name tool spans at start from the tool calls a model span listed (call id, else tool
    name and order within the trace)."""
    background_timeout_s: float = DEFAULT_BACKGROUND_TIMEOUT_S
    """A background call not harvested within this many seconds settles as an error
    (``· timed out``)."""
    in_thread: bool = True
    """Recognise, redact, name and shape in the processor's own thread: the app thread only
    enqueues (the live span is renamed moments after it starts; exported copies are always
    right). ``False`` does it all inline in ``on_start``/``on_end`` (the live span carries its
    label from the instant its args are known: its start, or for Langfuse ``@observe`` the
    ``set_attributes`` call that brings them; at a cost on the app thread)."""
    max_queue: int = DEFAULT_MAX_QUEUE
    """Span events (starts and ends) waiting for the processor's thread. Beyond this the app
    thread never waits: the span's processing is shed (``stats()["shed_spans"]``, logged once),
    its exported copy is a stub (name scrubbed, identifiers only, ``intentrace.shed``) and its
    anchor is settled without outcome or missing, counted in the ledger (``Ledger.dropped``).
    Each queued end holds its span's data: lower it for very large payloads."""

    def resolved_naming(self) -> Naming:
        value = self.naming or os.environ.get(INTENTRACE_NAMING, "").strip().lower() or "intent"
        if value not in NAMINGS:
            raise ConfigError(
                f"naming must be 'intent' or 'stable', got {value!r} "
                f"(argument naming= or ${INTENTRACE_NAMING})"
            )
        return cast("Naming", value)

    def resolved_langfuse_tag(self) -> str | None:
        return _tag(self.langfuse_tag, INTENTRACE_LANGFUSE_TAG, A.DEFAULT_LANGFUSE_TAG)

    def resolved_activity_tag(self) -> str | None:
        return _tag(self.activity_tag, INTENTRACE_ACTIVITY_TAG, A.DEFAULT_ACTIVITY_TAG)


def _tag(value: str | bool | None, env_name: str, default: str) -> str | None:
    """A tag option: argument > environment > default; ``False``/empty: no tag."""
    if value is False:
        return None
    if isinstance(value, str):
        return value.strip() or None
    env = os.environ.get(env_name)
    if env is not None:
        return env.strip() or None
    return default
