"""The Sessions page: every session, sorted and paginated in the database, searchable and
filterable (time range, errors, live, agent, tool, status, user, tag). Every control is kept in
the URL (``?range=24h&sort=calls&errors=true&user=u-7``) and each change is an entry of the
browser's history, so a link shows the same list and Back/Forward walk the lists the user saw."""

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
FILTERS: Final = ("agent", "tool", "status", "user", "tag")
"""The filters in the "Filter by" section (widget keys and URL parameters)."""
_DEFAULTS: Final[dict[str, str | bool | int]] = {
    "q": "", "range": "any", "sort": "last_seen", "asc": False, "errors": False, "live": False,
    "times": "local", "size": 50, **dict.fromkeys(FILTERS, _ALL),
}  # fmt: skip
"""The controls kept in the URL (``?sort=calls&errors=true``): widget key and default value."""
_CHOICES: Final[dict[str, Collection[str]]] = {
    "range": RANGES,
    "sort": SESSION_ORDERS,
    "times": TIMES,
    "size": [str(n) for n in PAGE_SIZES],
    "status": STATUSES,
}
_WRITTEN: Final = "sessions_url"
"""Session state: the controls as this page last put them in the URL. A URL that differs was
navigated to (Back, Forward, a link): the controls take its values."""
_TOUCHED: Final = "sessions_touched"
"""Session state: the user changed a control in this run (its ``on_change``). Such a run may
carry the URL of the run before (clicks faster than the runs): the user's change wins."""


def _touched() -> None:
    st.session_state[_TOUCHED] = True


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
    if any(r["users"] for r in rows):  # (columns only when the ledger knows some)
        columns["users"] = [", ".join(r["users"]) for r in rows]
    if any(r["tags"] for r in rows):
        columns["tags"] = [", ".join(r["tags"]) for r in rows]
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


def _choices(key: str, known: list[str]) -> list[str]:
    """A filter's options: any, then the values the ledger has (and the one chosen, when a link
    names one the ledger does not have: it stays chosen and matches nothing)."""
    options = [_ALL, *known]
    chosen = st.session_state.get(key)
    if isinstance(chosen, str) and chosen not in options:
        options.append(chosen)
    return options


def _filters(url: str) -> dict[str, str | None]:
    """Agent, tool, status, user and tag filters, in a section that loads its choices only
    when open (listing them scans the ledger; the page itself never does). Closing it drops
    them; a URL that names one opens it."""
    section = st.expander(
        "Filter by agent, tool, status, user or tag", key="filters", on_change=_touched
    )
    if not section.open:
        for key in FILTERS:  # (closed: none applies, and the URL loses them)
            st.session_state[key] = _ALL
        return dict.fromkeys(FILTERS)
    lists = {"agent": _data.agents, "tool": _data.tools, "user": _data.users, "tag": _data.tags}
    names = {"agent": "Agent", "tool": "Tool", "status": "Status", "user": "User", "tag": "Tag"}
    chosen: dict[str, str | None] = {}
    with section, st.container(horizontal=True):
        for key in FILTERS:
            known = [str(s) for s in STATUSES] if key == "status" else lists[key](url)
            value = st.selectbox(
                names[key], _choices(key, known), key=key, format_func=_option, on_change=_touched
            )
            chosen[key] = _choice(value)
    return chosen


def _window(choice: str, zone: str) -> tuple[int | None, int | None, int | None]:
    """The time range chosen: (within_s, since_ns, until_ns); custom dates in ``zone``."""
    if choice != CUSTOM:
        return RANGES.get(choice, RANGES["any"])[1], None, None
    today = datetime.now(ZoneInfo(zone)).date()
    picked = st.date_input(
        "From – to",
        value=(today - timedelta(days=6), today),
        key="dates",
        on_change=_touched,
        format="YYYY-MM-DD",
        help=f"Whole days, time zone {zone}",
    )
    days: list[date] = list(picked)  # a range being picked has one date so far
    if not days:
        return None, None, None
    start = datetime.combine(min(days), time.min, ZoneInfo(zone))
    end = datetime.combine(max(days) + timedelta(days=1), time.min, ZoneInfo(zone))
    return None, int(start.timestamp()) * 1_000_000_000, int(end.timestamp()) * 1_000_000_000 - 1


