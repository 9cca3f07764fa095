"""The viewer's Analytics page under Streamlit AppTest, on a real ledger."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from streamlit.testing.v1 import AppTest

from tests.analytics.conftest import call, write_all
from tests.viewer.conftest import open_page
from tracing.analytics import load_dashboards
from tracing.environment_variables import INTENTRACE_DASHBOARDS, INTENTRACE_LEDGER_URL
from tracing.ledger import Ledger
from viewer import APP_PATH


@pytest.fixture
def page_url(
    sqlite_url: str, make_ledger: Callable[[str], Ledger], monkeypatch: pytest.MonkeyPatch
) -> str:
    ledger = make_ledger(sqlite_url)
    writes = []
    for i in range(30):
        writes.append(call(f"e{i}", "edit_file", "Editing the lockfile by hand", start_ms=10 * i))
        writes.append(
            call(f"f{i}", "shell", "Running a build", status="error", start_ms=10 * i + 1)
        )
        writes.append(call(f"r{i}", "read_file", f"Reading file {i}", start_ms=10 * i + 2))
    write_all(ledger, writes)
    monkeypatch.setenv(INTENTRACE_LEDGER_URL, sqlite_url)
    monkeypatch.delenv(INTENTRACE_DASHBOARDS, raising=False)
    return sqlite_url


def _run(dashboard: str | None = None) -> AppTest:
    at = AppTest.from_file(str(APP_PATH), default_timeout=60)
    if dashboard is not None:
        at.query_params["dashboard"] = dashboard
    open_page(at, "analytics")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_failures_dashboard(page_url: str) -> None:
    at = _run("failures")
    assert [t.value for t in at.title] == ["Analytics"]
    dashboards = load_dashboards()
    assert at.selectbox[0].options == [d.title for d in dashboards.values()]
    assert at.selectbox[0].value == "failures"
    assert [h.value for h in at.subheader] == [p.title for p in dashboards["failures"].panels]
    top = at.dataframe[0].value
    assert top["item"].iloc[0] == "editing the lockfile by hand"
    assert int(top["count"].iloc[0]) == 30
    tools = at.dataframe[4].value
    shell = tools[tools["tool_name"] == "shell"].iloc[0]
    assert (int(shell["failed"]), int(shell["settled"]), float(shell["failure_rate"])) == (
        30,
        30,
        1.0,
    )
    downloads = at.get("download_button")
    assert len(downloads) == len(dashboards["failures"].panels)
    assert len(at.get("vega_lite_chart")) == 5  # every panel of this dashboard has a chart


def test_switching_dashboards(page_url: str) -> None:
    at = _run()
    at.selectbox[0].set_value("tool_health").run()
    assert not at.exception
    assert at.query_params["dashboard"] == "tool_health"
    table = at.dataframe[0].value
    assert sorted(table["tool_name"]) == ["edit_file", "read_file", "shell"]
    assert set(table["label_coverage"]) == {1.0}
    assert len(at.get("download_button")) == 4
    # the SQL panel (over calls_v1): each row opens its call
    failed = at.dataframe[3].value
    assert list(failed["tool_call_id"][:2]) == ["f0", "f1"]
    assert list(failed["open"][:2]) == [
        "session?session=s1&anchor=f0",
        "session?session=s1&anchor=f1",
    ]


def test_bad_ledger_is_a_message(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(INTENTRACE_LEDGER_URL, f"sqlite:///{tmp_path}/missing.db")
    at = _run("tool_health")
    assert [e.value for e in at.error] == ["The ledger cannot be analysed."]
    assert "no ledger database" in at.code[0].value


def test_every_row_links_to_the_calls_behind_it(page_url: str) -> None:
    at = _run("failures")
    top = at.dataframe[0].value  # precursors: the latest call with that intent
    assert top["open"].iloc[0] == "session?session=s1&anchor=e29"
    tools = at.dataframe[4].value  # per tool: the latest failed call of the tool
    shell = tools[tools["tool_name"] == "shell"].iloc[0]
    assert shell["open"] == "session?session=s1&anchor=f29"
    days = at.dataframe[2].value  # failure rate per day: a failed call of that day
    assert days["open"].iloc[0] == "session?session=s1&anchor=f29"
    spec = at.get("vega_lite_chart")[0].proto.spec
    assert '"href"' in spec  # a chart mark opens the same link


def test_filters_from_the_url_reach_the_engine(page_url: str) -> None:
    at = AppTest.from_file(str(APP_PATH), default_timeout=60)
    at.query_params["dashboard"] = "tool_health"
    at.query_params["tool"] = "shell,read_file"
    at.query_params["until"] = "2026-01-01T00:00:00.150Z"
    open_page(at, "analytics")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    table = at.dataframe[0].value
    assert dict(zip(table["tool_name"], table["calls"], strict=True)) == {
        "shell": 15,
        "read_file": 15,
    }
    assert at.text_input(key="filter-tool").value == "shell,read_file"
    at.text_input(key="filter-tool").set_value("").run()
    assert "tool" not in at.query_params
    assert sorted(at.dataframe[0].value["tool_name"]) == ["edit_file", "read_file", "shell"]


def test_unknown_dashboard_says_so_and_shows_no_other(page_url: str) -> None:
    at = _run("nope\u202egnp.exe")
    assert [t.value for t in at.title] == ["Analytics"]
    assert at.warning[0].value == "There is no dashboard with this name:"
    # shown as the display sanitizer leaves it (the bidi override dropped)
    assert "nopegnp.exe" in [t.value for t in at.text]
    assert at.selectbox[0].value is None  # no other dashboard opened in its place
    assert not at.subheader and not at.dataframe
    assert at.query_params["dashboard"] == "nope\u202egnp.exe"  # the URL still says what was asked
    at.selectbox[0].set_value("tool_health").run()
    assert not at.warning
    assert at.query_params["dashboard"] == "tool_health"
    assert sorted(at.dataframe[0].value["tool_name"]) == ["edit_file", "read_file", "shell"]
