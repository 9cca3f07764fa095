"""The Sessions page: every session, paginated in the database, searchable and filterable."""

from __future__ import annotations

import hashlib
import math
from datetime import datetime
from typing import Any, Final

import pandas as pd
import streamlit as st

from tracing.status import STATUSES
from viewer import _data
from viewer._story import call_label
from viewer._text import frame, one_line, short_label
from viewer._ui import SESSION_PARAM, link_to_call, page

PAGE_SIZES: Final = (25, 50, 100)
_ALL: Final = "(any)"
MATCHING_CALLS: Final = 10
"""Calls listed under the table when searching (each opens the session on that call)."""


def _choice(value: object) -> str | None:
    return None if value in (None, _ALL) else str(value)


def _option(value: object) -> str:
    """A filter choice as shown (stored text: the display sanitizer; the value is kept)."""
    return one_line(value, 80) or "(blank)"


def _when(ns: int | None) -> datetime | None:
    return None if ns is None else datetime.fromtimestamp(ns / 1e9)


def _table(rows: list[_data.SessionInfo]) -> pd.DataFrame:
    columns: dict[str, list[Any]] = {
        "session": [r["session_id"] or "(no session)" for r in rows],
        "calls": [r["calls"] for r in rows],
        "errors": [r["errors"] for r in rows],
        "live": [r["in_flight"] for r in rows],
    }
    if any(r["dropped"] for r in rows):  # (a column only when some calls were shed)
        columns["shed"] = [r["dropped"] for r in rows]
    columns |= {
        "turns": [r["last_turn"] or 0 for r in rows],
        "agents": [", ".join(r["agents"]) for r in rows],
        "tools": [", ".join(r["tools"]) for r in rows],
        "last activity": [_when(r["last_ns"]) for r in rows],
    }
    return frame(pd.DataFrame(columns))


def render() -> None:
    """Sessions, most recent activity first."""
    st.title("Sessions")
    url = _data.ledger_url()
    try:
        _sessions(url)
    except _data.LedgerError as exc:
        st.error("The ledger cannot be read.")
        st.code(str(exc), language=None)


def _filters(url: str) -> tuple[str | None, str | None, str | None]:
    """Agent, tool and status filters, in a section that loads its choices only when open
    (listing every agent and tool scans the ledger; the page itself never does)."""
    section = st.expander("Filter by agent, tool or status", key="filters", on_change="rerun")
    if not section.open:
        return None, None, None
    with section, st.container(horizontal=True):
        agent = st.selectbox("Agent", [_ALL, *_data.agents(url)], key="agent", format_func=_option)
        tool = st.selectbox("Tool", [_ALL, *_data.tools(url)], key="tool", format_func=_option)
        status = st.selectbox("Status", [_ALL, *STATUSES], key="status")
    return _choice(agent), _choice(tool), _choice(status)


def _sessions(url: str) -> None:
    with st.container(horizontal=True, vertical_alignment="bottom"):
        search = st.text_input(
            "Search intents",
            key="q",
            placeholder="words from an intent, outcome or label",
            bind="query-params",
        )
        size = st.selectbox("Per page", PAGE_SIZES, index=1, key="size")
    agent, tool, status = _filters(url)
    for note in _data.dropped_lines(url):
        st.warning(note, icon=":material/warning:")

    where = _data.SessionFilter(agent=agent, tool=tool, status=status, search=search or None)
    total = _data.count_sessions(url, where)
    pages = max(1, math.ceil(total / size))
    # A new filter is a new pagination widget, which starts on its first page.
    digest = hashlib.sha1(repr((where, size)).encode()).hexdigest()[:12]
    number = st.pagination(pages, key=f"page-{digest}", max_visible_pages=7)
    offset = (min(number, pages) - 1) * size
    rows = _data.sessions_page(url, where, size, offset)

    if rows:
        first, last = offset + 1, offset + len(rows)
        st.caption(f"Sessions {first}–{last} of {total}. Select a row to open the session.")
        picked = st.dataframe(  # pyright: ignore[reportUnknownMemberType]  # streamlit's signature names pyarrow's Array without its type argument
            _table(rows),
            hide_index=True,
            width="stretch",
            on_select="rerun",
            selection_mode="single-row",
            key="sessions_table",
            column_config={
                "calls": st.column_config.NumberColumn(width="small"),
                "errors": st.column_config.NumberColumn(width="small"),
                "live": st.column_config.NumberColumn(width="small"),
                "shed": st.column_config.NumberColumn(
                    width="small", help="Tool calls shed under load (anchor missing or partial)"
                ),
                "turns": st.column_config.NumberColumn(width="small"),
                "last activity": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm:ss"),
            },
        )
        chosen = picked.selection.rows
        target = page("session")
        if chosen and target is not None:
            session_id = rows[chosen[0]]["session_id"]
            # forget the selection: coming Back to this page must not open the session again
            del st.session_state["sessions_table"]
            st.switch_page(target, query_params={SESSION_PARAM: session_id})
    elif total == 0 and where == _data.SessionFilter():
        st.info("The ledger has no sessions yet. Record some calls, or run `intentrace demo`.")
    elif search:
        st.info("No session has a call whose intent, outcome or label contains this text:")
        st.text(one_line(search, 200))
    else:
        st.info("No session matches these filters.")

    if search:
        _matching_calls(url, search)


def _matching_calls(url: str, text: str) -> None:
    found = _data.find_calls(url, text, MATCHING_CALLS)
    st.subheader("Matching calls")
    if not found:
        st.caption("No call's intent, outcome or label contains this text.")
        return
    for anchor in found:
        with st.container(horizontal=True, vertical_alignment="center"):
            st.text(short_label(call_label(anchor)), wrap=False, width="stretch")
            st.text(one_line(anchor["session_id"] or "(no session)", 40), width="content")
            link_to_call(anchor["session_id"], anchor["tool_call_id"])


__all__ = ["render"]
