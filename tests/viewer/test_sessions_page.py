"""The Sessions page's controls under AppTest, on the fixture ledger in SQLite and PostgreSQL:
sort over every page (in the database), the errors and live toggles, time ranges, the time
columns (first/last seen with their zone, or relative) and the duration; each control kept in
the URL."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from tests.ledger.conftest import pg_schema_url
from tests.viewer import fixture_ledger
from tests.viewer.conftest import captions, open_page, run_app
from tests.viewer.fixture_ledger import (
    AUTH,
    AUTH_USER,
    BASE_NS,
    BULK_SESSIONS,
    LIVE,
    LIVE_USER,
    XSS,
)
from tracing.environment_variables import INTENTRACE_LEDGER_URL
from tracing.ledger import open_ledger
from tracing.status import Status

TOTAL = BULK_SESSIONS + 3
NO_MATCH = "No session matches these filters."
FIXTURE_DAY = datetime.fromtimestamp(BASE_NS / 1e9, UTC).date()


@pytest.fixture(scope="module")
def postgres_fixture_url(postgres_url: str) -> str:
    """The fixture ledger in a schema of its own on the PostgreSQL server (written once)."""
    url = pg_schema_url(postgres_url)
    fixture_ledger.build(url)
    return url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(
    request: pytest.FixtureRequest, fixture_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """The viewer on the fixture ledger, in SQLite and in PostgreSQL."""
    url = (
        fixture_url
        if request.param == "sqlite"
        else request.getfixturevalue("postgres_fixture_url")
    )
    monkeypatch.setenv(INTENTRACE_LEDGER_URL, url)
    yield url


def sessions(at: AppTest) -> list[str]:
    return list(at.dataframe[0].value["session"]) if at.dataframe else []


def columns(at: AppTest) -> dict[str, dict[str, Any]]:
    """The table's column configuration as the browser gets it."""
    return json.loads(at.dataframe[0].proto.columns)


# --- sort -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("sort", "ascending", "first"),
    [
        ("calls", False, [AUTH, LIVE]),  # 13, 5, then the one-call sessions
        ("errors", False, [AUTH]),
        ("duration", False, [AUTH, XSS, LIVE]),  # 3 s, 100 ms, 40 ms
        ("first_seen", False, [XSS, LIVE, AUTH]),
        ("first_seen", True, ["bulk-000", "bulk-001"]),
        ("session", True, ["bulk-000", "bulk-001"]),
        ("session", False, [XSS, LIVE, AUTH]),
        ("last_seen", True, ["bulk-000", "bulk-001"]),
    ],
)
def test_sort(store_url: str, sort: str, ascending: bool, first: list[str]) -> None:
    at = run_app()
    at.selectbox(key="sort").set_value(sort)
    at.toggle(key="asc").set_value(ascending).run()
    assert sessions(at)[: len(first)] == first
    assert len(sessions(at)) == TOTAL


def test_sort_runs_over_every_page_not_the_one_shown(store_url: str) -> None:
    at = run_app({"sort": "calls", "asc": "true"})  # a link with the sort in it
    at.selectbox(key="size").set_value(25).run()
    name = "Sessions 1–25 of 33 · calls, fewest first (across all pages)."
    assert captions(at)[0].startswith(name)
    assert AUTH not in sessions(at) and LIVE not in sessions(at)
    at.pagination[0].set_value(2).run()
    assert sessions(at)[-2:] == [LIVE, AUTH]  # the most calls: last of the last page
    # a new sort starts again on the first page
    at.toggle(key="asc").set_value(False).run()
    assert captions(at)[0].startswith("Sessions 1–25 of 33 · calls, most first")
    assert sessions(at)[:2] == [AUTH, LIVE]


def test_unknown_sort_in_the_url_falls_back_to_last_seen(store_url: str) -> None:
    at = run_app({"sort": "nope"})
    assert at.selectbox(key="sort").value == "last_seen"
    assert sessions(at)[:3] == [XSS, LIVE, AUTH]


