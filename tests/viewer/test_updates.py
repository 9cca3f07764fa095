"""The viewer while the ledger is being written: growing intents, settlements, long sessions."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st

from tests.viewer.conftest import captions, run_app, texts
from tracing.environment_variables import INTENTRACE_LEDGER_URL
from tracing.ledger import AnchorWrite, Ledger, open_ledger
from tracing.status import Status
from viewer import _data
from viewer._story import PAGE_CALLS
from viewer._ui import call_key


@pytest.fixture
def writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Ledger]:
    """A ledger this test writes while the viewer reads it."""
    url = f"sqlite:///{tmp_path / 'live.db'}"
    ledger = open_ledger(url)
    monkeypatch.setenv(INTENTRACE_LEDGER_URL, url)
    yield ledger
    ledger.close()


def write(ledger: Ledger, **kw: object) -> None:
    ledger.record(AnchorWrite(**kw))  # pyright: ignore[reportArgumentType]
    assert ledger.flush(10.0)


def test_live_page_shows_the_intent_growing_then_the_call_leaving(writer: Ledger) -> None:
    now = time.time_ns()
    write(writer, tool_call_id="t1", tool_name="plan", status=Status.STREAMING, session_id="s1",
          turn=1, batch_id="b", intent="Planning the", start_ns=now)  # fmt: skip
    at = run_app(page="live")
    assert "✎ Planning the" in texts(at)
    write(writer, tool_call_id="t1", tool_name="plan", status=Status.STREAMING,
          intent="Planning the rollout of feature flags")  # fmt: skip
    _data.in_flight.clear()  # the page's own refresh would see it within LIVE_TTL_S
    at.run()
    assert "✎ Planning the rollout of feature flags" in texts(at)
    assert "✎ Planning the" not in texts(at)
    write(writer, tool_call_id="t1", tool_name="plan", status=Status.IN_FLIGHT)
    _data.in_flight.clear()
    at.run()
    assert "● Planning the rollout of feature flags" in texts(at)
    write(writer, tool_call_id="t1", tool_name="plan", status=Status.SUCCESS, outcome="Planned 3 steps",
          end_ns=now + 10**9)  # fmt: skip
    _data.in_flight.clear()
    at.run()
    assert "Nothing in flight right now." in [i.value for i in at.info]


def test_session_page_follows_writes_without_waiting_for_a_cache(writer: Ledger) -> None:
    now = time.time_ns()
    write(writer, tool_call_id="a", tool_name="search", status=Status.STREAMING, session_id="s2",
          turn=1, batch_id="b", intent="Searching for", start_ns=now)  # fmt: skip
    at = run_app({"session": "s2"})
    assert "✎ Searching for" in texts(at)
    # the streaming intent grows: same counts, but a newer write -> the story is re-read
    write(writer, tool_call_id="a", tool_name="search", status=Status.STREAMING,
          intent="Searching for OAuth handling")  # fmt: skip
    at.run()
    assert "✎ Searching for OAuth handling" in texts(at)
    write(writer, tool_call_id="a", tool_name="search", status=Status.SUCCESS,
          outcome="Found 12 results", end_ns=now + 5 * 10**8)  # fmt: skip
    at.run()
    assert "✓ Found 12 results" in texts(at)
    assert "Found 12 results" not in texts(at)  # a block of one call has no header


def test_an_activity_label_set_after_the_last_write_is_in_the_next_run(writer: Ledger) -> None:
    for n, intent in enumerate(("Reading the lexer", "Reading the parser")):
        write(writer, tool_call_id=f"h{n}", tool_name="read_file", status=Status.SUCCESS,
              session_id="s3", turn=1, batch_id="hb1", intent=intent, start_ns=1_000 + n,
              end_ns=2_000 + n)  # fmt: skip
    at = run_app({"session": "s3"})
    assert "Explored the front end" not in texts(at)
    writer.set_activity("s3", "hb1", "Explored the front end", turn=1)
    assert writer.flush(10.0)
    at.run()  # (no call written since: the cached story is keyed by the session's counter)
    assert "Explored the front end" in texts(at)


def test_long_session_pages_by_blocks_and_deep_links_to_the_right_page(writer: Ledger) -> None:
    calls = PAGE_CALLS * 2 + 30
    for i in range(calls):
        writer.record(
            AnchorWrite(tool_call_id=f"k{i}", tool_name="read_file", status=Status.SUCCESS,
                        session_id="long", turn=1 + i // 100, batch_id=f"b{i // 3}",
                        intent=f"Reading part {i}", start_ns=1_000 + i, end_ns=2_000 + i)
        )  # fmt: skip
    assert writer.flush(30.0)
    at = run_app({"session": "long"})
    assert at.pagination[0].value == 1
    assert "✓ Reading part 0" in texts(at)
    assert "✓ Reading part 200" not in texts(at)
    shown = [t for t in texts(at) if t.startswith("✓ ")]
    assert PAGE_CALLS <= len(shown) < PAGE_CALLS + 3  # whole blocks of 3
    assert any(c.startswith(f"Page 1 of 3 · {len(shown)} of {calls} calls") for c in captions(at))

    target = f"k{calls - 1}"
    at = run_app({"session": "long", "anchor": target})
    assert at.pagination[0].value == 3
    assert f"✓ Reading part {calls - 1}" in texts(at)
    assert "✓ Reading part 0" not in texts(at)
    assert any(call_key(target) in h.proto.body for h in at.get("html"))
    # paging by hand still works on a deep-linked session
    at.pagination[0].set_value(1).run()
    assert "✓ Reading part 0" in texts(at)


def test_the_live_page_rebuilds_a_story_only_for_writes_that_belong_in_it(
    writer: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = time.time_ns()
    for session in ("quiet", "busy"):
        write(writer, tool_call_id=f"{session}-1", tool_name="plan", status=Status.IN_FLIGHT,
              session_id=session, turn=1, batch_id="b", intent=f"Planning {session}",
              start_ns=now)  # fmt: skip
    built: list[str] = []
    real = _data.build_story

    def counting(session_id: str, *args: object, **kwargs: object) -> object:
        built.append(session_id)
        return real(session_id, *args, **kwargs)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(_data, "build_story", counting)
    st.cache_data.clear()
    at = run_app(page="live")
    assert sorted(built) == ["busy", "quiet"]
    built.clear()
    for n in range(3):  # the busy session writes; the quiet one does not
        write(writer, tool_call_id=f"busy-{n + 2}", tool_name="grep", status=Status.IN_FLIGHT,
              session_id="busy", turn=1, batch_id="b", intent=f"Grepping {n}",
              start_ns=now + n)  # fmt: skip
        _data.in_flight.clear()
        at.run()
    assert "quiet" not in built and "busy" in built
    assert "● Grepping 2" in texts(at)
    # a subagent of the quiet session, under a session of its own, does count for it
    built.clear()
    write(writer, tool_call_id="sub-1", tool_name="bisect", status=Status.IN_FLIGHT,
          session_id="sub", turn=1, batch_id="s", intent="Bisecting", parent_call_id="quiet-1",
          start_ns=now + 10)  # fmt: skip
    _data.in_flight.clear()
    at.run()
    assert "quiet" in built
