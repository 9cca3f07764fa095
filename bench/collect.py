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

Run: ``.venv/bin/python -m bench.collect`` (``--traces N``, ``--repeat N``).
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

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


def best_rate(count: int, run: Callable[[], None], repeat: int) -> float:
    times: list[float] = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return count / statistics.median(times)


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--traces", type=int, default=600, help="traces (11 spans each)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

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
    encodings: dict[str, tuple[list[bytes], Callable[[bytes], Any], str]] = {
        "protobuf": (protobuf, decode_protobuf, "application/x-protobuf"),
        "json": (jsons, decode_json, "application/json"),
    }
    for encoding, (bodies, decode, content_type) in encodings.items():
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
