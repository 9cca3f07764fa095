"""Options several commands share, defined once: the ledger, the redaction policy, the
label-bearing tools, and the interface and port a server binds; and how a long-running command
waits for Ctrl-C."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, Final, TypeVar

import click

from redaction.environment_variables import INTENTRACE_REDACTION_POLICY
from tracing.environment_variables import INTENTRACE_LEDGER_URL

F = TypeVar("F", bound=Callable[..., Any])

LOOPBACK: Final = "127.0.0.1"
"""What servers bind unless told otherwise."""

ledger_option = click.option(
    "--ledger",
    "ledger_url",
    metavar="URL",
    default=None,
    help=f"Ledger URL or SQLite file (default: ${INTENTRACE_LEDGER_URL}, else the default file).",
)

policy_option = click.option(
    "--policy",
    "policy_path",
    metavar="FILE",
    default=None,
    help=f"Redaction policy (TOML; default: ${INTENTRACE_REDACTION_POLICY}, else keep "
    "everything and scrub secrets).",
)

tool_option = click.option(
    "--tool",
    "tools",
    metavar="NAME",
    multiple=True,
    help="A label-bearing tool name, for spans without the intentrace.label_bearing flag "
    "(repeatable).",
)


def bind_options(port: int, *, what: str = "", any_port: bool = False) -> Callable[[F], F]:
    """``--host`` (loopback by default) and ``--port`` for a command that serves or opens a
    server; ``what`` names it in the help when the command does more than serve."""
    suffix = f" ({what})" if what else ""
    port_help = "TCP port (0: any free port)." if any_port else "TCP port."

    def decorate(command: F) -> F:
        command = click.option(
            "--port",
            type=click.IntRange(0 if any_port else 1, 65535),
            default=port,
            show_default=True,
            help=port_help[:-1] + suffix + ".",
        )(command)
        return click.option(
            "--host", default=LOOPBACK, show_default=True, help=f"Interface to bind{suffix}."
        )(command)

    return decorate


def wait_for_signal() -> None:
    """Block until SIGINT/SIGTERM (or Ctrl-C); the previous handlers are put back."""
    stop = threading.Event()
    previous: dict[int, Any] = {}

    def handler(signum: int, frame: FrameType | None) -> None:
        del signum, frame
        stop.set()

    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, handler)
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
