"""``intentrace demo``: load the simulated agent's sessions into the ledger (and open the viewer).

See :mod:`tracing.demo._run` and docs/collect.md#the-demo.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import sys
import threading
from collections.abc import Generator
from pathlib import Path
from typing import Any

import click

from tracing.cli._options import bind_options, ledger_option, wait_for_signal
from tracing.cli._view import DEFAULT_PORT as VIEW_PORT
from tracing.cli._view import run_viewer
from tracing.demo._live import live_session_id, run_live
from tracing.demo._run import DEFAULT_SEED, DEFAULT_SESSIONS, narrative, run_demo
from tracing.ledger import LedgerError, open_ledger


def _print(lines: list[str]) -> None:
    """Rich on a terminal, plain text otherwise (pipes, CI, tests)."""
    if sys.stdout.isatty():
        # lazy: rich is the optional `cli` extra
        try:
            from rich.console import Console
            from rich.text import Text
        except ImportError:
            pass
        else:
            console = Console(highlight=False)
            for n, line in enumerate(lines):
                style = (
                    "bold"
                    if n == 0 or (line.startswith("  ") and not line.startswith("   "))
                    else ""
                )
                text = Text(line, style=style)  # model-written text: never markup
                for mark, colour in (("✓", "green"), ("✗", "red"), ("⊘", "yellow")):
                    text.highlight_words([f" {mark} "], style=colour)
                console.print(text, soft_wrap=True)
            return
    for line in lines:
        click.echo(line)


def _command_as_typed() -> str:
    """``intentrace`` when that is on PATH, else the path it was run by (``.venv/bin/intentrace``
    from scripts/demo.sh), so the printed next step works as printed."""
    if shutil.which("intentrace"):
        return "intentrace"
    here = Path(sys.argv[0])
    if here.name == "intentrace" and here.exists():
        return shlex.quote(os.path.relpath(here) if not here.is_absolute() else str(here))
    return "intentrace"


@click.command()
@ledger_option
@click.option(
    "--seed",
    type=int,
    default=DEFAULT_SEED,
    show_default=True,
    help="Everything follows from it; the same seed updates the same sessions in place.",
)
@click.option(
    "--sessions",
    type=click.IntRange(1, 100),
    default=DEFAULT_SESSIONS,
    show_default=True,
    help="How many sessions to simulate.",
)
@click.option("--view", is_flag=True, help="Open the viewer on the ledger afterwards.")
@click.option(
    "--live",
    is_flag=True,
    help="Then keep a simulated agent writing in real time (intents being written, calls in "
    "flight, a background call, a subagent) until the viewer stops (without --view: Ctrl-C).",
)
@bind_options(VIEW_PORT, what="the viewer, with --view")
def demo(  # noqa: PLR0917 - click passes options as arguments
    ledger_url: str | None,
    seed: int,
    sessions: int,
    view: bool,
    live: bool,
    host: str,
    port: int,
) -> None:
    """Load a simulated coding agent's sessions into the ledger (no LLM, no network).

    The agent runs through the real pipeline (our instrumentation and IntentSpanProcessor)
    and writes parallel calls, failures, a cancellation, a background call, a subagent,
    non-English intents and a redacted tool. Running it again with the same seed updates the
    same anchors instead of adding new ones.
    """
    try:
        ledger = open_ledger(ledger_url)
    except LedgerError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        report = run_demo(ledger, seed=seed, sessions=sessions)
        lines = narrative(ledger, report)
    except LedgerError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        ledger.close()
    command = _command_as_typed()
    lines += [
        "",
        f"Ledger: {report.ledger_url}",
        f"Read it: {command} view --ledger {report.ledger_url}"
        if ledger_url
        else f"Read it: {command} view",
    ]
    if live:
        lines.append(f"Live: a simulated agent keeps writing {live_session_id(seed)} (Live page).")
    _print(lines)
    with _live_agent(ledger_url, seed, live):
        if not view:
            if live:
                click.echo("Ctrl-C stops it.")
                wait_for_signal()
            return
        kwargs: dict[str, Any] = {"host": host, "port": port}
        try:
            code = run_viewer(ledger_url, **kwargs)  # (the report's URL has no password)
        except LedgerError as exc:
            raise click.ClickException(str(exc)) from None
    if code not in (0, -2, -15, 130):
        raise click.ClickException(f"the viewer stopped with exit code {code}")


@contextlib.contextmanager
def _live_agent(ledger_url: str | None, seed: int, live: bool) -> Generator[None]:
    """The live demo agent in a thread while the block runs (nothing when not ``live``); it
    stops, settling what it left in flight, when the block ends."""
    if not live:
        yield
        return
    try:
        ledger = open_ledger(ledger_url)
    except LedgerError as exc:
        raise click.ClickException(str(exc)) from None
    stop = threading.Event()
    runner = threading.Thread(
        target=run_live, args=(ledger, stop), kwargs={"seed": seed}, name="intentrace-demo-live"
    )
    runner.start()
    try:
        yield
    finally:
        stop.set()
        runner.join(30.0)
        ledger.close()
