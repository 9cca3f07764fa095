"""AppTest runs of the real entry script on the fixture ledger: what each page says."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from streamlit import dataframe_util
from streamlit.testing.v1 import AppTest

from tests.viewer.conftest import captions, open_page, open_tab, run_app, texts
from tests.viewer.fixture_ledger import AUTH, BULK_SESSIONS, LIVE, XSS, XSS_INTENT
from viewer._ui import call_key

pytestmark = pytest.mark.usefixtures("viewer_url")

TOTAL_SESSIONS = BULK_SESSIONS + 3


def badges(at: AppTest) -> list[str]:
    """Badge texts (``st.badge`` is Markdown ``:color-badge[:icon: text]``)."""
    found = [re.fullmatch(r":\w+-badge\[(?::[\w/]+: )?(.*)\]", m.value) for m in at.markdown]
    return sorted(m.group(1) for m in found if m)


def chart_data(at: AppTest) -> pd.DataFrame:
    """The timeline's data (the Timeline tab is opened first: tabs are lazy)."""
    if not at.get("vega_lite_chart"):
        open_tab(at, "Timeline")
    (chart,) = at.get("vega_lite_chart")
    (dataset,) = chart.proto.datasets
    return dataframe_util.convert_arrow_bytes_to_pandas_df(dataset.data.data)


# --- Sessions -------------------------------------------------------------------------------
def test_sessions_lists_counts_most_recent_first() -> None:
    at = run_app()
    assert [t.value for t in at.title] == ["Sessions"]
    table = at.dataframe[0].value
    assert list(table["session"][:3]) == [XSS, LIVE, AUTH]
    auth = table[table["session"] == AUTH].iloc[0]
    assert (auth["calls"], auth["errors"], auth["live"], auth["turns"]) == (13, 1, 0, 3)
    assert auth["agents"] == "coder, reviewer"
    live = table[table["session"] == LIVE].iloc[0]
    assert (live["calls"], live["live"]) == (5, 5)
    assert captions(at)[0] == (
        f"Sessions 1–{TOTAL_SESSIONS} of {TOTAL_SESSIONS} · last seen, newest first (across all "
        "pages). Select a row to open the session."
    )


def test_sessions_paginate_in_the_database() -> None:
    at = run_app()
    at.selectbox(key="size").set_value(25).run()
    assert captions(at)[0].startswith(f"Sessions 1–25 of {TOTAL_SESSIONS} ·")
    assert len(at.dataframe[0].value) == 25
    pager = at.pagination[0]
    pager.set_value(2).run()
    assert captions(at)[0].startswith(f"Sessions 26–{TOTAL_SESSIONS} of {TOTAL_SESSIONS} ·")
    second = list(at.dataframe[0].value["session"])
    assert len(second) == TOTAL_SESSIONS - 25
    assert second[-1] == "bulk-000"  # the oldest activity comes last


@pytest.mark.parametrize(
    ("widget", "value", "expected"),
    [
        ("agent", "reviewer", [AUTH]),
        ("agent", "hunter", [LIVE]),
        ("tool", "bisect", [LIVE]),
        ("status", "cancelled", [AUTH]),
        ("status", "streaming", [LIVE]),
    ],
)
def test_sessions_filters(widget: str, value: str, expected: list[str]) -> None:
    at = run_app()
    assert widget not in [s.key for s in at.selectbox]  # loaded only when opened
    at.session_state["filters"] = True
    at.run()
    assert at.selectbox(key="agent").options == ["(any)", "batcher", "coder", "hunter",
                                                 "planner", "reviewer"]  # fmt: skip
    at.selectbox(key=widget).set_value(value).run()
    assert list(at.dataframe[0].value["session"]) == expected
    assert captions(at)[0].startswith(f"Sessions 1–{len(expected)} of {len(expected)} ·")


def test_sessions_search_by_intent_text_lists_matching_calls() -> None:
    at = run_app()
    at.text_input(key="q").input("oauth").run()
    assert list(at.dataframe[0].value["session"]) == [AUTH]
    assert [s.value for s in at.subheader] == ["Matching calls"]
    lines = texts(at)
    assert "Found 12 results" in lines  # c2's label (its intent matched)
    assert "12 résultats trouvés" in lines  # c12: "Recherche de la gestion OAuth"
    links = [p for p in at.page_link if p.value == "Open"]
    assert len(links) == 2
    # a search that matches nothing says so
    at.text_input(key="q").input("no such words anywhere").run()
    assert not at.dataframe
    assert [i.value for i in at.info] == [
        "No session has a call whose intent, outcome or label contains this text:"
    ]
    assert "no such words anywhere" in texts(at)
    assert not [c for c in captions(at) if c.startswith("Sessions 0")]


def test_selecting_a_session_row_opens_it() -> None:
    at = run_app()
    rows = list(at.dataframe[0].value["session"])
    at.session_state["sessions_table"] = {
        "selection": {"rows": [rows.index(AUTH)], "columns": [], "cells": []}
    }
    at.run()
    assert [t.value for t in at.title] == ["Session"]
    assert at.query_params["session"] == AUTH


