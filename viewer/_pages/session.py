"""The Session page: one session read as a story, its timeline, its checkpoints, call detail.

``?session=<id>&anchor=<toolCallId>`` opens the session on the page that shows the call, with
the call highlighted, its detail open and scrolled into view.
"""

from __future__ import annotations

import time
from typing import Any, Final, cast

import altair as alt
import pandas as pd
import streamlit as st

from tracing import INTENT_MAX_CHARS
from tracing.ledger import SessionInfo
from tracing.status import STATUSES, Status
from viewer import _data
from viewer._links import ANCHOR_PARAM, SESSION_PARAM, TURN_PARAM, app_root, session_link
from viewer._pages._call import detail
from viewer._story import (
    Block,
    CallFilter,
    Story,
    count_text,
    format_duration,
    page_holding,
    paginate,
    turns,
)
from viewer._text import one_line, short_label
from viewer._ui import (
    STATUS_WORDS,
    StoryView,
    call_key,
    focus,
    page,
    scroll_to,
    story_block,
)

TIMELINE_ROW_PX: Final = 20
_PICK: Final = "pick"
"""The timeline's point selection: a click on a bar opens that call."""
_TIMELINE_KEY: Final = "timeline_chart"
_STORY_TAB: Final = "Story"
_TIMELINE_TAB: Final = "Timeline"
_CHECKPOINTS_TAB: Final = "Checkpoints"
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
        seen = (
            (_data.last_version(url, session_id), _data.session_counter(url, session_id))
            if session_id is not None
            else (newest, 0)
        )
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
def _follow(url: str, session_id: str | None, seen: tuple[int, int], live_since: float) -> None:
    """Rerun the page when its session was written since it was drawn (``seen``: the session's
    newest row version and its counter then; for no session, every call's newest version), or,
    while calls are live, every ``LIVE_TICK_S`` (their running times). Cheap when nothing
    changed: one read of the end of the ledger's version index and one of the session's row
    (its counter: an activity label set after the last call's write moves it, no version
    does); the session's own version is asked only when the ledger's moved."""
    try:
        newest = _data.last_version(url)
        counter = 0 if session_id is None else _data.session_counter(url, session_id)
        if (
            newest == st.session_state.get(_NEWEST_KEY)
            and counter == seen[1]
            and not _tick_due(live_since)
        ):
            return
        st.session_state[_NEWEST_KEY] = newest
        version = newest if session_id is None else _data.last_version(url, session_id)
    except _data.LedgerError:
        return  # the next full run says so
    if (version, counter) != seen or _tick_due(live_since):
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
    where, turn = _controls(story)
    _story_tabs(url, story, anchor, where, turn)
    if anchor is not None:
        focus(anchor)
    elif turn is not None:
        scroll_to(_turn_key(story, turn))


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
    with st.popover("Link to this session", icon=":material/link:"):
        st.code(session_link(app_root(st.context.url), story.session_id), language=None)


def _digest(story: Story) -> str:
    return call_key(story.session_id)[5:]


def _controls(story: Story) -> tuple[CallFilter, int | None]:
    """Search inside the session (text, tool, status, errors only) and jump to a turn."""
    digest = _digest(story)
    tools = sorted({c.tool_name for c in story.calls.values()})
    numbers = [t for t in story.turn_numbers() if t is not None]
    with st.container(horizontal=True, vertical_alignment="bottom", key="session-find"):
        text = st.text_input(
            "Search this session",
            key=f"find-text-{digest}",
            placeholder="words of a label, intent, tool or call id",
        )
        tool = st.selectbox(
            "Tool",
            [None, *tools],
            format_func=lambda t: "(any)" if t is None else one_line(t, 60),
            key=f"find-tool-{digest}",
        )
        status = st.selectbox(
            "Status",
            [None, *STATUSES],
            format_func=lambda s: "(any)" if s is None else STATUS_WORDS[s],
            key=f"find-status-{digest}",
        )
        errors = st.toggle("Errors only", key=f"find-errors-{digest}")
        turn = _jump(numbers, digest)
    return CallFilter(text=text, tool=tool, status=status, errors_only=errors), turn


def _jump(numbers: list[int], digest: str) -> int | None:
    """The turn to jump to (``&turn=N`` in the URL, shareable), chosen in a select box."""
    raw = st.query_params.get(TURN_PARAM)
    wanted = int(raw) if raw and raw.isdigit() and int(raw) in numbers else None
    key = f"jump-{digest}"
    if key not in st.session_state:
        st.session_state[key] = wanted
    st.selectbox(
        "Jump to turn",
        [None, *numbers],
        format_func=lambda t: "(choose)" if t is None else f"Turn {t}",
        key=key,
        on_change=_jumped,
        args=(key,),
    )
    return wanted


def _jumped(key: str) -> None:
    """A turn was chosen: it goes into the URL, and a linked call makes way for it."""
    turn = st.session_state.get(key)
    if ANCHOR_PARAM in st.query_params:
        del st.query_params[ANCHOR_PARAM]
    if turn is None:
        if TURN_PARAM in st.query_params:
            del st.query_params[TURN_PARAM]
    else:
        st.query_params[TURN_PARAM] = str(turn)


def _turn_key(story: Story, turn: int | None) -> str:
    """The CSS-safe key of a turn's heading (found by the jump's scroll)."""
    return "turn-" + call_key(f"{story.session_id}\x00{turn}")[5:]


