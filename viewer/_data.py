"""Every ledger query of the viewer, in one place (read-only; the pages never touch the ledger).

The connection is one read-only ``Ledger`` per URL (``st.cache_resource``), shared by every
browser session; results are cached with ``st.cache_data`` for a short time (the ledger is
written live while people watch). A session's story is cached by a cheap version token (its
counts and the newest write it includes), so a 5 000-call session is rebuilt only when it
changed. The ledger URL comes from ``$INTENTRACE_LEDGER_URL`` (``intentrace view`` sets it),
else the ledger's default file.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import streamlit as st

from tracing.environment_variables import INTENTRACE_LEDGER_URL, INTENTRACE_TRACE_URL
from tracing.ledger import (
    Anchor,
    DroppedInfo,
    Ledger,
    LedgerError,
    SessionInfo,
    SessionOrder,
    default_ledger_url,
    dropped_notes,
    open_ledger,
)
from viewer._links import check_trace_url
from viewer._story import Story, build_story

LIST_TTL_S: Final = 3.0
"""Sessions list, counts, filters: fresh enough to browse, cheap on every rerun."""
LIVE_TTL_S: Final = 1.0
"""Calls in flight (the Live page refreshes every ``LIVE_REFRESH_S``)."""


def ledger_url() -> str:
    """The ledger the viewer reads: ``$INTENTRACE_LEDGER_URL``, else the default file."""
    return os.environ.get(INTENTRACE_LEDGER_URL, "").strip() or default_ledger_url()


def trace_url_template() -> str | None:
    """The link out to a call's trace (``$INTENTRACE_TRACE_URL``, ``intentrace view
    --trace-url`` sets it): an http(s) URL template with ``{trace_id}``; None when unset or
    not one (the command line refuses a bad one with a message)."""
    raw = os.environ.get(INTENTRACE_TRACE_URL, "").strip()
    if not raw:
        return None
    try:
        return check_trace_url(raw)
    except ValueError:
        return None


@st.cache_resource(show_spinner=False)
def _ledger(url: str) -> Ledger:
    return open_ledger(url, read_only=True)


def ledger(url: str | None = None) -> Ledger:
    """The shared read-only ledger (raises ``LedgerError`` with a one-line message)."""
    return _ledger(url or ledger_url())


@dataclass(frozen=True, slots=True)
class SessionFilter:
    """The Sessions page's filters (each keeps sessions with at least one matching call)."""

    agent: str | None = None
    tool: str | None = None
    status: str | None = None
    search: str | None = None
    within_s: int | None = None
    """Sessions active in the last this many seconds (resolved when the query runs, so a
    cached page keys on the choice, not on the clock)."""
    since_ns: int | None = None
    """Sessions active at or after this time (a chosen range)."""
    until_ns: int | None = None
    """Sessions that started at or before this time."""
    errors: bool = False
    """Sessions with a failed call."""
    live: bool = False
    """Sessions with a call not settled yet."""
    user: str | None = None
    """Sessions with a call run for this user id."""
    tag: str | None = None
    """Sessions with a call whose trace has this tag."""


def _filters(where: SessionFilter) -> dict[str, Any]:
    """``where`` as the keyword arguments of ``Ledger.sessions`` and ``count_sessions``."""
    since_ns = where.since_ns
    if where.within_s is not None:
        recent = time.time_ns() - where.within_s * 1_000_000_000
        since_ns = recent if since_ns is None else max(since_ns, recent)
    return {
        "agent": where.agent,
        "tool": where.tool,
        "status": where.status,
        "search": where.search,
        "since_ns": since_ns,
        "until_ns": where.until_ns,
        "errors": where.errors,
        "live": where.live,
        "user": where.user,
        "tag": where.tag,
    }


@st.cache_data(ttl=LIST_TTL_S, max_entries=64, show_spinner=False)
def sessions_page(
    url: str,
    where: SessionFilter,
    limit: int,
    offset: int,
    *,
    order: SessionOrder = "last_seen",
    descending: bool = True,
) -> list[SessionInfo]:
    """One page of sessions in ``order`` (most recent activity first by default), sorted and
    paginated in the database over every matching session."""
    return ledger(url).sessions(
        limit=limit, offset=offset, order=order, descending=descending, **_filters(where)
    )


