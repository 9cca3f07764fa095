"""Viewer page timings (Streamlit AppTest) on a large ledger, ours against naive pages.

Builds (once, through the ledger's public writer ``Ledger.record``) a SQLite ledger with
``--sessions`` small sessions (default 100 000) plus one session of ``--calls`` calls (default
5 000: turns, blocks of parallel siblings, failures, a subagent, live calls at the end), then
runs the real entry script with AppTest and prints medians:

* sessions page: ours (one page from the database: ``sessions(limit, offset)`` +
  ``count_sessions``) vs a naive page that loads every session and shows them in one table;
  its controls: sort by calls or duration over every page (ours: in the database; peer: every
  session loaded and sorted in pandas), the Errors and Live toggles, a time range;
* session page, 5 000 calls, cold (caches cleared) and warm: ours (the story, one page of
  blocks, timeline, checkpoints) vs a naive page that renders every call as a line;
* a deep link to a call on the last page of that session;
* the Live page with 200 calls in flight.

Run: ``.venv/bin/python -m bench.viewer`` (``--ledger PATH`` keeps/reuses the generated file,
``--repeat N`` timings per figure, ``--only sessions`` the Sessions page alone, ``--browser``
the Sessions page in headless Chromium too: warm loads until its table is drawn). Goals (issue 6):
the 5 000-call session under 3 s; the sessions page fast over 100 000 sessions; (issue 19) the
Sessions page with 10 000 sessions under 1 s warm:
``.venv/bin/python -m bench.viewer --sessions 10000 --only sessions``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# As `intentrace view` runs it (no usage statistics: no per-command telemetry work).
os.environ.setdefault("STREAMLIT_BROWSER_GATHER_USAGE_STATS", "false")

from streamlit.testing.v1 import AppTest

from tracing.environment_variables import INTENTRACE_LEDGER_URL
from tracing.ledger import AnchorWrite, LedgerOptions, open_ledger
from tracing.status import Status
from viewer import APP_PATH

BIG = "big-session"
BASE_NS = 1_750_000_000_000_000_000
TOOLS = ("search_code", "read_file", "run_tests", "edit_file", "http_get")


def _args(i: int) -> str:
    return json.dumps({"query": f"handler number {i}", "path": f"src/mod_{i % 97}.py", "limit": 20})


def _flush_every(ledger: Any, n: int, every: int = 20_000) -> None:
    if n % every == 0:
        ledger.flush(120.0)


def build(path: Path, sessions: int, calls: int, live: int) -> float:
    """Write the bench ledger; returns seconds taken."""
    t0 = time.perf_counter()
    ledger = open_ledger(f"sqlite:///{path}", options=LedgerOptions(max_queue_size=200_000))
    n = 0
    for s in range(sessions):
        sid = f"s-{s:06d}"
        for c in range(2):
            start = BASE_NS + (s * 10 + c) * 1_000_000
            ledger.record(
                AnchorWrite(
                    tool_call_id=f"{sid}-{c}",
                    tool_name=TOOLS[(s + c) % len(TOOLS)],
                    status=Status.ERROR if (s + c) % 17 == 0 else Status.SUCCESS,
                    session_id=sid,
                    turn=1,
                    batch_id=f"{sid}-b",
                    agent_id=f"agent-{s % 7}",
                    intent=f"Looking into issue {s} step {c}",
                    outcome=f"Found {s % 13} matches",
                    start_ns=start,
                    end_ns=start + 400_000_000,
                    args=_args(s),
                )
            )
            n += 1
            _flush_every(ledger, n)
    # one long session: 5 000 calls in blocks of 1-5 siblings over 25 turns
    start = BASE_NS + sessions * 10 * 1_000_000
    for i in range(calls):
        block = i // 4
        status = Status.SUCCESS
        if i % 23 == 0:
            status = Status.ERROR
        if i >= calls - live:
            status = Status.IN_FLIGHT
        parent = f"{BIG}-{(i // 200) * 200}" if i % 200 in (1, 2, 3) else None
        write = AnchorWrite(
            tool_call_id=f"{BIG}-{i}",
            tool_name=TOOLS[i % len(TOOLS)],
            status=status,
            session_id=BIG,
            turn=1 + i * 25 // calls,
            batch_id=f"{BIG}-b{block}",
            parent_call_id=parent,
            agent_id="reviewer" if parent else "coder",
            intent=f"Reading part {i} of the auth module",
            start_ns=start + i * 50_000_000,
            args=_args(i),
        )
        if status != "in_flight":
            write["end_ns"] = start + i * 50_000_000 + 30_000_000
            write["outcome"] = f"Read {i % 300} lines"
            write["result"] = json.dumps({"lines": i % 300, "text": "x" * 400})
        if status == "error":
            write["error"] = "TimeoutError: the file server did not answer"
        ledger.record(write)
        n += 1
        _flush_every(ledger, n)
    ledger.flush(600.0)
    stats = ledger.stats()
    ledger.close()
    if stats.get("dropped") or stats.get("errors"):
        raise SystemExit(f"the bench ledger lost writes: {stats}")
    return time.perf_counter() - t0


def _naive_sessions() -> None:
    import pandas as pd
    import streamlit as st

    from tracing.ledger import open_ledger

    ledger = open_ledger(None, read_only=True)
    rows = ledger.sessions(limit=10**9)
    st.title("Sessions")
    st.dataframe(pd.DataFrame(rows), hide_index=True)


def _naive_sorted_sessions() -> None:
    import pandas as pd
    import streamlit as st

    from tracing.ledger import open_ledger

    ledger = open_ledger(None, read_only=True)
    rows = ledger.sessions(limit=10**9)
    st.title("Sessions")
    table = pd.DataFrame(rows).sort_values("calls", ascending=False, kind="stable")
    st.dataframe(table.head(50), hide_index=True)


_NAIVE_SESSIONS_SCRIPT = """
import pandas as pd
import streamlit as st

