"""A real Arize Phoenix server for tests: ``phoenix serve`` as a process on loopback.

Phoenix (``arize-phoenix``) pins versions of packages the rest of the suite needs newer
(anthropic, google-genai), so ``scripts/test.sh`` installs it into its own virtual environment,
``.venv-phoenix``; only its ``phoenix`` command is used here. Another install is found through
``INTENTRACE_TEST_PHOENIX`` (the path of a ``phoenix`` executable) or ``PATH``.

Usage::

    with PhoenixServer() as phx:
        configure(otlp=phx.traces_url, ...)
        spans = phx.wait_for_spans("my-project", 4)
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from tracing.environment_variables import INTENTRACE_TEST_PHOENIX

ROOT = Path(__file__).resolve().parents[2]


def phoenix_executable() -> str | None:
    """The ``phoenix`` command to run: ``$INTENTRACE_TEST_PHOENIX``, ``.venv-phoenix``, PATH."""
    configured = os.environ.get(INTENTRACE_TEST_PHOENIX)
    if configured:
        return configured
    local = ROOT / ".venv-phoenix" / "bin" / "phoenix"
    if local.exists():
        return str(local)
    return shutil.which("phoenix")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PhoenixServer:
    """``phoenix serve`` on free loopback ports with a temporary working directory."""

    def __init__(self, *, start_timeout_s: float = 300.0) -> None:
        self.port = _free_port()
        self.grpc_port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.traces_url = f"{self.base_url}/v1/traces"
        self._start_timeout_s = start_timeout_s
        self._workdir: tempfile.TemporaryDirectory[str] | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    def __enter__(self) -> PhoenixServer:
        executable = phoenix_executable()
        if executable is None:
            raise RuntimeError(
                "no `phoenix` command: run scripts/test.sh (it installs arize-phoenix into "
                ".venv-phoenix) or set INTENTRACE_TEST_PHOENIX to one"
            )
        self._workdir = tempfile.TemporaryDirectory(prefix="intentrace-phoenix-")
        workdir = self._workdir.name
        env = {
            **os.environ,
            "PHOENIX_WORKING_DIR": workdir,
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(self.port),
            "PHOENIX_GRPC_PORT": str(self.grpc_port),
            "PHOENIX_TELEMETRY_ENABLED": "false",
        }
        for key in ("PHOENIX_SQL_DATABASE_URL", "PHOENIX_COLLECTOR_ENDPOINT"):
            env.pop(key, None)
        self._log = open(Path(workdir) / "server.log", "wb")
        self._process = subprocess.Popen(
            [executable, "serve"], env=env, stdout=self._log, stderr=subprocess.STDOUT
        )
        try:
            self._wait_ready()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _wait_ready(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + self._start_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"phoenix serve exited ({self._process.returncode}):\n{self.log()}"
                )
            try:
                with urllib.request.urlopen(f"{self.base_url}/healthz", timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.25)
        raise RuntimeError(f"phoenix serve not ready in {self._start_timeout_s} s:\n{self.log()}")

    def log(self) -> str:
        """The server's output so far (its last 4,000 characters)."""
        if self._workdir is None:
            return ""
        path = Path(self._workdir.name) / "server.log"
        return path.read_text("utf-8", "replace")[-4000:] if path.exists() else ""

    def get(self, path: str, **params: Any) -> Any:
        """GET a REST path (``/v1/...``) and parse its JSON."""
        query = urllib.parse.urlencode(params, doseq=True)
        url = f"{self.base_url}{path}" + (f"?{query}" if query else "")
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.loads(response.read())

    def spans(self, project: str) -> list[dict[str, Any]]:
        """Every span of a project (``GET /v1/projects/<name>/spans``), oldest first."""
        try:
            body = self.get(
                f"/v1/projects/{urllib.parse.quote(project)}/spans", limit=1000, order="asc"
            )
        except urllib.error.HTTPError as exc:
            if exc.code == 404:  # the project exists once its first span is ingested
                return []
            raise
        return list(body["data"])

    def wait_for_spans(
        self, project: str, count: int, *, timeout: float = 30.0
    ) -> list[dict[str, Any]]:
        """Poll until the project has at least ``count`` spans (ingestion is asynchronous)."""
        deadline = time.monotonic() + timeout
        spans: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            spans = self.spans(project)
            if len(spans) >= count:
                return spans
            time.sleep(0.2)
        raise AssertionError(f"{len(spans)} of {count} spans in Phoenix:\n{self.log()}")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=5)
            self._process = None
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._workdir is not None:
            self._workdir.cleanup()
            self._workdir = None
