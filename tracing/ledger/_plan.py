"""Turn one batch of queued writes into the rows to insert and update (no database here).

The writer thread looks up the stored state of every call id in the batch (inside the write
transaction), or the preparing thread predicts it from the batch before (checked by the writer,
see ``_writer``), then ``plan_batch`` replays the batch's writes in arrival order on that state:

* a call id seen for the first time becomes one INSERT, however many writes it got in the batch
  (an in-flight write and its settle in the same batch are one row write);
* a stored call becomes one UPDATE of the columns whose value changes (none: no write at all,
  so a replayed write is free and never duplicates);
* a settled status is never overwritten by a live one: a live write for a settled call only fills
  columns that are still NULL, other than the label and its inputs (intent, outcome);
* ``seq`` (first write, or a move to another session) and ``settle_seq`` (first settle) come from
  the session's counter in event order: planning counts each session's numbers (a call keeps its
  offsets in the batch), the store hands out the ranges, ``assign`` adds their starts;
* a ``streaming`` write (a stream tap) for a call already past streaming (in flight, in the
  background or settled) never rewinds it: it only fills columns that are still NULL, never the
  status, the label or what the label is made of;
* an ``abandoned`` write (a stream tap whose stream stopped before the call's arguments were
  complete) settles a call only while it is still ``streaming``: a call the application has
  taken over (in flight, in the background, settled) keeps its status, and the write only fills
  gaps. Only the ledger's own reaper (``reaping=True``) abandons a live call that went stale.
  Abandonment is our guess, not the application's word: an in-flight or background write that
  arrives after it (the processor's thread lagging the tap's) revives the call.
* a write from a tool span (``span_id`` given) for a call settled under another span is another
  call that reused the provider's id (``call_0`` in every response): it goes to the anchor of its
  own span identity (``tracing.anchor.anchor_id``), never into the settled one.

This runs for every write, so it is written for speed (measured in bench/ledger.py);
tests/ledger/test_concurrency.py checks that batching never changes a result, and
tests/ledger/test_pipeline.py that planning ahead never does.
"""

from __future__ import annotations

import json
import operator
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, cast

from tracing.anchor import ANCHOR_COLUMNS, COLUMN_TYPES, WRITABLE_COLUMNS, anchor_id
from tracing.status import LIVE_STATUSES, SETTLED_STATUSES, STATUSES, Status, frame_label

LOADED_COLUMNS: Final[tuple[str, ...]] = tuple(
    c for c in ANCHOR_COLUMNS if c not in ("args", "result")
)
"""Columns the lookup loads; ``args``/``result`` (possibly large) come back as IS NULL flags."""

NOT_LOADED: Final = object()
"""Stands for a stored non-NULL ``args``/``result`` value that the lookup did not load."""

_STATUSES: Final = frozenset(STATUSES)
_STREAMING: Final = Status.STREAMING
_ABANDONED: Final = Status.ABANDONED
_APP_LIVE: Final = frozenset({Status.IN_FLIGHT, Status.BACKGROUND})
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


@dataclass(frozen=True, slots=True)
class Dropped:
    """Calls (or writes) of one session lost before they reached the ledger, as counted by
    ``Ledger.record_dropped``: added to the ``dropped`` table."""

    session_id: str
    source: str
    """``processor``: tool calls a span processor shed under load (anchor missing or settled
    without outcome); ``ledger``: anchor writes dropped because the ledger's queue was full."""
    count: int
    first_ns: int
    last_ns: int


@dataclass(slots=True)
class SessionDelta:
    """What one batch adds to a ``sessions`` row."""

    slots: int = 0
    """Sequence numbers the batch needs from the session's counter."""
    last_turn: int = 0
    first_ns: int | None = None
    last_ns: int | None = None


@dataclass(slots=True)
class Update:
    """An UPDATE of one stored call: the columns that change and their new values."""

    tool_call_id: str
    rid: Any
    """SQLite rowid (None on PostgreSQL)."""
    values: dict[str, Any]


# A call being planned is a small list (cheaper than an object on this hot path):
_ROW, _STORED, _RID, _FRESH, _DEFAULTED, _SEQ_AT, _SETTLE_AT, _SETTLE_IN = range(8)
ROW: Final = _ROW
RID: Final = _RID
# _ROW: the row as it will be; _STORED/_RID: the stored state (None: new) and SQLite rowid;
# _FRESH: the label came from a writer (else resolved with frame_label); _DEFAULTED: start_ns
# was not given; _SEQ_AT: offset of the call's seq in its session's numbers in this batch (-1:
# none taken; a call that moves session takes a new one, and the number it leaves stays
# unused); _SETTLE_AT/_SETTLE_IN: offset of its settle_seq (-1: none) and in which session.


