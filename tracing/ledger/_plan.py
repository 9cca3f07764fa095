"""Turn one batch of queued writes into the rows to insert and update (no database here).

The writer thread looks up the stored state of every call id in the batch (inside the write
transaction), then ``plan_batch`` replays the batch's writes in arrival order on that state:

* a call id seen for the first time becomes one INSERT, however many writes it got in the batch
  (an in-flight write and its settle in the same batch are one row write);
* a stored call becomes one UPDATE of the columns whose value changes (none: no write at all,
  so a replayed write is free and never duplicates);
* a settled status is never overwritten by a live one: a live write for a settled call only fills
  columns that are still NULL, other than the label and its inputs (intent, outcome);
* ``seq`` (first write, or a move to another session) and ``settle_seq`` (first settle) come from
  the session's counter in event order; the store hands out the ranges, ``assign`` fills them in;
* a ``streaming`` write (a stream tap) for a call already past streaming (in flight, in the
  background or settled) never rewinds it: it only fills columns that are still NULL, never the
  status, the label or what the label is made of.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from tracing._status import LIVE_STATUSES, SETTLED_STATUSES, STATUSES, STREAMING, frame_label
from tracing.ledger._model import ANCHOR_COLUMNS, COLUMN_TYPES, WRITABLE_COLUMNS

LOADED_COLUMNS: Final[tuple[str, ...]] = tuple(
    c for c in ANCHOR_COLUMNS if c not in ("args", "result")
)
"""Columns the lookup loads; ``args``/``result`` (possibly large) come back as IS NULL flags."""

NOT_LOADED: Final = object()
"""Stands for a stored non-NULL ``args``/``result`` value that the lookup did not load."""

_STATUSES: Final = frozenset(STATUSES)
_STREAMING_NEVER_FILLS: Final = frozenset({"status", "label", "intent", "outcome"})
_LABEL_INPUTS: Final = frozenset({"status", "intent", "outcome", "tool_name"})
_SETTLED_FINAL: Final = _LABEL_INPUTS | {"label"}
_TEXT_COLUMNS: Final = frozenset(c for c, t in COLUMN_TYPES.items() if t == "text")
_INT_COLUMNS: Final = frozenset(c for c, t in COLUMN_TYPES.items() if t == "integer")
_JSON_COLUMNS: Final = frozenset({"args", "result", "redaction"})
_COLUMN_INDEX: Final = {c: i for i, c in enumerate(ANCHOR_COLUMNS)}


@dataclass(frozen=True, slots=True)
class Activity:
    """A queued ``set_activity`` call."""

    session_id: str
    batch_id: str
    label: str
    turn: int | None


@dataclass(frozen=True, slots=True)
class TurnFloor:
    """A turn handed out while the database was unreachable: recorded as a floor later."""

    session_id: str
    turn: int


@dataclass(slots=True)
class SessionDelta:
    """What one batch adds to a ``sessions`` row."""

    slots: int = 0
    last_turn: int = 0
    first_ns: int | None = None
    last_ns: int | None = None


@dataclass(slots=True)
class _Call:
    row: dict[str, Any]
    stored: dict[str, Any] | None
    rid: Any
    label_fresh: bool
    settle_pending: bool = False
    start_defaulted: bool = False
    seq_slots: int = 0
    """How many ``seq`` slots the call took in this batch (it moved session): the last wins."""


@dataclass(slots=True)
class Update:
    """An UPDATE of one stored call: the columns that change and their new values."""

    tool_call_id: str
    rid: Any
    """SQLite rowid (None on PostgreSQL)."""
    values: dict[str, Any]


@dataclass
class BatchPlan:
    """The outcome of planning one batch."""

    calls: dict[str, _Call] = field(default_factory=lambda: {})
    sessions: dict[str, SessionDelta] = field(default_factory=lambda: {})
    activities: list[tuple[Activity, list[int]]] = field(default_factory=lambda: [])
    slots: dict[str, list[tuple[_Call | list[int], str, int]]] = field(default_factory=lambda: {})
    invalid: int = 0
    inserts: list[tuple[Any, ...]] = field(default_factory=lambda: [])
    updates: list[Update] = field(default_factory=lambda: [])
    blocks: list[tuple[str, str, int | None, str, int]] = field(default_factory=lambda: [])


def clean_text(value: Any, *, column: str, strip_nul: bool) -> str | None:
    """Coerce a value for a text column: JSON for containers, no lone surrogates (and no NUL
    for PostgreSQL, whose text type cannot hold it)."""
    if value is None:
        return None
    if not isinstance(value, str):
        if column in _JSON_COLUMNS:
            value = json.dumps(value, ensure_ascii=False, default=str)
        else:
            value = str(value)
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            value = value.encode("utf-8", "replace").decode("utf-8")
    if strip_nul and "\x00" in value:
        value = value.replace("\x00", "\ufffd")
    return value


def _clean_int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _clean_write(write: Mapping[str, Any], *, strip_nul: bool) -> dict[str, Any] | None:
    """Validated, coerced copy of a write; None when it cannot be stored."""
    call_id = write.get("tool_call_id")
    status = write.get("status")
    tool = write.get("tool_name")
    if not isinstance(call_id, str) or not call_id or status not in _STATUSES:
        return None
    if not isinstance(tool, str) or not tool:
        return None
    out: dict[str, Any] = {}
    for key, value in write.items():
        if key not in WRITABLE_COLUMNS:
            continue
        if key in _INT_COLUMNS:
            out[key] = _clean_int(value)
        else:
            out[key] = clean_text(value, column=key, strip_nul=strip_nul)
    if "session_id" in out and out["session_id"] is None:
        out["session_id"] = ""
    if "label" in out and out["label"] is None:
        del out["label"]
    if "start_ns" in out and out["start_ns"] is None:
        del out["start_ns"]
    return out


def plan_batch(
    items: Iterable[Mapping[str, Any] | Activity | TurnFloor],
    stored: Mapping[str, tuple[Any, dict[str, Any]]],
    *,
    now_ns: int,
    strip_nul: bool = False,
) -> BatchPlan:
    """Replay a batch on the stored state (``stored[id] = (rid, loaded columns)``)."""
    plan = BatchPlan()
    calls = plan.calls
    for item in items:
        if isinstance(item, Activity):
            ticket: list[int] = [0]
            plan.activities.append((item, ticket))
            _slot(plan, item.session_id, ticket, "block")
            delta = _delta(plan, item.session_id)
            if item.turn is not None and item.turn > delta.last_turn:
                delta.last_turn = item.turn
            continue
        if isinstance(item, TurnFloor):
            delta = _delta(plan, item.session_id)
            delta.last_turn = max(delta.last_turn, item.turn)
            continue
        write = _clean_write(item, strip_nul=strip_nul)
        if write is None:
            plan.invalid += 1
            continue
        call_id: str = write["tool_call_id"]
        call = calls.get(call_id)
        if call is None:
            found = stored.get(call_id)
            if found is None:
                row: dict[str, Any] = dict.fromkeys(ANCHOR_COLUMNS)
                row["tool_call_id"] = call_id
                row["session_id"] = ""
                call = _Call(row=row, stored=None, rid=None, label_fresh=False)
                calls[call_id] = call
                _apply(plan, call, write, new=True, now_ns=now_ns)
                continue
            rid, loaded = found
            call = _Call(row=dict(loaded), stored=loaded, rid=rid, label_fresh=True)
            calls[call_id] = call
        _apply(plan, call, write, new=False, now_ns=now_ns)
    return plan


def _delta(plan: BatchPlan, session_id: str) -> SessionDelta:
    delta = plan.sessions.get(session_id)
    if delta is None:
        delta = plan.sessions[session_id] = SessionDelta()
    return delta


def _slot(plan: BatchPlan, session_id: str, target: _Call | list[int], kind: str) -> None:
    token = 0
    if kind == "seq" and isinstance(target, _Call):
        target.seq_slots += 1
        token = target.seq_slots
    plan.slots.setdefault(session_id, []).append((target, kind, token))
    _delta(plan, session_id).slots += 1


def _apply(plan: BatchPlan, call: _Call, write: dict[str, Any], *, new: bool, now_ns: int) -> None:
    row = call.row
    status = write["status"]
    if not new and status == STREAMING and row["status"] != STREAMING:
        # A late stream-tap write never rewinds a call that its processor already started,
        # backgrounded or settled (writers in other processes race): it only fills gaps.
        for key, value in write.items():
            if key not in _STREAMING_NEVER_FILLS and value is not None and row[key] is None:
                row[key] = value
        _touch_session(plan, row)
        return

    if not new and row["status"] in SETTLED_STATUSES and status in LIVE_STATUSES:
        # A late or replayed live write never un-settles a call: it only fills gaps, and never
        # in the label or what the label is made of (a settled label is final).
        for key, value in write.items():
            if key in _SETTLED_FINAL or value is None:
                continue
            if row[key] is None:
                row[key] = value
        _touch_session(plan, row)
        return
    old_session = row["session_id"]
    for key, value in write.items():
        row[key] = value
    if "label" in write:
        call.label_fresh = True
    elif not _LABEL_INPUTS.isdisjoint(write):
        call.label_fresh = False
    if "start_ns" in write:
        call.start_defaulted = False
    if new:
        if row["start_ns"] is None:
            row["start_ns"] = row["end_ns"] if row["end_ns"] is not None else now_ns
            call.start_defaulted = True
        _slot(plan, row["session_id"], call, "seq")
    elif row["session_id"] != old_session:
        _slot(plan, row["session_id"], call, "seq")
    if status in SETTLED_STATUSES and row["settle_seq"] is None and not call.settle_pending:
        call.settle_pending = True
        _slot(plan, row["session_id"], call, "settle_seq")
    _touch_session(plan, row)


def _touch_session(plan: BatchPlan, row: dict[str, Any]) -> None:
    delta = _delta(plan, row["session_id"])
    turn = row["turn"]
    if turn is not None and turn > delta.last_turn:
        delta.last_turn = turn
    start = row["start_ns"]
    if start is not None and (delta.first_ns is None or start < delta.first_ns):
        delta.first_ns = start
    last = row["end_ns"] if row["end_ns"] is not None else start
    if last is not None and (delta.last_ns is None or last > delta.last_ns):
        delta.last_ns = last


def assign(plan: BatchPlan, bases: Mapping[str, int], *, updated_ns: int) -> int:
    """Fill in the sequence numbers from the allocated ranges and build the row writes.

    ``bases[session]`` is the first number of the session's range. Each written row gets a
    distinct ``updated_ns`` from ``updated_ns`` upwards; returns the next unused value.
    """
    for session_id, slots in plan.slots.items():
        number = bases[session_id]
        for target, kind, token in slots:
            if isinstance(target, list):
                target[0] = number
            elif kind != "seq" or token == target.seq_slots:
                target.row[kind] = number  # (a seq slot left behind by a move stays unused)
            number += 1
    stamp = updated_ns
    for call in plan.calls.values():
        row = call.row
        if not call.label_fresh or row["label"] is None:
            row["label"] = frame_label(
                tool_name=row["tool_name"],
                status=row["status"],
                intent=row["intent"],
                outcome=row["outcome"],
            )
        start, end = row["start_ns"], row["end_ns"]
        if call.start_defaulted and end is not None and end < start:
            row["start_ns"] = start = end  # a writer that never said when the call started
        row["duration_ms"] = (end - start) / 1e6 if start is not None and end is not None else None
        stored = call.stored
        if stored is None:
            row["updated_ns"] = stamp
            stamp += 1
            plan.inserts.append(tuple(row[c] for c in ANCHOR_COLUMNS))
            continue
        values = {
            c: row[c]
            for c in ANCHOR_COLUMNS
            if c != "updated_ns" and row[c] is not NOT_LOADED and row[c] != stored[c]
        }
        if values:
            values["updated_ns"] = stamp
            stamp += 1
            plan.updates.append(Update(row["tool_call_id"], call.rid, values))
    for activity, ticket in plan.activities:
        plan.blocks.append(
            (activity.session_id, activity.batch_id, activity.turn, activity.label, ticket[0])
        )
    return stamp


def loaded_row(values: Iterable[Any]) -> dict[str, Any]:
    """The stored state from a lookup row: ``LOADED_COLUMNS`` then ``args IS NULL``,
    ``result IS NULL``."""
    vals = list(values)
    row = dict(zip(LOADED_COLUMNS, vals, strict=False))
    n = len(LOADED_COLUMNS)
    row["args"] = None if vals[n] else NOT_LOADED
    row["result"] = None if vals[n + 1] else NOT_LOADED
    return row


def column_index(column: str) -> int:
    """Position of a column in ``ANCHOR_COLUMNS``."""
    return _COLUMN_INDEX[column]


def monotonic_ns(previous: int) -> int:
    """``time.time_ns()``, but strictly above ``previous`` (updated_ns never goes back)."""
    now = time.time_ns()
    return now if now > previous else previous + 1
