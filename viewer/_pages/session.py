"""The Session page: one session read as a story, its timeline, its checkpoints, call detail.

``?session=<id>&anchor=<toolCallId>`` opens the session on the page that shows the call, with
the call highlighted, its detail open and scrolled into view.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any, Final, cast

import altair as alt
import pandas as pd
import streamlit as st

from tracing.ledger import Anchor, SessionInfo
from tracing.status import LIVE_STATUSES, STATUSES, Status
from viewer import _data
from viewer._story import (
    Block,
    Story,
    call_label,
    count_text,
    format_duration,
    turns,
)
from viewer._text import block as plain
from viewer._text import one_line, short_label, structure
from viewer._ui import (
    ANCHOR_PARAM,
    SESSION_PARAM,
    STATUS_WORDS,
    StoryView,
    call_key,
    focus,
    link_to_call,
    page,
    story_block,
)

MAX_PAYLOAD_CHARS: Final = 200_000
"""Args/results longer than this are shown cut (the ledger keeps them whole)."""
TIMELINE_ROW_PX: Final = 20
FOLLOW_S: Final = 1.5
"""How often the page asks the ledger whether its session was written since it was drawn."""
LIVE_TICK_S: Final = 5.0
"""While calls are live, the page is drawn again at least this often (their running times)."""
_NEWEST_KEY: Final = "_intentrace_session_newest"
"""The ledger's newest row version when the page last looked (per browser tab)."""

STATUS_COLORS: Final[dict[Status, str]] = {
    Status.STREAMING: "#f59e0b",
    Status.IN_FLIGHT: "#3b82f6",
    Status.BACKGROUND: "#8b5cf6",
    Status.SUCCESS: "#22c55e",
    Status.ERROR: "#ef4444",
    Status.CANCELLED: "#9ca3af",
    Status.ABANDONED: "#6b7280",
}


def _param(name: str) -> str | None:
    value = st.query_params.get(name)
    return value if value else None


def render() -> None:
    """The Session page (it follows its session while it is written: ``_follow``)."""
    url = _data.ledger_url()
    anchor = _param(ANCHOR_PARAM)
    session_id = _param(SESSION_PARAM)
    st.title("Session")
    try:
        if session_id is None and anchor is not None:
            session_id = _data.session_of(url, anchor)
            if session_id is None:
                st.warning("The ledger has no call with this id:", icon=":material/search_off:")
                st.text(one_line(anchor, 200))
                _back_to_sessions()
                return
        if session_id is None:
            session_id = _data.latest_session(url)
        # read before the story: what is drawn is at least this new
        newest = _data.last_version(url)
        seen = _data.last_version(url, session_id) if session_id is not None else newest
        info = _data.session_info(url, session_id) if session_id is not None else None
    except _data.LedgerError as exc:
        _ledger_error(exc)
        return

    st.session_state[_NEWEST_KEY] = newest
    if session_id is None:
        st.info("The ledger has no sessions yet. Record some calls, or run `intentrace demo`.")
        _follow(url, None, seen, 0.0)  # the first session to be written opens here
        return
    if info is None:
        st.warning("The ledger has no session with this id:", icon=":material/search_off:")
        st.text(one_line(session_id, 200))
        st.caption("This page shows the session as soon as its first call is written.")
        _back_to_sessions()
        _follow(url, session_id, seen, 0.0)
        return
    # The URL names what is shown (also after an in-page link, which does not update it).
    st.query_params[SESSION_PARAM] = session_id
    if anchor is not None:
        st.query_params[ANCHOR_PARAM] = anchor
    _session(url, session_id, anchor, info)
    _follow(url, session_id, seen, time.monotonic() if info["in_flight"] else 0.0)


@st.fragment(run_every=FOLLOW_S)
def _follow(url: str, session_id: str | None, seen: int, live_since: float) -> None:
    """Rerun the page when its session was written since it was drawn (``seen``: the session's
    newest row version then; for no session, every call's), or, while calls are live, every
    ``LIVE_TICK_S`` (their running times). Cheap when nothing changed: one read of the end of
    the ledger's version index; the session's own version is asked only when that moved."""
    try:
        newest = _data.last_version(url)
        if newest == st.session_state.get(_NEWEST_KEY) and not _tick_due(live_since):
            return
        st.session_state[_NEWEST_KEY] = newest
        now = newest if session_id is None else _data.last_version(url, session_id)
    except _data.LedgerError:
        return  # the next full run says so
    if now != seen or _tick_due(live_since):
        st.rerun(scope="app")


