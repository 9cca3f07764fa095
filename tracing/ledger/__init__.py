"""The anchor ledger: one durable record per tool call, written live, read by the viewer,
the CLI and analytics. SQLite by default, PostgreSQL when shared. No OpenTelemetry here.

    ledger = open_ledger()                       # $INTENTRACE_LEDGER_URL or the default file
    ledger.record({"tool_call_id": "c1", "tool_name": "search", "status": "in_flight", ...})
    ledger.session_anchors("conv-42")

See docs/ledger.md.
"""

from __future__ import annotations

from tracing.anchor import ANCHOR_COLUMNS, Anchor, AnchorWrite, BlockInfo, DroppedInfo, SessionInfo
from tracing.ledger._config import LedgerError, LedgerOptions, default_ledger_url, display_url
from tracing.ledger._ledger import SESSION_ORDERS, Ledger, SessionOrder, open_ledger
from tracing.ledger._summary import dropped_notes

__all__ = [
    "ANCHOR_COLUMNS",
    "SESSION_ORDERS",
    "Anchor",
    "AnchorWrite",
    "BlockInfo",
    "DroppedInfo",
    "Ledger",
    "LedgerError",
    "LedgerOptions",
    "SessionInfo",
    "SessionOrder",
    "default_ledger_url",
    "display_url",
    "dropped_notes",
    "open_ledger",
]