def test_back_to_sessions_stays_on_sessions() -> None:
    """Back from a session opened from the table: the Sessions page again (same tab), whose
    URL may still name the session, is not bounced to the Session page, nor re-opened by the
    table's old selection."""
    at = run_app()
    rows = list(at.dataframe[0].value["session"])
    at.session_state["sessions_table"] = {
        "selection": {"rows": [rows.index(AUTH)], "columns": [], "cells": []}
    }
    at.run()
    assert [t.value for t in at.title] == ["Session"]
    open_page(at, "sessions")  # what the browser's Back does: the page of the earlier URL
    at.query_params["session"] = AUTH
    at.run()
    assert [t.value for t in at.title] == ["Sessions"]


# --- Session: story --------------------------------------------------------------------------
def story_lines(at: AppTest) -> list[str]:
    return [t for t in texts(at) if t[:2] in {"✓ ", "✗ ", "⊘ ", "● ", "✎ ", "◷ "}]


def test_session_reads_as_turns_blocks_calls() -> None:
    at = run_app({"session": AUTH})
    assert [t.value for t in at.title] == ["Session"]
    assert [s.value for s in at.subheader] == ["Turn 1", "Turn 2", "Turn 3"]
    assert story_lines(at) == [
        # turn 1: parallel siblings with distinct intents; settled outcome, failure framing
        "✓ Found MCP wiring in server.py",
        "✓ Found 12 results",
        "✗ Reading the callback router · failed",
        # turn 2: identical sibling intents stay two rows; cancellation framing; background
        # call harvested later shows its outcome
        "✓ Reading the config",
        "✓ Reading the config",
        "⊘ Running the auth test suite · cancelled",
        "✓ Indexed 1,204 files",
        # turn 3: the delegating call reads "parent · child's latest", its subagent nested
        "✓ Migration review done · No down-migration found",
        "✓ Reading migration 0042",
        "✓ No down-migration found",
        # redacted args: the intent is hidden, so today's default label
        "✓ Ran http_get",
        # non-English intents, as written
        "✓ 12 résultats trouvés",
        "✓ 認証ハンドラを探しています",
    ]


def test_block_headers_follow_the_precedence_with_counts() -> None:
    at = run_app({"session": AUTH})
    lines = texts(at)
    counts = captions(at)
    # b1: latest settled by settle sequence (c1 settled last although it started first)
    assert lines[lines.index("✓ Found MCP wiring in server.py") - 1] == (
        "Found MCP wiring in server.py"
    )
    assert "3 calls · 1 failed" in counts
    assert not any(c.startswith("1 call ·") for c in counts)  # one call: no header, no count
    # b4 has a block-level activity label: it heads the block
    assert lines[lines.index("✓ Indexed 1,204 files") - 1] == "Warming the search index"
    # b7 is one call: the call alone, no header ("Used 1 tool" nowhere)
    assert "Used 1 tool" not in lines
    assert "Ran http_get" not in lines
    # the subagent's block (c9, c10): latest settled outcome
    assert lines[lines.index("✓ Reading migration 0042") - 1] == "No down-migration found"
    assert "2 calls" in counts


def test_subagent_calls_nest_under_the_spawning_call() -> None:
    at = run_app({"session": AUTH})
    (nest,) = at.expander
    assert nest.label == "Subagent · 2 calls"
    inside = [t.value for t in nest.text]
    assert "✓ Reading migration 0042" in inside
    assert "✓ No down-migration found" in inside
    assert "✓ Migration review done · No down-migration found" not in inside


def test_live_session_marks_live_calls_and_running_subagent() -> None:
    at = run_app({"session": LIVE})
    lines = story_lines(at)
    assert "✎ Planning the rollout of feature flags" in lines  # streaming: the intent so far
    assert "● Checking the deploy status" in lines
    assert "◷ Building the release artifacts · in background" in lines
    # a running subagent: "parent intent · child's latest intent"
    assert "● Delegating the flaky test hunt · Bisecting the failing commit" in lines
    assert badges(at) == ["live", "live", "live", "live · background", "live · writing"]
    # the block of l1 (streaming, seq 1) and l2 (in flight, seq 2): latest in-flight intent
    all_lines = texts(at)
    assert all_lines[all_lines.index("✎ Planning the rollout of feature flags") - 1] == (
        "Checking the deploy status"
    )


def test_model_text_is_plain_text_in_the_story() -> None:
    at = run_app({"session": XSS})
    assert f"✓ {XSS_INTENT}" in texts(at)
    # model text never reaches an element that renders Markdown or HTML
    for element in [*at.markdown, *at.caption, *at.expander, *at.page_link]:
        body = getattr(element, "value", None) or getattr(element, "label", "")
        assert "onerror" not in str(body)
    assert all("onerror" not in h.proto.body for h in at.get("html"))


