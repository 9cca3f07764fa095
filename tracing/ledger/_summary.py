"""``Ledger.summary``: a compact plain-text timeline of settled calls for a summarizer prompt;
``dropped_notes``: what the readers say about calls lost before reaching the ledger."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from tracing.anchor import Anchor, DroppedInfo
from tracing.status import Status

_LINE_MAX: Final = 240
_MARK: Final[Mapping[str, str]] = {Status.SUCCESS: "ok"}
"""How a status reads in a line (its own name unless listed)."""


def _flat(text: str | None) -> str:
    """One line: whitespace (newlines included) collapsed."""
    return " ".join((text or "").split())


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def _duration(ms: float | None) -> str:
    if ms is None:
        return ""
    if ms < 1000:
        return f" {ms:.0f}ms"
    return f" {ms / 1000:.1f}s"


def call_line(call: Anchor) -> str:
    """One call: ``t2 #14 search_code ok 0.4s: Found 12 results``."""
    turn = f"t{call['turn']} " if call["turn"] is not None else ""
    indent = "  " if call["parent_call_id"] else ""
    mark = _MARK.get(call["status"], call["status"])
    line = (
        f"{indent}{turn}#{call['seq']} {_flat(call['tool_name'])} {mark}"
        f"{_duration(call['duration_ms'])}: {_flat(call['label'])}"
    )
    if call["error"] and call["status"] != Status.SUCCESS:
        line += f" ({_flat(call['error'])})"
    return _cut(line, _LINE_MAX)


def render_summary(
    session_id: str, calls: Sequence[Anchor], *, turn: int | None, max_chars: int
) -> str:
    """Header, then one line per settled call in ``seq`` order, within ``max_chars``.

    When everything does not fit, the most recent calls are kept and one line says how many
    earlier calls were left out.
    """
    failed = sum(1 for c in calls if c["status"] != Status.SUCCESS)
    scope = f"session {_flat(session_id)}" + (f", turn {turn}" if turn is not None else "")
    if not calls:
        return _cut(f"{scope}: no settled calls.", max(0, max_chars))
    header = f"{scope}: {len(calls)} settled call{'s' if len(calls) != 1 else ''}" + (
        f", {failed} not successful." if failed else "."
    )
    lines = [call_line(c) for c in calls]
    budget = max_chars - len(header)
    if budget <= 0:
        return _cut(header, max(0, max_chars))
    total = sum(len(line) + 1 for line in lines)
    if total <= budget:
        return "\n".join([header, *lines])
    kept: list[str] = []
    used = 0
    omission_room = len(f"… {len(lines)} earlier calls left out") + 1
    for line in reversed(lines):
        if used + len(line) + 1 + omission_room > budget:
            break
        kept.append(line)
        used += len(line) + 1
    kept.reverse()
    left_out = len(lines) - len(kept)
    note = f"… {left_out} earlier call{'s' if left_out != 1 else ''} left out"
    return _cut("\n".join([header, note, *kept]), max_chars)


def _calls(n: int, what: str = "tool call") -> str:
    return f"{n:,} {what}" + ("" if n == 1 else "s")


def dropped_notes(rows: Sequence[DroppedInfo], *, session: bool = False) -> list[str]:
    """One plain-text line per kind of loss in ``Ledger.dropped()`` rows (none: no line).

    ``session``: the rows are one session's (the line says "of this session").
    """
    shed = [r for r in rows if r["source"] == "processor"]
    written = [r for r in rows if r["source"] == "ledger"]
    notes: list[str] = []
    where = " of this session" if session else ""
    if shed:
        n = sum(r["count"] for r in shed)
        loose = sum(r["count"] for r in shed if not r["session_id"])
        sessions = len({r["session_id"] for r in shed if r["session_id"]})
        spread = ""
        if not session:
            spread = f" in {_calls(sessions, 'session')}" if sessions else ""
            if loose:
                spread += f"{',' if spread else ''} {loose:,} without a session"
        notes.append(
            f"{_calls(n)}{where} were shed under load by the span processor (its queue was "
            f"full){spread}: their anchors are missing or settled without outcome."
        )
    if written:
        n = sum(r["count"] for r in written)
        notes.append(
            f"{_calls(n, 'anchor write')}{where} were dropped by the ledger (its write queue "
            "was full)."
        )
    return notes