@dataclass
class BatchPlan:
    """The outcome of planning one batch."""

    calls: dict[str, list[Any]] = field(default_factory=lambda: {})
    counts: dict[str, int] = field(default_factory=lambda: {})
    """Sequence numbers taken so far in each session (in event order: offsets 0, 1, ...)."""
    sessions: dict[str, SessionDelta] = field(default_factory=lambda: {})
    activities: list[tuple[Activity, int]] = field(default_factory=lambda: [])
    """Each activity and the offset of its number in its session."""
    invalid: int = 0
    inserts: list[tuple[Any, ...]] = field(default_factory=lambda: [])
    updates: list[Update] = field(default_factory=lambda: [])
    blocks: list[tuple[str, str, int | None, str, int]] = field(default_factory=lambda: [])
    dropped: list[Dropped] = field(default_factory=lambda: [])
    respanned: list[str] = field(default_factory=lambda: [])
    """Ids whose writes went to a span identity (another call had settled under the id)."""


_KIND: Final = {
    c: (1 if c in _INT_COLUMNS else 2 if c in _JSON_COLUMNS else 0) for c in WRITABLE_COLUMNS
}
_EMPTY_ROW: Final[dict[str, Any]] = {**dict.fromkeys(ANCHOR_COLUMNS), "session_id": ""}
_ROW_TUPLE: Final = cast(
    "Callable[[dict[str, Any]], tuple[Any, ...]]", operator.itemgetter(*ANCHOR_COLUMNS)
)
_UPDATABLE: Final = tuple(c for c in ANCHOR_COLUMNS if c not in ("updated_ns", "version"))
_WRITABLE_INTS: Final = tuple(
    c for c in ANCHOR_COLUMNS if c in WRITABLE_COLUMNS and c in _INT_COLUMNS
)


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


def _clean_write(
    write: Mapping[str, Any], *, strip_nul: bool, careful: bool
) -> Mapping[str, Any] | None:
    """The write, validated (a copy only when something needs fixing); None when it cannot be
    stored.

    Hot path (``careful=False``): only the key fields, unknown keys and the integer columns are
    checked; text that the database refuses (a lone surrogate, a dict, NUL for PostgreSQL)
    fails the batch, and the writer replays it once with ``careful=True``, which coerces every
    value.
    """
    try:
        call_id = write["tool_call_id"]
        status = write["status"]
        tool = write["tool_name"]
    except (KeyError, TypeError):
        return None
    if call_id.__class__ is not str or not call_id or status not in _STATUSES:
        return None
    if tool.__class__ is not str or not tool:
        return None
    if not WRITABLE_COLUMNS.issuperset(write):
        write = {k: v for k, v in write.items() if k in WRITABLE_COLUMNS}
    fixes: list[tuple[str, Any]] | None = None
    if careful:
        for key, value in write.items():
            if value is None:
                continue
            cls = value.__class__
            if cls is str:
                if _KIND[key] != 1 and value.isascii() and not (strip_nul and "\x00" in value):
                    continue
            elif cls is int and _KIND[key] == 1:
                continue
            if fixes is None:
                fixes = []
            if _KIND[key] == 1:
                fixes.append((key, _clean_int(value)))
            else:
                fixes.append((key, clean_text(value, column=key, strip_nul=strip_nul)))
    else:
        for key in _WRITABLE_INTS:
            value = write.get(key)
            if value is not None and value.__class__ is not int:
                if fixes is None:
                    fixes = []
                fixes.append((key, _clean_int(value)))
    if fixes is None and None not in (
        write.get("session_id", ""),
        write.get("label", ""),
        write.get("start_ns", 0),
    ):
        return write
    out = dict(write)
    for key, value in fixes or ():
        out[key] = value
    if out.get("session_id", "") is None:
        out["session_id"] = ""
    if "label" in out and out["label"] is None:
        del out["label"]
    if "start_ns" in out and out["start_ns"] is None:
        del out["start_ns"]
    return out


