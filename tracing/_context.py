"""Context carried to every nested span: session, agent, turn, and the current tool call.

Plain ``contextvars`` (cheaper than OpenTelemetry baggage and invisible on the wire): the span
processor copies the session onto every span started inside ``session(...)``, and our own
instrumentation reads the current call. No OpenTelemetry import here.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """The session (conversation), agent, turn and user that nested spans belong to."""

    session_id: str
    agent_id: str | None = None
    turn: int | None = None
    user_id: str | None = None


SESSION: Final[ContextVar[SessionInfo | None]] = ContextVar("intentrace_session", default=None)
CURRENT_CALL: Final[ContextVar[Any]] = ContextVar("intentrace_current_call", default=None)


def current_session() -> SessionInfo | None:
    """The innermost ``session(...)`` in effect, or None."""
    return SESSION.get()
