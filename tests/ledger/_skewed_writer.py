"""A writer process whose clock is off: the two-writer test runs two of these on one ledger.

python tests/ledger/_skewed_writer.py URL OFFSET_SECONDS NAME CALLS

Shifts ``time.time``/``time.time_ns`` by OFFSET_SECONDS before anything else is imported, then
makes CALLS tool calls through the real span processor (``configure`` with the ledger), each
turn's provider ids restarting at ``call_0`` (as some models number them): in the shared
session ``conv-shared`` (turns from the ledger's ``next_turn``, shared by both processes) and in
this process's own session (no turn at all). Prints one JSON line per call, then ``{"done": n}``.
"""

from __future__ import annotations

import json
import sys
import time

_OFFSET_NS = int(float(sys.argv[2]) * 1e9)
_time_ns, _time = time.time_ns, time.time
time.time_ns = lambda: _time_ns() + _OFFSET_NS
time.time = lambda: _time() + _OFFSET_NS / 1e9


def main() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import format_span_id

    from tracing import configure, session, tool_call
    from tracing.ledger import LedgerOptions

    url, name, calls = sys.argv[1], sys.argv[3], int(sys.argv[4])
    setup = configure(
        ledger=url,
        provider=TracerProvider(),
        set_global=False,
        exporters=(),
        processors=(),
    )
    ledger = setup.ledger
    assert ledger is not None and LedgerOptions  # (the ledger configure opened)
    tracer = setup.provider.get_tracer("skewed")
    made = 0
    while made < calls:
        turn = ledger.next_turn("conv-shared")  # pyright: ignore[reportAttributeAccessIssue]
        for sid, t in (("conv-shared", turn), (f"own-{name}", None)):
            with session(sid, agent_id=name, turn=t):
                for k in range(3):  # one model response: call_0, call_1, call_2
                    intent = f"{name} looking at piece {made}"
                    with tool_call(
                        "search_code",
                        {"intent": intent, "q": made},
                        tracer=tracer,
                        call_id=f"call_{k}",
                        label_bearing=True,
                    ) as c:
                        c.set_outcome(f"{name} found piece {made}")
                        span = c.span
                        assert span is not None
                        span_id = format_span_id(span.get_span_context().span_id)
                    print(json.dumps({"session": sid, "turn": t, "provider": f"call_{k}",
                                      "intent": intent, "span_id": span_id}), flush=True)  # fmt: skip
                    made += 1
    assert setup.force_flush()
    assert ledger.flush(60), ledger.recent_errors()  # pyright: ignore[reportAttributeAccessIssue]
    setup.shutdown()
    print(json.dumps({"done": made}), flush=True)


if __name__ == "__main__":
    main()
