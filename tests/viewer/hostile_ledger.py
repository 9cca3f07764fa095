"""A hostile ledger: markup, bidi overrides, control characters, 10 KB strings and CJK in every
stored field the viewer shows (session, agent and user ids, tags, tool names, intents, outcomes,
errors, args and results, activity labels)."""

from __future__ import annotations

import json
from typing import Final

from tracing.ledger import AnchorWrite, open_ledger
from tracing.status import Status

BASE_NS: Final = 1_770_000_000_000_000_000
BIDI: Final = "invoice\u202egnp.exe"
CONTROLS: Final = "bell\x07esc\x1b[31mred\x1b[0m nul\x00 del\x7f c1\x9b"
MARKUP: Final = "<img src=x onerror=alert(1)> <script>alert(2)</script> **bold** [a](http://x)"
CJK: Final = "認証ハンドラを探しています"
LONG: Final = "Reading " + "長い" * 5_000  # 10 KB of intent

SESSION: Final = "hostile\u202eexe.txt\x1b[2J"
AGENT: Final = "agent\u2066\x00x"
TOOL: Final = "tool\x1b]8;;http://x\x07link"
USER: Final = "user\u202egnp.exe\x07"
UNSAFE_CHARS: Final = ("\u202e", "\u2066", "\x00", "\x07", "\x1b", "\x7f", "\x9b")


def build(url: str) -> None:
    ledger = open_ledger(url)
    try:
        ledger.set_activity(SESSION, "hb1", f"Exploring {BIDI} {CONTROLS}", turn=1)
        rows = [
            ("h1", f"{MARKUP} {BIDI}", Status.SUCCESS, f"Found {BIDI}"),
            ("h2", f"{CONTROLS} {CJK}", Status.ERROR, None),
            ("h3", LONG, Status.ERROR, None),
            ("h4", f"Indexing {CJK} {BIDI}", Status.BACKGROUND, None),
        ]
        for n, (cid, intent, status, outcome) in enumerate(rows):
            ledger.record(
                AnchorWrite(
                    tool_call_id=cid,
                    tool_name=TOOL,
                    status=Status.IN_FLIGHT if status != Status.BACKGROUND else status,
                    session_id=SESSION,
                    agent_id=AGENT,
                    intent=intent,
                    turn=1,
                    batch_id="hb1",
                    start_ns=BASE_NS + n * 1_000_000,
                    trace_id=f"trace{BIDI}",
                    args=json.dumps({f"key{BIDI}": [CONTROLS, MARKUP, {"deep": CJK}]}),
                    user_id=USER,
                    tags=json.dumps([f"tag {BIDI}", MARKUP, CONTROLS, CJK]),
                )
            )
            ledger.flush(10.0)
            if status == Status.BACKGROUND:
                continue
            ledger.record(
                AnchorWrite(
                    tool_call_id=cid,
                    tool_name=TOOL,
                    status=status,
                    end_ns=BASE_NS + n * 1_000_000 + 500_000_000,
                    outcome=outcome,
                    error=f"Traceback {CONTROLS}\n{BIDI}\n{MARKUP}"
                    if status == Status.ERROR
                    else None,
                    result=json.dumps({"text": f"{MARKUP}\n{BIDI}"}),
                )
            )
            ledger.flush(10.0)
        assert ledger.flush(30.0)
    finally:
        ledger.close()
