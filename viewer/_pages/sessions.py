"""The Sessions page: every session, sorted and paginated in the database, searchable and
filterable (time range, errors, live, agent, tool, status). The controls are kept in the URL
(``?range=24h&sort=calls&errors=true``), so a link or Back shows the same list."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Collection
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pandas as pd
import streamlit as st

from tracing.ledger import SESSION_ORDERS, SessionOrder
from tracing.status import STATUSES
from viewer import _data
from viewer._story import call_label
from viewer._text import frame, one_line, short_label
from viewer._ui import SESSION_PARAM, link_to_call, page

PAGE_SIZES: Final = (25, 50, 100)
_ALL: Final = "(any)"
MATCHING_CALLS: Final = 10
"""Calls listed under the table when searching (each opens the session on that call)."""
CUSTOM: Final = "custom"
RANGES: Final[dict[str, tuple[str, int | None]]] = {
    "any": ("Any time", None),
    "15m": ("Last 15 minutes", 15 * 60),
    "1h": ("Last hour", 3600),
    "24h": ("Last 24 hours", 24 * 3600),
    "7d": ("Last 7 days", 7 * 24 * 3600),
    "30d": ("Last 30 days", 30 * 24 * 3600),
    CUSTOM: ("Dates…", None),
}
"""Time ranges (URL value: label, seconds back from now): sessions active in the range."""
SORTS: Final[dict[SessionOrder, tuple[str, str, str]]] = {
    "last_seen": ("Last seen", "newest first", "oldest first"),
    "first_seen": ("First seen", "newest first", "oldest first"),
    "duration": ("Duration", "longest first", "shortest first"),
    "calls": ("Calls", "most first", "fewest first"),
    "errors": ("Errors", "most first", "fewest first"),
    "session": ("Session id", "Z to A", "A to Z"),
}
"""Sort keys (``Ledger.sessions`` orders): the name, then descending and ascending in words."""
TIMES: Final = {"local": "Local", "utc": "UTC", "relative": "Relative"}
"""How times are shown: the browser's time zone (its offset shown), UTC, or "5 minutes ago"."""
_TIME_FORMAT: Final = "YYYY-MM-DD HH:mm:ss Z"
_DEFAULTS: Final[dict[str, str | bool]] = {
    "q": "", "range": "any", "sort": "last_seen", "asc": False, "errors": False, "live": False,
    "times": "local",
}  # fmt: skip
"""The controls kept in the URL (``?sort=calls&errors=true``): widget key and default value."""
_CHOICES: Final[dict[str, Collection[str]]] = {
    "range": RANGES,
    "sort": SESSION_ORDERS,
    "times": TIMES,
}


def _choice(value: object) -> str | None:
    return None if value in (None, _ALL) else str(value)


def _option(value: object) -> str:
    """A filter choice as shown (stored text: the display sanitizer; the value is kept)."""
    return one_line(value, 80) or "(blank)"


def _when(ns: int | None) -> datetime | None:
    return None if ns is None else datetime.fromtimestamp(ns / 1e9, UTC)


def _took(row: _data.SessionInfo) -> timedelta | None:
    first, last = row["first_ns"], row["last_ns"]
    if first is None or last is None:
        return None
    return timedelta(milliseconds=round((last - first) / 1e6))  # shown to the millisecond


def _zone() -> str:
    """The browser's time zone (``st.context``), else UTC."""
    zone = st.context.timezone
    if zone:
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            return "UTC"
        return zone
    return "UTC"


def _table(rows: list[_data.SessionInfo]) -> pd.DataFrame:
    columns: dict[str, list[Any]] = {
        "session": [r["session_id"] or "(no session)" for r in rows],
        "first seen": [_when(r["first_ns"]) for r in rows],
        "last seen": [_when(r["last_ns"]) for r in rows],
        "duration": [_took(r) for r in rows],
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
    }
    return frame(pd.DataFrame(columns))


def _time_column(label: str, times: str, zone: str) -> Any:
    """A time column as chosen: relative ("5 minutes ago") or absolute with its offset."""
    if times == "relative":
        return st.column_config.DatetimeColumn(label, format="distance", help=f"{label} (ago)")
    where = "UTC" if times == "utc" else zone
    return st.column_config.DatetimeColumn(
        label, format=_TIME_FORMAT, timezone=where, help=f"{label}, time zone {where}"
    )


def _times_note(times: str, zone: str) -> str:
    if times == "relative":
        return "Times relative to now (hover a column header for more)."
    if times == "utc" or zone == "UTC":
        return "Times in UTC."
    return f"Times in {zone}, your browser's time zone."


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


def _window(choice: str, zone: str) -> tuple[int | None, int | None, int | None]:
    """The time range chosen: (within_s, since_ns, until_ns); custom dates in ``zone``."""
    if choice != CUSTOM:
        return RANGES.get(choice, RANGES["any"])[1], None, None
    today = datetime.now(ZoneInfo(zone)).date()
    picked = st.date_input(
        "From – to",
        value=(today - timedelta(days=6), today),
        key="dates",
        format="YYYY-MM-DD",
        help=f"Whole days, time zone {zone}",
    )
    days: list[date] = list(picked)  # a range being picked has one date so far
    if not days:
        return None, None, None
    start = datetime.combine(min(days), time.min, ZoneInfo(zone))
    end = datetime.combine(max(days) + timedelta(days=1), time.min, ZoneInfo(zone))
    return None, int(start.timestamp()) * 1_000_000_000, int(end.timestamp()) * 1_000_000_000 - 1


