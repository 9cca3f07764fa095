"""``intentrace collect`` (an OTLP/HTTP receiver) and ``intentrace import`` (OTLP JSON lines).

Both feed the ledger through :class:`~tracing.collect.SpanFeed`, which derives anchors with
the in-process span processor's own logic. See docs/collect.md.
"""

from __future__ import annotations

import gzip
import ipaddress
import os
import sys
from collections.abc import Callable, Generator, Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import click

from redaction import PolicyError, RedactionPolicy
from tracing.cli._options import (
    bind_options,
    ledger_option,
    policy_option,
    tool_option,
    wait_for_signal,
)
from tracing.collect._feed import SpanFeed
from tracing.collect._otlp import OtlpDecodeError, decode_json
from tracing.collect._receiver import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_PORT,
    CollectOptions,
    CollectReceiver,
)
from tracing.environment_variables import INTENTRACE_COLLECT_TOKEN
from tracing.intent import IntentRegistry
from tracing.ledger import Ledger, LedgerError, LedgerOptions, open_ledger

MAX_REPORTED: int = 5
"""Bad lines (and rejected spans) named in the report; all are counted."""


@contextmanager
def _writing(ledger_url: str | None) -> Generator[Ledger]:
    try:
        # A ledger that cannot be reached at start is an error here, not a background retry:
        # the command would report success while every write is dropped.
        ledger = open_ledger(ledger_url, options=LedgerOptions(open_requires_database=True))
    except LedgerError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        yield ledger
    finally:
        ledger.close()


def _feed(ledger: Ledger, policy_path: str | None, tools: tuple[str, ...]) -> SpanFeed:
    try:
        policy = RedactionPolicy.load(policy_path)
    except PolicyError as exc:
        raise click.ClickException(str(exc)) from None
    return SpanFeed(ledger, policy=policy, registry=IntentRegistry(tools))


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# ---------------------------------------------------------------------------------- collect


@click.command()
@bind_options(DEFAULT_PORT, any_port=True)
@ledger_option
@click.option(
    "--token",
    envvar=INTENTRACE_COLLECT_TOKEN,
    show_envvar=True,
    default=None,
    help="Require 'Authorization: Bearer <token>' on every request.",
)
@click.option(
    "--max-body-bytes",
    type=click.IntRange(min=1024),
    default=DEFAULT_MAX_BODY_BYTES,
    show_default=True,
    help="Largest request body, compressed or not (larger: 413).",
)
@policy_option
@tool_option
def collect(  # noqa: PLR0917 - click passes options as arguments
    host: str,
    port: int,
    ledger_url: str | None,
    token: str | None,
    max_body_bytes: int,
    policy_path: str | None,
    tools: tuple[str, ...],
) -> None:
    """Receive OTLP/HTTP traces (POST /v1/traces) and write their tool calls to the ledger.

    Point an app's exporter (OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318) or an
    OpenTelemetry Collector's otlphttp exporter here. Protobuf and JSON, gzip. Runs until
    Ctrl-C.
    """
    options = CollectOptions(
        host=host, port=port, token=token or None, max_body_bytes=max_body_bytes
    )
    with _writing(ledger_url) as ledger:
        feed = _feed(ledger, policy_path, tools)
        try:
            receiver = CollectReceiver(feed, options, ledger_stats=ledger.stats)
        except OSError as exc:
            raise click.ClickException(
                f"cannot listen on {host}:{port}: {exc.strerror or exc}"
            ) from None
        if not _is_loopback(host) and not options.token:
            click.echo(
                f"warning: listening on {host} without a token: anyone who can reach this port "
                f"can write to the ledger (set --token or ${INTENTRACE_COLLECT_TOKEN})",
                err=True,
            )
        click.echo(
            f"intentrace collect: OTLP/HTTP on {receiver.traces_url} -> ledger {ledger.url} "
            "(Ctrl-C stops it)"
        )
        sys.stdout.flush()
        _serve_until_signal(receiver)
        ledger.flush(10.0)
        counts = receiver.stats()
    dropped = ledger.stats().get("dropped", 0)  # (after the close: what it had to drop too)
    line = (
        f"received {counts.get('spans', 0)} spans in {counts.get('requests', 0)} requests: "
        f"{counts.get('calls', 0)} tool calls written, {counts.get('rejected', 0)} spans rejected"
    )
    bad = sum(v for k, v in counts.items() if k.startswith("http_4"))
    if bad:
        line += f", {bad} requests refused"
    if dropped:
        line += f", {dropped} ledger writes dropped"
    click.echo(line)
    if dropped:
        raise click.exceptions.Exit(1)  # (some calls are not in the ledger: not a success)