# --- Session: deep links and call detail ------------------------------------------------------
def test_deep_link_opens_the_call_with_its_detail_and_focus() -> None:
    at = run_app({"session": AUTH, "anchor": "c10"})
    (nest,) = at.expander
    assert nest.proto.expanded  # the subagent section holding the call is open
    detail = [t.value for t in nest.text]
    assert "Looking for down-migrations" in detail  # its intent
    facts = next(t for t in detail if t.startswith("Status:"))
    assert "Agent: reviewer" in facts
    assert "Spawned by: c8" in detail  # beside a link to the spawning call
    assert "Sequence: 17 · settled at 19" in facts
    assert at.json[0].proto.body == '{"query": "args of c10"}'
    # the browser is told to highlight and scroll to exactly that call
    key = call_key("c10")
    focus = [h.proto.body for h in at.get("html") if key in h.proto.body]
    assert any("scrollIntoView" in body for body in focus)
    assert any("outline" in body for body in focus)
    assert at.query_params["anchor"] == "c10"


def test_deep_link_from_the_root_url_and_from_another_page() -> None:
    for page in (None, "live"):
        at = run_app({"session": AUTH, "anchor": "c3"}, page=page)
        assert [t.value for t in at.title] == ["Session"]
        assert "FileNotFoundError: routes/callback.py" in [c.value for c in at.code]


def test_deep_link_naming_only_the_call_finds_its_session() -> None:
    at = run_app({"anchor": "c6"})
    assert AUTH in texts(at)
    assert "Running the auth test suite · cancelled" in texts(at)  # the detail's label
    assert at.query_params["session"] == AUTH


def test_detail_of_a_redacted_call() -> None:
    at = run_app({"session": AUTH, "anchor": "c11"})
    lines = texts(at)
    assert "(none: the call carries no visible intent)" in lines
    facts = next(t for t in lines if t.startswith("Status:"))
    assert "Redaction: args: redact · intent hidden by policy · outcome hidden by policy" in facts
    assert '"[redacted: policy]"' in [c.value for c in at.code]


def test_unknown_session_and_foreign_anchor() -> None:
    at = run_app({"session": "no-such-session"})
    assert at.warning[0].value == "The ledger has no session with this id:"
    assert [p.label for p in at.page_link] == ["Back to the sessions"]
    at = run_app({"session": XSS, "anchor": "c1"})
    assert at.warning[0].value == "The linked call is not part of this session:"


def test_unknown_anchor_says_so_and_opens_no_other_session() -> None:
    at = run_app({"anchor": "nope"})
    assert [t.value for t in at.title] == ["Session"]
    assert at.warning[0].value == "The ledger has no call with this id:"
    assert "nope" in texts(at)
    assert not at.metric  # no session (not the latest one) was opened


def test_session_page_without_a_session_opens_the_latest() -> None:
    at = run_app(page="session")
    assert XSS in texts(at)
    assert at.query_params["session"] == XSS


# --- Session: timeline and checkpoints --------------------------------------------------------
def test_timeline_has_one_row_per_call_even_with_identical_labels() -> None:
    at = run_app({"session": AUTH})
    data = chart_data(at)
    assert len(data) == 13
    assert data["row"].is_unique  # rows are keyed by sequence number, never by text
    assert list(data["label"]).count("Reading the config") == 2
    assert "↳ Reading migration 0042" in list(data["label"])  # nested calls are marked
    assert "13 calls on this page, one row each, in sequence order." in captions(at)
    spec = at.get("vega_lite_chart")[0].proto.spec
    assert '"field": "row"' in spec


def test_checkpoints_are_settled_calls_and_open_the_call() -> None:
    at = open_tab(run_app({"session": AUTH}), "Checkpoints")
    table = at.dataframe[0].value
    assert len(table) == 13
    assert list(table["checkpoint"][:3]) == [
        "Found MCP wiring in server.py",
        "Found 12 results",
        "Reading the callback router · failed",
    ]
    at.session_state["checkpoints_table"] = {"selection": {"rows": [5], "columns": [], "cells": []}}
    at.run()
    assert at.query_params["anchor"] == "c6"
    assert "⊘ Running the auth test suite · cancelled" in texts(at)
    assert any(t.startswith("Status: cancelled") for t in texts(at))


# --- Live ------------------------------------------------------------------------------------
def test_live_page_lists_calls_in_flight_across_sessions() -> None:
    at = run_app(page="live")
    assert [t.value for t in at.title] == ["Live"]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics == {"In flight": "5", "Being written": "1", "Sessions": "1"}
    lines = texts(at)
    assert f"Session {LIVE}" in lines
    assert "✎ Planning the rollout of feature flags" in lines
    assert "◷ Building the release artifacts · in background" in lines
    assert "● Bisecting the failing commit" in lines
    assert badges(at) == ["live", "live", "live", "live · background", "live · writing"]
    details = [p.label for p in at.page_link if p.label.startswith("Details")]
    assert len(details) == len(set(details)) == 5  # distinct accessible names


def test_subagent_shows_its_agent_and_links_both_ways() -> None:
    at = run_app({"session": AUTH, "anchor": "c10"})
    assert "Subagent: reviewer" in texts(at)
    links = {p.label: p for p in at.page_link}
    assert "Open its thread" in links and "Open the spawning call" in links
    assert "Spawned by: c8" in texts(at)
