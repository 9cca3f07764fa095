"""The narrative Streamlit viewer: reads the ledger only (read-only; no OpenTelemetry).

Run it with ``intentrace view`` (or ``tracing.cli._view.run_viewer``); ``APP_PATH`` is the
entry script that ``streamlit run`` executes. See docs/viewer.md.
"""

from __future__ import annotations

from pathlib import Path

from viewer._links import check_trace_url

APP_PATH: Path = Path(__file__).with_name("app.py")
"""The Streamlit entry script (the router)."""

__all__ = ["APP_PATH", "check_trace_url"]
