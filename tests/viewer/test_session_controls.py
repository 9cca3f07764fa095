"""The Session page's controls (AppTest on the fixture ledger): search inside a session, jump
to a turn, collapse a turn, previous/next call, timeline bars that open a call, links to copy,
the link out to the trace."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from streamlit.testing.v1 import AppTest

from tests.viewer.conftest import captions, run_app, texts
from tests.viewer.fixture_ledger import AUTH
from tests.viewer.test_pages import chart_data
from tracing.cli import main
from tracing.environment_variables import INTENTRACE_TRACE_URL
from viewer import check_trace_url
from viewer._links import app_root, session_link, trace_url

pytestmark = pytest.mark.usefixtures("viewer_url")

MARKS = ("✓ ", "✗ ", "⊘ ", "● ", "✎ ", "◷ ")


def rows(at: AppTest) -> list[str]:
    return [t for t in texts(at) if t[:2] in MARKS]


def widget_key(at: AppTest, prefix: str) -> str:
    widgets = [*at.text_input, *at.selectbox, *at.toggle]
    return next(w.key for w in widgets if w.key and w.key.startswith(prefix))


# --- search inside a session -----------------------------------------------------------------
def test_search_text_keeps_matching_calls_with_their_block_headers() -> None:
    at = run_app({"session": AUTH})
    at.text_input(key=widget_key(at, "find-text-")).set_value("CONFIG").run()
    assert rows(at) == ["✓ Reading the config", "✓ Reading the config"]
    assert "2 of 13 calls match the search." in captions(at)
    assert [s.value for s in at.subheader] == ["Turn 2"]


def test_search_reaches_into_a_subagent_and_opens_its_section() -> None:
    at = run_app({"session": AUTH})
    at.text_input(key=widget_key(at, "find-text-")).set_value("down-migration").run()
    (nest,) = at.expander
    assert nest.proto.expanded
    # the spawning call is drawn for context, the subagent's matching call inside
    assert rows(at) == ["✓ Migration review done · No down-migration found",
                        "✓ No down-migration found"]  # fmt: skip


@pytest.mark.parametrize(
    ("prefix", "value", "expected"),
    [
        ("find-tool-", "run_tests", ["⊘ Running the auth test suite · cancelled"]),
        ("find-status-", "error", ["✗ Reading the callback router · failed"]),
    ],
)
def test_search_by_tool_and_by_status(prefix: str, value: str, expected: list[str]) -> None:
    at = run_app({"session": AUTH})
    at.selectbox(key=widget_key(at, prefix)).set_value(value).run()
    assert rows(at) == expected


def test_errors_only() -> None:
    at = run_app({"session": AUTH})
    at.toggle(key=widget_key(at, "find-errors-")).set_value(True).run()
    assert rows(at) == ["✗ Reading the callback router · failed"]
    at.text_input(key=widget_key(at, "find-text-")).set_value("config").run()
    assert rows(at) == []
    assert "No call matches the search." in [i.value for i in at.info]


# --- turns -----------------------------------------------------------------------------------
def test_jump_to_turn_puts_it_in_the_url_and_scrolls_to_it() -> None:
    at = run_app({"session": AUTH, "anchor": "c1"})
    at.selectbox(key=widget_key(at, "jump-")).set_value(3).run()
    assert at.query_params["turn"] == "3"
    assert "anchor" not in at.query_params  # the linked call made way
    scripts = [h.proto.body for h in at.get("html") if "scrollIntoView" in h.proto.body]
    assert len(scripts) == 1 and ".st-key-turn-" in scripts[0]
    # the URL alone does it too (a shared link)
    again = run_app({"session": AUTH, "turn": "3"})
    assert again.selectbox(key=widget_key(again, "jump-")).value == 3


def test_collapse_a_turn() -> None:
    at = run_app({"session": AUTH})
    at.toggle(key=widget_key(at, "fold-")).set_value(True).run()  # the first turn's
    assert "✓ Found 12 results" not in rows(at)
    assert "✓ Reading the config" in rows(at)
    assert "Collapsed · 3 calls" in captions(at)
    assert [t.label for t in at.toggle if t.label.startswith("Collapse")] == [
        "Collapse turn 1", "Collapse turn 2", "Collapse turn 3"
    ]  # fmt: skip


# --- the call detail -------------------------------------------------------------------------
def links(at: AppTest) -> dict[str, str]:
    return {p.label: p.proto.query_string for p in at.page_link}


def test_previous_and_next_call_in_the_detail() -> None:
    at = run_app({"session": AUTH, "anchor": "c2"})
    found = links(at)
    assert "anchor=c1" in found["Previous call"]
    assert "anchor=c3" in found["Next call"]
    first = links(run_app({"session": AUTH, "anchor": "c1"}))
    assert "Previous call" not in first and "anchor=c2" in first["Next call"]


def test_links_to_copy() -> None:
    at = run_app({"session": AUTH, "anchor": "c3"})
    code = [c.value for c in at.code]
    assert f"/session?session={AUTH}&anchor=c3" in code  # the call's
    assert f"/session?session={AUTH}" in code  # the session's


def test_timeline_bar_opens_its_call() -> None:
    at = run_app({"session": AUTH})
    data = chart_data(at)
    seq = int(data[data["label"] == "Running the auth test suite · cancelled"]["seq"].iloc[0])
    at.session_state["timeline_chart"] = {"selection": {"pick": [{"seq": seq}]}}
    at.run()
    assert at.query_params["anchor"] == "c6"
    assert any(t.startswith("Status: cancelled") for t in texts(at))


# --- the link out to the trace ---------------------------------------------------------------
TEMPLATE = "https://langfuse.example/project/p1/traces/{trace_id}?observation={span_id}"


def test_trace_link_from_the_template(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(INTENTRACE_TRACE_URL, TEMPLATE)
    at = run_app({"session": AUTH, "anchor": "c3"})
    (button,) = at.get("link_button")
    assert button.proto.label == "Open the trace in your tracing backend"
    assert button.proto.url.startswith(
        "https://langfuse.example/project/p1/traces/4bf92f3577b34da6a3ce929d0e0e4736?observation="
    )
    monkeypatch.setenv(INTENTRACE_TRACE_URL, "javascript:alert(1)//{trace_id}")
    assert not run_app({"session": AUTH, "anchor": "c3"}).get("link_button")
    monkeypatch.delenv(INTENTRACE_TRACE_URL)
    assert not run_app({"session": AUTH, "anchor": "c3"}).get("link_button")


def test_trace_and_call_links_quote_what_they_put_in() -> None:
    assert trace_url(TEMPLATE, "a/b?c", "<s>") == (
        "https://langfuse.example/project/p1/traces/a%2Fb%3Fc?observation=%3Cs%3E"
    )
    assert trace_url(TEMPLATE, None) is None
    assert session_link("/", "a&b", "c d") == "/session?session=a%26b&anchor=c%20d"
    assert app_root("http://127.0.0.1:8501/base/session?x=1") == "http://127.0.0.1:8501/base/"


@pytest.mark.parametrize(
    "bad", ["ftp://x/{trace_id}", "https://x/traces/", "javascript:alert(1)//{trace_id}", "x"]
)
def test_a_bad_trace_template_is_one_clear_line(bad: str, fixture_url: str) -> None:
    with pytest.raises(ValueError, match="trace URL template"):
        check_trace_url(bad)
    result = CliRunner().invoke(main, ["view", "--ledger", fixture_url, "--trace-url", bad])
    assert result.exit_code == 1
    assert result.output.startswith("Error: the trace URL template")
    assert len(result.output.strip().splitlines()) == 1