def _in_url() -> dict[str, str]:
    """The controls' parameters in the URL as it is."""
    return {k: v for k, v in st.query_params.to_dict().items() if k in _DEFAULTS}


def _parse(key: str, raw: str) -> str | bool | int | None:
    """A URL value as the control's value, None when it is not one of its values."""
    default = _DEFAULTS[key]
    if isinstance(default, bool):
        return raw == "true" if raw in ("true", "false") else None
    if key in _CHOICES and raw not in _CHOICES[key]:
        return None
    return int(raw) if isinstance(default, int) else raw


def _from_url() -> None:
    """The controls as the URL says when it was navigated to (a link, a reload, Back or
    Forward to another list, Back from another page): every control takes the URL's value or
    its default (unknown values: the default). While the URL is the one this page wrote, the
    controls keep their state (the user is changing them)."""
    params = _in_url()
    touched = st.session_state.pop(_TOUCHED, False)
    navigated = not touched and st.session_state.get(_WRITTEN) != params
    for key, default in _DEFAULTS.items():
        if key in st.session_state and not navigated:
            continue
        raw = params.get(key)
        value = None if raw is None else _parse(key, raw)
        st.session_state[key] = default if value is None else value
    if navigated and any(k in params for k in FILTERS):
        st.session_state["filters"] = True  # (the section holding them, open)


def _to_url() -> None:
    """The controls' values into the URL (a default one leaves it), all in one change: the
    browser gets one history entry per change of the list, so Back and Forward walk the lists
    the user saw. Kept by hand rather than bound (``bind``): ``st.switch_page`` may not carry a
    bound parameter, and ``_open`` must carry them."""
    wanted: dict[str, str] = {}
    for key, default in _DEFAULTS.items():
        value = st.session_state.get(key, default)
        if value != default and value is not None:
            wanted[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    st.session_state[_WRITTEN] = wanted
    if _in_url() != wanted:
        others = {k: v for k, v in st.query_params.to_dict().items() if k not in _DEFAULTS}
        st.query_params.from_dict({**others, **wanted})


def _controls() -> tuple[str, int, str, SessionOrder, bool, bool, bool, str]:
    """The controls above the table (each kept in the URL): search, page size, time range,
    sort and its direction, the errors and live toggles, how times are shown; the filters
    (``_filters``) below them."""
    _from_url()
    with st.container(horizontal=True, vertical_alignment="bottom"):
        search = st.text_input(
            "Search intents",
            key="q",
            placeholder="words from an intent, outcome or label",
            on_change=_touched,
        )
        choice = st.selectbox(
            "Time range",
            list(RANGES),
            key="range",
            format_func=lambda k: RANGES[k][0],
            on_change=_touched,
        )
        order = st.selectbox(
            "Sort by",
            SESSION_ORDERS,
            key="sort",
            format_func=lambda k: SORTS[k][0],
            on_change=_touched,
        )
        size = st.selectbox("Per page", PAGE_SIZES, key="size", on_change=_touched)
    with st.container(horizontal=True, vertical_alignment="center"):
        ascending = st.toggle("Ascending", key="asc", on_change=_touched)
        errors = st.toggle(
            "Errors", key="errors", help="Sessions with a failed call", on_change=_touched
        )
        live = st.toggle(
            "Live", key="live", help="Sessions with a call not settled yet", on_change=_touched
        )
        times = st.segmented_control(
            "Times", list(TIMES), required=True, key="times", format_func=lambda k: TIMES[k],
            label_visibility="collapsed", on_change=_touched,
        )  # fmt: skip
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
    chosen = _filters(url)
    _to_url()
    for note in _data.dropped_lines(url):
        st.warning(note, icon=":material/warning:")

    where = _data.SessionFilter(
        agent=chosen["agent"], tool=chosen["tool"], status=chosen["status"],
        search=search or None, within_s=within_s, since_ns=since_ns, until_ns=until_ns,
        errors=errors, live=live, user=chosen["user"], tag=chosen["tag"],
    )  # fmt: skip
    total = _data.count_sessions(url, where)
    pages = max(1, math.ceil(total / size))
    # A new filter or sort is a new pagination widget, which starts on its first page.
    digest = hashlib.sha1(repr((where, size, order, descending)).encode()).hexdigest()[:12]
    number = st.pagination(pages, key=f"page-{digest}", max_visible_pages=7, on_change=_touched)
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
