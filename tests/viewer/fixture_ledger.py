"""A realistic ledger for the viewer tests, written through ``Ledger.record`` like an app would.

Session ``conv-auth-42`` (agent ``coder``, 3 turns): parallel siblings with distinct intents
that settle out of order (one fails), identical sibling intents, a cancellation, a background
call harvested later (under an activity label), a subagent (``reviewer``) with its own calls,
non-English intents, and a call whose args were redacted (intent NULL → default label).
Session ``conv-live-7`` (agent ``planner``): live calls — one still streaming its intent, one in
flight, one in background, and a running subagent. Session ``conv-xss``: a model-written intent
full of HTML and Markdown. Plus ``bulk-NNN`` sessions for pagination.
"""

from __future__ import annotations

import json
from typing import Any, Final

from tracing.ledger import AnchorWrite, open_ledger
from tracing.status import Status

BASE_NS: Final = 1_760_000_000_000_000_000
XSS_INTENT: Final = "<img src=x onerror=alert(1)> **bold** [link](http://x)"
BULK_SESSIONS: Final = 30

AUTH: Final = "conv-auth-42"
LIVE: Final = "conv-live-7"
XSS: Final = "conv-xss"
AUTH_USER: Final = "alice"
LIVE_USER: Final = "bob"

REDACTED: Final = json.dumps(
    {"args": "redact", "output": "keep", "intent_hidden": True, "outcome_hidden": True,
     "scrubbed": 0}
)  # fmt: skip


def _ms(ms: float) -> int:
    return BASE_NS + int(ms * 1_000_000)


def build(url: str) -> None:
    """Write the fixture into the (empty) ledger at ``url``."""
    ledger = open_ledger(url)
    try:
        _write(ledger)
        assert ledger.flush(30.0), "the fixture ledger did not flush"
        stats = ledger.stats()
        assert stats["dropped"] == 0 and stats["errors"] == 0, stats
    finally:
        ledger.close()


