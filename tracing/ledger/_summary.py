"""``Ledger.summary``: a compact plain-text timeline of settled calls for a summarizer prompt
(both label layers: the model's intent and the tool's outcome, status and error; activity
labels head their blocks);
``dropped_notes``: what the readers say about calls lost before reaching the ledger."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from tracing.anchor import Anchor, DroppedInfo
from tracing.status import Status

_LINE_MAX: Final = 480
_TEXT_MAX: Final = 120
"""An intent, outcome, label or error is cut to this in a line (the ledger keeps it whole)."""
_MARK: Final[Mapping[str, str]] = {Status.SUCCESS: "ok"}
"""How a status reads in a line (its own name unless listed)."""


def _flat(text: str | None, limit: int | None = None) -> str:
    """One line: whitespace (newlines included) collapsed; cut to ``limit`` with ``…``."""
    flat = " ".join((text or "").split())
    return flat if limit is None else _cut(flat, limit)


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: limit - 1] + "…" if limit > 0 else ""


def _duration(ms: float | None) -> str:
    if ms is None:
        return ""
    if ms < 1000:
        return f" {ms:.0f}ms"
    return f" {ms / 1000:.1f}s"


def _what(call: Anchor) -> str:
    """Both label layers: ``intent → outcome`` when the tool's outcome differs from the
    model's intent, the intent alone otherwise, the label when there is no intent."""
    intent = _flat(call["intent"], _TEXT_MAX)
    outcome = _flat(call["outcome"], _TEXT_MAX)
    if not intent:
        return _flat(call["label"], _TEXT_MAX)
    if outcome and outcome != intent and call["status"] == Status.SUCCESS:
        return f"{intent} → {outcome}"
    return intent


def call_line(call: Anchor, indent: str = "") -> str:
    """One call: ``t2 #14 search_code ok 0.4s: Searching for OAuth → Found 12 results``; a
    failed call's error follows in parentheses."""
    turn = f"t{call['turn']} " if call["turn"] is not None else ""
    indent += "  " if call["parent_call_id"] else ""
    mark = _MARK.get(call["status"], call["status"])
    line = (
        f"{indent}{turn}#{call['seq']} {_flat(call['tool_name'])} {mark}"
        f"{_duration(call['duration_ms'])}: {_what(call)}"
    )
    if call["error"] and call["status"] != Status.SUCCESS:
        line += f" ({_flat(call['error'], _TEXT_MAX)})"
    return _cut(line, _LINE_MAX)


def _units(calls: Sequence[Anchor], activity: Mapping[str, str]) -> list[tuple[str, list[str]]]:
    """Runs of lines: a block with an activity label is its header line and its calls
    (indented); other calls are runs of their own (no header)."""
    units: list[tuple[str, list[str]]] = []
    open_batch: str | None = None
    for call in calls:
        batch = call["batch_id"]
        label = activity.get(batch) if batch else None
        if label:
            if batch != open_batch:
                units.append((f"▸ {_flat(label, _TEXT_MAX)}", []))
                open_batch = batch
            units[-1][1].append(call_line(call, "  "))
        else:
            open_batch = None
            units.append(("", [call_line(call)]))
    return units


def render_summary(
    session_id: str,
    calls: Sequence[Anchor],
    *,
    turn: int | None,
    max_chars: int,
    activity: Mapping[str, str] | None = None,
) -> str:
    """Header, then one line per settled call in ``seq`` order, within ``max_chars``.

    Each line carries the call's intent and, when it differs, its outcome (both label
    layers), its status and its error; a block with an activity label (``activity``: batch id
    -> label) is headed by it. When everything does not fit, the most recent calls are kept
    (with their block's header) and one line says how many earlier calls were left out.
    """
    failed = sum(1 for c in calls if c["status"] != Status.SUCCESS)
    scope = f"session {_flat(session_id)}" + (f", turn {turn}" if turn is not None else "")
    if not calls:
        return _cut(f"{scope}: no settled calls.", max(0, max_chars))
    header = f"{scope}: {len(calls)} settled call{'s' if len(calls) != 1 else ''}" + (
        f", {failed} not successful." if failed else "."
    )
    units = _units(calls, activity or {})
    lines = [line for head, body in units for line in ([head] if head else []) + body]
    budget = max_chars - len(header)
    if budget <= 0:
        return _cut(header, max(0, max_chars))
    if sum(len(line) + 1 for line in lines) <= budget:
        return "\n".join([header, *lines])
    kept: list[str] = []
    used = 0
    kept_calls = 0
    omission_room = len(f"… {len(calls)} earlier calls left out") + 1
    for head, body in reversed(units):
        room = budget - omission_room - used - (len(head) + 1 if head else 0)
        taken: list[str] = []
        for line in reversed(body):
            if len(line) + 1 > room:
                break
            taken.append(line)
            room -= len(line) + 1
        if not taken:
            break
        taken.reverse()
        unit = ([head] if head else []) + taken
        kept[:0] = unit
        used += sum(len(line) + 1 for line in unit)
        kept_calls += len(taken)
        if len(taken) < len(body):
            break
    left_out = len(calls) - kept_calls
    note = f"… {left_out} earlier call{'s' if left_out != 1 else ''} left out"
    out = "\n".join([header, note, *kept])
    return out if len(out) <= max_chars else header  # (no room for the note: the header)


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