def _tick_due(live_since: float) -> bool:
    return bool(live_since) and time.monotonic() - live_since >= LIVE_TICK_S


def _back_to_sessions() -> None:
    target = page("sessions")
    if target is not None:
        st.page_link(target, label="Back to the sessions", icon=":material/list:")


def _ledger_error(exc: Exception) -> None:
    st.error("The ledger cannot be read.")
    st.code(str(exc), language=None)


def _session(url: str, session_id: str, anchor: str | None, info: SessionInfo) -> None:
    try:
        story = _data.story(url, session_id, info)
    except _data.LedgerError as exc:
        _ledger_error(exc)
        return
    if anchor is not None and anchor not in story.calls:
        st.warning("The linked call is not part of this session:")
        st.text(anchor)
        anchor = None
    _summary(url, info, story)
    _story_tabs(url, story, anchor)
    if anchor is not None:
        focus(anchor)


def _summary(url: str, info: SessionInfo, story: Story) -> None:
    st.text(one_line(story.session_id or "(no session)", 200), wrap=False)
    with st.container(horizontal=True):
        st.metric("Calls", info["calls"])
        st.metric("Errors", info["errors"])
        st.metric("Live", info["in_flight"])
        st.metric("Turns", info["last_turn"] or 0)
        st.metric("Agents", len(info["agents"]))
        if story.start_ns is not None and story.end_ns is not None:
            st.metric("Duration", format_duration((story.end_ns - story.start_ns) / 1e6) or "0 ms")
    if info["agents"]:
        st.text("Agents: " + one_line(", ".join(info["agents"]), 300), wrap=False)
    if info["dropped"]:
        for note in _data.dropped_lines(url, story.session_id):
            st.warning(note, icon=":material/warning:")


def _story_tabs(url: str, story: Story, anchor: str | None) -> None:
    number = _page_number(story, anchor)
    blocks = story.page_blocks(number)
    story_tab, timeline_tab, checkpoints_tab = st.tabs(["Story", "Timeline", "Checkpoints"])
    now_ns = time.time_ns()
    with story_tab:
        _story(url, story, blocks, anchor, now_ns)
    with timeline_tab:
        _timeline(story, blocks, now_ns)
    with checkpoints_tab:
        _checkpoints(story)


def _page_number(story: Story, anchor: str | None) -> int:
    """0-based page to show: the linked call's page when a link names one, else the reader's.

    The pagination widget's key includes the linked call, so following a new link starts a
    new widget on that call's page, while paging by hand keeps working.
    """
    pages = max(1, len(story.pages))
    if pages == 1:
        return 0
    wanted = story.page_of(anchor) or 0
    digest = call_key(f"{story.session_id}\x00{anchor or ''}")[5:]
    with st.container(horizontal=True, vertical_alignment="center"):
        number = st.pagination(pages, default=wanted + 1, key=f"story-page-{digest}")
        start, end = story.pages[number - 1]
        shown = sum(b.size for b in story.blocks[start:end])
        st.caption(f"Page {number} of {pages} · {shown} of {story.total} calls")
    return number - 1


def _story(url: str, story: Story, blocks: list[Block], anchor: str | None, now_ns: int) -> None:
    if not blocks:
        st.info("This session has no calls yet.")
        return
    opened = frozenset(story.ancestors(anchor)) if anchor else frozenset[str]()
    view = StoryView(
        story=story,
        now_ns=now_ns,
        anchor=anchor,
        opened=opened,
        detail=lambda call_id: _detail(url, call_id),
    )
    for turn, turn_blocks in turns(blocks):
        st.subheader(f"Turn {turn}" if turn is not None else "Calls outside a turn")
        for block in turn_blocks:
            story_block(view, block)


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