def _write(ledger: Any) -> None:
    def start(cid: str, tool: str, intent: str | None, at_ms: float, **extra: Any) -> None:
        write: dict[str, Any] = {
            "tool_call_id": cid,
            "tool_name": tool,
            "status": extra.pop("status", "in_flight"),
            "session_id": extra.pop("session_id", AUTH),
            "agent_id": extra.pop("agent_id", "coder"),
            "intent": intent,
            "start_ns": _ms(at_ms),
            "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
            "span_id": f"{abs(hash(cid)) % (1 << 63):016x}",
            "args": json.dumps({"query": f"args of {cid}"}),
        }
        write.update(extra)
        ledger.record(AnchorWrite(**write))

    def settle(cid: str, tool: str, status: str, at_ms: float, **extra: Any) -> None:
        write: dict[str, Any] = {
            "tool_call_id": cid,
            "tool_name": tool,
            "status": status,
            "end_ns": _ms(at_ms),
        }
        write.update(extra)
        ledger.record(AnchorWrite(**write))
        ledger.flush(10.0)  # settle order is what the group header follows

    # --- conv-auth-42, turn 1: three parallel siblings, distinct intents, settle out of order
    start("c1", "search_code", "Searching for MCP wiring", 0, turn=1, batch_id="b1",
          user_id=AUTH_USER, tags='["auth","prod"]')  # fmt: skip
    start("c2", "search_code", "Searching for OAuth handling", 5, turn=1, batch_id="b1")
    start("c3", "read_file", "Reading the callback router", 9, turn=1, batch_id="b1")
    ledger.flush(10.0)
    settle("c3", "read_file", "error", 120, error="FileNotFoundError: routes/callback.py")
    settle("c2", "search_code", "success", 700, outcome="Found 12 results",
           result=json.dumps({"hits": 12}))  # fmt: skip
    settle("c1", "search_code", "success", 900, outcome="Found MCP wiring in server.py",
           result=json.dumps({"hits": 1, "path": "server.py"}))  # fmt: skip

    # turn 2: identical sibling intents; a cancellation; a background call harvested later
    start("c4", "read_file", "Reading the config", 1000, turn=2, batch_id="b2")
    start("c5", "read_file", "Reading the config", 1001, turn=2, batch_id="b2")
    ledger.flush(10.0)
    settle("c4", "read_file", "success", 1100, result="[settings]\ndebug = false")
    settle("c5", "read_file", "success", 1150, result="[settings]\ndebug = false")
    start("c6", "run_tests", "Running the auth test suite", 1200, turn=2, batch_id="b3")
    ledger.flush(10.0)
    settle("c6", "run_tests", "cancelled", 1500)
    ledger.set_activity(AUTH, "b4", "Warming the search index", turn=2)
    start("c7", "index_repo", "Indexing the repository", 1600, turn=2, batch_id="b4",
          status=Status.BACKGROUND)  # fmt: skip
    ledger.flush(10.0)

    # turn 3: a subagent (reviewer) with its own calls under the delegating call
    start("c8", "delegate", "Delegating the migration review", 2000, turn=3, batch_id="b5")
    start("c9", "read_file", "Reading migration 0042", 2100, turn=3, batch_id="b6",
          parent_call_id="c8", agent_id="reviewer")  # fmt: skip
    start("c10", "search_code", "Looking for down-migrations", 2150, turn=3, batch_id="b6",
          parent_call_id="c8", agent_id="reviewer")  # fmt: skip
    ledger.flush(10.0)
    settle("c9", "read_file", "success", 2300)
    settle("c10", "search_code", "success", 2400, outcome="No down-migration found")
    settle("c8", "delegate", "success", 2500, outcome="Migration review done")
    # redacted args: the intent is hidden with them (NULL) -> today's default label
    start("c11", "http_get", None, 2600, turn=3, batch_id="b7", args='"[redacted: policy]"',
          redaction=REDACTED)  # fmt: skip
    ledger.flush(10.0)
    settle("c11", "http_get", "success", 2700)
    # non-English intents
    start("c12", "search_code", "Recherche de la gestion OAuth", 2800, turn=3, batch_id="b8")
    start("c13", "search_code", "認証ハンドラを探しています", 2810, turn=3, batch_id="b8")
    ledger.flush(10.0)
    settle("c12", "search_code", "success", 2900, outcome="12 résultats trouvés")
    settle("c13", "search_code", "success", 2950)
    # the background call of turn 2 is harvested now
    settle("c7", "index_repo", "success", 3000, outcome="Indexed 1,204 files")

    # --- conv-live-7: calls in flight, one still being written by the model
    live = {"session_id": LIVE, "agent_id": "planner", "turn": 1}
    start("l1", "plan", "Planning the rollout of feat", 10_000, batch_id="lb1",
          status=Status.STREAMING, **live)  # fmt: skip
    start("l2", "deploy_status", "Checking the deploy status", 10_010, batch_id="lb1",
          user_id=LIVE_USER, tags='["prod"]', **live)  # fmt: skip
    # a live block under an activity label: it heads the block on the Live page too
    ledger.set_activity(LIVE, "lb2", "Preparing the release", turn=1)
    start("l3", "build", "Building the release artifacts", 10_020, batch_id="lb2",
          status=Status.BACKGROUND, **live)  # fmt: skip
    start("l4", "delegate", "Delegating the flaky test hunt", 10_030, batch_id="lb3", **live)
    ledger.flush(10.0)
    start("l5", "bisect", "Bisecting the failing commit", 10_040, batch_id="lb4",
          parent_call_id="l4", **{**live, "agent_id": "hunter"})  # fmt: skip
    ledger.flush(10.0)
    # the streaming intent grows (the tap rewrites the same row)
    ledger.record(
        AnchorWrite(
            tool_call_id="l1",
            tool_name="plan",
            status=Status.STREAMING,
            intent="Planning the rollout of feature flags",
        )
    )

    # --- conv-xss: model-written text that must stay plain text
    start("x1", "search_code", XSS_INTENT, 20_000, session_id=XSS, agent_id="coder", turn=1,
          batch_id="xb1")  # fmt: skip
    ledger.flush(10.0)
    settle("x1", "search_code", "success", 20_100)

    # --- bulk sessions for pagination
    for n in range(BULK_SESSIONS):
        sid = f"bulk-{n:03d}"
        cid = f"bulk-{n:03d}-a"
        start(cid, "lookup", f"Looking up record {n}", -100_000 + n, session_id=sid,
              agent_id="batcher", turn=1, batch_id=f"{sid}-b")  # fmt: skip
        ledger.record(
            AnchorWrite(tool_call_id=cid, tool_name="lookup", status=Status.SUCCESS,
                        end_ns=_ms(-100_000 + n + 5))
        )  # fmt: skip
