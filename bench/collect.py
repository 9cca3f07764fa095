"""``intentrace collect``: spans received and turned into anchors, against the bare OTLP decode.

The same spans — a realistic agent mix: per trace an agent span, two model steps and eight
tool calls with ~1 KB JSON args (intent first), session attributes, the label-bearing flag —
are encoded as OTLP export requests of 512 spans (the SDK's batch size), protobuf and OTLP/JSON.
In one run, per encoding:

* ``collect``: the receiver over loopback HTTP (keep-alive, one client) into a SQLite ledger,
  timed until the ledger has written every anchor;
* ``feed``: decode + derive (``decode_*`` then ``SpanFeed.ingest``), no HTTP, anchors to a
  recording sink;
* ``decode``: our decoding into span views alone;
* ``http``: the receiver with a feed that does nothing (what the stdlib HTTP server costs);

each against the peer, the bare decode of the same bodies (protobuf ``ParseFromString``;
``json.loads`` for JSON). Prints ``name: ours X, peer Y, ratio Z`` lines (spans per second;
ratio = ours / peer).

Then, under load:

* ``burst``: ``--burst N`` (1 000) connections opened at once, each posting one request, into
  a receiver with a SQLite ledger: connection resets (goal 0), the statuses, and the memory
  held (the receiver's budget in use at its peak, and the process's RSS above its baseline)
  against the configured budget (``--budget-mib``);
* ``scale``: 1, 2 and 4 processes (``--processes``), each its own receiver posting the
  protobuf requests into one PostgreSQL ledger (``--postgres URL``; a fresh schema): spans/s
  of all of them together, against one process.

Run: ``.venv/bin/python -m bench.collect`` (``--traces N``, ``--repeat N``, ``--burst N``,
``--processes 1,2,4``, ``--postgres URL``, ``--skip-postgres``).
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import selectors
import socket
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jiter
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from redaction import RedactionPolicy
from tests.support.wire import to_otlp_json
from tracing import activity, session, tool_call
from tracing.collect._feed import FeedResult, SpanFeed
from tracing.collect._otlp import decode_json, decode_protobuf
from tracing.collect._receiver import CollectOptions, CollectReceiver
from tracing.derive._conventions import SpanView
from tracing.ledger import open_ledger
from tracing.testing import RecordingLedger

BATCH = 512
GOAL_SPANS_PER_S = 20_000
"""``collect`` per process (issue 23), checked per CPU-second."""
TOOLS = ("search_code", "read_file", "run_tests", "edit_file")


def make_spans(traces: int) -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench")
    body = "def handler(request):  # validates state and code\n" * 20  # ~1 KB
    for t in range(traces):
        with (
            session(f"conv-{t % 50}", agent_id="coder", turn=t // 50 + 1),
            tracer.start_as_current_span("invoke_agent coder"),
        ):
            for step in range(2):
                with activity(f"Step {step} of trace {t}", tracer=tracer):
                    for n in range(4):
                        name = TOOLS[(t + n) % len(TOOLS)]
                        args = {"intent": f"Looking at part {n} of {t}", "content": body}
                        with tool_call(name, args, label_bearing=True, tracer=tracer) as call:
                            call.set_result({"ok": True, "lines": n}, outcome=f"Looked at {n}")
    provider.shutdown()
    return list(exporter.get_finished_spans())


def batches(spans: Sequence[ReadableSpan]) -> list[ExportTraceServiceRequest]:
    return [encode_spans(spans[i : i + BATCH]) for i in range(0, len(spans), BATCH)]


def best_rate(
    count: int, run: Callable[[], None], repeat: int, clock: Callable[[], float] = time.perf_counter
) -> float:
    """Spans per second of ``clock`` (wall clock; ``time.process_time``: per CPU-second of all
    the process's threads, which other processes on a loaded machine do not change)."""
    times: list[float] = []
    for _ in range(repeat):
        start = clock()
        run()
        times.append(clock() - start)
    return count / statistics.median(times)


class TimedPolicy:
    """The policy, with the CPU time spent inside its calls summed (``redaction`` stage)."""

    def __init__(self, policy: RedactionPolicy) -> None:
        self._policy = policy
        self.seconds = 0.0

    def _timed(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        try:
            return method(*args, **kwargs)
        finally:
            self.seconds += time.thread_time() - start

    def redact_call(self, **kwargs: Any) -> Any:
        return self._timed(self._policy.redact_call, **kwargs)

    def scrub(self, value: Any) -> Any:
        return self._timed(self._policy.scrub, value)

    def scrub_text(self, text: str) -> str:
        return self._timed(self._policy.scrub_text, text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._policy, name)


def stages(
    n: int,
    bodies: Sequence[bytes],
    decode: Callable[[bytes], Any],
    parse: Callable[[bytes], Any],
    content_type: str,
    policy: RedactionPolicy,
    repeat: int,
) -> dict[str, float]:
    """CPU microseconds per span of each stage, each measured on its own (medians):
    parse (the peer), span conversion (our decode less the parse), derivation (the feed less
    the decode; redaction is the part spent inside the policy's calls), ledger write (the
    anchors the feed made, recorded into a SQLite ledger: the process's CPU, writer thread
    included), HTTP (the receiver with an empty feed, less the decode)."""

    def cpu(run: Callable[[], Any]) -> float:
        times: list[float] = []
        for _ in range(repeat):
            start = time.process_time()
            run()
            times.append(time.process_time() - start)
        return statistics.median(times) * 1e6 / n

    def each(fn: Callable[[bytes], Any]) -> Callable[[], None]:
        def run() -> None:
            for body in bodies:
                fn(body)

        return run

    parse_us = cpu(each(parse))
    decode_us = cpu(each(decode))
    decoded = [decode(b).spans for b in bodies]
    timed = TimedPolicy(policy)
    shares: list[float] = []

    def feed_run() -> None:
        before = timed.seconds
        feed = SpanFeed(RecordingLedger(), policy=timed)
        for spans in decoded:
            feed.ingest(spans)
        shares.append(timed.seconds - before)

    derive_us = cpu(feed_run)
    redaction_us = statistics.median(shares) * 1e6 / n
    sink = RecordingLedger()
    feed = SpanFeed(sink, policy=policy)
    for spans in decoded:
        feed.ingest(spans)

    def ledger_run() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            ledger = open_ledger(f"sqlite:///{Path(tmp) / 'stage.db'}")
            for write in sink.writes:
                ledger.record(dict(write))  # pyright: ignore[reportArgumentType]
            for a in sink.activities:
                ledger.set_activity(a["session_id"], a["batch_id"], a["label"], turn=a["turn"])
            ledger.flush(120)
            ledger.close()

    ledger_us = cpu(ledger_run)
    with CollectReceiver(NullFeed(), CollectOptions(port=0)) as rx:  # pyright: ignore[reportArgumentType]
        http_us = cpu(lambda: post_all(rx, bodies, content_type)) - decode_us
    return {
        "parse": parse_us,
        "span conversion": decode_us - parse_us,
        "derivation (less redaction)": derive_us - redaction_us,
        "redaction": redaction_us,
        "ledger write": ledger_us,
        "HTTP": http_us,
    }


class NullFeed:
    """A feed that does nothing: the receiver then costs HTTP + decode only."""

    def ingest(self, spans: Sequence[SpanView]) -> FeedResult:
        return FeedResult(len(spans), 0, 0)


def post_all(receiver: CollectReceiver, bodies: Sequence[bytes], content_type: str) -> None:
    host, port = receiver.address
    conn = http.client.HTTPConnection(host, port, timeout=60)
    try:
        for body in bodies:
            conn.request("POST", "/v1/traces", body=body, headers={"Content-Type": content_type})
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                raise SystemExit(f"receiver answered {response.status}")
    finally:
        conn.close()


def line(name: str, ours: float, peer: float, peer_name: str) -> None:
    print(
        f"{name}: ours {ours:,.0f} spans/s, peer ({peer_name}) {peer:,.0f} spans/s, "
        f"ratio {ours / peer:.3f}"
    )


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # (not Linux)
        return 0


def burst(n: int, body: bytes, budget_mib: int) -> None:
    """``n`` connections at once, one protobuf post each: resets, statuses, memory."""
    budget = budget_mib * 1024 * 1024
    payload = (
        "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    with tempfile.TemporaryDirectory() as tmp:
        ledger = open_ledger(f"sqlite:///{Path(tmp) / 'burst.db'}")
        feed = SpanFeed(ledger, policy=RedactionPolicy.default())
        options = CollectOptions(port=0, max_memory_bytes=budget)
        rx = CollectReceiver(feed, options, ledger_stats=ledger.stats)
        base = _rss_bytes()
        peak = [base]
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.005):
                peak[0] = max(peak[0], _rss_bytes())

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        resets = 0
        statuses: dict[str, int] = {}
        began = time.perf_counter()
        with rx:
            socks: list[socket.socket] = []
            for _ in range(n):
                s = socket.socket()
                s.setblocking(False)
                s.connect_ex(rx.address)
                socks.append(s)
            sel = selectors.DefaultSelector()
            for s in socks:
                sel.register(s, selectors.EVENT_WRITE)
            sent: list[socket.socket] = []
            deadline = time.monotonic() + 120
            while len(sent) + resets < n and time.monotonic() < deadline:
                for key, _ in sel.select(1):
                    s = key.fileobj
                    assert isinstance(s, socket.socket)
                    sel.unregister(s)
                    try:
                        s.setblocking(True)
                        s.settimeout(60)
                        s.sendall(payload)
                        sent.append(s)
                    except OSError:
                        resets += 1
            for s in sent:
                try:
                    head = b""
                    while b"\r\n\r\n" not in head:
                        chunk = s.recv(4096)
                        if not chunk:
                            break
                        head += chunk
                    key = head.split(b" ", 2)[1].decode() if head else "closed"
                    length = 0
                    for row in head.split(b"\r\n"):
                        if row.lower().startswith(b"content-length:"):
                            length = int(row.split(b":", 1)[1])
                    got = len(head.split(b"\r\n\r\n", 1)[-1])
                    while got < length:
                        chunk = s.recv(65536)
                        if not chunk:
                            break
                        got += len(chunk)
                except OSError:
                    resets += 1
                    key = "reset"
                statuses[key] = statuses.get(key, 0) + 1
                s.close()
            wall = time.perf_counter() - began
            reserved = rx.stats().get("peak_reserved_bytes", 0)
        done.set()
        sampler.join()
        ledger.close(60)
    print(
        f"burst: {n} connections at once, one post each ({len(body) / 1e3:.0f} KB): "
        f"resets {resets} (goal 0), statuses {dict(sorted(statuses.items()))}, {wall:.1f} s"
    )
    print(
        f"burst memory: budget {budget_mib} MiB; reserved at peak {reserved / 2**20:.1f} MiB "
        f"(ratio {reserved / budget:.3f}); process RSS above baseline at peak "
        f"{(peak[0] - base) / 2**20:.1f} MiB (ratio {(peak[0] - base) / budget:.3f})"
    )


def _scale_worker(url: str, traces: int, go: Any, out: Any) -> None:
    bodies = [r.SerializeToString() for r in batches(make_spans(traces))]
    count = sum(len(ExportTraceServiceRequest.FromString(b).resource_spans[0].scope_spans[0].spans)
                for b in bodies)  # fmt: skip
    ledger = open_ledger(url)
    feed = SpanFeed(ledger, policy=RedactionPolicy.default())
    with CollectReceiver(feed, CollectOptions(port=0), ledger_stats=ledger.stats) as rx:
        go.wait()
        began, cpu = time.perf_counter(), time.process_time()
        post_all(rx, bodies, "application/x-protobuf")
        ledger.flush(300)
        wall, cpu = time.perf_counter() - began, time.process_time() - cpu
    stats = ledger.stats()
    ledger.close()
    out.put((count, wall, stats["dropped"], cpu))


def _cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine (Linux; zeros elsewhere)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


def scale(base_url: str, processes: Sequence[int], traces: int) -> None:
    """1, 2, 4 processes (each a receiver and a ledger writer) into one PostgreSQL ledger."""
    import psycopg
    from psycopg import sql

    schema = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(base_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    url = f"{base_url}?options=-csearch_path%3D{schema}"
    open_ledger(url).close()  # (migrated once, before the timed runs)
    ctx = multiprocessing.get_context("spawn")
    rates: dict[int, float] = {}
    try:
        for k in processes:
            go, out = ctx.Event(), ctx.Queue()
            procs = [
                ctx.Process(target=_scale_worker, args=(url, traces, go, out)) for _ in range(k)
            ]
            for p in procs:
                p.start()
            time.sleep(3 + k)  # (each makes its spans and opens its ledger first)
            busy0, total0 = _cpu_ticks()
            go.set()
            results = [out.get(timeout=900) for _ in procs]
            busy1, total1 = _cpu_ticks()
            for p in procs:
                p.join(60)
            spans = sum(r[0] for r in results)
            wall = max(r[1] for r in results)
            dropped = sum(r[2] for r in results)
            per_cpu = spans / sum(r[3] for r in results)
            machine = (busy1 - busy0) / max(1, total1 - total0)
            rates[k] = spans / wall
            print(
                f"scale postgres {k} process(es): ours {rates[k]:,.0f} spans/s, peer (1 process) "
                f"{rates[processes[0]]:,.0f} spans/s, ratio {rates[k] / rates[processes[0]]:.3f}"
                f" ({spans} spans, {wall:.1f} s, dropped {dropped}; {per_cpu:,.0f} spans per "
                f"CPU-second of the collect processes; machine {machine:.0%} busy on "
                f"{os.cpu_count()} cores, PostgreSQL included)"
            )
    finally:
        with psycopg.connect(base_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--traces", type=int, default=600, help="traces (11 spans each)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--burst", type=int, default=1000, help="connections at once (0: skip)")
    parser.add_argument("--budget-mib", type=int, default=256, help="the receiver's budget")
    parser.add_argument("--processes", default="1,2,4", help="process counts for 'scale'")
    parser.add_argument(
        "--postgres",
        default=os.environ.get(
            "INTENTRACE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
        ),
    )
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument(
        "--only", choices=("all", "rates", "stages", "burst", "scale"), default="all"
    )
    args = parser.parse_args(argv)
    if args.only in ("all", "burst") and args.burst:
        body = batches(make_spans(2))[0].SerializeToString()  # (22 spans, ~25 KB)
        burst(args.burst, body, args.budget_mib)
    if args.only in ("all", "scale") and not args.skip_postgres:
        counts = [int(x) for x in args.processes.split(",") if x.strip()]
        scale(args.postgres, counts, args.traces)
    if args.only not in ("all", "rates", "stages"):
        return 0

    spans = make_spans(args.traces)
    requests = batches(spans)
    n = len(spans)
    calls = sum(1 for s in spans if s.name.startswith("execute_tool"))
    protobuf = [r.SerializeToString() for r in requests]
    jsons = [json.dumps(to_otlp_json(r)).encode() for r in requests]
    print(
        f"# {n} spans ({calls} tool calls) in {len(requests)} requests; "
        f"protobuf {sum(map(len, protobuf)) / 1e6:.1f} MB, JSON {sum(map(len, jsons)) / 1e6:.1f} MB"
        f"; python {sys.version.split()[0]}"
    )
    policy = RedactionPolicy.default()

    def parse_pb() -> None:
        for body in protobuf:
            ExportTraceServiceRequest().ParseFromString(body)

    def parse_json() -> None:
        for body in jsons:
            json.loads(body)

    peers = {
        "protobuf": (best_rate(n, parse_pb, args.repeat), "ParseFromString alone"),
        "json": (best_rate(n, parse_json, args.repeat), "json.loads alone"),
    }
    cpu = time.process_time
    cpu_peers = {
        "protobuf": best_rate(n, parse_pb, args.repeat, cpu),
        "json": best_rate(n, parse_json, args.repeat, cpu),
    }
    below: list[str] = []
    encodings: dict[str, tuple[list[bytes], Callable[[bytes], Any], str]] = {
        "protobuf": (protobuf, decode_protobuf, "application/x-protobuf"),
        "json": (jsons, decode_json, "application/json"),
    }
    parsers: dict[str, Callable[[bytes], Any]] = {
        "protobuf": ExportTraceServiceRequest.FromString,
        "json": jiter.from_json,  # (what decode_json parses with)
    }
    for encoding, (bodies, decode, content_type) in encodings.items():
        if args.only in ("all", "stages"):
            costs = stages(n, bodies, decode, parsers[encoding], content_type, policy, args.repeat)
            total = sum(costs.values())
            print(
                f"stages {encoding} (CPU us per span, each on its own): "
                + ", ".join(f"{k} {v:.1f}" for k, v in costs.items())
                + f"; sum {total:.1f} us = {1e6 / total:,.0f} spans per CPU-second"
            )
        if args.only == "stages":
            continue
        peer, peer_name = peers[encoding]

        def decode_only(bodies: list[bytes] = bodies, decode: Any = decode) -> None:
            for body in bodies:
                decode(body)

        def feed_only(bodies: list[bytes] = bodies, decode: Any = decode) -> None:
            feed = SpanFeed(RecordingLedger(), policy=policy)
            for body in bodies:
                feed.ingest(decode(body).spans)

        null_rx = CollectReceiver(NullFeed(), CollectOptions(port=0))  # pyright: ignore[reportArgumentType]
        with null_rx:
            http_rate = best_rate(
                n, lambda r=null_rx, b=bodies, c=content_type: post_all(r, b, c), args.repeat
            )

        def collect_run(bodies: list[bytes] = bodies, content_type: str = content_type) -> None:
            with tempfile.TemporaryDirectory() as tmp:
                ledger = open_ledger(f"sqlite:///{Path(tmp) / 'bench.db'}")
                try:
                    feed = SpanFeed(ledger, policy=policy)
                    with CollectReceiver(feed, CollectOptions(port=0)) as rx:
                        post_all(rx, bodies, content_type)
                    ledger.flush(120)
                    stats = ledger.stats()
                    if stats["written"] < calls or stats["dropped"]:
                        raise SystemExit(f"ledger wrote {stats}")
                finally:
                    ledger.close()

        line(f"decode {encoding}", best_rate(n, decode_only, args.repeat), peer, peer_name)
        line(f"http {encoding} (stdlib server, empty feed)", http_rate, peer, peer_name)
        line(
            f"feed {encoding} (decode + derive)",
            best_rate(n, feed_only, args.repeat),
            peer,
            peer_name,
        )
        line(
            f"collect {encoding} (HTTP -> anchors in SQLite)",
            best_rate(n, collect_run, args.repeat),
            peer,
            peer_name,
        )
        # per CPU-second of the whole process (receiver, feed, ledger writer, the client):
        # what one process does with a core to itself, however loaded the machine is
        cpu_peer = cpu_peers[encoding]
        line(f"feed {encoding} per CPU-second", best_rate(n, feed_only, args.repeat, cpu),
             cpu_peer, f"{peer_name}, CPU")  # fmt: skip
        collect_cpu = best_rate(n, collect_run, args.repeat, cpu)
        line(f"collect {encoding} per CPU-second", collect_cpu, cpu_peer, f"{peer_name}, CPU")
        if collect_cpu < GOAL_SPANS_PER_S:
            below.append(f"collect {encoding} {collect_cpu:,.0f} spans per CPU-second")
    if args.only == "stages":
        return 0
    print(
        f"goal {GOAL_SPANS_PER_S:,} spans/s per process: "
        + ("met" if not below else "NOT MET: " + "; ".join(below)),
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
