"""The parts of a policy: actions, rules per tool and per agent, decisions, redacted calls.

Plain frozen data and the checks their fields need (glob patterns, action names); the policy
(``_policy``) and the TOML loader (``_toml``) build on them.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass, field
from typing import Any, Final, Literal, get_args

from redaction._base import TrailEntry
from redaction._errors import PolicyError

Action = Literal["keep", "redact", "hash"]
ACTIONS: Final[tuple[Action, ...]] = get_args(Action)
STRICTNESS: Final[dict[str, int]] = {"keep": 0, "hash": 1, "redact": 2}
"""keep < hash < redact: an agent overlay may only move a field to the right."""


def stricter(a: Action, b: Action) -> Action:
    return a if STRICTNESS[a] >= STRICTNESS[b] else b


@dataclass(frozen=True)
class Decision:
    """What a call may show. The label rule lives here and only here.

    ``show_intent`` is true only when the args are kept (the intent distils the args);
    ``show_outcome`` only when the intent is shown and the output is kept. When a flag is
    false, sinks use the neutral default label (the tool name), never the hidden text.
    """

    args: Action
    """Action on the call's arguments."""
    output: Action
    """Action on the call's result."""
    show_intent: bool = field(init=False)
    """The intent may be shown (``args == "keep"``)."""
    show_outcome: bool = field(init=False)
    """The outcome may be shown (``show_intent and output == "keep"``)."""

    def __post_init__(self) -> None:
        if self.args not in ACTIONS or self.output not in ACTIONS:
            raise ValueError(f"actions must be one of {', '.join(ACTIONS)}")
        show_intent = self.args == "keep"
        object.__setattr__(self, "show_intent", show_intent)
        object.__setattr__(self, "show_outcome", show_intent and self.output == "keep")


@dataclass(frozen=True)
class Rule:
    """Actions for args and output; ``None`` inherits from the rule underneath."""

    args: Action | None = None
    """Action on arguments (``keep``: scrubbed; ``redact``: placeholder; ``hash``: HMAC)."""
    output: Action | None = None
    """Action on the result."""


@dataclass(frozen=True)
class ToolRule:
    """A rule for tools whose name equals ``match`` or matches it as a glob (``db_*``)."""

    match: str
    """Exact tool name or glob (``*``, ``?``, ``[abc]``)."""
    args: Action | None = None
    """Action on arguments; ``None`` inherits."""
    output: Action | None = None
    """Action on the result; ``None`` inherits."""


@dataclass(frozen=True)
class AgentOverlay:
    """A stricter layer for agents whose id equals ``match`` or matches it as a glob."""

    match: str
    """Exact agent id or glob."""
    args: Action | None = None
    """Applies to every tool of the agent; may only be stricter than the base rules."""
    output: Action | None = None
    """Applies to every tool of the agent; may only be stricter than the base rules."""
    tools: tuple[ToolRule, ...] = ()
    """Per-tool layers for this agent; each may only be stricter than the base tool rules."""


@dataclass(frozen=True)
class RedactedCall:
    """One call after redaction: what a sink may record."""

    decision: Decision
    """The actions and label flags that applied."""
    args: Any
    """Same kind as given (mapping -> dict, JSON text -> JSON text), kept and scrubbed, or a
    placeholder / HMAC form when the action says so; ``None`` when given ``None``."""
    intent: str | None
    """Scrubbed intent; ``None`` when hidden (``decision.show_intent`` false) or not given."""
    outcome: str | None
    """Scrubbed outcome; ``None`` when hidden or not given."""
    output: Any
    """Like ``args``, by the output action."""
    error: str | None
    """Error or exception text: always scrubbed, never hidden."""
    trail: tuple[TrailEntry, ...]
    """What was removed (paths rooted at ``args``, ``output``, ``intent``, ``outcome``,
    ``error``) and why; never values."""

    @property
    def scrubbed(self) -> int:
        """Number of removals (``len(trail)``)."""
        return len(self.trail)


GLOB_CHARS = frozenset("*?[")


def is_glob(pattern: str) -> bool:
    return any(c in GLOB_CHARS for c in pattern)


def check_glob(pattern: str, source: str, entry: str) -> None:
    if not pattern:
        raise PolicyError(source, entry, "empty name or glob")
    if is_glob(pattern):
        depth = 0
        for ch in pattern:
            if ch == "[":
                if depth:
                    raise PolicyError(source, entry, f"bad glob {pattern!r}: nested '['")
                depth = 1
            elif ch == "]" and depth:
                depth = 0
        if depth:
            raise PolicyError(source, entry, f"bad glob {pattern!r}: unclosed '['")
        try:
            re.compile(fnmatch.translate(pattern))
        except re.error as exc:
            raise PolicyError(source, entry, f"bad glob {pattern!r}: {exc}") from None


def matches(pattern: str, name: str) -> bool:
    return pattern == name or (is_glob(pattern) and fnmatch.fnmatchcase(name, pattern))


def may_overlap(a: str, b: str) -> bool:
    """Conservative: could a name match both patterns?"""
    return matches(a, b) or matches(b, a)


def tool_entry(match: str, agent: str | None = None) -> str:
    base = f"[agents.{json.dumps(agent)}.tools.{json.dumps(match)}]" if agent is not None else ""
    return base or f"[tools.{json.dumps(match)}]"


def check_action(value: object, source: str, entry: str) -> Action | None:
    if value is None:
        return None
    if value not in ACTIONS:
        raise PolicyError(source, entry, f"{value!r} is not one of {', '.join(ACTIONS)}")
    return value