def _story_tabs(
    url: str, story: Story, anchor: str | None, where: CallFilter, turn: int | None
) -> None:
    if where.active:
        blocks = [b for b in story.blocks if b.holds(where)]
        pages = paginate(blocks)
        found = sum(1 for c in story.calls.values() if where(c))
        st.caption(f"{found} of {count_text(story.total)} match the search.")
    else:
        blocks, pages = story.blocks, story.pages
    number = _page_number(story, blocks, pages, anchor, turn)
    start, end = pages[number] if pages else (0, 0)
    shown = blocks[start:end]
    # a new link (a bar or a checkpoint clicked) makes new tabs that open on the story,
    # where the call's detail is
    # lazy tabs (on_change="rerun"): only the open tab's content is computed and sent, so the
    # story's rows are not queued behind a chart and a table of every settled call
    story_tab, timeline_tab, checkpoints_tab = st.tabs(
        [_STORY_TAB, _TIMELINE_TAB, _CHECKPOINTS_TAB],
        default=_STORY_TAB,
        key=tabs_key(anchor),
        on_change="rerun",
    )
    now_ns = time.time_ns()
    if story_tab.open:
        with story_tab:
            _story(url, story, shown, anchor, now_ns, where=where)
    if timeline_tab.open:
        with timeline_tab:
            _timeline(story, shown, now_ns)
    if checkpoints_tab.open:
        with checkpoints_tab:
            _checkpoints(story)


def tabs_key(anchor: str | None) -> str:
    """The Story/Timeline/Checkpoints tabs' key: a new link makes new tabs, on the story."""
    return "session-tabs-" + call_key(anchor or "")[5:]


def _page_number(
    story: Story,
    blocks: list[Block],
    pages: list[tuple[int, int]],
    anchor: str | None,
    turn: int | None,
) -> int:
    """0-based page to show: the linked call's page, else the chosen turn's, else the reader's.

    The pagination widget's key includes the link and the turn, so following a new link or
    jumping starts a new widget on that page, while paging by hand keeps working.
    """
    if len(pages) <= 1:
        return 0
    index: int | None = None
    if anchor is not None and anchor in story.top_of:
        holder = story.blocks[story.top_of[anchor]]
        index = next((i for i, b in enumerate(blocks) if b is holder), None)
    elif turn is not None:
        index = next((i for i, b in enumerate(blocks) if b.turn == turn), None)
    wanted = page_holding(pages, index) if index is not None else None
    digest = call_key(f"{story.session_id}\x00{anchor or ''}\x00{turn}\x00{len(blocks)}")[5:]
    with st.container(horizontal=True, vertical_alignment="center"):
        number = st.pagination(len(pages), default=(wanted or 0) + 1, key=f"story-page-{digest}")
        start, end = pages[number - 1]
        shown = sum(b.size for b in blocks[start:end])
        st.caption(f"Page {number} of {len(pages)} · {shown} of {story.total} calls")
    return number - 1


def _story(
    url: str,
    story: Story,
    blocks: list[Block],
    anchor: str | None,
    now_ns: int,
    *,
    where: CallFilter,
) -> None:
    if not blocks:
        st.info("No call matches the search." if where.active else "This session has no calls yet.")
        return
    opened = frozenset(story.ancestors(anchor)) if anchor else frozenset[str]()
    view = StoryView(
        story=story,
        now_ns=now_ns,
        anchor=anchor,
        opened=opened,
        keep=where if where.active else None,
        detail=lambda call_id: detail(url, story, call_id),
    )
    for turn, turn_blocks in turns(blocks):
        first = turn_blocks[0]
        fold = "fold-" + call_key(f"{story.session_id}\x00{first.key}")[5:]
        with st.container(horizontal=True, vertical_alignment="center", key=_turn_key(story, turn)):
            st.subheader(f"Turn {turn}" if turn is not None else "Calls outside a turn")
            folded = st.toggle(
                f"Collapse turn {turn}" if turn is not None else "Collapse", key=fold
            )
        holds_anchor = anchor in story.top_of and any(
            b is story.blocks[story.top_of[anchor]] for b in turn_blocks
        )
        if folded and not holds_anchor:
            st.caption(f"Collapsed · {count_text(sum(b.size for b in turn_blocks))}")
            continue
        for block in turn_blocks:
            story_block(view, block)


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
                        "full": one_line(call.line, INTENT_MAX_CHARS),  # the hover: whole
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
    pick = alt.selection_point(name=_PICK, fields=["seq"], on="click")
    bars = (
        base.mark_bar(cornerRadius=2, height={"band": 0.7}, cursor="pointer")
        .encode(
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
        .add_params(pick)
    )
    height = alt.Step(TIMELINE_ROW_PX)
    chart = alt.hconcat(
        names.properties(width=430, height=height),
        bars.properties(width=520, height=height),
        spacing=6,
    ).resolve_scale(y="shared")  # pyright: ignore[reportUnknownMemberType]  # altair's **kwds are untyped
    event = st.altair_chart(
        chart, width="content", on_select="rerun", selection_mode=_PICK, key=_TIMELINE_KEY
    )
    st.caption(f"{count_text(len(frame))} on this page, one row each, in sequence order.")
    st.caption("Click a bar to open its call.")
    # (mapping access: a selection set through session state comes back as a plain dict)
    selection: object = cast("dict[str, object]", event).get("selection")
    picked = _picked_seq(cast("dict[str, object]", selection).get(_PICK) if selection else None)
    if picked is not None:
        by_seq = {c.seq: c.id for c in story.calls.values()}
        del st.session_state[_TIMELINE_KEY]
        if picked in by_seq:
            st.query_params[ANCHOR_PARAM] = by_seq[picked]
            st.rerun()


def _picked_seq(points: object) -> int | None:
    """The sequence number of the bar clicked (the chart's point selection), if any."""
    if not isinstance(points, list) or not points:
        return None
    first = cast("list[object]", points)[0]
    if not isinstance(first, dict):
        return None
    seq = cast("dict[str, object]", first).get("seq")
    return seq if isinstance(seq, int) else None


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


__all__ = ["render", "tabs_key"]