def _from_url() -> None:
    """Controls not on screen yet (a link, a reload, Back from another page) start as the URL
    says; unknown values are ignored. ``times`` always has a value (no widget default)."""
    params = st.query_params
    for key, default in _DEFAULTS.items():
        raw = params.get(key)
        if key in st.session_state or raw is None:
            continue
        if isinstance(default, bool):
            if raw in ("true", "false"):
                st.session_state[key] = raw == "true"
        elif key not in _CHOICES or raw in _CHOICES[key]:
            st.session_state[key] = raw
    st.session_state.setdefault("times", _DEFAULTS["times"])


def _to_url() -> None:
    """The controls' values into the URL (a default one leaves it): a link or Back shows the
    same list. Kept by hand rather than bound (``bind``): ``st.switch_page`` may not carry a
    bound parameter, and ``_open`` must carry them."""
    for key, default in _DEFAULTS.items():
        value = st.session_state.get(key, default)
        if value == default:
            if key in st.query_params:
                del st.query_params[key]
            continue
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        if st.query_params.get(key) != text:
            st.query_params[key] = text


def _controls() -> tuple[str, int, str, SessionOrder, bool, bool, bool, str]:
    """The controls above the table (each kept in the URL): search, page size, time range,
    sort and its direction, the errors and live toggles, how times are shown."""
    _from_url()
    with st.container(horizontal=True, vertical_alignment="bottom"):
        search = st.text_input(
            "Search intents", key="q", placeholder="words from an intent, outcome or label"
        )
        choice = st.selectbox(
            "Time range", list(RANGES), key="range", format_func=lambda k: RANGES[k][0]
        )
        order = st.selectbox(
            "Sort by", SESSION_ORDERS, key="sort", format_func=lambda k: SORTS[k][0]
        )
        size = st.selectbox("Per page", PAGE_SIZES, index=1, key="size")
    with st.container(horizontal=True, vertical_alignment="center"):
        ascending = st.toggle("Ascending", key="asc")
        errors = st.toggle("Errors", key="errors", help="Sessions with a failed call")
        live = st.toggle("Live", key="live", help="Sessions with a call not settled yet")
        times = st.segmented_control(
            "Times", list(TIMES), required=True, key="times", format_func=lambda k: TIMES[k],
            label_visibility="collapsed",
        )  # fmt: skip
    _to_url()
    return search, size, choice, order, not ascending, errors, live, times or "local"


def _open(session_id: str) -> None:
    """Open a session from the table. ``st.switch_page`` first rewrites this page's URL to the
    parameters it is given: the list's go with the session, so that Back comes to the same
    list (the Sessions page ignores ``session`` then, and the Session page the list's)."""
    target = page("session")
    if target is None:
        return
    keep = {k: v for k, v in st.query_params.to_dict().items() if k in _DEFAULTS}
    # forget the selection: coming Back to this page must not open the session again
    del st.session_state["sessions_table"]
    st.switch_page(target, query_params={SESSION_PARAM: session_id, **keep})


def _sessions(url: str) -> None:
    search, size, choice, order, descending, errors, live, times = _controls()
    zone = _zone()
    within_s, since_ns, until_ns = _window(choice, zone)
    agent, tool, status = _filters(url)
    for note in _data.dropped_lines(url):
        st.warning(note, icon=":material/warning:")

    where = _data.SessionFilter(
        agent=agent, tool=tool, status=status, search=search or None, within_s=within_s,
        since_ns=since_ns, until_ns=until_ns, errors=errors, live=live,
    )  # fmt: skip
    total = _data.count_sessions(url, where)
    pages = max(1, math.ceil(total / size))
    # A new filter or sort is a new pagination widget, which starts on its first page.
    digest = hashlib.sha1(repr((where, size, order, descending)).encode()).hexdigest()[:12]
    number = st.pagination(pages, key=f"page-{digest}", max_visible_pages=7)
    offset = (min(number, pages) - 1) * size
    rows = _data.sessions_page(url, where, size, offset, order=order, descending=descending)

    if rows:
        first, last = offset + 1, offset + len(rows)
        name, down, up = SORTS[order]
        st.caption(
            f"Sessions {first}–{last} of {total} · {name.lower()}, {down if descending else up} "
            "(across all pages). Select a row to open the session."
        )
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
                "first seen": _time_column("first seen", times, zone),
                "last seen": _time_column("last seen", times, zone),
                "duration": st.column_config.NumberColumn(
                    format="compact", help="First call to last activity"
                ),
            },
        )
        st.caption(_times_note(times, zone))
        chosen = picked.selection.rows
        if chosen:
            _open(rows[chosen[0]]["session_id"])
    elif total == 0 and where == _data.SessionFilter():
        st.info("The ledger has no sessions yet. Record some calls, or run `intentrace demo`.")
    elif search and where == _data.SessionFilter(search=search):
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
