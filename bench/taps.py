"""Stream taps: latency added to the application's stream, and ledger writes per stream.

1. Added latency per stream event, on the application's side. The real SDKs (``openai`` Chat
   Completions and Responses, ``anthropic`` Messages) read recorded-format SSE streams from a
   loopback server: two parallel tool calls with ~5 KB of arguments each, in 16-byte deltas.

   * replay: the events the SDK produced, collected once, then iterated untapped (the peer)
     and through the tap (ours) with a real SQLite ledger on. Each ``next()`` is timed; the
     difference of the medians is what the tap adds per event (goal: < 5 µs);
   * loopback: the whole SDK stream (HTTP, SSE decoding, pydantic) untapped vs tapped, same
     measure: what an application actually sees.

   * app-thread CPU: the CPU time of the thread that consumes a whole ~20k-event loopback
     stream (``time.thread_time``), untapped vs tapped: what the tap costs the application,
     SSE decoding and pydantic included (the ledger's and the flusher's threads are not the
     application's).

2. Ledger writes per 10 KB argument stream (one call), for 1, 4, 16 and 64-byte deltas, when
   the deltas arrive at once (replay) and paced like a model (50 deltas/s, simulated clock).
   Peers: a write per change of the intent, and a write per delta.

Run: ``python -m bench.taps`` (``--repeats N``). Prints ``name: ours X, peer Y, ratio Z``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import openai

from tests.support.sse import SSEServer, anthropic_stream, chat_stream, responses_stream
from tracing import IntentRegistry
from tracing.ledger import AnchorWrite, Ledger, open_ledger
from tracing.taps import StreamTap, TapOptions

INTENTS = ("Searching the repository for the OAuth callback handler", "Reading the router module")
GOAL_US = 5.0


def args_of(intent: str, size: int) -> str:
    """Arguments (intent first) of about ``size`` characters."""
    line = "def handler(request):  # validates state and code\n"
    body = (line * (size // len(line) + 1))[:size]
    return json.dumps({"intent": intent, "path": "src/auth.py", "content": body})


def calls(size: int) -> list[tuple[str, str, str]]:
    return [
        ("call_bench_1", "search_code", args_of(INTENTS[0], size)),
        ("call_bench_2", "read_file", args_of(INTENTS[1], size)),
    ]


def registry() -> IntentRegistry:
    reg = IntentRegistry()
    reg.add("search_code")
    reg.add("read_file")
    return reg


class Counter:
    """Counts the writes, then hands them to the real ledger (or nowhere)."""

    def __init__(self, inner: Ledger | None = None) -> None:
        self.inner = inner
        self.n = 0

    def record(self, write: AnchorWrite) -> None:
        self.n += 1
        if self.inner is not None:
            self.inner.record(write)


def timed(it: Iterator[Any]) -> list[int]:
    """Nanoseconds of each ``next()`` (the last one raises StopIteration: the loop's end)."""
    clock = time.perf_counter_ns
    step = it.__next__
    samples: list[int] = []
    append = samples.append
    while True:
        start = clock()
        try:
            step()
        except StopIteration:
            append(clock() - start)
            return samples
        append(clock() - start)


def median_us(samples: list[int]) -> float:
    return statistics.median(samples) / 1000


def p99_us(samples: list[int]) -> float:
    return statistics.quantiles(samples, n=100)[98] / 1000


def line(name: str, ours: float, peer: float, unit: str = "µs") -> None:
    ratio = ours / peer if peer else float("inf")
    print(f"{name}: ours {ours:.3f} {unit}, peer {peer:.3f} {unit}, ratio {ratio:.2f}")


def sdk_streams(server: SSEServer) -> dict[str, Callable[[], Any]]:
    oai = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-bench", max_retries=0)
    ant = anthropic.Anthropic(base_url=server.url, api_key="sk-bench", max_retries=0)
    size = 5_000

    def chat() -> Any:
        server.respond(chat_stream(calls(size), size=16, interleaved=True))
        return oai.chat.completions.create(model="m", messages=[], stream=True)

    def responses() -> Any:
        server.respond(responses_stream(calls(size), size=16, interleaved=True))
        return oai.responses.create(model="m", input="x", stream=True)

    def messages() -> Any:
        server.respond(anthropic_stream(calls(size), size=16))
        return ant.messages.create(model="m", max_tokens=10, messages=[], stream=True)

    return {"openai chat": chat, "openai responses": responses, "anthropic messages": messages}


def latency(server: SSEServer, ledger: Ledger, repeats: int) -> list[float]:
    tap = StreamTap(ledger=ledger, registry=registry(), session_id="bench")
    added: list[float] = []
    for name, open_stream in sdk_streams(server).items():
        events = list(open_stream())
        peer: list[int] = []
        ours: list[int] = []
        for _ in range(repeats):  # interleaved, so that drift hits both alike
            peer += timed(iter(events))
            ours += timed(iter(tap.wrap(_Replay(events))))
        line(
            f"{name}, replay of {len(events)} events, per event (median)",
            median_us(ours),
            median_us(peer),
        )
        line(f"{name}, replay, per event (p99)", p99_us(ours), p99_us(peer))
        added.append(median_us(ours) - median_us(peer))
        print(f"{name}: added per event {added[-1]:.3f} µs (goal < {GOAL_US} µs)")
        peer, ours = [], []
        for _ in range(max(1, repeats // 4)):
            peer += timed(iter(open_stream()))
            ours += timed(iter(tap.wrap(open_stream())))
        line(f"{name}, loopback SDK stream, per event (median)", median_us(ours), median_us(peer))
    assert ledger.flush(30)
    return added


def app_cpu(server: SSEServer, ledger: Ledger, repeats: int) -> None:
    """App-thread CPU over a ~20k-event stream per SDK, untapped (peer) vs tapped (ours)."""
    tap = StreamTap(ledger=ledger, registry=registry(), session_id="bench-cpu")
    oai = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-bench", max_retries=0)
    ant = anthropic.Anthropic(base_url=server.url, api_key="sk-bench", max_retries=0)
    size = 160_000  # two calls' arguments in 16-byte deltas: ~20k events
    streams: dict[str, Callable[[], Any]] = {
        "openai chat": lambda: oai.chat.completions.create(model="m", messages=[], stream=True),
        "openai responses": lambda: oai.responses.create(model="m", input="x", stream=True),
        "anthropic messages": lambda: ant.messages.create(
            model="m", max_tokens=10, messages=[], stream=True
        ),
    }
    parts = {
        "openai chat": chat_stream(calls(size), size=16, interleaved=True),
        "openai responses": responses_stream(calls(size), size=16, interleaved=True),
        "anthropic messages": anthropic_stream(calls(size), size=16),
    }
    for name, open_stream in streams.items():
        peer: list[float] = []
        ours: list[float] = []
        n = 0
        for i in range(2 * max(1, repeats // 8)):  # alternated, so that drift hits both alike
            server.respond(parts[name])
            stream = open_stream()
            if i % 2:
                stream = tap.wrap(stream)
            start = time.thread_time()
            n = sum(1 for _ in stream)
            (ours if i % 2 else peer).append(time.thread_time() - start)
        line(
            f"{name}, app-thread CPU over a {n}-event loopback stream (median)",
            statistics.median(ours) * 1000,
            statistics.median(peer) * 1000,
            unit="ms",
        )
    assert ledger.flush(30)


class _Replay:
    """The collected events as a stream the tap can take in place (an ``_iterator``)."""

    def __init__(self, events: list[Any]) -> None:
        self._iterator = iter(events)

    def __iter__(self) -> Iterator[Any]:
        return self._iterator


class _Paced:
    """A clock that moves 20 ms per reading: deltas arriving at 50 per second."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 0.02
        return self.now


def count_writes(events: list[Any], ledger: Ledger, options: TapOptions) -> int:
    counter = Counter(ledger)
    tap = StreamTap(ledger=counter, registry=registry(), options=options)
    for _ in tap.wrap(_Replay(events)):
        pass
    return counter.n


def writes(server: SSEServer, ledger: Ledger) -> None:
    oai = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-bench", max_retries=0)
    one = [("call_w", "search_code", args_of(INTENTS[0], 10_000))]
    size_kb = len(one[0][2]) / 1000
    print(f"(the argument stream is {size_kb:.1f} KB; the intent is {len(INTENTS[0])} characters)")
    for chunk in (1, 4, 16, 64):
        server.respond(chat_stream(one, size=chunk))
        events = list(oai.chat.completions.create(model="m", messages=[], stream=True))
        deltas = sum(1 for e in events if e.choices and e.choices[0].delta.tool_calls)
        for paced in (False, True):
            mode = "paced 50/s" if paced else "at once"
            ours = count_writes(
                events, ledger, TapOptions(clock=_Paced() if paced else time.monotonic)
            )
            every = count_writes(
                events,
                ledger,
                TapOptions(
                    publish_interval_millis=0,
                    max_updates_per_call=10**9,
                    whole_words=False,
                    clock=_Paced() if paced else time.monotonic,
                ),
            )
            print(
                f"ledger writes per {size_kb:.0f} KB stream, {chunk}-byte deltas, {mode}: "
                f"ours {ours}, peer (a write per intent change) {every}, "
                f"ratio {ours / every:.2f}; a write per delta would be {deltas}"
            )
    assert ledger.flush(30)


def calibration_ns() -> float:
    """Nanoseconds of one trivial Python function call now (a loaded machine shows here)."""

    def f(x: int) -> int:
        return x

    best = float("inf")
    for _ in range(5):
        start = time.perf_counter_ns()
        for i in range(100_000):
            f(i)
        best = min(best, (time.perf_counter_ns() - start) / 100_000)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--repeats", type=int, default=40)
    opts = parser.parse_args()
    print(
        f"openai {openai.__version__}, anthropic {anthropic.__version__}, python {sys.version.split()[0]}"
    )
    print(f"calibration: one trivial Python function call takes {calibration_ns():.0f} ns here")
    server = SSEServer().start()
    with tempfile.TemporaryDirectory() as tmp, open_ledger(f"sqlite:///{tmp}/bench.db") as ledger:
        added = latency(server, ledger, opts.repeats)
        app_cpu(server, ledger, opts.repeats)
        writes(server, ledger)
    server.stop()
    worst = max(added)
    print(f"goal: added latency per event < {GOAL_US} µs (median, ledger on): worst {worst:.3f} µs")
    return 0 if worst < GOAL_US else 1


if __name__ == "__main__":
    sys.exit(main())
