"""``intentrace watch``: CliRunner over ledgers being written by another thread."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.ledger.conftest import FAST, pg_schema_url
from tests.support.sse import SSEServer, chat_stream
from tests.taps.conftest import sdk_client
from tracing import IntentRegistry
from tracing.anchor import anchor_id
from tracing.cli import main
from tracing.ledger import AnchorWrite, Ledger, open_ledger
from tracing.status import Status
from tracing.taps import StreamTap

COLOR = re.compile(r"\x1b\[[0-9;]*(3[0-7]|9[0-7]|38;[25];[0-9;]+)m")


def call(cid: str, status: Status | str, **kw: Any) -> AnchorWrite:
    return {
        "tool_call_id": cid,
        "tool_name": kw.pop("tool_name", "search_code"),
        "status": Status(status),
        **kw,
    }  # pyright: ignore[reportReturnType]


@pytest.fixture
def db(tmp_path: Path) -> Iterator[tuple[str, Ledger]]:
    url = f"sqlite:///{tmp_path}/watch.db"
    led = open_ledger(url, options=FAST)
    yield url, led
    led.close()


def seed(led: Ledger) -> None:
    now = time.time_ns()
    led.record(
        call(
            "old",
            "success",
            session_id="conv",
            intent="Listing the repo",
            outcome="Listed 12 files",
            start_ns=now - 3 * 10**9,
            end_ns=now - 2 * 10**9,
            tool_name="ls",
        )
    )
    led.record(call("a", "streaming", session_id="conv", batch_id="msg_1", intent="Searching for"))
    led.record(
        call(
            "b",
            "in_flight",
            session_id="conv",
            batch_id="msg_1",
            intent="[bold]Reading[/bold] the [red]router[/red]",
            tool_name="read_file",
        )
    )
    led.record(
        call("c", "in_flight", session_id="other", intent="Grepping the logs", tool_name="grep")
    )
    assert led.flush()


def run(*args: str, env: dict[str, str] | None = None) -> str:
    result = CliRunner().invoke(main, ["watch", *args], env=env)
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def test_once_plain_groups_siblings_and_shows_markup_literally(db: tuple[str, Ledger]) -> None:
    url, led = db
    seed(led)
    out = run("--ledger", url, "--once", "--session", "conv", "--recent", "1")
    lines = out.splitlines()
    assert lines[0].startswith("  ✓ Listed 12 files  [ls]  1.0 s")
    # the block's header: the latest in-flight intent (group_header), markup shown as typed
    assert lines[1] == "▸ [bold]Reading[/bold] the [red]router[/red]"
    assert lines[2] == "    ✎ Searching for  [search_code]  writing…"
    assert lines[3].startswith("    ● [bold]Reading[/bold] the [red]router[/red]  [read_file]  ")
    assert len(lines) == 4 and "Grepping" not in out  # another session
    every = run("--ledger", url, "--once", "--recent", "0")
    assert "  ● Grepping the logs  [grep]" in every and every.rstrip().endswith("(other)")
    assert "\x1b[" not in out + every  # not a terminal: plain text


def test_once_rich_respects_no_color_and_escapes_markup(db: tuple[str, Ledger]) -> None:
    url, led = db
    seed(led)
    colored = run(
        "--ledger", url, "--once", "--format", "rich", "--session", "conv", env={"NO_COLOR": ""}
    )
    assert COLOR.search(colored)
    plain = run(
        "--ledger", url, "--once", "--format", "rich", "--session", "conv", env={"NO_COLOR": "1"}
    )
    assert not COLOR.search(plain)
    for out in (colored, plain):
        text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out)
        assert "▸ [bold]Reading[/bold] the [red]router[/red]" in text
        assert "Searching for" in text and "writing…" in text and "Listed 12 files" in text


def test_model_text_cannot_drive_the_terminal(db: tuple[str, Ledger]) -> None:
    url, led = db
    led.record(
        call(
            "x",
            "in_flight",
            session_id="s",
            intent="Deleting \x1b[2J\x1b]0;pwned\x07the cache\nnow",
        )
    )
    assert led.flush()
    for fmt in ("plain", "rich"):
        out = run("--ledger", url, "--once", "--format", fmt, env={"NO_COLOR": "1"})
        assert "\x1b[2J" not in out and "\x1b]0" not in out and "pwned" not in out
        assert "Deleting the cache now" in re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out)


def writer(led: Ledger, steps: list[AnchorWrite], pause_s: float = 0.15) -> threading.Thread:
    def go() -> None:
        time.sleep(0.3)
        for step in steps:
            led.record(step)
            assert led.flush()
            time.sleep(pause_s)

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    return thread


AGENT_STEPS: list[AnchorWrite] = [
    call("s1", "streaming", session_id="live", batch_id="m9"),
    call("s1", "streaming", intent="Searching for"),
    call("s2", "streaming", session_id="live", batch_id="m9", tool_name="read_file"),
    call("s1", "streaming", intent="Searching for OAuth handling"),
    call("s2", "streaming", intent="Reading the router", tool_name="read_file"),
    call("s1", "in_flight", intent="Searching for OAuth handling"),
    call("s2", "in_flight", intent="Reading the router", tool_name="read_file"),
    call("s1", "success", outcome="Found 12 results", end_ns=time.time_ns() + 10**9),
    call(
        "s2",
        "error",
        error="FileNotFoundError",
        tool_name="read_file",
        end_ns=time.time_ns() + 10**9,
    ),
]


def check_follow(out: str) -> None:
    lines = [line for line in out.splitlines() if line.strip()]
    expected = [
        "✎ Running search_code  [search_code]  writing…",
        "✎ Searching for  [search_code]  writing…",
        "✎ Running read_file  [read_file]  writing…",
        "✎ Searching for OAuth handling  [search_code]  writing…",
        "✎ Reading the router  [read_file]  writing…",
        "● Searching for OAuth handling  [search_code]",
        "● Reading the router  [read_file]",
        "✓ Found 12 results  [search_code]",
        "✗ Reading the router · failed  [read_file]  error",
    ]
    # each state shows once, in order (a poll may skip an intermediate state, never reorder)
    positions = [next((i for i, line in enumerate(lines) if e in line), None) for e in expected]
    found = [p for p in positions if p is not None]
    assert found == sorted(found) and len(found) >= 5, out
    assert positions[0] is not None and positions[-2] is not None and positions[-1] is not None, out
    assert any(line.startswith("▸ ") for line in lines), out  # siblings grouped under a header
    assert lines[-1].lstrip().startswith("✗ Reading the router · failed"), out


def test_follow_plain_while_another_thread_writes(db: tuple[str, Ledger]) -> None:
    url, led = db
    thread = writer(led, AGENT_STEPS)
    out = run(
        "--ledger",
        url,
        "--session",
        "live",
        "--interval",
        "0.05",
        "--until-idle",
        "--timeout",
        "20",
    )
    thread.join(5)
    check_follow(out)


@pytest.mark.postgres
def test_follow_postgres_written_by_another_connection(postgres_url: str) -> None:
    url = pg_schema_url(postgres_url)
    with open_ledger(url, options=FAST) as led:  # the agent's ledger (its own connections)
        thread = writer(led, AGENT_STEPS)
        out = run(
            "--ledger",
            url,
            "--session",
            "live",
            "--interval",
            "0.05",
            "--until-idle",
            "--timeout",
            "20",
        )
        thread.join(5)
    check_follow(out)


def test_follow_rich_settles_and_exits(db: tuple[str, Ledger]) -> None:
    url, led = db
    thread = writer(led, AGENT_STEPS, pause_s=0.05)
    out = run(
        "--ledger",
        url,
        "--format",
        "rich",
        "--interval",
        "0.05",
        "--until-idle",
        "--timeout",
        "20",
        env={"NO_COLOR": "1"},
    )
    thread.join(5)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out)
    assert "Found 12 results" in text and "Reading the router · failed" in text


def test_tapped_stream_shows_up_live(
    sse_server: SSEServer, db: tuple[str, Ledger], registry: IntentRegistry
) -> None:
    url, led = db
    calls = [("call_w1", "search_code", '{"intent": "Searching for the flaky test", "q": "flaky"}')]
    sse_server.respond(chat_stream(calls, size=2), delay_s=0.03)  # ~1 s, like a real model
    tap = StreamTap(ledger=led, registry=registry, session_id="tapped")

    def agent() -> None:
        time.sleep(0.3)
        client = sdk_client("openai", sse_server)
        for _ in tap.wrap(client.chat.completions.create(model="m", messages=[], stream=True)):
            pass
        settled = anchor_id("call_w1", session_id="tapped")  # the call's identity
        led.record(call(settled, "success", outcome="Found 1 flaky test", end_ns=time.time_ns()))

    thread = threading.Thread(target=agent, daemon=True)
    thread.start()
    out = run(
        "--ledger",
        url,
        "--session",
        "tapped",
        "--interval",
        "0.05",
        "--until-idle",
        "--timeout",
        "20",
    )
    thread.join(5)
    lines = out.splitlines()
    writing = [line for line in lines if "writing…" in line]
    assert writing and writing[-1].strip().startswith("✎ Searching for the flaky test"), out
    assert lines[-1].strip().startswith("✓ Found 1 flaky test"), out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ledger", "mysql://x/y"], "unsupported ledger URL"),
        (["--ledger", "/nonexistent/dir/ledger.db"], "no ledger database"),
    ],
)
def test_errors_are_one_line(args: list[str], message: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["watch", *args, "--once"])
    assert result.exit_code == 1 and message in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_ctrl_c_exits_quietly(db: tuple[str, Ledger], monkeypatch: pytest.MonkeyPatch) -> None:
    url, led = db
    seed(led)
    calls: list[float] = []

    def interrupt(seconds: float) -> None:
        calls.append(seconds)
        if len(calls) > 2:
            raise KeyboardInterrupt

    monkeypatch.setattr("tracing.cli._watch._sleep", interrupt)
    out = run("--ledger", url, "--interval", "0.05")
    assert "Searching for" in out and len(calls) == 3


def test_a_model_pausing_mid_intent_shows_in_watch_within_the_interval(
    sse_server: SSEServer, db: tuple[str, Ledger], registry: IntentRegistry
) -> None:
    # The server holds the stream after "Searching for the OAuth token": no delta arrives,
    # yet `intentrace watch` shows what the application received once the interval passed.
    from tests.support.sse import chat_finish, chat_tool_delta, chat_tool_start, sse

    url, led = db
    parts = [
        chat_tool_start(0, "call_pause", "search_code"),
        chat_tool_delta(0, '{"intent": "Searching'),
        chat_tool_delta(0, " for the OAuth token"),
        chat_tool_delta(0, ' refresh", "q": "refresh"}'),
        chat_finish(),
        sse("[DONE]"),
    ]
    script = sse_server.respond(parts, hold_at=3)
    tap = StreamTap(ledger=led, registry=registry, session_id="paused")
    finished = threading.Event()

    def agent() -> None:
        client = sdk_client("openai", sse_server)
        for _ in tap.wrap(client.chat.completions.create(model="m", messages=[], stream=True)):
            pass
        finished.set()

    threading.Thread(target=agent, daemon=True).start()
    assert script.reached.wait(10)
    deadline = time.monotonic() + 10
    out = ""
    while time.monotonic() < deadline:
        out = run("--ledger", url, "--once", "--session", "paused")
        if "Searching for the OAuth token" in out:
            break
        time.sleep(0.05)
    assert not finished.is_set()  # still paused: nothing more arrived
    assert "✎ Searching for the OAuth token  [search_code]  writing…" in out, out
    script.release.set()
    assert finished.wait(10)
    assert led.flush()
    assert "Searching for the OAuth token refresh" in run(
        "--ledger", url, "--once", "--session", "paused"
    )


def test_once_shows_settled_siblings_as_one_block_with_its_header(db: tuple[str, Ledger]) -> None:
    """--once: the latest settled calls keep their block (header, every sibling) and a block
    still live shows each of its calls once, not again as a loose settled line."""
    url, led = db
    now = time.time_ns()
    done = {"session_id": "s", "batch_id": "m1", "start_ns": now - 5 * 10**9}
    for cid, intent in (("p1", "Reading the router"), ("p2", "Reading the models")):
        led.record(
            call(cid, "success", intent=intent, outcome=f"{intent[8:]} read", end_ns=now, **done)
        )
    led.set_activity("s", "m1", "Read the routing layer")
    live = {"session_id": "s", "batch_id": "m2"}
    led.record(call("q1", "success", intent="Grepping for TODO", outcome="3 hits", **live))
    led.record(call("q2", "in_flight", intent="Grepping for FIXME", **live))
    assert led.flush()
    lines = run("--ledger", url, "--once", "--session", "s", "--recent", "3").splitlines()
    assert lines[0] == "▸ Read the routing layer"
    assert [ln.split("  [")[0] for ln in lines[1:3]] == [
        "    ✓ the router read",
        "    ✓ the models read",
    ]
    assert lines[3].startswith("▸ ")
    rest = "\n".join(lines[4:])
    assert rest.count("3 hits") == 1 and rest.count("Grepping for FIXME") == 1 and len(lines) == 6
    rich = run(
        "--ledger", url, "--once", "--session", "s", "--format", "rich", env={"NO_COLOR": "1"}
    )
    assert rich.count("Read the routing layer") == 1 and rich.count("3 hits") == 1
    assert rich.index("the models read") < rich.index("Grepping for FIXME")
