"""Drill-down on the Analytics page in a real headless Chromium (``intentrace view`` on a real
ledger): a table row's link opens the call behind it in a new tab, a chart mark opens it in the
same tab, and the viewer shows that session with the call."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.analytics.conftest import call, write_all
from tests.ledger.conftest import FAST
from tests.viewer.browser import BROWSER_MARKS, Tab, chromium_tab, serve
from tracing.ledger import open_ledger

pytestmark = BROWSER_MARKS
WAIT_MS = 60_000
ROW_PX = 35  # a Streamlit dataframe's header and row height


@pytest.fixture(scope="module")
def browser_tab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tab]:
    folder: Path = tmp_path_factory.mktemp("drill")
    url = f"sqlite:///{folder}/ledger.db"
    ledger = open_ledger(url, options=FAST)
    try:
        writes = []
        for i in range(6):
            writes.append(call(f"e{i}", "edit_file", "Editing the lockfile by hand",
                               session=f"s{i % 2}", start_ms=10 * i))  # fmt: skip
            writes.append(call(f"f{i}", "shell", "Running a build", status="error",
                               session=f"s{i % 2}", start_ms=10 * i + 1))  # fmt: skip
        write_all(ledger, writes)
    finally:
        ledger.close()
    with serve(url) as base, chromium_tab(base) as tab:
        yield tab


def _open_analytics(tab: Tab) -> None:
    tab.page.goto(f"{tab.base}/analytics?dashboard=tool_health")
    tab.page.locator("[data-testid=stDataFrame]").first.wait_for(timeout=WAIT_MS)
    tab.page.locator(".vega-embed svg .mark-rect path").first.wait_for(timeout=WAIT_MS)


def _shows_the_call(page: object, call_id: str) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    expect(page).to_have_url(re.compile(rf"/session\?session=s[01]&anchor={call_id}$"))
    page.locator("[data-testid=stMain]").get_by_text("Running a build").first.wait_for(
        timeout=WAIT_MS
    )


def test_a_table_row_opens_its_call(browser_tab: Tab) -> None:
    _open_analytics(browser_tab)
    page = browser_tab.page
    table = page.locator("[data-testid=stDataFrame]").first
    table.scroll_into_view_if_needed()
    box = table.bounding_box()
    assert box is not None
    # the link column comes first; the per-tool table's second row is shell (latest failure f5)
    x, y = box["x"] + 18, box["y"] + ROW_PX + ROW_PX + ROW_PX / 2
    page.mouse.click(x, y)  # selects the cell
    with page.context.expect_page(timeout=WAIT_MS) as opened:
        page.mouse.click(x, y)  # a selected link cell opens its link in a new tab
    new = opened.value
    try:
        _shows_the_call(new, "f5")
    finally:
        new.close()


def test_a_chart_mark_opens_its_call(browser_tab: Tab) -> None:
    _open_analytics(browser_tab)
    page = browser_tab.page
    # the P95 chart: a bar per tool; shell's bar carries the same link as its row
    bar = page.locator(".vega-embed svg .mark-rect path[aria-label*='tool_name: shell']").first
    assert "open: session?session=s1&anchor=f5" in (bar.get_attribute("aria-label") or "")
    bar.scroll_into_view_if_needed()
    bar.click()
    _shows_the_call(page, "f5")
