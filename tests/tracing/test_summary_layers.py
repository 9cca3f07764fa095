"""Compaction keeps both label layers (§10.8, §11.4 #2): ``Ledger.summary`` and ``intentrace
summary`` give each call's intent and, when it differs, its outcome, its status and error; an
activity label heads its block. Written by an instrumented agent through ``configure``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.agent import instrumented
from tracing import activity, session, tool_call
from tracing.cli import main
from tracing.ledger import Ledger, open_ledger


@pytest.fixture
def written(tmp_path: Path) -> Iterator[tuple[Ledger, str]]:
    url = f"sqlite:///{tmp_path}/summary.db"
    ledger = open_ledger(url)
    setup = instrumented(ledger, "search_code", "read_file", "grep")
    tracer = setup.provider.get_tracer("agent")
    with session("conv", turn=1, tracer=tracer):
        with activity("Explored the auth flow", tracer=tracer):
            with tool_call(
                "search_code", {"intent": "Searching for OAuth handling"}, tracer=tracer
            ) as c:
                c.set_result(["a.py"] * 12, outcome="Found 12 OAuth handlers")
            with tool_call("grep", {"intent": "Grepping for the callback"}, tracer=tracer):
                pass
        with tool_call("read_file", {"intent": "Reading the router"}, tracer=tracer) as c:
            c.fail("FileNotFoundError: router.py")
    assert setup.force_flush()
    yield ledger, url
    setup.shutdown()


def _shape(text: str) -> list[str]:
    """Lines with their durations taken out (they vary)."""
    return [re.sub(r" \d+(\.\d)?m?s:", ":", line) for line in text.splitlines()]


def test_each_line_carries_both_layers_status_and_error(written: tuple[Ledger, str]) -> None:
    ledger, url = written
    expected = [
        "session conv: 3 settled calls, 1 not successful.",
        "▸ Explored the auth flow",
        "  t1 #1 search_code ok: Searching for OAuth handling → Found 12 OAuth handlers",
        "  t1 #3 grep ok: Grepping for the callback",
        "t1 #6 read_file error: Reading the router (FileNotFoundError: router.py)",
    ]
    assert _shape(ledger.summary("conv")) == expected
    result = CliRunner().invoke(main, ["summary", "conv", "--ledger", url])
    assert result.exit_code == 0, result.output
    assert _shape(result.output.rstrip("\n")) == expected


def test_a_cut_summary_keeps_the_latest_calls_under_their_header(
    written: tuple[Ledger, str],
) -> None:
    ledger, _ = written
    cut = ledger.summary("conv", max_chars=230)
    assert len(cut) <= 230
    lines = _shape(cut)
    assert lines[1] == "… 1 earlier call left out"
    assert lines[2:] == [
        "▸ Explored the auth flow",
        "  t1 #3 grep ok: Grepping for the callback",
        "t1 #6 read_file error: Reading the router (FileNotFoundError: router.py)",
    ]


def test_any_budget_keeps_a_suffix_within_it(written: tuple[Ledger, str]) -> None:
    ledger, _ = written
    whole = ledger.summary("conv").splitlines()
    calls = [line for line in whole[1:] if not line.startswith("▸")]

    @settings(max_examples=150, deadline=None)
    @given(st.integers(min_value=0, max_value=400))
    def check(budget: int) -> None:
        cut = ledger.summary("conv", max_chars=budget)
        assert len(cut) <= budget
        lines = cut.splitlines()[1:]
        kept = [line for line in lines if not line.startswith(("▸", "… "))]
        assert kept == calls[len(calls) - len(kept) :]  # the most recent calls, in order
        for line in kept:  # a call of a labelled block keeps its header above it
            if line.startswith("  "):
                assert lines[0].startswith("▸") or lines[1].startswith("▸")

    check()
