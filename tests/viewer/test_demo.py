"""The viewer on the demo ledger (``intentrace demo``: the simulated agent through the real
pipeline), checked against the ledger's own rows rather than against fixed strings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.viewer.conftest import run_app, texts
from tracing.cli import main
from tracing.demo._run import session_ids
from tracing.environment_variables import INTENTRACE_LEDGER_URL
from tracing.ledger import Anchor, open_ledger
from tracing.status import GLYPHS, HeaderCall, frame_label, group_header
from viewer._ui import call_key


@pytest.fixture(scope="module")
def demo_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('demo') / 'demo.db'}"
    result = CliRunner().invoke(main, ["demo", "--ledger", url])
    assert result.exit_code == 0, result.output
    return url


@pytest.fixture
def demo(demo_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[Anchor]]]:
    monkeypatch.setenv(INTENTRACE_LEDGER_URL, demo_url)
    ledger = open_ledger(demo_url, read_only=True)
    try:
        yield {sid: ledger.session_anchors(sid) for sid in session_ids()}
    finally:
        ledger.close()


def line(anchor: Anchor) -> str:
    label = frame_label(
        tool_name=anchor["tool_name"],
        status=anchor["status"],
        intent=anchor["intent"],
        outcome=anchor["outcome"],
    )
    return f"{GLYPHS[anchor['status']]} {label}"


def test_demo_sessions_are_listed(demo: dict[str, list[Anchor]]) -> None:
    at = run_app()
    table = at.dataframe[0].value
    assert sorted(table["session"]) == sorted(demo)
    for sid, anchors in demo.items():
        row = table[table["session"] == sid].iloc[0]
        assert row["calls"] == len(anchors)
        assert row["errors"] == sum(a["status"] == "error" for a in anchors)


def test_demo_session_story_matches_the_ledger(demo: dict[str, list[Anchor]]) -> None:
    for sid, anchors in demo.items():
        at = run_app({"session": sid})
        shown = texts(at)
        by_id = {a["tool_call_id"]: a for a in anchors}
        for anchor in anchors:
            expected = line(anchor)
            kids = [a for a in anchors if a["parent_call_id"] == anchor["tool_call_id"]]
            if kids:  # the spawning call: "parent label · child's latest"
                latest = group_header(
                    HeaderCall(k["status"], k["intent"], line(k)[2:], k["seq"], k["settle_seq"])
                    for k in kids
                )
                expected = f"{expected} · {latest}"
            assert expected in shown, (sid, expected)
            if anchor["intent"] is None and anchor["status"] == "success":
                assert expected == f"✓ Ran {anchor['tool_name']}"  # today's default label
        # every header drawn is the group header of its calls (activity labels included)
        ledger = open_ledger(None, read_only=True)
        try:
            activity = {b["batch_id"]: b["activity_label"] for b in ledger.blocks(sid)}
        finally:
            ledger.close()
        blocks: dict[str, list[Anchor]] = {}
        for a in anchors:  # a call without a batch is a block of its own
            blocks.setdefault(a["batch_id"] or f"call:{a['tool_call_id']}", []).append(a)
        for batch, calls in blocks.items():
            if len(calls) == 1 and not activity.get(batch):
                continue  # a block of one call is the call alone: no header is drawn
            header = group_header(
                (HeaderCall(a["status"], a["intent"], line(a)[2:], a["seq"], a["settle_seq"])
                 for a in calls),
                activity.get(batch),
            )  # fmt: skip
            assert header in shown, (sid, header)
        # subagent calls are inside the spawning call's section
        nested = [a for a in anchors if a["parent_call_id"] in by_id]
        if nested:
            inside = [t.value for e in at.expander for t in e.text]
            for anchor in nested:
                assert line(anchor) in inside


def test_demo_has_what_the_viewer_must_show(demo: dict[str, list[Anchor]]) -> None:
    everything = [a for anchors in demo.values() for a in anchors]
    statuses = {a["status"] for a in everything}
    assert {"success", "error", "cancelled"} <= statuses
    assert any(a["intent"] is None for a in everything)  # a redacted/unlabelled call
    assert any(a["parent_call_id"] for a in everything)  # a subagent


def test_demo_deep_link_to_a_failure(demo: dict[str, list[Anchor]]) -> None:
    sid, failed = next(
        (sid, a) for sid, anchors in demo.items() for a in anchors if a["status"] == "error"
    )
    at = run_app({"session": sid, "anchor": failed["tool_call_id"]})
    assert line(failed) in texts(at)
    if failed["error"]:
        assert failed["error"] in [c.value for c in at.code]
    assert any(call_key(failed["tool_call_id"]) in h.proto.body for h in at.get("html"))


def test_demo_ledger_file_is_not_touched_by_the_viewer(
    demo_url: str, demo: dict[str, list[Anchor]]
) -> None:
    path = Path(demo_url.removeprefix("sqlite:///"))
    before = path.stat().st_mtime_ns
    for sid in demo:
        run_app({"session": sid})
    assert path.stat().st_mtime_ns == before
