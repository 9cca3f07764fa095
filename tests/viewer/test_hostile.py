"""Every text surface over a hostile ledger (tests/viewer/hostile_ledger.py): no control
character or bidi override reaches the page, nothing is interpreted, framing survives cuts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from tests.viewer import hostile_ledger as h
from tests.viewer.conftest import run_app
from tracing.environment_variables import INTENTRACE_LEDGER_URL
from tracing.status import FRAME_ERROR


@pytest.fixture(scope="module")
def hostile_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('hostile') / 'hostile.db'}"
    h.build(url)
    return url


@pytest.fixture
def hostile(hostile_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(INTENTRACE_LEDGER_URL, hostile_url)
    return hostile_url


def _shown(at: AppTest) -> list[str]:
    """Every string an element of the run carries to the browser."""
    found: list[str] = []
    for kind in ("text", "caption", "code", "json", "markdown", "title", "subheader"):
        found += [str(getattr(e, "value", "")) for e in at.get(kind)]
    for frame in at.dataframe:
        data = frame.value
        found += [str(v) for column in data.columns for v in data[column].tolist()]
    for box in at.selectbox:
        found += [str(o) for o in box.options]
    for chart in at.get("vega_lite_chart"):
        found.append(str(chart.proto))
    return found


def _assert_clean(at: AppTest) -> None:
    bad = [s[:80] for s in _shown(at) if any(c in s for c in h.UNSAFE_CHARS)]
    assert not bad


def _session() -> dict[str, str]:
    return {"session": h.SESSION}


@pytest.mark.usefixtures("hostile")
def test_sessions_table_and_filters_are_sanitized() -> None:
    at = run_app()
    at.session_state["filters"] = True
    at.run()
    _assert_clean(at)
    table = at.dataframe[0].value
    assert "hostileexe.txt" in str(table["session"].tolist())
    assert any("agent" in o and "\x00" not in o for o in at.selectbox(key="agent").options)
    assert any(o.startswith("user") for o in at.selectbox(key="user").options)
    assert len(at.selectbox(key="tag").options) == 5  # (any) and the four tags, each one line
    assert "users" in table.columns and "tags" in table.columns


@pytest.mark.usefixtures("hostile")
@pytest.mark.parametrize("anchor", ["h1", "h2", "h3"])
def test_session_page_rows_detail_and_timeline_are_sanitized(anchor: str) -> None:
    at = run_app({**_session(), "anchor": anchor})
    _assert_clean(at)
    shown = _shown(at)
    assert any(h.CJK in s for s in shown)
    assert any("invoicegnp.exe" in s for s in shown)
    # the 10 KB intent: its row is cut and keeps its framing
    rows = [t.value for t in at.text if t.value.startswith("✗ ")]
    assert rows and all(r.endswith(" · failed") for r in rows)
    assert all(len(r) < 140 for r in rows)
    if anchor == "h3":  # the detail shows the whole intent
        assert any(s.startswith("Reading 長い") and len(s) > 9_000 for s in shown)


@pytest.mark.usefixtures("hostile")
def test_live_page_is_sanitized() -> None:
    at = run_app(page="live")
    _assert_clean(at)


def test_long_label_keeps_framing_in_rows() -> None:
    from viewer._text import INTENT_CHARS, short_label

    out = short_label(h.LONG + FRAME_ERROR)
    assert out.endswith(FRAME_ERROR) and len(out) <= INTENT_CHARS + len(FRAME_ERROR)


# --- in a real browser ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def hostile_server(hostile_url: str) -> Iterator[str]:
    from tests.viewer.browser import serve

    with serve(hostile_url) as base:
        yield base


@pytest.mark.browser
def test_hostile_text_in_a_browser_runs_nothing_and_requests_nothing(
    hostile_server: str,
) -> None:
    import shutil
    from urllib.parse import quote

    if shutil.which("/usr/bin/chromium") is None:
        pytest.skip("needs Debian's chromium")
    from playwright.sync_api import sync_playwright

    dialogs: list[str] = []
    foreign: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        tab: Any = browser.new_page(viewport={"width": 1400, "height": 1000})
        tab.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        tab.on(
            "request",
            lambda r: foreign.append(r.url) if not r.url.startswith(hostile_server) else None,
        )
        pages = [
            "/",
            f"/session?session={quote(h.SESSION)}&anchor=h1",
            f"/session?session={quote(h.SESSION)}&anchor=h3",
            "/live",
        ]
        for path in pages:
            tab.goto(hostile_server + path)
            tab.wait_for_selector("[data-testid=stMain] h1", timeout=30_000)
            tab.wait_for_timeout(1500)
            main = tab.locator("[data-testid=stMain]")
            body: str = main.inner_text()
            assert not [c for c in h.UNSAFE_CHARS if c in body], path
            assert main.locator("img[src='x'], script:text('alert'), strong").count() == 0
            assert tab.locator("[onerror]").count() == 0
            if "anchor" in path:
                assert "failed" in body or "done" in body
        browser.close()
    assert dialogs == []
    # nothing the stored text names was fetched (Streamlit's own icon font may be)
    assert [u for u in foreign if "://x" in u or u.rstrip("/").endswith("/x")] == []
