"""A real headless Chromium against a running ``intentrace view`` on the fixture ledger."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.viewer.browser import BROWSER_MARKS, Tab, chromium_tab, serve
from tests.viewer.conftest import repo_root
from tests.viewer.fixture_ledger import AUTH, XSS, XSS_INTENT
from viewer._ui import call_key

pytestmark = BROWSER_MARKS
SCREENSHOTS = repo_root() / "artifacts" / "screenshots"


@pytest.fixture(scope="module")
def server(fixture_url: str) -> Iterator[str]:
    """``intentrace view --ledger <fixture> --port <free>`` as a subprocess."""
    with serve(fixture_url) as base:
        yield base


@pytest.fixture(scope="module")
def browser_tab(server: str) -> Iterator[Tab]:
    """One Chromium tab for the module (each test starts by loading the URL it tests)."""
    with chromium_tab(server) as tab:
        yield tab


@pytest.fixture
def tab(browser_tab: Tab) -> Any:
    return browser_tab.page


def focused(tab: Any, call_id: str) -> Any:
    selector = f".st-key-{call_key(call_id)}[data-focused='1']"
    return tab.wait_for_selector(selector, timeout=60_000)  # a loaded CI machine is slow


def in_viewport(tab: Any, element: Any) -> bool:
    box = element.bounding_box()
    height = tab.viewport_size["height"]
    return box is not None and box["y"] < height and box["y"] + min(box["height"], 40) > 0


def test_pasted_deep_link_lands_on_and_highlights_the_call(server: str, tab: Any) -> None:
    # pasted on the root URL: the router opens the Session page on that call
    tab.goto(f"{server}/?session={AUTH}&anchor=c10")
    target = focused(tab, "c10")
    tab.wait_for_timeout(300)  # let the smooth layout settle
    assert in_viewport(tab, target)
    assert "No down-migration found" in target.inner_text()
    assert "Looking for down-migrations" in target.inner_text()  # its detail is open
    outline = target.evaluate("e => getComputedStyle(e).outlineStyle")
    assert outline == "solid"
    assert tab.locator("[data-focused='1']").count() == 1  # only that call
    other = tab.locator(f".st-key-{call_key('c1')}")
    assert other.evaluate("e => getComputedStyle(e).outlineStyle") == "none"
    assert "/session" in tab.url and "anchor=c10" in tab.url
    # a screenshot of the session page for review (artifacts/ is not committed)
    tab.set_viewport_size({"width": 1400, "height": 2200})
    tab.wait_for_timeout(500)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot: Path = SCREENSHOTS / "session.png"
    tab.screenshot(path=str(shot))
    tab.set_viewport_size({"width": 1400, "height": 1000})
    assert shot.stat().st_size > 20_000


def test_links_across_pages_open_the_call(server: str, tab: Any) -> None:
    tab.goto(f"{server}/live")
    # the Live page's row for l2 has a Details link to the Session page on that call
    tab.locator(f".st-key-{call_key('l2')} a").click(timeout=20_000)
    target = focused(tab, "l2")
    assert "Checking the deploy status" in target.inner_text()
    assert in_viewport(tab, target)
    tab.wait_for_url("**/session?*anchor=l2*")
    # a Details link on the Session page moves the focus, and the URL follows (shareable)
    tab.locator(f".st-key-{call_key('l3')} a").click()
    target = focused(tab, "l3")
    assert "Building the release artifacts" in target.inner_text()
    tab.wait_for_url("**/session?*anchor=l3*")
    assert tab.locator("[data-focused='1']").count() == 1


def test_model_text_is_literal_and_runs_nothing(server: str, tab: Any, browser_tab: Tab) -> None:
    tab.goto(f"{server}/session?session={XSS}&anchor=x1")
    target = focused(tab, "x1")
    assert XSS_INTENT in target.inner_text()  # literally, in the row and in the detail
    main = tab.locator("[data-testid=stMain]")
    assert main.locator("img[src='x']").count() == 0
    assert main.locator("strong", has_text="bold").count() == 0
    assert main.locator("b", has_text="bold").count() == 0
    assert main.locator("a[href^='http://x']").count() == 0
    # the timeline's tooltip shows it as text too
    tab.get_by_role("tab", name="Timeline").click()
    bar = main.locator("[data-testid=stVegaLiteChart] .mark-rect path").first
    bar.hover(timeout=20_000)
    tooltip = tab.locator("#vg-tooltip-element.visible")
    tooltip.wait_for(timeout=10_000)
    assert XSS_INTENT in tooltip.inner_text()
    assert tooltip.locator("img, strong, a").count() == 0
    tab.wait_for_timeout(300)
    assert browser_tab.dialogs == []  # no alert ran
    assert tab.locator("[onerror]").count() == 0
    assert not [
        u for u in browser_tab.requests if u.rstrip("/").endswith("/x")
    ]  # no <img src=x> load
