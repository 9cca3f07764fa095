"""Viewer fixtures: the realistic fixture ledger, and AppTest runs of the real entry script."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

# As `intentrace view` runs it: no usage statistics (Streamlit reads this when it loads its
# config; it also skips per-command telemetry work in every script run).
os.environ.setdefault("STREAMLIT_BROWSER_GATHER_USAGE_STATS", "false")

import pytest
from streamlit.testing.v1 import AppTest
from streamlit.util import calc_hash

from tests.viewer import fixture_ledger
from tracing.environment_variables import INTENTRACE_LEDGER_URL
from viewer import APP_PATH


@pytest.fixture(scope="session")
def fixture_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The fixture ledger (tests/viewer/fixture_ledger.py), written once per test run."""
    path = tmp_path_factory.mktemp("viewer") / "fixture.db"
    url = f"sqlite:///{path}"
    fixture_ledger.build(url)
    return url


@pytest.fixture
def viewer_url(fixture_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Point the viewer at the fixture ledger (the app reads ``$INTENTRACE_LEDGER_URL``)."""
    monkeypatch.setenv(INTENTRACE_LEDGER_URL, fixture_url)
    yield fixture_url


_components: list[object] = []


def new_app() -> AppTest:
    """An AppTest of the entry script. Every new AppTest scans all installed packages for
    Streamlit components (1-2 s here); the viewer uses none, so the first scan is shared."""
    at = AppTest.from_file(str(APP_PATH), default_timeout=30)
    if _components:
        at._bidi_component_manager = _components[0]  # pyright: ignore[reportAttributeAccessIssue]
    return at


def _share_components(at: AppTest) -> None:
    manager = getattr(at, "_bidi_component_manager", None)
    if manager is not None and not _components:
        _components.append(manager)


def run_app(params: Mapping[str, str] | None = None, page: str | None = None) -> AppTest:
    """Run the viewer's entry script once, on ``page`` (a url path) with query ``params``."""
    at = new_app()
    for name, value in (params or {}).items():
        at.query_params[name] = value
    if page is not None:
        open_page(at, page)
    at.run()
    _share_components(at)
    assert not at.exception, [e.value for e in at.exception]
    return at


def open_page(at: AppTest, url_path: str) -> None:
    """Select a page of ``st.navigation`` by url path (AppTest's ``switch_page`` takes files;
    our pages are functions, whose page hash is the hash of their url path)."""
    at._page_hash = calc_hash(url_path)


def open_tab(at: AppTest, name: str) -> AppTest:
    """Open a tab of the Session page (they are lazy: only the open one is drawn) and run."""
    from viewer._pages.session import tabs_key

    anchor = at.query_params.get("anchor")
    at.session_state[tabs_key(str(anchor) if anchor else None)] = name
    at.run()
    return at


def texts(at: AppTest) -> list[str]:
    return [t.value for t in at.text]


def captions(at: AppTest) -> list[str]:
    return [c.value for c in at.caption]


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]