def clean_item(item: Any, *, strip_nul: bool) -> Any:
    """A queued item with its ids and texts coerced (the careful replay, before the stored rows
    are looked up: a lone surrogate in a call, session or batch id fails the lookup too). A
    write that cannot be stored is returned as it is (the plan counts it invalid)."""
    if isinstance(item, Mapping):
        write = cast(Mapping[str, Any], item)
        cleaned = _clean_write(write, strip_nul=strip_nul, careful=True)
        return write if cleaned is None else cleaned
    if item.__class__ is Activity:
        a = cast(Activity, item)
        return Activity(
            clean_text(a.session_id, column="session_id", strip_nul=strip_nul) or "",
            clean_text(a.batch_id, column="batch_id", strip_nul=strip_nul) or "",
            a.label,
            a.turn,
        )
    if item.__class__ is TurnFloor:
        f = cast(TurnFloor, item)
        return TurnFloor(
            clean_text(f.session_id, column="session_id", strip_nul=strip_nul) or "", f.turn
        )
    if item.__class__ is Dropped:
        d = cast(Dropped, item)
        return Dropped(
            clean_text(d.session_id, column="session_id", strip_nul=strip_nul) or "",
            clean_text(d.source, column="session_id", strip_nul=strip_nul) or "",
            d.count,
            d.first_ns,
            d.last_ns,
        )
    return item


def plan_batch(
    items: Iterable[Mapping[str, Any] | Activity | TurnFloor | Dropped],
    stored: Mapping[str, tuple[Any, dict[str, Any]]],
    *,
    now_ns: int,
    strip_nul: bool = False,
    careful: bool = True,
    reaping: bool = False,
) -> BatchPlan:
    """Replay a batch on the stored state (``stored[id] = (rid, loaded columns)``).

    With ``careful=False`` (the writer's first try) plain dict writes are only validated
    (key fields, known keys), not coerced: what the database refuses fails the batch, and
    the writer replays it with ``careful=True``. ``reaping``: the batch is the reaper's, whose
    ``abandoned`` writes settle live calls whatever their status.
    """
    plan = BatchPlan()
    calls = plan.calls
    counts = plan.counts
    floors: list[TurnFloor] = []
    settled = SETTLED_STATUSES
    statuses = _STATUSES
    writable = WRITABLE_COLUMNS
    empty = _EMPTY_ROW
    for item in items:
        if item.__class__ is dict and not careful:
            write: dict[str, Any] = item  # pyright: ignore[reportAssignmentType]
            call_id = status = ""
            try:
                call_id = write["tool_call_id"]
                status = write["status"]
                tool = write["tool_name"]
                valid = (
                    call_id.__class__ is str
                    and tool.__class__ is str
                    and call_id
                    and tool
                    and status in statuses
                )
            except (KeyError, TypeError):
                valid = False
            if not valid:
                plan.invalid += 1
                continue
            if (
                "settle_seq" in write
                or "seq" in write
                or "updated_ns" in write
                or "duration_ms" in write
            ):
                write = {k: v for k, v in write.items() if k in writable}
            # (other unknown keys are dropped below, or by the row's tuple: checking every key
            # here would cost each write more than the rest of this check; a None session_id
            # fails the NOT NULL constraint: the careful replay fixes it)
        elif item.__class__ is Activity:
            activity = cast(Activity, item)
            at = counts.get(activity.session_id, 0)
            counts[activity.session_id] = at + 1
            plan.activities.append((activity, at))
            continue
        elif item.__class__ is TurnFloor:
            floors.append(cast(TurnFloor, item))
            continue
        elif item.__class__ is Dropped:
            plan.dropped.append(cast(Dropped, item))
            continue
        else:
            cleaned = _clean_write(cast(Mapping[str, Any], item), strip_nul=strip_nul, careful=True)
            if cleaned is None:
                plan.invalid += 1
                continue
            write = dict(cleaned)
            call_id = write["tool_call_id"]
            status = write["status"]
        call = calls.get(call_id)
        found = None
        if call is None:
            found = stored.get(call_id) if stored else None
            if found is not None and found[1]["status"] in settled and _other_span(found[1], write):
                call_id, write, call, found = _respan(plan, write, stored)
        elif call[_ROW]["status"] in settled and _other_span(call[_ROW], write):
            call_id, write, call, found = _respan(plan, write, stored)
        if call is None:
            if found is None:
                # A call never seen before (the common case).
                row = {**empty, **write}
                session = row["session_id"]
                at = counts.get(session, 0)
                if status in settled:
                    counts[session] = at + 2
                    call = [row, None, None, "label" in write, False, at, at + 1, session]
                else:
                    counts[session] = at + 1
                    call = [row, None, None, "label" in write, False, at, -1, None]
                calls[call_id] = call
                if row["start_ns"] is None:
                    end = row["end_ns"]
                    row["start_ns"] = end if end is not None else now_ns
                    call[_DEFAULTED] = True
                continue
            rid, loaded = found
            call = calls[call_id] = [dict(loaded), loaded, rid, True, False, -1, -1, None]
        else:
            row = call[_ROW]
            if (
                status in settled
                and row["status"] not in settled
                and "session_id" not in write
                and call[_SETTLE_AT] < 0
                and row["settle_seq"] is None
                and (status != _ABANDONED or row["status"] == _STREAMING or reaping)
            ):
                # The settle of a call started in this batch (the common case), inlined.
                row.update(write)
                call[_FRESH] = "label" in write
                if "start_ns" in write:
                    call[_DEFAULTED] = False
                session = row["session_id"]
                at = counts.get(session, 0)
                counts[session] = at + 1
                call[_SETTLE_AT] = at
                call[_SETTLE_IN] = session
                continue
        if not writable.issuperset(write):
            write = {k: v for k, v in write.items() if k in writable}
        _further(call, write, status, counts, reaping)
    _sessions(plan, floors)
    return plan


