"""``intentrace import``: OTLP JSON lines as a Collector's file exporter writes them, bad lines
counted and reported (never fatal), gzip files, stdin, into a real SQLite ledger."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from click.testing import CliRunner
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from redaction import RedactionPolicy
from tests.support.wire import spans_to_json
from tracing import activity, session, tool_call
from tracing.cli import main
from tracing.cli._collect import import_otlp_lines
from tracing.collect._feed import SpanFeed
from tracing.ledger import open_ledger
from tracing.testing import RecordingLedger


def run_spans() -> list[list[ReadableSpan]]:
    """Two export batches of one session: the calls first, their block later."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with session("conv-import", agent_id="coder", turn=1), activity("Exploring", tracer=tracer):
        for n in range(3):
            args = {"intent": f"Reading file {n}", "path": f"f{n}.py"}
            with tool_call("read_file", args, label_bearing=True, tracer=tracer) as c:
                c.set_result({"lines": n}, outcome=f"Read file {n}")
    provider.shutdown()
    spans = list(exporter.get_finished_spans())
    return [spans[:2], spans[2:]]


def jsonl(batches: list[list[ReadableSpan]], bad: dict[int, str] | None = None) -> bytes:
    lines = [json.dumps(spans_to_json(b)) for b in batches]
    for index, text in sorted((bad or {}).items()):
        lines.insert(index, text)
    return ("\n".join(lines) + "\n").encode()


BAD = {
    0: '{"resourceSpans": [{"scopeSpans": [{"spans": [{"na',
    2: "not json at all",
    3: "",
    4: '{"resourceSpans": 7}',
}


def test_import_lines_counts_bad_lines() -> None:
    ledger = RecordingLedger()
    data = jsonl(run_spans(), BAD)
    report = import_otlp_lines(
        data.splitlines(keepends=True), SpanFeed(ledger, policy=RedactionPolicy.default())
    )
    assert (report.lines, report.bad_lines, report.spans, report.calls) == (5, 3, 4, 3)
    assert report.problems[0].startswith("line 1: body is not JSON")
    assert report.problems[1].startswith("line 3: body is not JSON")
    assert report.problems[2] == "line 5: resourceSpans: expected a list, got a number"
    assert sorted(a["label"] for a in ledger.calls().values()) == [
        "Read file 0",
        "Read file 1",
        "Read file 2",
    ]
    assert ledger.activities[0]["label"] == "Exploring"


def test_cli_import_with_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_bytes(jsonl(run_spans(), BAD))
    url = f"sqlite:///{tmp_path}/ledger.db"
    result = CliRunner().invoke(main, ["import", str(path), "--ledger", url])
    assert result.exit_code == 0, result.output
    assert f"imported 4 spans from 5 lines of {path}: 3 tool calls -> ledger {url}" in result.output
    assert "3 bad lines skipped" in result.output
    assert "line 3: body is not JSON" in result.output
    ledger = open_ledger(url, read_only=True)
    try:
        anchors = ledger.session_anchors("conv-import")
        assert [a["label"] for a in anchors] == ["Read file 0", "Read file 1", "Read file 2"]
        assert [b["activity_label"] for b in ledger.blocks("conv-import")] == ["Exploring"]
    finally:
        ledger.close()


def test_cli_import_gzip_and_stdin(tmp_path: Path) -> None:
    data = jsonl(run_spans())
    path = tmp_path / "traces.jsonl.gz"
    path.write_bytes(gzip.compress(data))
    url = f"sqlite:///{tmp_path}/ledger.db"
    first = CliRunner().invoke(main, ["import", str(path), "--ledger", url])
    assert first.exit_code == 0, first.output
    assert "3 tool calls" in first.output
    again = CliRunner().invoke(main, ["import", "-", "--ledger", url], input=data)
    assert again.exit_code == 0, again.output
    ledger = open_ledger(url, read_only=True)
    try:
        assert len(ledger.session_anchors("conv-import")) == 3  # the same spans: idempotent
    finally:
        ledger.close()


def test_cli_import_errors_are_one_line(tmp_path: Path) -> None:
    missing = CliRunner().invoke(main, ["import", str(tmp_path / "nope.jsonl")])
    assert missing.exit_code == 1
    assert missing.output.startswith("Error: cannot read")
    assert len(missing.output.strip().splitlines()) == 1
    (tmp_path / "t.jsonl").write_text("")
    bad_policy = tmp_path / "policy.toml"
    bad_policy.write_text("[tools.x]\nargs = 'shred'\n")
    result = CliRunner().invoke(
        main,
        [
            "import",
            str(tmp_path / "t.jsonl"),
            "--ledger",
            f"sqlite:///{tmp_path}/l.db",
            "--policy",
            str(bad_policy),
        ],
    )
    assert result.exit_code == 1
    assert result.output.startswith("Error: ")
    assert "shred" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_no_test_touches_the_users_default_ledger() -> None:
    """The suite's own default location (tests/conftest.py), never ~/.local/share."""
    from tracing.ledger import default_ledger_url

    assert str(Path.home() / ".local" / "share") not in default_ledger_url()
