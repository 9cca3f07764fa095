"""``intentrace collect`` as a process: it prints where it listens, takes spans from the real
exporter with a token, writes them to the ledger, and stops cleanly on SIGINT/SIGTERM with a
summary; configuration errors are one-line messages."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tracing import session, tool_call
from tracing.cli import main
from tracing.cli._collect import _is_loopback
from tracing.environment_variables import INTENTRACE_COLLECT_TOKEN
from tracing.ledger import open_ledger


def start_collect(
    *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "intentrace"), "collect", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = re.search(r"on (http://127\.0\.0\.1:\d+/v1/traces)", line)
    assert found, (line, proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
    return proc, found.group(1)


def send(url: str, token: str | None, n: int) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    provider = TracerProvider()
    provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=url, headers=headers))
    )
    tracer = provider.get_tracer("app")
    with session("conv-cli", agent_id="coder", turn=1):
        for i in range(n):
            args = {"intent": f"Reading part {i}", "path": f"p{i}"}
            with tool_call("read_file", args, label_bearing=True, tracer=tracer) as call:
                call.set_result("ok", outcome=f"Read part {i}")
    provider.shutdown()


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_collect_process_end_to_end(tmp_path: Path, stop: signal.Signals) -> None:
    url = f"sqlite:///{tmp_path}/ledger.db"
    proc, endpoint = start_collect("--ledger", url, env={INTENTRACE_COLLECT_TOKEN: "tok-123"})
    try:
        send(endpoint, "tok-123", 3)
        send(endpoint, None, 1)  # refused: no token
    finally:
        proc.send_signal(stop)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "received 3 spans in 3 requests: 3 tool calls written, 0 spans rejected" in out
    assert "1 requests refused" in out
    assert "Traceback" not in err
    ledger = open_ledger(url, read_only=True)
    try:
        labels = [a["label"] for a in ledger.session_anchors("conv-cli")]
    finally:
        ledger.close()
    assert labels == ["Read part 0", "Read part 1", "Read part 2"]


def test_port_in_use_is_a_one_line_error(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(
            main, ["collect", "--port", str(port), "--ledger", f"sqlite:///{tmp_path}/l.db"]
        )
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: cannot listen on 127.0.0.1:{port}:")
    assert len(result.output.strip().splitlines()) == 1


def test_bad_ledger_and_policy_are_one_line_errors(tmp_path: Path) -> None:
    bad_url = CliRunner().invoke(main, ["collect", "--ledger", "mysql://x"])
    assert bad_url.exit_code == 1
    assert bad_url.output.startswith("Error: unsupported ledger URL")
    missing = CliRunner().invoke(
        main,
        ["collect", "--ledger", f"sqlite:///{tmp_path}/l.db", "--policy", str(tmp_path / "no")],
    )
    assert missing.exit_code == 1
    assert missing.output.startswith("Error: ")
    assert len(missing.output.strip().splitlines()) == 1


def test_loopback_detection() -> None:
    assert _is_loopback("127.0.0.1")
    assert _is_loopback("::1")
    assert _is_loopback("localhost")
    assert not _is_loopback("0.0.0.0")
    assert not _is_loopback("192.168.1.4")


def test_docs_list_every_collect_option() -> None:
    from tracing.cli._collect import collect

    text = (Path(__file__).parents[2] / "docs" / "collect.md").read_text()
    table = text.split("## `intentrace collect`", 1)[1].split("###", 1)[0]
    documented = set(re.findall(r"^\| `(--[a-z-]+)", table, flags=re.MULTILINE))
    options = {
        name
        for param in collect.params
        for name in param.opts
        if name.startswith("--") and name != "--help"
    }
    assert documented == options
