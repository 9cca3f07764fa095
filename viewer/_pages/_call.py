"""The call detail of the Session page: everything stored about one call, as stored (plain
text, a JSON viewer, code blocks), with the previous/next call, a link to copy, and a link out
to the call's trace in the user's tracing backend (``$INTENTRACE_TRACE_URL``, ``intentrace view
--trace-url``)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Final, cast

import streamlit as st

from tracing.ledger import Anchor
from tracing.status import LIVE_STATUSES
from viewer import _data
from viewer._links import app_root, session_link, trace_url
from viewer._story import Story, call_label, format_duration
from viewer._text import block as plain
from viewer._text import one_line, structure
from viewer._ui import STATUS_WORDS, link_to_call

MAX_PAYLOAD_CHARS: Final = 200_000
"""Args/results longer than this are shown cut (the ledger keeps them whole)."""


def _when(ns: int | None) -> str:
    if ns is None:
        return "—"
    return datetime.fromtimestamp(ns / 1e9).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _redaction_text(raw: str | None) -> str | None:
    if not raw:
        return None
    try:
        data: Any = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    fields = cast("dict[str, Any]", data)
    parts: list[str] = []
    for what in ("args", "output"):
        action = fields.get(what)
        if action and action != "keep":
            parts.append(f"{what}: {action}")
    if fields.get("intent_hidden"):
        parts.append("intent hidden by policy")
    if fields.get("outcome_hidden"):
        parts.append("outcome hidden by policy")
    scrubbed = fields.get("scrubbed")
    if isinstance(scrubbed, int) and scrubbed:
        parts.append(f"{scrubbed} secret{'s' if scrubbed != 1 else ''} scrubbed")
    return " · ".join(str(p) for p in parts) or None


def _payload(title: str, raw: str | None) -> None:
    st.caption(title)
    if raw is None:
        st.text("(not stored)")
        return
    cut = len(raw) > MAX_PAYLOAD_CHARS
    text = raw[:MAX_PAYLOAD_CHARS]
    if not cut:
        try:
            value: Any = json.loads(text)
        except ValueError:
            value = None
        if isinstance(value, dict | list):
            st.json(structure(value), expanded=2)
            return
    st.code(plain(text), language=None, wrap_lines=True)
    if cut:
        st.caption(f"Cut at {MAX_PAYLOAD_CHARS:,} of {len(raw):,} characters.")


def detail(url: str, story: Story, call_id: str) -> None:
    """Everything stored about one call of ``story``, under its row."""
    anchor = _data.call(url, call_id)
    if anchor is None:
        st.caption("This call is no longer in the ledger.")
        return
    _detail_body(anchor, story)


def _detail_body(a: Anchor, story: Story) -> None:
    status = a["status"]
    facts = [
        f"Status: {STATUS_WORDS.get(status, status)} ({status})",
        f"Tool: {one_line(a['tool_name'], 200)}",
        f"Agent: {one_line(a['agent_id'], 200) or '—'}",
        f"Turn: {a['turn'] if a['turn'] is not None else '—'}",
        f"Sequence: {a['seq']}"
        + (f" · settled at {a['settle_seq']}" if a["settle_seq"] is not None else ""),
        f"Started: {_when(a['start_ns'])}",
        f"Ended: {_when(a['end_ns'])}",
        f"Duration: {format_duration(a['duration_ms']) or '—'}",
        f"Call id: {one_line(a['tool_call_id'], 200)}",
    ]
    if a["batch_id"]:
        facts.append(f"Block: {one_line(a['batch_id'], 200)}")
    parent = a["parent_call_id"]
    if a["trace_id"]:
        facts.append(
            f"Trace: {one_line(a['trace_id'], 200)}  span: {one_line(a['span_id'], 200) or '—'}"
        )
    redaction = _redaction_text(a["redaction"])
    if redaction:
        facts.append(f"Redaction: {redaction}")
    with st.container(border=True, key="call-detail"):
        _moves(a, story)
        st.caption("Label")
        st.text(plain(call_label(a)))
        if a["intent"]:
            st.caption("Intent")
            st.text(plain(a["intent"]))
        elif status not in LIVE_STATUSES or a["redaction"]:
            st.caption("Intent")
            st.text("(none: the call carries no visible intent)")
        if a["outcome"]:
            st.caption("Outcome")
            st.text(plain(a["outcome"]))
        st.text("\n".join(facts))
        if parent:
            with st.container(horizontal=True, vertical_alignment="center"):
                st.text("Spawned by: " + one_line(parent, 200), wrap=False, width="content")
                link_to_call(a["session_id"], parent, label="Open the spawning call")
        if a["error"]:
            st.caption("Error")
            st.code(plain(a["error"]), language=None, wrap_lines=True)
        _payload("Arguments (as the redaction policy left them)", a["args"])
        _payload("Result (as the redaction policy left it)", a["result"])
        _links(a)


def _moves(a: Anchor, story: Story) -> None:
    """Previous and next call of the session (``seq`` order), as links: the URL follows."""
    before, after = story.neighbours(a["tool_call_id"])
    with st.container(horizontal=True, vertical_alignment="center", key="call-moves"):
        if before is not None:
            link_to_call(a["session_id"], before.id, label="Previous call")
        if after is not None:
            link_to_call(a["session_id"], after.id, label="Next call")


def _links(a: Anchor) -> None:
    """The call's shareable link (copy button on the code block) and its trace, if known."""
    link = session_link(app_root(st.context.url), a["session_id"], a["tool_call_id"])
    st.caption("Link to this call (copy it with the button at the right)")
    st.code(link, language=None)
    template = _data.trace_url_template()
    out = trace_url(template, a["trace_id"], a["span_id"]) if template else None
    if out is not None:
        st.link_button("Open the trace in your tracing backend", out, icon=":material/open_in_new:")
