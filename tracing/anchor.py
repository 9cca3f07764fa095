"""The anchor: one compact, durable record per tool call (the ledger's row).

This module is the contract between the writers (span processor, OTLP receiver, importers,
stream taps, demo) and the readers (viewer, CLI, analytics, watcher). No OpenTelemetry here.

Columns of the ``anchors`` table, in this order (the documented schema for ``intentrace sql``):

==================  ========  ==============================================================
column              type      meaning
==================  ========  ==============================================================
tool_call_id        text PK   the anchor's own id (``anchor_id``: unique across sessions and turns)
session_id          text      conversation id (``gen_ai.conversation.id``/``session.id``), ''=none
seq                 integer   monotonic per session, assigned when the anchor is first written
settle_seq          integer   from the same per-session counter, assigned when it settles
turn                integer   turn of the session (>= 1), NULL if unknown
batch_id            text      sibling calls of one model step share it (default: parent span id)
parent_call_id      text      the tool call that spawned this one (subagents), NULL at top level
agent_id            text      agent name/id, NULL if unknown
tool_name           text      code-level tool name
intent              text      the intent as shown (redacted+sanitized), NULL when absent/hidden
outcome             text      resolved outcome text as shown, NULL when absent/hidden
label               text      resolved label (``tracing.status.frame_label``)
status              text      streaming|in_flight|success|error|cancelled|background|abandoned
start_ns            integer   start, unix epoch nanoseconds
end_ns              integer   end, NULL while live
duration_ms         real      (end_ns - start_ns) / 1e6, NULL while live
trace_id            text      32 hex chars, NULL when unknown (e.g. still streaming)
span_id             text      16 hex chars, NULL when unknown
error               text      error/exception message (scrubbed), NULL
args                text      JSON of the args as the policy left them (intent stripped), NULL
result              text      JSON/text of the result as the policy left it, NULL
redaction           text      JSON: {"args": action, "output": action, "intent_hidden": bool,
                              "outcome_hidden": bool, "scrubbed": count}
updated_ns          integer   last write, unix epoch nanoseconds (the writer's clock)
provider_call_id    text      the provider's tool call id (not unique: ``call_0`` restarts), NULL
version             integer   row version: from the database's one counter, at every write, in
                              commit order (what the analytics copy syncs on, never a clock)
user_id             text      the end user the call ran for (``session(..., user_id=)``,
                              ``langfuse.user.id``, ``user.id``), redacted like any attribute, NULL
tags                text      JSON array of the trace's tags (``langfuse.trace.tags``,
                              ``tag.tags``), sorted, without our own, NULL when none
==================  ========  ==============================================================

**Identity** (docs/ledger.md, "Anchor identity"): ``tool_call_id`` is ``anchor_id(...)`` of the
call: a hash of (session, turn, provider call id) when the provider gave an id, else of the tool
span's (trace id, span id). Every writer computes it from what it knows of the call, so the
processor, ``collect``/``import`` and a stream tap meet in one row; a span's write for an anchor
already settled under another span is another call that reused the provider id, and is stored
under its span identity instead.

Other tables: ``sessions`` (session_id PK, next_seq, last_turn, first_ns, last_ns),
``blocks`` (session_id, batch_id PK together, turn, activity_label, seq),
``dropped`` (session_id, source PK together, count, first_ns, last_ns: what was lost before
reaching the ledger, see ``Ledger.record_dropped``), ``schema_migrations`` (name PK, applied_ns),
``ledger_clock`` (one row: ``next_version``).

``sessions.next_seq`` is the next number the session's counter hands out (``seq``,
``settle_seq`` and ``blocks.seq`` all come from it, so they interleave in event order);
``last_turn`` is the highest turn handed out by ``next_turn`` or written on an anchor (0: none);
``first_ns``/``last_ns`` are the earliest start and the latest start/end seen. ``blocks`` rows
exist only for blocks that got an activity label (``Ledger.set_activity``); ``blocks.seq`` is
taken from the session counter when the label is set.

Indexes (what the readers need, and nothing that makes every write pay for a rare read):

================================  ==============================================================
index                             used by
================================  ==============================================================
anchors (tool_call_id) unique     upserts, ``anchor(id)`` (SQLite: the rowid table's PK index)
anchors (session_id, seq)         ``session_anchors``, ``checkpoints``, ``blocks``, session stats
anchors (updated_ns)              ``changed_since`` (the watcher and the live viewer poll it)
anchors (version)                 the analytics copy's sync (``version > ?``)
anchors (provider_call_id)        ``anchors_by_provider_id`` (partial: rows with a provider id)
anchors (status, start_ns)        ``in_flight``: a partial index over live rows only (tiny)
sessions (last_ns)                ``sessions()`` ordered by last activity
================================  ==============================================================

Search by intent/outcome/label text is a case-insensitive substring scan (no trigram or
full-text index: either would cost every write for a rare read); filters by agent/tool/status
in ``sessions()`` scan too. Analytics over many rows should read a copy (DuckDB), see
docs/analytics.md.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Iterable
from typing import Any, Final, Literal, NotRequired, Protocol, TypedDict, cast

from tracing.status import Status

ANCHOR_COLUMNS: Final[tuple[str, ...]] = (
    "tool_call_id",
    "session_id",
    "seq",
    "settle_seq",
    "turn",
    "batch_id",
    "parent_call_id",
    "agent_id",
    "tool_name",
    "intent",
    "outcome",
    "label",
    "status",
    "start_ns",
    "end_ns",
    "duration_ms",
    "trace_id",
    "span_id",
    "error",
    "args",
    "result",
    "redaction",
    "updated_ns",
    "provider_call_id",
    "version",
    "user_id",
    "tags",
)

ANCHOR_ID_CHARS: Final = 24
"""Length of an ``anchor_id`` (hex)."""


def safe_id(value: str) -> str:
    """``value`` with every lone surrogate replaced by ``?``: an id (call, session, batch,
    agent) that a database, a UTF-8 encoder or a JSON reader can take. Python strings may
    hold lone surrogates (a JSON escape of half a pair, ``surrogateescape`` decoding); no
    database text type does. Writers coerce ids with it, as labels are sanitized; text that
    encodes is returned as it is."""
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "replace").decode("utf-8")
    return value


def anchor_id(
    provider_call_id: str | None,
    *,
    session_id: str | None = None,
    turn: int | None = None,
    trace_id: str | None = None,
    span_id: str | None = None,
) -> str:
    """The identity of one tool call: what every writer puts in ``tool_call_id``.

    With a provider call id: a hash of (session, turn, provider id): ``call_0`` in another turn
    or session is another anchor, and a stream tap (which knows the session and turn but no
    span) and the span processor (which knows both) get the same id. Without one: a hash of the
    tool span's (trace id, span id), unique by construction. 24 hex characters (96 bits).
    ``session_id`` ``None`` and ``''`` are the same (no session), as in the ledger.
    """
    if provider_call_id:
        key = (
            f"p\x1f{session_id or ''}\x1f{'' if turn is None else int(turn)}\x1f{provider_call_id}"
        )
    else:
        key = f"s\x1f{trace_id or ''}\x1f{span_id or ''}"
    # (ids as stored: a lone surrogate hashes as the ``?`` every writer stores for it)
    return hashlib.blake2b(safe_id(key).encode("utf-8"), digest_size=12).hexdigest()


MAX_TAGS: Final = 32
"""Most tags kept per call (the first ones, sorted)."""
MAX_TAG_CHARS: Final = 200


def tags_text(tags: Iterable[str]) -> str | None:
    """The ``tags`` column for these tags: a JSON array, deduplicated and sorted, each tag made
    one line (control characters become spaces, trimmed, at most ``MAX_TAG_CHARS``); None when
    none is left. ``tag_pattern`` finds one tag in it exactly."""
    kept: set[str] = set()
    for tag in tags:
        one = "".join(" " if unicodedata.category(c)[0] == "C" else c for c in safe_id(tag))
        one = " ".join(one.split())[:MAX_TAG_CHARS]
        if one:
            kept.add(one)
    if not kept:
        return None
    return json.dumps(sorted(kept)[:MAX_TAGS], ensure_ascii=False, separators=(",", ":"))


def tag_list(text: str | None) -> list[str]:
    """The tags of a ``tags`` column value ([] for NULL or what is not a JSON list)."""
    if not text:
        return []
    try:
        value = json.loads(text)
    except ValueError:
        return []
    if not isinstance(value, list):
        return []
    return [t for t in cast("list[Any]", value) if isinstance(t, str)]


def tag_patterns(tag: str) -> tuple[str, str]:
    """Two substrings of which a ``tags`` value (as ``tags_text`` writes it) contains one
    exactly when ``tag`` is one of its tags: the tag's JSON string after ``[`` or ``,``.
    Inside a JSON string a quote is always escaped, so an unescaped quote after ``[``/``,``
    starts an element, and the encoding's closing quote ends it."""
    encoded = json.dumps(tag, ensure_ascii=False)
    return "[" + encoded, "," + encoded


class AnchorWrite(TypedDict):
    """What a writer hands to ``Ledger.record``: a full or partial anchor keyed by tool_call_id.

    ``tool_call_id`` is the anchor's identity (``anchor_id``); ``provider_call_id`` the
    provider's id, kept as data. ``seq``/``settle_seq``/``updated_ns``/``version`` are assigned
    by the ledger, never by writers. A write from a tool span (``trace_id`` and ``span_id``
    given) for an anchor settled under another span is another call that reused the provider
    id: it is stored under ``anchor_id(None, trace_id=..., span_id=...)``. A
    write for an id already present updates it in place (idempotent upsert): fields absent
    from the write keep their stored value; a settled status is never overwritten by a live one
    (a late or replayed in-flight write cannot un-settle a call: it only fills columns still
    NULL, never ``label``/``intent``/``outcome``). Repeated settles: the last one wins,
    ``settle_seq`` keeps the first. ``label`` absent: resolved with ``frame_label`` from the
    stored fields. A write that changes nothing writes nothing (``updated_ns`` stays).
    A ``streaming`` write (a stream tap) for a call already past streaming (in flight, in the
    background, settled) never rewinds it: it too only fills columns still NULL, never the
    status, ``label``, ``intent`` or ``outcome``. So one row goes streaming -> in flight ->
    settled whatever order the writers' updates arrive in. An ``abandoned`` write (a stream
    tap whose stream stopped mid-arguments) settles a call only while it is ``streaming``: for a
    call the application took over (in flight, in the background, settled) it too only fills
    gaps (only the ledger's reaper abandons a live call that went stale).
    """

    tool_call_id: str
    tool_name: str
    status: Status
    provider_call_id: NotRequired[str | None]
    session_id: NotRequired[str]
    turn: NotRequired[int | None]
    batch_id: NotRequired[str | None]
    parent_call_id: NotRequired[str | None]
    agent_id: NotRequired[str | None]
    intent: NotRequired[str | None]
    outcome: NotRequired[str | None]
    label: NotRequired[str]
    start_ns: NotRequired[int]
    end_ns: NotRequired[int | None]
    trace_id: NotRequired[str | None]
    span_id: NotRequired[str | None]
    error: NotRequired[str | None]
    args: NotRequired[str | None]
    result: NotRequired[str | None]
    redaction: NotRequired[str | None]
    user_id: NotRequired[str | None]
    tags: NotRequired[str | None]


class Anchor(TypedDict):
    """A stored anchor as the read API returns it (every column)."""

    tool_call_id: str
    session_id: str
    seq: int
    settle_seq: int | None
    turn: int | None
    batch_id: str | None
    parent_call_id: str | None
    agent_id: str | None
    tool_name: str
    intent: str | None
    outcome: str | None
    label: str
    status: Status
    start_ns: int
    end_ns: int | None
    duration_ms: float | None
    trace_id: str | None
    span_id: str | None
    error: str | None
    args: str | None
    result: str | None
    redaction: str | None
    updated_ns: int
    provider_call_id: str | None
    version: int
    user_id: str | None
    tags: str | None
    """JSON array text (``tracing.anchor.tag_list`` reads it)."""


ColumnType = Literal["text", "integer", "real"]

COLUMN_TYPES: Final[dict[str, ColumnType]] = {
    "tool_call_id": "text",
    "session_id": "text",
    "seq": "integer",
    "settle_seq": "integer",
    "turn": "integer",
    "batch_id": "text",
    "parent_call_id": "text",
    "agent_id": "text",
    "tool_name": "text",
    "intent": "text",
    "outcome": "text",
    "label": "text",
    "status": "text",
    "start_ns": "integer",
    "end_ns": "integer",
    "duration_ms": "real",
    "trace_id": "text",
    "span_id": "text",
    "error": "text",
    "args": "text",
    "result": "text",
    "redaction": "text",
    "updated_ns": "integer",
    "provider_call_id": "text",
    "version": "integer",
    "user_id": "text",
    "tags": "text",
}
"""SQL type class of each anchor column (the migrations render it per database)."""

NOT_NULL_COLUMNS: Final[frozenset[str]] = frozenset(
    {
        "tool_call_id",
        "session_id",
        "seq",
        "tool_name",
        "label",
        "status",
        "start_ns",
        "updated_ns",
        "version",
    }
)

WRITABLE_COLUMNS: Final[frozenset[str]] = frozenset(AnchorWrite.__annotations__)
"""Keys a writer may put in an ``AnchorWrite`` (others are ignored)."""


class SessionInfo(TypedDict):
    """One row of ``Ledger.sessions()``."""

    session_id: str
    calls: int
    """Anchors in the session."""
    errors: int
    """Anchors with status ``error``."""
    in_flight: int
    """Anchors not settled yet (``streaming``, ``in_flight``, ``background``)."""
    agents: list[str]
    tools: list[str]
    users: list[str]
    """The end users of its calls (``user_id``), sorted."""
    tags: list[str]
    """The tags of its calls, sorted."""
    first_ns: int | None
    last_ns: int | None
    """Last activity: the latest start or end of a call in the session."""
    last_turn: int | None
    dropped: int
    """Tool calls of the session a span processor shed under load (anchor missing or settled
    without outcome; ``Ledger.dropped``), 0 when none."""


class DroppedInfo(TypedDict):
    """One row of ``Ledger.dropped()``: what was lost before reaching the ledger."""

    session_id: str
    """'' when the calls had no session."""
    source: str
    """``processor``: tool calls shed by a span processor under load; ``ledger``: anchor writes
    dropped because the ledger's queue was full."""
    count: int
    first_ns: int
    last_ns: int


class BlockInfo(TypedDict):
    """A block of sibling calls (one model step) of a session, as ``Ledger.blocks()`` returns it."""

    session_id: str
    batch_id: str
    turn: int | None
    activity_label: str | None
    """The block-level activity label set by the app (``Ledger.set_activity``), if any."""
    seq: int
    """The smallest ``seq`` of the block's calls (or the label's seq when it has no calls yet)."""


class LedgerSink(Protocol):
    """Where anchors go (``tracing.ledger.Ledger`` satisfies it). Must not block or raise."""

    def record(self, write: AnchorWrite) -> None: ...

    def set_activity(
        self, session_id: str, batch_id: str, label: str, *, turn: int | None = None
    ) -> None: ...
