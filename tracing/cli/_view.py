"""``intentrace view``: the narrative viewer (Streamlit) on a ledger.

``run_viewer`` is the one code path that starts it; ``intentrace demo --view`` calls it too.
The viewer runs as a child process (``python -m streamlit run viewer/app.py``) that reads the
ledger named by ``$INTENTRACE_LEDGER_URL``; it binds 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from types import FrameType
from typing import Final

import click

from tracing.cli._options import LOOPBACK, bind_options, ledger_option
from tracing.environment_variables import INTENTRACE_LEDGER_URL, INTENTRACE_TRACE_URL
from tracing.ledger import LedgerError, display_url, open_ledger
from viewer import APP_PATH, check_trace_url

DEFAULT_HOST: Final = LOOPBACK
DEFAULT_PORT: Final = 8501


def viewer_argv(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> list[str]:
    """The command that runs the viewer's Streamlit server (headless, no telemetry)."""
    # lazy: streamlit is the optional `viewer` extra
    try:
        import streamlit  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError:
        raise LedgerError("Streamlit is not installed: pip install 'intentrace[viewer]'") from None
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP_PATH),
        "--server.address",
        host,
        "--server.port",
        str(port),
        "--server.headless",
        "true",
        "--server.fileWatcherType",
        "none",
        "--server.runOnSave",
        "false",
        "--browser.gatherUsageStats",
        "false",
        "--client.toolbarMode",
        "minimal",
        "--client.showErrorDetails",
        "none",
        "--runner.magicEnabled",
        "false",
    ]


def check_ledger(ledger_url: str | None) -> str:
    """Open the ledger read-only once and return the URL to open it with (password included:
    show ``display_url`` of it); ``LedgerError`` when it cannot be opened."""
    ledger = open_ledger(ledger_url, read_only=True)
    try:
        ledger.count_sessions()
        return ledger.connect_url
    finally:
        ledger.close()


def run_viewer(
    ledger_url: str | None = None,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    env: Mapping[str, str] | None = None,
) -> int:
    """Serve the viewer on ``http://host:port`` until it stops (Ctrl-C); return its exit code.

    Args:
        ledger_url: the ledger to read (argument > ``$INTENTRACE_LEDGER_URL`` > default file).
            It must exist: the viewer only reads.
        host: interface to bind (loopback by default).
        port: TCP port.
        env: environment of the viewer process (default: this process's).

    Raises:
        LedgerError: the ledger cannot be opened read-only, or the viewer is not installed.
    """
    url = check_ledger(ledger_url)
    argv = viewer_argv(host, port)
    child_env = dict(os.environ if env is None else env)
    child_env[INTENTRACE_LEDGER_URL] = url
    shown = f"[{host}]" if ":" in host else host
    click.echo(
        f"intentrace viewer on http://{shown}:{port}  (ledger: {display_url(url)}; Ctrl-C stops it)"
    )
    proc = subprocess.Popen(argv, env=child_env)
    previous: dict[int, object] = {}

    def forward(signum: int, frame: FrameType | None) -> None:
        del frame
        if proc.poll() is None:
            proc.send_signal(signum)

    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)):
            if signum is not None:
                previous[signum] = signal.signal(signum, forward)
    try:
        while True:
            try:
                return proc.wait()
            except KeyboardInterrupt:  # no handler installed (not the main thread)
                forward(signal.SIGINT, None)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)  # pyright: ignore[reportArgumentType]
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


@click.command()
@ledger_option
@bind_options(DEFAULT_PORT)
@click.option(
    "--trace-url",
    "trace_url",
    metavar="TEMPLATE",
    default=None,
    help="Link each call to its trace in your tracing backend: an http(s) URL with "
    "{trace_id} (and optionally {span_id}), e.g. a Langfuse or Phoenix trace URL "
    f"(default: ${INTENTRACE_TRACE_URL}).",
)
def view(ledger_url: str | None, host: str, port: int, trace_url: str | None) -> None:
    """Open the narrative viewer (Streamlit) on the ledger: sessions, stories, live calls."""
    env = dict(os.environ)
    template = trace_url if trace_url is not None else env.get(INTENTRACE_TRACE_URL, "")
    if template.strip():
        try:
            env[INTENTRACE_TRACE_URL] = check_trace_url(template)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
    try:
        code = run_viewer(ledger_url, host, port, env=env)
    except LedgerError as exc:
        raise click.ClickException(str(exc)) from None
    if code not in (0, -signal.SIGINT, -signal.SIGTERM, 130):
        raise click.ClickException(f"the viewer stopped with exit code {code}")
