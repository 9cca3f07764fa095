"""Call statuses and label resolution: one place, pure Python, shared by the span processor,
the ledger, the viewer and the terminal watcher (no OpenTelemetry import here).

Resolution rules (DESIGN.md):

* a call with an intent shows the intent while it is in flight (``streaming``/``in_flight``);
* on success it shows its outcome (``apply_outcome``: ``outcome`` > ``outcome_patch`` > intent);
* error, cancellation, background and abandonment get their own framing, never past tense;
* a call with no intent keeps today's default label (``Ran search_code``).

Group header of a block of sibling calls: a block-level activity label once it exists >
the latest in-flight intent > the latest settled outcome > a plain count (``Used 2 tools``).
"Latest" is by the ledger's monotonic sequence numbers, never list order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

Status = Literal[
    "streaming", "in_flight", "success", "error", "cancelled", "background", "abandoned"
]

STREAMING: Final = "streaming"
IN_FLIGHT: Final = "in_flight"
SUCCESS: Final = "success"
ERROR: Final = "error"
CANCELLED: Final = "cancelled"
BACKGROUND: Final = "background"
ABANDONED: Final = "abandoned"

STATUSES: Final[tuple[Status, ...]] = (
    "streaming",
    "in_flight",
    "success",
    "error",
    "cancelled",
    "background",
    "abandoned",
)
LIVE_STATUSES: Final[frozenset[str]] = frozenset({"streaming", "in_flight", "background"})
"""Calls that have not settled yet."""

GLYPHS: Final[Mapping[str, str]] = {
    "streaming": "✎",
    "in_flight": "●",
    "background": "◷",
    "success": "✓",
    "error": "✗",
    "cancelled": "⊘",
    "abandoned": "⊘",
}
"""One mark per status: the terminal watcher and the viewer show the same ones."""
FAILED_STATUSES: Final[frozenset[str]] = frozenset({"error", "cancelled", "abandoned"})
SETTLED_STATUSES: Final[frozenset[str]] = frozenset({"success", "error", "cancelled", "abandoned"})

# Framing suffixes. Deliberately not past tense: they work in every language.
FRAME_ERROR: Final = " · failed"
FRAME_CANCELLED: Final = " · cancelled"
FRAME_BACKGROUND: Final = " · in background"
FRAME_ABANDONED: Final = " · abandoned"
FRAME_TIMED_OUT: Final = " · timed out"


def default_label(tool_name: str, status: str) -> str:
    """Today's label for a call that carries no (visible) intent."""
    if status in ("streaming", "in_flight"):
        return f"Running {tool_name}"
    if status == "background":
        return f"Running {tool_name}{FRAME_BACKGROUND}"
    if status == "error":
        return f"{tool_name}{FRAME_ERROR}"
    if status == "cancelled":
        return f"{tool_name}{FRAME_CANCELLED}"
    if status == "abandoned":
        return f"{tool_name}{FRAME_ABANDONED}"
    return f"Ran {tool_name}"


def frame_label(
    *,
    tool_name: str,
    status: str,
    intent: str | None,
    outcome: str | None = None,
    timed_out: bool = False,
) -> str:
    """The label of one call.

    Args:
        tool_name: the code-level tool name (the neutral default when no intent is visible).
        status: one of ``STATUSES``.
        intent: the visible intent (already redacted/sanitized), or None when absent or hidden.
        outcome: the visible resolved outcome text (``apply_outcome`` already applied), or None.
        timed_out: an error that is a background task that never returned.
    """
    if not intent:
        if status == "error" and timed_out:
            return f"{tool_name}{FRAME_TIMED_OUT}"
        return default_label(tool_name, status)
    if status == "success":
        return outcome or intent
    if status == "error":
        return f"{intent}{FRAME_TIMED_OUT if timed_out else FRAME_ERROR}"
    if status == "cancelled":
        return f"{intent}{FRAME_CANCELLED}"
    if status == "background":
        return f"{intent}{FRAME_BACKGROUND}"
    if status == "abandoned":
        return f"{intent}{FRAME_ABANDONED}"
    return intent


@dataclass(frozen=True, slots=True)
class HeaderCall:
    """What the group header needs to know about one call of a block."""

    status: str
    intent: str | None
    label: str
    seq: int
    """Sequence number at start (monotonic per session)."""
    settle_seq: int | None = None
    """Sequence number at settle (None while live)."""


def group_header(calls: Iterable[HeaderCall], activity_label: str | None = None) -> str:
    """Header of a block of sibling calls (three-phase precedence, monotonic sequence)."""
    items = list(calls)
    if activity_label:
        return activity_label
    live = [c for c in items if c.status in LIVE_STATUSES and c.intent]
    if live:
        return max(live, key=lambda c: c.seq).intent or ""
    settled = [c for c in items if c.status not in LIVE_STATUSES and c.intent]
    if settled:
        return max(settled, key=lambda c: (c.settle_seq or c.seq, c.seq)).label
    n = len(items)
    return f"Used {n} tool" if n == 1 else f"Used {n} tools"
