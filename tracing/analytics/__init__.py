"""Intent analytics over the anchor ledger: failure precursors, vague intents, redundant siblings,
per-tool figures and trends, answered from a columnar (DuckDB) copy kept in step with the ledger.

    with Analytics("sqlite:///agent.db") as analytics:
        result = analytics.run("precursors", {"k": 3})
        print(result.to_csv())

No OpenTelemetry here (the viewer imports it). See docs/analytics.md.
"""

from __future__ import annotations

from tracing.analytics._analyses import ANALYSES, Analysis, AnalyticsError, Param
from tracing.analytics._dashboards import Chart, Dashboard, Panel, dashboard_schema, load_dashboards
from tracing.analytics._engine import Analytics, AnalyticsOptions, Result, SyncReport
from tracing.analytics._filters import Filters

__all__ = [
    "ANALYSES",
    "Analysis",
    "Analytics",
    "AnalyticsError",
    "AnalyticsOptions",
    "Chart",
    "Dashboard",
    "Filters",
    "Panel",
    "Param",
    "Result",
    "SyncReport",
    "dashboard_schema",
    "load_dashboards",
]