from tracing.ledger import open_ledger

st.title("Sessions")
rows = open_ledger(None, read_only=True).sessions(limit=10**9)
st.dataframe(pd.DataFrame(rows), hide_index=True)
"""
"""The naive Sessions page as a script of its own (for the browser figures)."""
_EMPTY_SCRIPT = 'import streamlit as st\n\nst.title("Sessions")\n'
"""A page with a title only: the floor of any Streamlit page on this machine."""
_TABLE_SCRIPT = """
import pandas as pd
import streamlit as st

st.title("Sessions")
rows = {"session": [f"s-{i:06d}" for i in range(50)], "calls": list(range(50))}
st.dataframe(pd.DataFrame(rows), hide_index=True)
"""
"""A title and one 50-row ``st.dataframe`` (no query): the floor of a page with a table."""


def browser_load(page: Any, url: str, ready: Callable[[Any], None], repeat: int) -> float:
    """Median seconds from navigating to ``url`` until ``ready(page)`` returns, in Chromium,
    warm: after one unmeasured load (the server's caches and the browser's bundle filled)."""
    page.goto(url)
    ready(page)
    times: list[float] = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        page.goto(url)
        ready(page)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _table_drawn(page: Any) -> None:
    """The table's first row is in the grid (its accessible copy of the canvas)."""
    page.locator("[data-testid=stDataFrame] [role=row]").nth(1).wait_for(
        state="attached", timeout=120_000
    )


def _title_drawn(page: Any) -> None:
    page.locator("[data-testid=stMain] h1").wait_for(timeout=120_000)


def _caption_drawn(page: Any) -> None:
    page.get_by_text("Sessions 1–").wait_for(timeout=120_000)


def _our_table_drawn(page: Any) -> None:
    page.get_by_text("Sessions 1–").wait_for(timeout=120_000)
    _table_drawn(page)