def _serve_until_signal(receiver: CollectReceiver) -> None:
    """Serve in a thread until SIGINT/SIGTERM (or Ctrl-C), then stop the receiver."""
    receiver.start()
    try:
        wait_for_signal()
    finally:
        receiver.stop()


# ---------------------------------------------------------------------------------- import


@dataclass
class ImportReport:
    """What ``import_otlp_lines`` made of a file."""

    lines: int = 0
    """Non-empty lines read."""
    spans: int = 0
    calls: int = 0
    rejected_spans: int = 0
    bad_lines: int = 0
    problems: list[str] = field(default_factory=list[str])
    """The first few bad lines and rejected spans (``line N: why``)."""

    def note(self, text: str) -> None:
        if len(self.problems) < MAX_REPORTED:
            self.problems.append(text)


def import_otlp_lines(
    stream: Iterable[bytes], feed: SpanFeed, *, progress: Callable[[int], None] | None = None
) -> ImportReport:
    """Feed every line of ``stream`` (one OTLP/JSON ``ExportTraceServiceRequest`` per line, as
    the Collector's file exporter writes them) to ``feed``. Bad lines are counted and skipped.

    Args:
        stream: the lines (binary).
        feed: where the spans go.
        progress: called with the number of bytes consumed by each line.
    """
    report = ImportReport()
    for number, line in enumerate(stream, start=1):
        if progress is not None:
            progress(len(line))
        if not line.strip():
            continue
        report.lines += 1
        try:
            batch = decode_json(line)
        except OtlpDecodeError as exc:
            report.bad_lines += 1
            report.note(f"line {number}: {exc}")
            continue
        result = feed.ingest(batch.spans)
        report.spans += len(batch.spans) + batch.rejected
        report.calls += result.calls
        rejected = batch.rejected + result.rejected
        report.rejected_spans += rejected
        for reason in [*batch.reasons, *result.reasons][:rejected]:
            report.note(f"line {number}: {reason}")
    return report


@contextmanager
def _open_lines(path: str) -> Generator[tuple[Iterable[bytes], IO[bytes], int | None]]:
    """(lines, raw file, size) of a file — gzip-compressed or not — or of stdin for ``-``."""
    if path == "-":
        yield sys.stdin.buffer, sys.stdin.buffer, None
        return
    try:
        raw = Path(path).open("rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise click.ClickException(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        size = os.fstat(raw.fileno()).st_size
        if raw.read(2) == b"\x1f\x8b":
            raw.seek(0)
            with gzip.GzipFile(fileobj=raw) as lines:
                yield lines, raw, size
        else:
            raw.seek(0)
            yield raw, raw, size
    finally:
        raw.close()


def _progress_bar(size: int | None) -> Any:
    if size is None or not sys.stderr.isatty():
        return None
    # lazy: rich is the optional `cli` extra
    try:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )
    except ImportError:
        return None
    return Progress(
        TextColumn("importing"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    )


@click.command("import")
@click.argument("file", metavar="FILE")
@ledger_option
@policy_option
@tool_option
def import_(
    file: str, ledger_url: str | None, policy_path: str | None, tools: tuple[str, ...]
) -> None:
    """Load FILE, OTLP JSON lines (an OpenTelemetry Collector file exporter's output, plain or
    gzip; - reads stdin), into the ledger. Bad lines are counted and skipped."""
    with _writing(ledger_url) as ledger, _open_lines(file) as (lines, raw, size):
        feed = _feed(ledger, policy_path, tools)
        bar = _progress_bar(size)
        if bar is None:
            report = import_otlp_lines(lines, feed)
        else:
            with bar:
                task = bar.add_task("import", total=size)

                def advance(_: int) -> None:
                    bar.update(task, completed=raw.tell())

                report = import_otlp_lines(lines, feed, progress=advance)
        ledger.flush(60.0)
        url = ledger.url
    dropped = ledger.stats().get("dropped", 0)  # (after the close: what it had to drop too)
    click.echo(
        f"imported {report.spans} spans from {report.lines} lines of {file}: "
        f"{report.calls} tool calls -> ledger {url}"
    )
    if report.bad_lines or report.rejected_spans or dropped:
        parts: list[str] = []
        if report.bad_lines:
            parts.append(f"{report.bad_lines} bad lines skipped")
        if report.rejected_spans:
            parts.append(f"{report.rejected_spans} spans rejected")
        if dropped:
            parts.append(f"{dropped} ledger writes dropped")
        click.echo(", ".join(parts) + ":", err=True)
        for problem in report.problems:
            click.echo(f"  {problem}", err=True)
    if dropped:
        raise click.exceptions.Exit(1)  # (some calls are not in the ledger: not a success)
