"""``intentrace demo``: the simulated agent through the real pipeline. Every case the brief
lists is in the ledger, the same seed gives the same anchors, running it again adds nothing,
and with ``OTEL_EXPORTER_OTLP_*`` set the same run reaches ``collect`` with the same anchors."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from redaction import RedactionPolicy
from tracing.cli import main
from tracing.collect._feed import SpanFeed
from tracing.collect._receiver import CollectOptions, CollectReceiver
from tracing.demo._run import DEMO_POLICY, run_demo, session_ids
from tracing.ledger import Anchor, Ledger, open_ledger

END_NS = 1_750_000_000_000_000_000
VOLATILE = ("updated_ns", "version")  # when and in which order it was written
SEQS = ("seq", "settle_seq")  # the receiver numbers calls in the order they arrive


@pytest.fixture
def demo_ledger(tmp_path: Path) -> Iterator[Ledger]:
    ledger = open_ledger(f"sqlite:///{tmp_path}/demo.db")
    run_demo(ledger, seed=7, end_ns=END_NS)
    yield ledger
    ledger.close()


def everything(ledger: Ledger, seed: int = 7, sessions: int = 3) -> list[Anchor]:
    return [a for sid in session_ids(seed, sessions) for a in ledger.session_anchors(sid)]


def stable(anchors: list[Anchor], *drop: str) -> list[dict[str, Any]]:
    return [{k: v for k, v in a.items() if k not in (*VOLATILE, *drop)} for a in anchors]


def test_demo_covers_every_case(demo_ledger: Ledger) -> None:
    ledger = demo_ledger
    ids = session_ids(7, 3)
    anchors = everything(ledger)
    assert len(anchors) >= 20
    assert {a["session_id"] for a in anchors} == set(ids)
    dump = json.dumps(anchors, ensure_ascii=False)

    by_batch: dict[str, list[Anchor]] = defaultdict(list)
    for a in anchors:
        by_batch[a["batch_id"] or ""].append(a)

    # several turns
    turns = {a["turn"] for a in ledger.session_anchors(ids[0])}
    assert turns == {1, 2, 3}

    # parallel sibling calls with distinct intents, overlapping in time
    def overlapping(block: list[Anchor]) -> bool:
        return any(
            x["start_ns"] < (y["end_ns"] or 0) and y["start_ns"] < (x["end_ns"] or 0)
            for x in block
            for y in block
            if x is not y
        )

    parallel = [
        b
        for b in by_batch.values()
        if len(b) >= 3 and len({a["intent"] for a in b}) == len(b) and overlapping(b)
    ]
    assert len(parallel) >= 2

    # a sibling pair with identical intents
    assert any(len(b) == 2 and b[0]["intent"] == b[1]["intent"] for b in by_batch.values())

    # failures (with their error text) and a cancellation
    failed = [a for a in anchors if a["status"] == "error"]
    assert len(failed) >= 3
    assert all(a["error"] and a["label"].endswith("· failed") for a in failed)
    assert any("FileNotFoundError" in (a["error"] or "") for a in failed)
    cancelled = [a for a in anchors if a["status"] == "cancelled"]
    assert len(cancelled) == 1
    assert cancelled[0]["label"].endswith("· cancelled")

    # a background call harvested later: in flight while later blocks ran, then settled
    def outlives_later_blocks(a: Anchor) -> bool:
        later = [
            x
            for x in anchors
            if x["session_id"] == a["session_id"]
            and x["batch_id"] != a["batch_id"]
            and x["parent_call_id"] != a["tool_call_id"]
            and x["seq"] > a["seq"]
        ]
        return any((x["end_ns"] or 0) < (a["end_ns"] or 0) for x in later)

    background = [a for a in anchors if a["status"] == "success" and outlives_later_blocks(a)]
    assert [a["tool_name"] for a in background] == ["run_tests"]
    assert background[0]["label"] == "All 1184 tests passed"

    # a subagent with its own calls
    spawn = next(a for a in anchors if a["tool_name"] == "spawn_agent")
    children = [a for a in anchors if a["parent_call_id"] == spawn["tool_call_id"]]
    assert len(children) >= 3
    assert {a["agent_id"] for a in children} == {"reviewer"}
    assert spawn["agent_id"] == "coder"

    # non-English intents (French, Japanese) with outcomes in the same language
    assert any("é" in (a["intent"] or "") for a in anchors)
    assert any("しています" in (a["intent"] or "") for a in anchors)
    assert any("追加しました" in a["label"] for a in anchors)

    # a tool whose own business parameter is `intent`: no label, the parameter kept
    issue = next(a for a in anchors if a["tool_name"] == "open_issue")
    assert (issue["intent"], issue["label"]) == (None, "Ran open_issue")
    assert json.loads(issue["args"] or "{}")["intent"] == "bug"

    # a tool whose args the policy redacts: intent hidden, nothing of it stored
    query = next(a for a in anchors if a["tool_name"] == "query_customers")
    assert (query["intent"], query["label"], query["args"]) == (
        None,
        "Ran query_customers",
        "[redacted:policy]",
    )
    assert json.loads(query["redaction"] or "{}")["intent_hidden"] is True
    assert "yuki.tanaka" not in dump
    assert "顧客情報" not in dump  # the hidden intent and outcome text

    # a secret in kept args is scrubbed
    assert "hunter2" not in dump
    assert "[redacted:connection_string]" in dump

    # activity labels head some blocks, not all
    labelled = [b for sid in ids for b in ledger.blocks(sid) if b["activity_label"]]
    assert len(labelled) >= 4
    assert len(labelled) < len(by_batch)

    # realistic tools of a coding agent
    assert {"search_code", "read_file", "edit_file", "run_tests", "run_shell"} <= {
        a["tool_name"] for a in anchors
    }


def test_same_seed_same_anchors_and_rerun_is_idempotent(
    demo_ledger: Ledger, tmp_path: Path
) -> None:
    first = everything(demo_ledger)
    other = open_ledger(f"sqlite:///{tmp_path}/other.db")
    try:
        run_demo(other, seed=7, end_ns=END_NS)
        assert stable(everything(other)) == stable(first)
        run_demo(other, seed=8, end_ns=END_NS)
        eight = everything(other, seed=8)
        assert {a["session_id"] for a in eight}.isdisjoint({a["session_id"] for a in first})
        assert stable(eight, "session_id") != stable(first, "session_id")
    finally:
        other.close()
    run_demo(demo_ledger, seed=7)  # again, now: the same anchors, updated in place
    again = everything(demo_ledger)
    assert [a["tool_call_id"] for a in again] == [a["tool_call_id"] for a in first]
    assert demo_ledger.count_sessions() == 3
    assert stable(again, "start_ns", "end_ns") == stable(first, "start_ns", "end_ns")


def test_more_sessions_repeat_the_scripts(tmp_path: Path) -> None:
    ledger = open_ledger(f"sqlite:///{tmp_path}/l.db")
    try:
        report = run_demo(ledger, seed=3, sessions=5, end_ns=END_NS)
        assert [p.session_id for p in report.sessions] == session_ids(3, 5)
        assert ledger.count_sessions() == 5
        assert report.calls == len(everything(ledger, seed=3, sessions=5))
    finally:
        ledger.close()


def test_demo_exported_over_otlp_reaches_collect_with_the_same_anchors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = open_ledger(f"sqlite:///{tmp_path}/remote.db")
    local = open_ledger(f"sqlite:///{tmp_path}/local.db")
    try:
        feed = SpanFeed(remote, policy=RedactionPolicy.from_toml(DEMO_POLICY))
        with CollectReceiver(feed, CollectOptions(port=0)) as rx:
            monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", rx.traces_url)
            run_demo(local, seed=11, end_ns=END_NS)
        remote.flush()
        assert feed.internal_errors() == []
        mine = {a["tool_call_id"]: a for a in stable(everything(local, seed=11), *SEQS)}
        theirs = {a["tool_call_id"]: a for a in stable(everything(remote, seed=11), *SEQS)}
        assert sorted(theirs) == sorted(mine)
        for call_id, anchor in mine.items():
            assert theirs[call_id] == anchor
    finally:
        remote.close()
        local.close()


def test_cli_demo_prints_a_plain_story_and_the_ledger(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/cli.db"
    result = CliRunner().invoke(main, ["demo", "--ledger", url, "--seed", "5"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "\x1b[" not in out  # not a terminal: plain text
    assert out.startswith("intentrace demo (seed 5): 3 sessions")
    assert "Fix the failing OAuth callback test" in out
    assert "▸ Exploring the auth flow" in out
    assert f"Ledger: {url}" in out
    assert "demo-5-2-pagination" in out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
def test_demo_view_serves_the_viewer_on_loopback(tmp_path: Path) -> None:
    """What README's main command runs: the demo, then the real viewer, stopped by Ctrl-C."""
    port = _free_port()
    url = f"sqlite:///{tmp_path}/view.db"
    command = [str(Path(sys.executable).parent / "intentrace"), "demo", "--view"]
    proc = subprocess.Popen(
        [*command, "--ledger", url, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        health = ""
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/_stcore/health", timeout=2
                ) as response:
                    health = response.read().decode()
                    break
            except OSError:
                time.sleep(0.3)
        assert health == "ok"
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    assert f"Ledger: {url}" in out
    assert f"intentrace viewer on http://127.0.0.1:{port}" in out
    assert "Traceback" not in out