@st.cache_data(ttl=LIST_TTL_S, max_entries=64, show_spinner=False)
def count_sessions(url: str, where: SessionFilter) -> int:
    return ledger(url).count_sessions(**_filters(where))


@st.cache_data(ttl=30.0, show_spinner=False)
def agents(url: str) -> list[str]:
    return ledger(url).agents()


@st.cache_data(ttl=30.0, show_spinner=False)
def tools(url: str) -> list[str]:
    return ledger(url).tools()


@st.cache_data(ttl=30.0, show_spinner=False)
def users(url: str) -> list[str]:
    return ledger(url).users()


@st.cache_data(ttl=30.0, show_spinner=False)
def tags(url: str) -> list[str]:
    return ledger(url).tags()


@st.cache_data(ttl=LIST_TTL_S, max_entries=64, show_spinner=False)
def dropped(url: str, session_id: str | None = None) -> list[DroppedInfo]:
    """What was lost before reaching the ledger (every session's, or one's)."""
    return ledger(url).dropped(session_id)


def dropped_lines(url: str, session_id: str | None = None) -> list[str]:
    """Plain-text warnings about calls lost before reaching the ledger (none: empty)."""
    return dropped_notes(dropped(url, session_id), session=session_id is not None)


def last_version(url: str, session_id: str | None = None) -> int:
    """The newest row version written (uncached; ``Ledger.last_version``): of every call (one
    end of an index: what a page polls), or of one session's (asked only when that moved)."""
    return ledger(url).last_version(session_id)


def session_counter(url: str, session_id: str) -> int:
    """The session's counter (uncached; ``Ledger.session_counter``): moves when an activity
    label is set too, which no row version shows."""
    return ledger(url).session_counter(session_id)


def session_info(url: str, session_id: str) -> SessionInfo | None:
    """One session's counts (uncached: it is the version token of the story)."""
    return ledger(url).session(session_id)


@st.cache_data(max_entries=16, show_spinner=False)
def _story(url: str, session_id: str, version: tuple[object, ...]) -> Story:
    del version  # part of the cache key only
    book = ledger(url)
    anchors = book.session_anchors(session_id)
    blocks = book.blocks(session_id)
    children = book.subagent_anchors(session_id)  # subagents run under sessions of their own
    for child in dict.fromkeys(a["session_id"] for a in children):
        blocks += book.blocks(child)
    return build_story(session_id, anchors + children, blocks)


@st.cache_resource(show_spinner=False)
def _seen() -> dict[tuple[str, str], int]:
    """(url, session) -> the newest write the cached story must include (shared, tiny)."""
    return {}


def story(url: str, session_id: str, info: SessionInfo) -> Story:
    """A session as a story, rebuilt only when the session changed.

    The cached story is keyed by the session's counts (``info`` from ``session_info``) and by
    the newest write it must include; one indexed query (``changed_since`` the story's newest
    write, limit 1) tells whether anything was written since — a growing streaming intent, a
    settlement — so a large session is read once, yet live calls show their latest state.
    """
    seen = _seen()
    key = (url, session_id)
    counter = session_counter(url, session_id)  # (an activity label set since: a new story)
    found = _story(url, session_id, _version(info, seen.get(key, 0), counter))
    newest = _newer_write(url, found)
    if newest is not None:
        seen[key] = max(seen.get(key, 0), newest)
        found = _story(url, session_id, _version(info, seen[key], counter))
    return found


RELEVANT_SCAN: Final = 200
"""Writes after a live story's newest looked at per check (the rest at the next one)."""


@st.cache_resource(show_spinner=False)
def _scanned() -> dict[tuple[str, str], int]:
    """(url, session) -> the write time up to which other writes were found not to belong in
    its live story (shared, tiny): each check reads only what came after."""
    return {}