def browser_figures(path: Path, total: int, repeat: int) -> None:
    """The Sessions page in headless Chromium against ``intentrace view`` (ours) and a naive
    page served by ``streamlit run`` (peer)."""
    # the tests' server and Chromium helpers (the Playwright extra is installed for them)
    from tests.viewer.browser import chromium_tab, serve

    url = f"sqlite:///{path}"
    with tempfile.TemporaryDirectory() as folder:
        naive, empty = Path(folder) / "naive_sessions.py", Path(folder) / "empty.py"
        table = Path(folder) / "table.py"
        naive.write_text(_NAIVE_SESSIONS_SCRIPT)
        empty.write_text(_EMPTY_SCRIPT)
        table.write_text(_TABLE_SCRIPT)
        with serve(url, script=naive) as base, chromium_tab(base) as tab:
            peer_s = browser_load(tab.page, base, _table_drawn, max(1, repeat // 2))
        with serve(url, script=empty) as base, chromium_tab(base) as tab:
            floor_s = browser_load(tab.page, base, _title_drawn, repeat)
        with serve(url, script=table) as base, chromium_tab(base) as tab:
            table_s = browser_load(tab.page, base, _table_drawn, repeat)
    with serve(url) as base, chromium_tab(base) as tab:
        ours_s = browser_load(tab.page, base + "/", _our_table_drawn, repeat)
        # where the time goes: the title (the app's navigation and page drawn), the caption
        # (the queries and controls), the table's first row (the grid drawn)
        title_s = browser_load(tab.page, base + "/", _title_drawn, repeat)
        caption_s = browser_load(tab.page, base + "/", _caption_drawn, repeat)
        line(f"sessions page in Chromium over {total} sessions, warm", ours_s, peer_s)
        line("sessions page in Chromium vs an empty Streamlit page (the floor)", ours_s, floor_s)
        line("sessions page in Chromium vs a page of one 50-row st.dataframe", ours_s, table_s)
        line("sessions page in Chromium, until its title is drawn", title_s, floor_s)
        line("sessions page in Chromium, until its caption is drawn", caption_s)
        print(
            f"goal (issue 19): < 1 s warm: {'met' if ours_s < 1 else 'NOT met'}; ours / empty "
            f"page {ours_s / floor_s:.2f}x, ours / one-table page {ours_s / table_s:.2f}x",
            flush=True,
        )
        line(
            "sessions page in Chromium, sorted by calls, warm",
            browser_load(tab.page, base + "/?sort=calls", _our_table_drawn, repeat),
        )
        line(
            "sessions page in Chromium, Errors toggle, warm",
            browser_load(tab.page, base + "/?errors=true", _our_table_drawn, repeat),
        )


_NAIVE_SESSION_SCRIPT = """
import streamlit as st

from tracing.ledger import open_ledger

st.title("Session")
batch = None
for anchor in open_ledger(None, read_only=True).session_anchors("big-session"):
    if anchor["batch_id"] != batch:
        batch = anchor["batch_id"]
        st.text(str(batch))
    st.text(f"{anchor['label']}  {anchor['tool_name']}  {anchor['duration_ms']}")
"""
"""The naive Session page (every call a line) as a script of its own (browser figures)."""


def _first_page_last_call(path: Path) -> tuple[str, str]:
    """(id of the last call drawn on the big session's first page, its row's label)."""
    from viewer._story import build_story

    book = open_ledger(f"sqlite:///{path}", read_only=True)
    try:
        story = build_story(BIG, book.session_anchors(BIG), book.blocks(BIG))
        last = story.page_blocks(0)[-1].calls[-1]
        return last.id, last.short
    finally:
        book.close()


def session_browser_figures(path: Path, calls: int, repeat: int) -> None:
    """The Session page of the big session in headless Chromium against ``intentrace view``
    (ours: first rows, then the whole first page: its last row)
    and a naive page that draws every call as a line (peer: its first row, its last)."""
    from tests.viewer.browser import chromium_tab, serve
    from viewer._ui import call_key

    url = f"sqlite:///{path}"
    last_id, _ = _first_page_last_call(path)
    first_rows = "[data-testid=stMain] [class*='st-key-call-']"

    def ours_first_rows(page: Any) -> None:
        page.locator(first_rows).first.wait_for(timeout=120_000)

    def ours_first_page(page: Any) -> None:
        # its last row (the Timeline and Checkpoints tabs are drawn when opened)
        page.locator(f".st-key-{call_key(last_id)}").wait_for(state="attached", timeout=120_000)

    def naive_first_row(page: Any) -> None:
        page.get_by_text("Reading part 0 of the auth module", exact=False).first.wait_for(
            timeout=120_000
        )

    def naive_all(page: Any) -> None:
        page.get_by_text(f"Reading part {calls - 1} of the auth module").first.wait_for(
            state="attached", timeout=300_000
        )

    target = f"/session?session={BIG}"
    with tempfile.TemporaryDirectory() as folder:
        naive = Path(folder) / "naive_session.py"
        naive.write_text(_NAIVE_SESSION_SCRIPT)
        with serve(url, script=naive) as base, chromium_tab(base) as tab:
            peer_first = browser_load(tab.page, base, naive_first_row, max(1, repeat // 2))
            peer_all = browser_load(tab.page, base, naive_all, max(1, repeat // 2))
    with serve(url) as base, chromium_tab(base) as tab:
        # the first load after the server started: the story is read and built (cold)
        t0 = time.perf_counter()
        tab.page.goto(base + target)
        ours_first_rows(tab.page)
        cold_rows = time.perf_counter() - t0
        ours_first_page(tab.page)
        cold_page = time.perf_counter() - t0
        rows_s = browser_load(tab.page, base + target, ours_first_rows, repeat)
        page_s = browser_load(tab.page, base + target, ours_first_page, repeat)
    line(f"session page in Chromium, {calls} calls, first rows, warm", rows_s, peer_first)
    line(f"session page in Chromium, {calls} calls, whole first page, warm", page_s, peer_all)
    line(f"session page in Chromium, {calls} calls, first rows, first load", cold_rows)
    line(f"session page in Chromium, {calls} calls, whole first page, first load", cold_page)
    print(
        f"goals (issue 19): first rows < 1 s: {'met' if rows_s < 1 else 'NOT met'}; "
        f"whole first page < 1.5 s: {'met' if page_s < 1.5 else 'NOT met'} (warm medians)",
        flush=True,
    )


def _naive_session() -> None:
    import streamlit as st

    from tracing.ledger import open_ledger

    ledger = open_ledger(None, read_only=True)
    st.title("Session")
    batch = None
    for anchor in ledger.session_anchors("big-session"):
        if anchor["batch_id"] != batch:
            batch = anchor["batch_id"]
            st.text(str(batch))
        st.text(f"{anchor['label']}  {anchor['tool_name']}  {anchor['duration_ms']}")


def time_app(make: Callable[[], AppTest], repeat: int, *, cold: bool) -> float:
    """Median wall time of ``AppTest.run`` (one instance, run ``repeat`` times after a first
    run: a new AppTest scans every installed package for components, which is not page time).
    ``cold`` clears ``st.cache_data`` before each run (the ledger connection stays open)."""
    import streamlit as st

    at = make()
    at.run()
    times: list[float] = []
    for _ in range(repeat):
        if cold:
            st.cache_data.clear()
        t0 = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - t0)
        if at.exception:
            raise SystemExit(f"the page failed: {[e.value for e in at.exception]}")
    return statistics.median(times)


def time_last_page(repeat: int) -> float:
    """The Sessions page turned to its last page (the deepest ``OFFSET``), caches cleared."""
    import streamlit as st

    at = ours()()
    at.run()
    pager = at.pagination[0]
    pager.set_value(pager.num_pages).run()
    times: list[float] = []
    for _ in range(repeat):
        st.cache_data.clear()
        t0 = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - t0)
    assert at.pagination[0].value == at.pagination[0].num_pages
    return statistics.median(times)


def ours(params: dict[str, str] | None = None, page: str | None = None) -> Callable[[], AppTest]:
    from streamlit.util import calc_hash

    def make() -> AppTest:
        at = AppTest.from_file(str(APP_PATH), default_timeout=300)
        for key, value in (params or {}).items():
            at.query_params[key] = value
        if page:
            at._page_hash = calc_hash(page)
        return at

    return make


def peer(func: Callable[[], None]) -> Callable[[], AppTest]:
    return lambda: AppTest.from_function(func, default_timeout=300)


def line(name: str, ours_s: float, peer_s: float | None = None) -> None:
    if peer_s is None:
        print(f"{name}: ours {ours_s:.3f} s", flush=True)
    else:
        print(
            f"{name}: ours {ours_s:.3f} s, peer {peer_s:.3f} s, ratio {peer_s / ours_s:.1f}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=5_000)
    parser.add_argument("--live", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--ledger", type=Path, default=None, help="reuse/keep this SQLite file")
    parser.add_argument("--only", choices=("all", "sessions", "session-browser"), default="all")
    parser.add_argument(
        "--browser", action="store_true", help="also time the pages in headless Chromium"
    )
    opts = parser.parse_args()

    tmp = None
    path: Path = opts.ledger
    if path is None:
        tmp = tempfile.TemporaryDirectory()
        path = Path(tmp.name) / "bench.db"
    if not path.exists():
        took = build(path, opts.sessions, opts.calls, opts.live)
        print(f"built {path} ({opts.sessions} sessions + {opts.calls} calls) in {took:.1f} s")
    os.environ[INTENTRACE_LEDGER_URL] = f"sqlite:///{path}"
    book = open_ledger(f"sqlite:///{path}", read_only=True)
    total = book.count_sessions()
    big = book.session(BIG)
    assert big is not None
    print(f"ledger: {total} sessions; {BIG}: {big['calls']} calls, {big['in_flight']} live")
    print(f"python {sys.version.split()[0]}, AppTest medians of {opts.repeat} runs")

    r = opts.repeat
    if opts.only == "session-browser":  # the Session page in Chromium only
        book.close()
        session_browser_figures(path, big["calls"], r)
        if tmp is not None:
            tmp.cleanup()
        return
    line(
        f"sessions page over {total} sessions (first page)",
        time_app(ours(), r, cold=True),
        time_app(peer(_naive_sessions), max(1, r // 2), cold=True),
    )
    line("sessions page, warm (cached for 3 s)", time_app(ours(), r, cold=False))
    line("sessions page, the last page (largest offset)", time_last_page(r))
    line("sessions page, search 'issue 99999' (scan)",
         time_app(ours({"q": "issue 99999"}), r, cold=True))  # fmt: skip
    line(
        "sessions page, sorted by calls over every page",
        time_app(ours({"sort": "calls"}), r, cold=True),
        time_app(peer(_naive_sorted_sessions), max(1, r // 2), cold=True),
    )
    line("sessions page, sorted by calls, warm", time_app(ours({"sort": "calls"}), r, cold=False))
    line("sessions page, sorted by duration", time_app(ours({"sort": "duration"}), r, cold=True))
    line("sessions page, sorted by errors", time_app(ours({"sort": "errors"}), r, cold=True))
    line("sessions page, Errors toggle", time_app(ours({"errors": "true"}), r, cold=True))
    line("sessions page, Live toggle", time_app(ours({"live": "true"}), r, cold=True))
    line("sessions page, last 24 hours", time_app(ours({"range": "24h"}), r, cold=True))
    line(
        "sessions page, errors + sorted by calls, warm",
        time_app(ours({"errors": "true", "sort": "calls"}), r, cold=False),
    )
    if opts.browser:
        browser_figures(path, total, r)
    if opts.only == "sessions":
        book.close()
        if tmp is not None:
            tmp.cleanup()
        return
    session = {"session": BIG}
    naive_session = time_app(peer(_naive_session), max(1, r // 2), cold=True)
    line(
        f"session page, {big['calls']} calls, cold",
        time_app(ours(session), r, cold=True),
        naive_session,
    )
    line(f"session page, {big['calls']} calls, warm", time_app(ours(session), r, cold=False))
    last = f"{BIG}-{opts.calls - opts.live - 1}"
    line(
        f"deep link to the last settled call of {big['calls']}",
        time_app(ours({"session": BIG, "anchor": last}), r, cold=True),
    )
    line(f"live page, {len(book.in_flight(limit=1000))} calls in flight",
         time_app(ours(page="live"), r, cold=True))  # fmt: skip
    book.close()
    if opts.browser:
        session_browser_figures(path, big["calls"], r)
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
