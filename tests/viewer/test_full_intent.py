"""The viewer cuts a long intent in its row and shows it whole in the call's detail and the
timeline's hover (the ledger keeps it whole: tests/intent/test_full_intent.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.agent import instrumented
from tests.viewer.conftest import run_app, texts
from tests.viewer.test_pages import chart_data
from tracing import LABEL_MAX_CHARS, session, tool_call
from tracing.environment_variables import INTENTRACE_LEDGER_URL
from tracing.ledger import open_ledger

LONG = (
    "Searching the whole repository for every place where the OAuth callback handler is "
    "registered, including the legacy router, the plugin loader and the test fixtures, so "
    "that the redirect bug can be traced end to end, then reading each of them to find the "
    "one that drops the state parameter before the token exchange with the identity "
    "provider and the session store"
)


def test_the_row_is_cut_and_the_detail_is_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'full.db'}"
    monkeypatch.setenv(INTENTRACE_LEDGER_URL, url)
    ledger = open_ledger(url)
    setup = instrumented(ledger, "search_code")
    tracer = setup.provider.get_tracer("agent")
    with session("s", tracer=tracer), tool_call("search_code", {"intent": LONG}, tracer=tracer):
        pass
    assert setup.force_flush()
    (call,) = ledger.session_anchors("s")
    setup.shutdown()
    assert len(LONG) > 300
    at = run_app({"session": "s", "anchor": call["tool_call_id"]})
    lines = texts(at)
    row = next(line for line in lines if line.startswith("✓ "))
    assert row.endswith("…") and len(row) <= LABEL_MAX_CHARS + 2
    assert LONG in lines  # the detail's Intent
    assert list(chart_data(at)["full"]) == [LONG]  # the timeline's hover
