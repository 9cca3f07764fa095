"""The Live page: every call in flight across sessions, refreshing on its own.

The working indicator an operator leaves open: calls still being written by the model
(``streaming``: the intent grows as its tokens arrive), running, or in background, grouped by
session and by block of sibling calls, each block headed by ``group_header``.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Final

import streamlit as st

from tracing.ledger import Anchor
from tracing.status import Status, group_header
from viewer import _data
from viewer._story import count_text, to_call
from viewer._text import one_line, short_label
from viewer._ui import call_key, call_row, link_to_session

LIVE_REFRESH_S: Final = 2.0
"""Refresh period of the live list (a fragment with ``run_every``)."""
LIVE_LIMIT: Final = 200
"""Most calls listed (oldest first, as the ledger returns them)."""


def render() -> None:
    """The Live page."""
    st.title("Live")
    st.caption(f"Calls in flight across sessions. Refreshes every {LIVE_REFRESH_S:g} s.")
    _live(_data.ledger_url())


def _by_session(rows: list[Anchor]) -> dict[str, dict[str, list[Anchor]]]:
    """session -> block key -> calls, in order of first appearance (oldest first)."""
    grouped: dict[str, dict[str, list[Anchor]]] = {}
    for row in rows:
        key = row["batch_id"] or f"call:{row['tool_call_id']}"
        grouped.setdefault(row["session_id"], {}).setdefault(key, []).append(row)
    return grouped


@st.fragment(run_every=LIVE_REFRESH_S)
def _live(url: str) -> None:
    try:
        rows = _data.in_flight(url, LIVE_LIMIT)
    except _data.LedgerError as exc:
        st.error("The ledger cannot be read.")
        st.code(str(exc), language=None)
        return
    now_ns = time.time_ns()
    writing = sum(1 for r in rows if r["status"] == Status.STREAMING)
    grouped = _by_session(rows)
    with st.container(horizontal=True):
        st.metric("In flight", len(rows))
        st.metric("Being written", writing)
        st.metric("Sessions", len(grouped))
    st.caption(f"Updated {datetime.now().strftime('%H:%M:%S')}")
    if not rows:
        st.info("Nothing in flight right now.")
        return
    for session_id, blocks in grouped.items():
        with st.container(border=True):
            with st.container(horizontal=True, vertical_alignment="center"):
                st.text(
                    "Session " + one_line(session_id or "(no session)", 120),
                    wrap=False,
                    width="stretch",
                )
                link_to_session(session_id, label="Open session")
            for key, block_rows in blocks.items():
                calls = [to_call(r) for r in block_rows]
                header = group_header(c.header_call() for c in calls)
                digest = call_key(f"{session_id}\x00{key}")[5:]
                with st.container(
                    horizontal=True, vertical_alignment="center", key=f"head-{digest}"
                ):
                    st.text(short_label(header), wrap=False, width="stretch")
                    st.caption(count_text(len(calls), live=len(calls)))
                for call in calls:
                    call_row(call, session_id=session_id, now_ns=now_ns, key=call_key(call.id))
