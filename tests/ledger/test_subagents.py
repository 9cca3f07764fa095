"""``Ledger.subagent_anchors``: the calls of subagents run under sessions of their own, found
from the parent session (SQLite and PostgreSQL)."""

from __future__ import annotations

from typing import Any

from tracing.ledger import AnchorWrite, Ledger
from tracing.status import Status

T0 = 1_700_000_000_000_000_000


def _call(ledger: Ledger, call_id: str, session: str, at_s: float, **kw: Any) -> None:
    write: dict[str, Any] = {
        "tool_call_id": call_id,
        "tool_name": kw.pop("tool_name", "grep"),
        "status": kw.pop("status", Status.SUCCESS),
        "session_id": session,
        "intent": kw.pop("intent", f"Doing {call_id}"),
        "start_ns": T0 + int(at_s * 1e9),
        **kw,
    }
    if write["status"] == Status.SUCCESS:
        write.setdefault("end_ns", write["start_ns"] + 10**8)
    ledger.record(AnchorWrite(**write))


def test_calls_of_child_sessions_in_any_depth(ledger: Ledger) -> None:
    _call(ledger, "p1", "parent", 0, status=Status.IN_FLIGHT, tool_name="delegate")
    _call(ledger, "p2", "parent", 1)
    _call(ledger, "c1", "child", 2, parent_call_id="p1")
    # a call nested inside the subagent, that itself spawned a subagent (it ends after it)
    _call(ledger, "c2", "child", 3, parent_call_id="c1", end_ns=T0 + 5 * 10**9)
    _call(ledger, "c0", "child", 1.5)  # the child session's own call, not the subagent's
    _call(ledger, "g1", "grandchild", 4, parent_call_id="c2")  # (found from "child")
    _call(ledger, "x1", "elsewhere", 2, parent_call_id="nope")
    _call(ledger, "old", "before", -100, parent_call_id="p1")  # over before the parent began
    assert ledger.flush(10.0)
    assert [a["tool_call_id"] for a in ledger.subagent_anchors("parent")] == ["c1", "c2"]
    assert [a["tool_call_id"] for a in ledger.subagent_anchors("child")] == ["g1"]
    assert ledger.subagent_anchors("elsewhere") == []
    assert ledger.subagent_anchors("no such session") == []
