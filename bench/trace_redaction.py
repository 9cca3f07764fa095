"""Redacting the spans that are not tool spans: IntentSpanProcessor wrapping a
BatchSpanProcessor vs the bare BatchSpanProcessor, per span, in the same run.

Three kinds of span, each as an instrumentation makes it:

* ``plain``: an HTTP client span with six short attributes (nothing to remove);
* ``model``: a GenAI ``chat`` span whose ``gen_ai.input/output.messages`` (~3 KB) list two
  tool calls and a result, redacted with the default policy (keep everything, scrub);
* ``model, hiding policy``: the same with a policy that redacts one of the two tools (the
  listed calls get their own tool's policy).

Figures per kind: app thread CPU (``start_span`` + ``end``, as the app pays for them: ours
only stamps and enqueues) and end to end (the same plus ``force_flush``: every span redacted
and exported).

Run: ``python -m bench.trace_redaction`` (``--quick`` for fewer spans). Prints
``name: ours X, peer Y, ratio Z`` lines.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

from opentelemetry.sdk.trace import TracerProvider

from bench.processor import NullExporter, _batch, line
from redaction import RedactionPolicy, ToolRule
from tracing import IntentSpanProcessor
from tracing import attributes as A

PLAIN: dict[str, Any] = {
    "http.request.method": "GET",
    "url.full": "https://api.example.com/v1/items?page=2",
    "server.address": "api.example.com",
    "server.port": 443,
    "http.response.status_code": 200,
    "network.protocol.version": "1.1",
}


def _model_attrs() -> dict[str, Any]:
    code = "def handler(request):  # validates state and code, then exchanges the token\n" * 12
    outputs = [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "call_1",
                    "name": "read_file",
                    "arguments": {"intent": "Reading the callback", "path": "src/cb.py"},
                },
                {
                    "type": "tool_call",
                    "id": "call_2",
                    "name": "vault_read",
                    "arguments": {"intent": "Reading the client secret", "key": "oauth"},
                },
            ],
        }
    ]
    inputs = [
        {"role": "user", "parts": [{"type": "text", "content": "Why does the login fail?"}]},
        {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": "call_0", "response": code}],
        },
    ]
    return {
        A.GEN_AI_OPERATION_NAME: "chat",
        A.GEN_AI_REQUEST_MODEL: "gpt-4.1",
        "gen_ai.input.messages": json.dumps(inputs),
        A.GEN_AI_OUTPUT_MESSAGES: json.dumps(outputs),
        "gen_ai.usage.input_tokens": 812,
        "gen_ai.usage.output_tokens": 64,
    }


def run(ours: bool, name: str, attrs: dict[str, Any], n: int, policy: Any) -> tuple[float, float]:
    """Seconds per span: (app thread CPU, end to end)."""
    exporter = NullExporter()
    provider = TracerProvider()
    processor: Any = (
        IntentSpanProcessor(_batch(exporter), policy=policy) if ours else _batch(exporter)
    )
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("bench")
    c0 = time.thread_time()
    t0 = time.perf_counter()
    for i in range(n):
        span = tracer.start_span(name, attributes={**attrs, "bench.i": i})
        span.end()
    c1 = time.thread_time()
    processor.force_flush(600_000)
    t1 = time.perf_counter()
    assert exporter.count == n, (exporter.count, n)
    provider.shutdown()
    return (c1 - c0) / n, (t1 - t0) / n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer spans and rounds")
    opts = parser.parse_args(argv)
    rounds = 3 if opts.quick else 5
    n = 500 if opts.quick else 2000
    default = RedactionPolicy.default()
    hiding = RedactionPolicy(tools=(ToolRule("vault_read", args="redact", output="redact"),))
    cases = [
        ("plain span", "GET /v1/items", PLAIN, default),
        ("model span", "chat gpt-4.1", _model_attrs(), default),
        ("model span, hiding policy", "chat gpt-4.1", _model_attrs(), hiding),
    ]
    for label, name, attrs, policy in cases:
        run(True, name, attrs, 200, policy)  # warm up
        mine: list[tuple[float, float]] = []
        bare: list[tuple[float, float]] = []
        for _ in range(rounds):  # interleaved, so drift hits both alike
            bare.append(run(False, name, attrs, n, policy))
            mine.append(run(True, name, attrs, n, policy))
        line(
            f"{label} app thread CPU (intent vs bare BatchSpanProcessor)",
            statistics.median(m[0] for m in mine),
            statistics.median(b[0] for b in bare),
        )
        line(
            f"{label} end to end incl. redaction and export",
            statistics.median(m[1] for m in mine),
            statistics.median(b[1] for b in bare),
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