def _other_span(row: Mapping[str, Any], write: Mapping[str, Any]) -> bool:
    """Whether ``write`` comes from another tool span than the one ``row`` was written from."""
    span = write.get("span_id")
    if span is None:
        return False
    mine = row["span_id"]
    if mine is None:
        return False
    if mine != span:
        return True
    trace, theirs = write.get("trace_id"), row["trace_id"]
    return trace is not None and theirs is not None and trace != theirs


def _respan(
    plan: BatchPlan, write: dict[str, Any], stored: Mapping[str, tuple[Any, dict[str, Any]]]
) -> tuple[str, dict[str, Any], list[Any] | None, tuple[Any, dict[str, Any]] | None]:
    """``write`` moved to its span's own identity: (id, write, call in this batch, stored)."""
    plan.respanned.append(write["tool_call_id"])
    alt = anchor_id(None, trace_id=write.get("trace_id"), span_id=write["span_id"])
    write = {**write, "tool_call_id": alt}
    call = plan.calls.get(alt)
    found = None if call is not None or not stored else stored.get(alt)
    return alt, write, call, found


def span_identity(write: Mapping[str, Any]) -> str | None:
    """The id ``write`` would move to if its call id were taken (None: not from a span)."""
    span = write.get("span_id")
    if span is None or span.__class__ is not str:
        return None
    trace = write.get("trace_id")
    return anchor_id(None, trace_id=trace if trace.__class__ is str else None, span_id=span)


def _further(
    call: list[Any],
    write: dict[str, Any],
    status: str,
    counts: dict[str, int],
    reaping: bool = False,
) -> None:
    """A further write of a call (stored, or already seen in this batch)."""
    row: dict[str, Any] = call[_ROW]
    stored_status = row["status"]
    if stored_status == _ABANDONED and status in _APP_LIVE:
        # "abandoned" is our guess (a stream that stopped, a writer gone quiet), not the
        # app's word: the app starting or backgrounding the call after all replaces it.
        row["end_ns"] = row["error"] = row["settle_seq"] = None
        call[_SETTLE_AT], call[_SETTLE_IN] = -1, None
    elif (
        (stored_status in SETTLED_STATUSES and status in LIVE_STATUSES)
        or (status == _STREAMING and stored_status != _STREAMING)
        or (status == _ABANDONED and stored_status != _STREAMING and not reaping)
    ):
        # A late or replayed live write never un-settles a call, and a late stream-tap write
        # never rewinds a call its processor already started, backgrounded or settled (writers
        # in other processes race), nor abandons one the application took over: it only fills
        # gaps, and never in the label or what the label is made of.
        for key, value in write.items():
            if value is not None and row[key] is None and key not in _SETTLED_FINAL:
                row[key] = value
        return
    old_session = row["session_id"]
    row.update(write)
    call[_FRESH] = "label" in write  # every write carries a status: no label, resolve it
    if "start_ns" in write:
        call[_DEFAULTED] = False
    session = row["session_id"]
    if session != old_session:
        at = counts.get(session, 0)
        counts[session] = at + 1
        call[_SEQ_AT] = at
    if status in SETTLED_STATUSES and row["settle_seq"] is None and call[_SETTLE_AT] < 0:
        at = counts.get(session, 0)
        counts[session] = at + 1
        call[_SETTLE_AT] = at
        call[_SETTLE_IN] = session