# --- errors and live --------------------------------------------------------------------------
def test_errors_and_live_toggles(store_url: str) -> None:
    at = run_app()
    at.toggle(key="errors").set_value(True).run()
    assert sessions(at) == [AUTH]
    at.toggle(key="errors").set_value(False)
    at.toggle(key="live").set_value(True).run()
    assert sessions(at) == [LIVE]
    at.toggle(key="errors").set_value(True).run()  # both: no session has a failed and a live call
    assert not at.dataframe
    assert [i.value for i in at.info] == [NO_MATCH]
    assert sessions(run_app({"errors": "true"})) == [AUTH]  # kept in the URL


# --- time range -------------------------------------------------------------------------------
def test_time_range_dates(store_url: str) -> None:
    at = run_app()
    at.selectbox(key="range").set_value("custom").run()
    at.date_input(key="dates").set_value((FIXTURE_DAY, FIXTURE_DAY)).run()
    assert len(sessions(at)) == TOTAL
    later = FIXTURE_DAY + timedelta(days=1)
    at.date_input(key="dates").set_value((later, later + timedelta(days=3))).run()
    assert [i.value for i in at.info] == [NO_MATCH]
    before: date = FIXTURE_DAY - timedelta(days=2)
    at.date_input(key="dates").set_value((before, FIXTURE_DAY)).run()
    assert len(sessions(at)) == TOTAL


def test_time_range_presets_count_back_from_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'recent.db'}"
    now = time.time_ns()
    with open_ledger(url) as ledger:
        for session_id, ago_s in (("conv-now", 60), ("conv-yesterday", 30 * 3600),
                                  ("conv-last-month", 20 * 86400)):  # fmt: skip
            ledger.record({
                "tool_call_id": session_id, "tool_name": "search", "status": Status.SUCCESS,
                "session_id": session_id, "start_ns": now - ago_s * 1_000_000_000,
                "end_ns": now - ago_s * 1_000_000_000 + 1_000_000,
            })  # fmt: skip
    monkeypatch.setenv(INTENTRACE_LEDGER_URL, url)
    at = run_app()
    assert at.selectbox(key="range").value == "any"
    assert sessions(at) == ["conv-now", "conv-yesterday", "conv-last-month"]
    for preset, expected in (
        ("15m", ["conv-now"]),
        ("24h", ["conv-now"]),
        ("7d", ["conv-now", "conv-yesterday"]),
        ("30d", ["conv-now", "conv-yesterday", "conv-last-month"]),
    ):
        at.selectbox(key="range").set_value(preset).run()
        assert sessions(at) == expected, preset
    assert sessions(run_app({"range": "7d"})) == ["conv-now", "conv-yesterday"]


def test_old_sessions_out_of_a_recent_range_say_so(store_url: str) -> None:
    at = run_app({"range": "1h"})
    assert not at.dataframe
    assert [i.value for i in at.info] == [NO_MATCH]  # not "the ledger has no sessions"


# --- columns ----------------------------------------------------------------------------------
def test_first_last_seen_and_duration_columns(store_url: str) -> None:
    at = run_app()
    table = at.dataframe[0].value
    auth = table[table["session"] == AUTH].iloc[0]
    assert auth["first seen"] == datetime.fromtimestamp(BASE_NS / 1e9, UTC)
    assert auth["last seen"] == datetime.fromtimestamp(BASE_NS / 1e9 + 3, UTC)
    assert auth["duration"] == timedelta(seconds=3)
    config = columns(at)
    # absolute times in the browser's zone (UTC when the browser did not say), offset shown
    assert config["last seen"]["type_config"] == {
        "type": "datetime",
        "format": "YYYY-MM-DD HH:mm:ss Z",
        "timezone": "UTC",
    }
    assert config["duration"]["type_config"] == {"type": "number", "format": "compact"}


def test_times_relative_or_utc(store_url: str) -> None:
    at = run_app()
    at.segmented_control(key="times").set_value("relative").run()
    assert columns(at)["first seen"]["type_config"] == {"type": "datetime", "format": "distance"}
    at.segmented_control(key="times").set_value("utc").run()
    assert columns(at)["first seen"]["type_config"]["timezone"] == "UTC"
    at = run_app({"times": "relative"})
    assert columns(at)["last seen"]["type_config"]["format"] == "distance"


