"""A real ``intentrace view`` server and a headless Chromium tab, for the browser tests."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tracing.environment_variables import INTENTRACE_LEDGER_URL

CHROMIUM = "/usr/bin/chromium"
BROWSER_MARKS = [
    pytest.mark.browser,
    pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason="needs Debian's chromium"),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_healthy(base: str, proc: subprocess.Popen[bytes], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"intentrace view exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise AssertionError("the viewer did not come up")


@contextlib.contextmanager
def serve(ledger_url: str, *extra: str, script: Path | None = None) -> Iterator[str]:
    """``intentrace view --ledger <url> --port <free> [extra]`` as a subprocess; yields its
    base URL and checks that the Streamlit server went away with it. ``script``: another
    Streamlit app (``streamlit run script``, the ledger in ``$INTENTRACE_LEDGER_URL``) in its
    place, such as a benchmark's naive page."""
    port = free_port()
    cmd = [sys.executable, "-c", "from tracing.cli import main; main()", "view",
           "--ledger", ledger_url, "--port", str(port), *extra]  # fmt: skip
    if script is not None:
        cmd = [sys.executable, "-m", "streamlit", "run", str(script), "--server.port", str(port),
               "--server.address", "127.0.0.1", "--server.headless", "true",
               "--browser.gatherUsageStats", "false", *extra]  # fmt: skip
    env = {**os.environ, INTENTRACE_LEDGER_URL: ledger_url}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base, proc)
        yield base
    finally:
        proc.terminate()  # forwarded to the Streamlit child
        proc.wait(timeout=20)
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{base}/_stcore/health", timeout=2)


@dataclass
class Tab:
    """One browser tab and what it saw."""

    page: Any
    base: str
    """The server's base URL."""
    dialogs: list[str] = field(default_factory=list[str])
    requests: list[str] = field(default_factory=list[str])


@contextlib.contextmanager
def chromium_tab(
    base: str, width: int = 1400, height: int = 1000, timezone_id: str | None = None
) -> Iterator[Tab]:
    """One headless Chromium tab that records dialogs and requests, warmed up on ``base``
    (``timezone_id``: the browser's time zone, else the machine's)."""
    from playwright.sync_api import Dialog, Request, sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            page = chromium.new_page(
                viewport={"width": width, "height": height}, timezone_id=timezone_id
            )
            tab = Tab(page, base)

            def on_dialog(dialog: Dialog) -> None:
                tab.dialogs.append(dialog.message)
                dialog.dismiss()

            def on_request(request: Request) -> None:
                tab.requests.append(request.url)

            tab.page.on("dialog", on_dialog)
            tab.page.on("request", on_request)
            # A fresh server's first page load can come up blank: load once before testing.
            tab.page.goto(base)
            tab.page.wait_for_selector("[data-testid=stMain] h1", timeout=30_000)
            yield tab
        finally:
            chromium.close()
