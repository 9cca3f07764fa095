"""Call statuses and label resolution: one place, pure Python, shared by the span processor,
the ledger, the viewer and the terminal watcher (no OpenTelemetry import here).

Resolution rules (docs/architecture.md):

* a call with an intent shows the intent while it is in flight (``streaming``/``in_flight``);
* on success it shows its outcome (``apply_outcome``: ``outcome`` > ``outcome_patch`` > intent);
* error, cancellation, background and abandonment get their own framing, never past tense;
* a call with no intent keeps today's default label (``Ran search_code``).

Group header of a block of sibling calls: the latest in-flight intent while a call is live >
the block's activity label once the block has settled > the latest settled outcome > a plain
count (``Used 2 tools, ran 1 subagent``). "Latest" is by the ledger's monotonic sequence
numbers, never list order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final


class Status(StrEnum):
    """The status of a call. A ``str``: members equal (and hash as) their values, so a status
    read back from the ledger as text compares, indexes and sorts the same."""

    STREAMING = "streaming"
    """The model is still writing the call's arguments (its intent grows)."""
    IN_FLIGHT = "in_flight"
    """The tool is running."""
    BACKGROUND = "background"
    """Dispatched to the background: in flight until harvested or timed out."""
    SUCCESS = "success"
    ERROR = "error"
    CANCELLED = "cancelled"
    ABANDONED = "abandoned"
    """Never settled by the app (the stream stopped, the process died): settled by us."""


STATUSES: Final[tuple[Status, ...]] = tuple(Status)
LIVE_STATUSES: Final[frozenset[Status]] = frozenset(
    {Status.STREAMING, Status.IN_FLIGHT, Status.BACKGROUND}
)
"""Calls that have not settled yet."""
SETTLED_STATUSES: Final[frozenset[Status]] = frozenset(
    {Status.SUCCESS, Status.ERROR, Status.CANCELLED, Status.ABANDONED}
)
FAILED_STATUSES: Final[frozenset[Status]] = frozenset(
    {Status.ERROR, Status.CANCELLED, Status.ABANDONED}
)

GLYPHS: Final[Mapping[Status, str]] = {
    Status.STREAMING: "✎",
    Status.IN_FLIGHT: "●",
    Status.BACKGROUND: "◷",
    Status.SUCCESS: "✓",
    Status.ERROR: "✗",
    Status.CANCELLED: "⊘",
    Status.ABANDONED: "⊘",
}
"""One mark per status: the terminal watcher and the viewer show the same ones."""

# Framing suffixes. Deliberately not past tense: they work in every language.
FRAME_ERROR: Final = " · failed"
FRAME_CANCELLED: Final = " · cancelled"
FRAME_BACKGROUND: Final = " · in background"
FRAME_ABANDONED: Final = " · abandoned"
FRAME_TIMED_OUT: Final = " · timed out"


def default_label(tool_name: str, status: Status) -> str:
    """Today's label for a call that carries no (visible) intent."""
    if status in (Status.STREAMING, Status.IN_FLIGHT):
        return f"Running {tool_name}"
    if status == Status.BACKGROUND:
        return f"Running {tool_name}{FRAME_BACKGROUND}"
    if status == Status.ERROR:
        return f"{tool_name}{FRAME_ERROR}"
    if status == Status.CANCELLED:
        return f"{tool_name}{FRAME_CANCELLED}"
    if status == Status.ABANDONED:
        return f"{tool_name}{FRAME_ABANDONED}"
    return f"Ran {tool_name}"