def test_a_search_with_other_filters_names_no_single_cause(store_url: str) -> None:
    at = run_app({"q": "oauth"})
    assert sessions(at) == [AUTH]
    at.toggle(key="live").set_value(True).run()
    assert [i.value for i in at.info] == [NO_MATCH]


def test_a_session_opened_from_a_filtered_list_carries_the_list_for_back(store_url: str) -> None:
    at = run_app({"errors": "true", "sort": "calls"})
    assert sessions(at) == [AUTH]
    at.session_state["sessions_table"] = {"selection": {"rows": [0], "columns": [], "cells": []}}
    at.run()
    assert [t.value for t in at.title] == ["Session"]
    # st.switch_page gave the Sessions page's history entry these parameters: Back lands there
    params = {k: v[-1] if isinstance(v, list) else v for k, v in at.query_params.items()}
    assert params == {"session": AUTH, "errors": "true", "sort": "calls"}
    open_page(at, "sessions")  # what the browser's Back does, in the same tab: that URL
    at.query_params.clear()
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert [t.value for t in at.title] == ["Sessions"]
    assert at.toggle(key="errors").value and at.selectbox(key="sort").value == "calls"
    assert sessions(at) == [AUTH]


# --- agent, tool, status, user and tag filters; every control in the URL ----------------------
def url_params(at: AppTest) -> dict[str, str]:
    return {k: v[-1] if isinstance(v, list) else v for k, v in at.query_params.items()}


def test_user_and_tag_filters(store_url: str) -> None:
    at = run_app()
    table = at.dataframe[0].value
    assert {"users", "tags"} <= set(table.columns)
    assert dict(zip(table["session"], table["users"], strict=True))[AUTH] == AUTH_USER
    at.session_state["filters"] = True
    at.run()
    assert at.selectbox(key="user").options == ["(any)", AUTH_USER, LIVE_USER]
    assert at.selectbox(key="tag").options == ["(any)", "auth", "prod"]
    at.selectbox(key="user").set_value(AUTH_USER).run()
    assert sessions(at) == [AUTH]
    assert url_params(at) == {"user": AUTH_USER}
    at.selectbox(key="user").set_value("(any)")
    at.selectbox(key="tag").set_value("prod").run()
    assert sessions(at) == [LIVE, AUTH]
    assert url_params(at) == {"tag": "prod"}
    at.selectbox(key="agent").set_value("planner").run()
    assert sessions(at) == [LIVE]
    assert url_params(at) == {"tag": "prod", "agent": "planner"}


def test_every_filter_comes_from_the_url_and_opens_its_section(store_url: str) -> None:
    at = run_app({"user": LIVE_USER, "tag": "prod", "tool": "plan", "status": "streaming"})
    assert at.session_state["filters"] is True
    assert sessions(at) == [LIVE]
    assert at.selectbox(key="user").value == LIVE_USER
    # a value the ledger does not have stays chosen and matches nothing; a bad status: any
    at = run_app({"user": "nobody", "status": "nope", "size": "25", "agent": "coder"})
    assert at.selectbox(key="user").value == "nobody"
    assert at.selectbox(key="status").value == "(any)"
    assert at.selectbox(key="size").value == 25
    assert [i.value for i in at.info] == [NO_MATCH]
    assert url_params(at) == {"user": "nobody", "size": "25", "agent": "coder"}


def test_a_navigated_url_resets_the_controls_it_does_not_name(store_url: str) -> None:
    """Back/Forward to another list: the controls become that URL's (not the ones on screen)."""
    at = run_app()
    at.toggle(key="errors").set_value(True)
    at.selectbox(key="sort").set_value("calls").run()
    assert url_params(at) == {"errors": "true", "sort": "calls"}
    at.query_params.clear()  # what Back to the first list does: its URL, the same session
    at.query_params["live"] = "true"
    at.run()
    assert not at.toggle(key="errors").value and at.toggle(key="live").value
    assert at.selectbox(key="sort").value == "last_seen"
    assert sessions(at) == [LIVE]
    assert url_params(at) == {"live": "true"}