def _newer_write(url: str, found: Story) -> int | None:
    """The time of a write after the story's newest that belongs in it, else None. A settled
    story: a write of its session (one indexed row). A live one may hold a subagent writing
    under a session of its own: the writes since are looked at (``RELEVANT_SCAN`` at a time),
    and only those of its session, of its calls, or of calls its calls spawned count, so the
    writes of other sessions do not rebuild every live story on the Live page at each refresh."""
    book = ledger(url)
    if not found.live_blocks():
        newer = book.changed_since(found.max_updated_ns, session_id=found.session_id, limit=1)
        return newer[0]["updated_ns"] if newer else None
    scanned = _scanned()
    key = (url, found.session_id)
    after = max(found.max_updated_ns, scanned.get(key, 0))
    newer = book.changed_since(after, limit=RELEVANT_SCAN)
    calls = found.calls
    mine = [
        row["updated_ns"]
        for row in newer
        if row["session_id"] == found.session_id
        or row["tool_call_id"] in calls
        or row["parent_call_id"] in calls
    ]
    if mine:
        return max(mine)
    if newer:
        if len(scanned) > 4096:
            scanned.clear()
        scanned[key] = newer[-1]["updated_ns"]
    return None


def _version(info: SessionInfo, newest: int, counter: int) -> tuple[object, ...]:
    return (info["calls"], info["errors"], info["in_flight"], info["last_ns"], newest, counter)


@st.cache_data(ttl=LIST_TTL_S, max_entries=256, show_spinner=False)
def call(url: str, tool_call_id: str) -> Anchor | None:
    """One call with everything stored about it (args, result, error, redaction)."""
    return ledger(url).anchor(tool_call_id)


@st.cache_data(ttl=LIVE_TTL_S, max_entries=8, show_spinner=False)
def in_flight(url: str, limit: int) -> list[Anchor]:
    """Calls not settled yet across sessions (streaming, in flight, background), oldest first."""
    return ledger(url).in_flight(limit=limit)


@st.cache_data(ttl=LIST_TTL_S, max_entries=64, show_spinner=False)
def find_calls(url: str, text: str, limit: int) -> list[Anchor]:
    """Calls whose intent, outcome or label contains ``text``."""
    return ledger(url).search(text, limit=limit)


def latest_session(url: str) -> str | None:
    """The session with the most recent activity (what the Session page opens by default)."""
    found = sessions_page(url, SessionFilter(), 1, 0)
    return found[0]["session_id"] if found else None


def session_of(url: str, tool_call_id: str) -> str | None:
    """The session of a call (a deep link may name only the call)."""
    found = call(url, tool_call_id)
    return found["session_id"] if found else None


__all__: Sequence[str] = (
    "LedgerError",
    "SessionFilter",
    "agents",
    "call",
    "count_sessions",
    "dropped",
    "dropped_lines",
    "find_calls",
    "in_flight",
    "last_version",
    "latest_session",
    "ledger",
    "ledger_url",
    "session_counter",
    "session_info",
    "session_of",
    "sessions_page",
    "story",
    "tools",
    "trace_url_template",
)


# --- Analytics (tracing.analytics: a columnar copy of the ledger, kept in step) --------------
ANALYTICS_TTL_S: Final = 5.0
"""Dashboard results: each rerun within this time reuses them (the copy syncs on expiry)."""


@st.cache_resource(show_spinner=False)
def _analytics(url: str) -> object:
    # lazy: DuckDB and pyarrow (the `analytics` extra) load only to analyse
    from tracing.analytics import Analytics

    return Analytics(url)


@st.cache_data(ttl=ANALYTICS_TTL_S, max_entries=16, show_spinner="Computing…")
def dashboard_results(
    url: str, name: str, folder: str | None, filters: str = "{}"
) -> list[tuple[object, list[object]]]:
    """Every panel of dashboard ``name``: its ``tracing.analytics.Result`` and, per row, the
    call behind it (``Analytics.examples``), over ``filters`` (JSON of ``Filters.of``), after
    bringing the copy up to date (raises ``AnalyticsError`` with a one-line message)."""
    # lazy: DuckDB and pyarrow (the `analytics` extra) load only to analyse
    from tracing.analytics import Analytics, load_dashboards

    engine = _analytics(url)
    assert isinstance(engine, Analytics)
    dashboard = load_dashboards(None if folder is None else [folder])[name]
    return [
        (result, list(engine.examples(result)))
        for _, result in engine.dashboard(dashboard, filters=json.loads(filters))
    ]
