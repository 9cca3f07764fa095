"""The anchor: one compact, durable record per tool call (the ledger's row).

This module is the contract between the writers (span processor, OTLP receiver, importers,
stream taps, demo) and the readers (viewer, CLI, analytics, watcher). No OpenTelemetry here.

Columns of the ``anchors`` table, in this order (the documented schema for ``intentrace sql``):

==================  ========  ==============================================================
column              type      meaning
==================  ========  ==============================================================
tool_call_id        text PK   the provider's tool call id, else ``<trace_id>:<span_id>``
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
label               text      resolved label (``tracing._status.frame_label``)
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
updated_ns          integer   last write, unix epoch nanoseconds
==================  ========  ==============================================================

Other tables: ``sessions`` (session_id PK, next_seq, last_turn, first_ns, last_ns),
``blocks`` (session_id, batch_id PK together, turn, activity_label, seq),
``schema_migrations`` (name PK, applied_ns).
"""

from __future__ import annotations

from typing import Final, NotRequired, TypedDict

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
)


class AnchorWrite(TypedDict):
    """What a writer hands to ``Ledger.record``: a full or partial anchor keyed by tool_call_id.

    ``seq``/``settle_seq``/``updated_ns`` are assigned by the ledger, never by writers. A
    write for an id already present updates it in place (idempotent upsert): fields absent
    from the write keep their stored value; a settled status is never overwritten by a live one
    (a late or replayed in-flight write cannot un-settle a call).
    """

    tool_call_id: str
    tool_name: str
    status: str
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
    status: str
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
