"""The Live page: every call in flight across sessions, refreshing on its own.

The working indicator an operator leaves open: calls still being written by the model
(``streaming``: the intent grows as its tokens arrive), running, or in background, grouped by
session and by block of sibling calls. Blocks are drawn by the Session page's renderer
(``viewer._ui.story_block``) over the session's story, so a block reads the same on both pages
(its activity label, a running subagent's "parent · child's latest" line); only the calls that
are live, or hold live calls, are listed.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Final

import streamlit as st

from tracing.ledger import Anchor
from tracing.status import Status
from viewer import _data
from viewer._story import Story, build_story, is_live
from viewer._text import one_line
from viewer._ui import StoryView, link_to_session, story_block

LIVE_REFRESH_S: Final = 2.0
"""Refresh period of the live list (a fragment with ``run_every``)."""
LIVE_LIMIT: Final = 200
"""Most calls listed (oldest first, as the ledger returns them)."""
LIVE_SESSIONS: Final = 20
"""Most sessions drawn (those whose oldest live call started first)."""


def render() -> None:
    """The Live page."""
    st.title("Live")
    st.caption(f"Calls in flight across sessions. Refreshes every {LIVE_REFRESH_S:g} s.")
    _live(_data.ledger_url())


def _by_session(rows: list[Anchor]) -> dict[str, list[Anchor]]:
    """session -> its live calls, in order of first appearance (oldest first)."""
    grouped: dict[str, list[Anchor]] = {}
    for row in rows:
        grouped.setdefault(row["session_id"], []).append(row)
    return grouped


def _session_story(url: str, session_id: str, rows: list[Anchor]) -> Story:
    """The session's story (cached by version, shared with the Session page); the live rows
    alone when the ledger has no session row for them."""
    info = _data.session_info(url, session_id)
    if info is None:
        return build_story(session_id, rows)
    return _data.story(url, session_id, info)


@st.fragment(run_every=LIVE_REFRESH_S)
def _live(url: str) -> None:
    try:
        rows = _data.in_flight(url, LIVE_LIMIT)
        grouped = _by_session(rows)
        stories = [
            _session_story(url, session_id, found)
            for session_id, found in list(grouped.items())[:LIVE_SESSIONS]
        ]
    except _data.LedgerError as exc:
        st.error("The ledger cannot be read.")
        st.code(str(exc), language=None)
        return
    now_ns = time.time_ns()
    writing = sum(1 for r in rows if r["status"] == Status.STREAMING)
    with st.container(horizontal=True):
        st.metric("In flight", len(rows))
        st.metric("Being written", writing)
        st.metric("Sessions", len(grouped))
    st.caption(f"Updated {datetime.now().strftime('%H:%M:%S')}")
    if not rows:
        st.info("Nothing in flight right now.")
        return
    if len(grouped) > len(stories):
        st.caption(f"Showing the {len(stories)} sessions whose live calls started first.")
    for story in stories:
        with st.container(border=True):
            with st.container(horizontal=True, vertical_alignment="center"):
                st.text(
                    "Session " + one_line(story.session_id or "(no session)", 120),
                    wrap=False,
                    width="stretch",
                )
                link_to_session(story.session_id, label="Open session")
            view = StoryView(story=story, now_ns=now_ns, keep=is_live)
            for block in story.live_blocks():
                story_block(view, block)