def _detail(url: str, call_id: str) -> None:
    """Everything stored about one call, as stored (plain text, JSON viewer, code blocks)."""
    anchor = _data.call(url, call_id)
    if anchor is None:
        st.caption("This call is no longer in the ledger.")
        return
    _detail_body(anchor)


def _detail_body(a: Anchor) -> None:
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


def _timeline_frame(story: Story, blocks: list[Block], now_ns: int) -> pd.DataFrame:
    origin = story.start_ns or 0
    rows: list[dict[str, Any]] = []
    for block in blocks:
        for top in block.calls:
            for call in top.walk():
                end = call.end_ns if call.end_ns is not None else max(now_ns, call.start_ns)
                rows.append(
                    {
                        "row": f"{call.seq:09d}",
                        "label": ("↳ " * call.depth) + short_label(call.label, 60),
                        "full": one_line(call.line, 300),
                        "tool": one_line(call.tool_name, 80),
                        "status": call.status,
                        "start_s": (call.start_ns - origin) / 1e9,
                        "end_s": max((end - origin) / 1e9, (call.start_ns - origin) / 1e9),
                        "duration": format_duration(call.duration_ms)
                        or STATUS_WORDS.get(call.status, ""),
                        "seq": call.seq,
                    }
                )
    rows.sort(key=lambda r: r["seq"])
    return pd.DataFrame(rows)


def _timeline(story: Story, blocks: list[Block], now_ns: int) -> None:
    """One row per call (keyed by its sequence number, so identical labels never merge)."""
    frame = _timeline_frame(story, blocks, now_ns)
    if frame.empty:
        st.info("No calls to draw.")
        return
    y = alt.Y("row:N", sort=None, axis=None)
    base = alt.Chart(frame).encode(y=y)
    names = base.mark_text(align="left", baseline="middle", limit=420, fontSize=12).encode(
        x=alt.value(0), text=alt.Text("label:N")
    )
    bars = base.mark_bar(cornerRadius=2, height={"band": 0.7}).encode(
        x=alt.X("start_s:Q", title="seconds since the session started"),
        x2="end_s:Q",
        color=alt.Color(
            "status:N",
            scale=alt.Scale(domain=list(STATUSES), range=[STATUS_COLORS[s] for s in STATUSES]),
            legend=alt.Legend(orient="top", title=None),
        ),
        tooltip=[
            alt.Tooltip("full:N", title="call"),
            alt.Tooltip("tool:N"),
            alt.Tooltip("status:N"),
            alt.Tooltip("duration:N"),
            alt.Tooltip("seq:Q", title="sequence"),
        ],
    )
    height = alt.Step(TIMELINE_ROW_PX)
    chart = alt.hconcat(
        names.properties(width=430, height=height),
        bars.properties(width=520, height=height),
        spacing=6,
    ).resolve_scale(y="shared")  # pyright: ignore[reportUnknownMemberType]  # altair's **kwds are untyped
    st.altair_chart(chart, width="content")
    st.caption(f"{count_text(len(frame))} on this page, one row each, in sequence order.")


def _checkpoints(story: Story) -> None:
    """Settled calls as labelled rewind points; selecting one opens it in the story."""
    rows = story.checkpoints()
    if not rows:
        st.info("No call of this session has settled yet.")
        return
    frame = pd.DataFrame(
        {
            "seq": [c.seq for c in rows],
            "turn": [c.turn for c in rows],
            "checkpoint": [short_label(c.label, 200) for c in rows],
            "tool": [one_line(c.tool_name, 80) for c in rows],
            "status": [c.status for c in rows],
            "duration": [format_duration(c.duration_ms) for c in rows],
        }
    )
    st.caption("Settled calls in order. Select one to open it in the story.")
    picked = st.dataframe(  # pyright: ignore[reportUnknownMemberType]  # streamlit's signature names pyarrow's Array without its type argument
        frame,
        hide_index=True,
        width="stretch",
        on_select="rerun",
        selection_mode="single-row",
        key="checkpoints_table",
    )
    chosen = picked.selection.rows
    if chosen:
        target = rows[chosen[0]].id
        del st.session_state["checkpoints_table"]
        st.query_params[ANCHOR_PARAM] = target
        st.rerun()


__all__ = ["render"]