def _sessions(plan: BatchPlan, floors: list[TurnFloor]) -> None:
    """Resolve labels and durations, and sum up what each session needs."""
    deltas = plan.sessions
    for session, slots in plan.counts.items():
        deltas[session] = SessionDelta(slots=slots)
    for call in plan.calls.values():
        row = call[_ROW]
        if not call[_FRESH] or row["label"] is None:
            row["label"] = frame_label(
                tool_name=row["tool_name"],
                status=row["status"],
                intent=row["intent"],
                outcome=row["outcome"],
            )
        start, end = row["start_ns"], row["end_ns"]
        if end is not None:
            if call[_DEFAULTED] and end < start:
                row["start_ns"] = start = end  # a writer that never said when the call started
            row["duration_ms"] = (end - start) / 1e6
        else:
            row["duration_ms"] = None
        session = row["session_id"]
        delta = deltas.get(session)
        if delta is None:
            delta = deltas[session] = SessionDelta()
        turn = row["turn"]
        if turn is not None and turn > delta.last_turn:
            delta.last_turn = turn
        if delta.first_ns is None or start < delta.first_ns:
            delta.first_ns = start
        last = end if end is not None else start
        if delta.last_ns is None or last > delta.last_ns:
            delta.last_ns = last
    for activity, _ in plan.activities:
        delta = deltas[activity.session_id]
        if activity.turn is not None and activity.turn > delta.last_turn:
            delta.last_turn = activity.turn
    for floor in floors:
        delta = deltas.get(floor.session_id)
        if delta is None:
            delta = deltas[floor.session_id] = SessionDelta()
        delta.last_turn = max(delta.last_turn, floor.turn)


def assign(plan: BatchPlan, bases: Mapping[str, int], *, updated_ns: int, version: int = 1) -> int:
    """Fill in the sequence numbers from the allocated ranges and build the row writes.

    ``bases[session]`` is the first number of the session's range. Each written row gets a
    distinct ``updated_ns`` from ``updated_ns`` upwards and its ``version`` from ``version``
    upwards (at most ``len(plan.calls)`` of each); returns the next unused ``updated_ns``.
    """
    stamp = updated_ns
    offset = version - updated_ns
    inserts = plan.inserts
    row_tuple = _ROW_TUPLE
    for call in plan.calls.values():
        row = call[_ROW]
        at = call[_SEQ_AT]
        if at >= 0:
            row["seq"] = bases[row["session_id"]] + at
        at = call[_SETTLE_AT]
        if at >= 0:
            row["settle_seq"] = bases[call[_SETTLE_IN]] + at
        stored = call[_STORED]
        if stored is None:
            row["updated_ns"] = stamp
            row["version"] = stamp + offset
            stamp += 1
            inserts.append(row_tuple(row))
            continue
        values = {c: v for c in _UPDATABLE if (v := row[c]) is not NOT_LOADED and v != stored[c]}
        if values:
            values["updated_ns"] = row["updated_ns"] = stamp
            values["version"] = row["version"] = stamp + offset
            stamp += 1
            plan.updates.append(Update(row["tool_call_id"], call[_RID], values))
    for activity, at in plan.activities:
        plan.blocks.append(
            (
                activity.session_id,
                activity.batch_id,
                activity.turn,
                activity.label,
                bases[activity.session_id] + at,
            )
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


def as_stored(row: Mapping[str, Any]) -> dict[str, Any]:
    """The stored state a lookup would load for a row planned here (``args``/``result`` as
    flags): the writer keeps the rows of its last batch, and reads back only their stamps."""
    loaded = dict(row)
    if loaded["args"] is not None:
        loaded["args"] = NOT_LOADED
    if loaded["result"] is not None:
        loaded["result"] = NOT_LOADED
    return loaded


def column_index(column: str) -> int:
    """Position of a column in ``ANCHOR_COLUMNS``."""
    return _COLUMN_INDEX[column]


def monotonic_ns(previous: int) -> int:
    """``time.time_ns()``, but strictly above ``previous`` (updated_ns never goes back)."""
    now = time.time_ns()
    return now if now > previous else previous + 1
