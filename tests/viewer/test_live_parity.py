"""The Live page and the Session page draw a session's blocks with one renderer."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.viewer.conftest import run_app, texts
from tests.viewer.fixture_ledger import LIVE

pytestmark = pytest.mark.usefixtures("viewer_url")

SUBAGENT_LINE = "● Delegating the flaky test hunt · Bisecting the failing commit"


def header_of(at: AppTest, row: str) -> str:
    """The block header drawn above a call's row (the row is the block's first)."""
    lines = texts(at)
    return lines[lines.index(row) - 1]


def test_live_page_shows_a_running_subagent_as_parent_and_child_latest() -> None:
    at = run_app(page="live")
    lines = texts(at)
    assert SUBAGENT_LINE in lines
    # its subagent section is open on the Live page (it has live calls), its calls inside
    (nest,) = at.expander
    assert nest.proto.expanded
    assert "● Bisecting the failing commit" in [t.value for t in nest.text]


def test_live_block_headers_are_the_session_pages_headers() -> None:
    live = run_app(page="live")
    session = run_app({"session": LIVE})
    # a call of the block is still live (in background): its intent is the header on both
    # pages, the activity label only once the block has settled
    row = "◷ Building the release artifacts · in background"
    assert header_of(live, row) == header_of(session, row) == "Building the release artifacts"
    # every block: same header, same count line
    for first in ("✎ Planning the rollout of feature flags", SUBAGENT_LINE):
        assert header_of(live, first) == header_of(session, first)
    assert [c.value for c in live.caption if " call" in c.value] == [
        c.value for c in session.caption if " call" in c.value and "live" in c.value
    ]


def test_details_links_have_distinct_names() -> None:
    at = run_app({"session": LIVE})
    names = [p.label for p in at.page_link if p.label.startswith("Details")]
    assert len(names) == len(set(names)) == 5
    assert "Details #1" in names