def frame_label(
    *,
    tool_name: str,
    status: Status,
    intent: str | None,
    outcome: str | None = None,
    timed_out: bool = False,
) -> str:
    """The label of one call.

    Args:
        tool_name: the code-level tool name (the neutral default when no intent is visible).
        status: a :class:`Status` (or its text, as the ledger stores it).
        intent: the visible intent (already redacted/sanitized), or None when absent or hidden.
        outcome: the visible resolved outcome text (``apply_outcome`` already applied), or None.
        timed_out: an error that is a background task that never returned.
    """
    if not intent or intent.isspace():  # (only white space: no intent)
        if status == Status.ERROR and timed_out:
            return f"{tool_name}{FRAME_TIMED_OUT}"
        return default_label(tool_name, status)
    if status == Status.SUCCESS:
        return outcome if outcome and not outcome.isspace() else intent
    if status == Status.ERROR:
        return f"{intent}{FRAME_TIMED_OUT if timed_out else FRAME_ERROR}"
    if status == Status.CANCELLED:
        return f"{intent}{FRAME_CANCELLED}"
    if status == Status.BACKGROUND:
        return f"{intent}{FRAME_BACKGROUND}"
    if status == Status.ABANDONED:
        return f"{intent}{FRAME_ABANDONED}"
    return intent


QUESTION_TOOLS: Final[frozenset[str]] = frozenset(
    {
        "ask_user",
        "ask_user_question",
        "AskUserQuestion",
        "ask_followup_question",
        "ask_human",
        "human_input",
        "request_user_input",
    }
)
"""Tools that ask the user a question (they count as questions in a block's plain count)."""

KIND_TOOL: Final = "tool"
KIND_SUBAGENT: Final = "subagent"
KIND_QUESTION: Final = "question"


def call_kind(tool_name: str | None, *, spawned: bool = False) -> str:
    """What a call counts as in a plain-count header: ``subagent`` when calls were made under
    it (``parent_call_id``), ``question`` for a tool in ``QUESTION_TOOLS``, else ``tool``."""
    if spawned:
        return KIND_SUBAGENT
    return KIND_QUESTION if tool_name in QUESTION_TOOLS else KIND_TOOL


@dataclass(frozen=True, slots=True)
class HeaderCall:
    """What the group header needs to know about one call of a block."""

    status: Status
    intent: str | None
    label: str
    seq: int
    """Sequence number at start (monotonic per session)."""
    settle_seq: int | None = None
    """Sequence number at settle (None while live)."""
    kind: str = KIND_TOOL
    """``tool``, ``subagent`` or ``question`` (``call_kind``): how the plain count names it."""


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def count_header(calls: Iterable[HeaderCall]) -> str:
    """The plain count: ``Used 2 tools, ran 1 subagent, asked 1 question`` (only the kinds
    present; ``Used 0 tools`` for none)."""
    kinds = [c.kind for c in calls]
    tools = sum(1 for k in kinds if k not in (KIND_SUBAGENT, KIND_QUESTION))
    parts: list[str] = []
    if tools or not kinds:
        parts.append(f"used {_plural(tools, 'tool')}")
    if subagents := kinds.count(KIND_SUBAGENT):
        parts.append(f"ran {_plural(subagents, 'subagent')}")
    if questions := kinds.count(KIND_QUESTION):
        parts.append(f"asked {_plural(questions, 'question')}")
    text = ", ".join(parts)
    return text[:1].upper() + text[1:]


def group_header(calls: Iterable[HeaderCall], activity_label: str | None = None) -> str:
    """Header of a block of sibling calls, in three phases ("latest" by sequence number, never
    list order, so a slow call that settles late never rewinds it):

    1. while a call is live: the latest in-flight intent (the live edge), even when the block
       has an activity label;
    2. once nothing is live: the activity label, when the block has one (pass it only once it
       has resolved: the ledger stores it when the block settled without error);
    3. else the latest settled label; else, for one call, that call's label (a block of one
       call is the call); else a plain count (``count_header``).
    """
    items = list(calls)
    live = [c for c in items if c.status in LIVE_STATUSES]
    speaking = [c for c in live if c.intent]
    if speaking:
        return max(speaking, key=lambda c: c.seq).intent or ""
    if activity_label and not live:
        return activity_label
    settled = [c for c in items if c.status not in LIVE_STATUSES and c.intent]
    if settled:
        return max(settled, key=lambda c: (c.settle_seq or c.seq, c.seq)).label
    if len(items) == 1:
        return items[0].label
    return count_header(items)
