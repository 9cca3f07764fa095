"""The Analytics page: every dashboard (``dashboards/`` and the user folder), chart + table + CSV.

Dashboards are declarative files (docs/analytics.md); each panel runs one analysis over the
columnar copy of the ledger (``tracing.analytics``). Values written by models (intents) appear
only in tables (``st.dataframe``) and Altair charts, never as Markdown.
"""

from __future__ import annotations

from typing import Any

import altair as alt
import streamlit as st

from viewer import _data, _text

DASHBOARD_PARAM = "dashboard"
"""Query parameter naming the dashboard shown (``/analytics?dashboard=failures``)."""


def render() -> None:
    """The Analytics page."""
    st.title("Analytics")
    # lazy: DuckDB and pyarrow (the `analytics` extra) load only to analyse
    try:
        from tracing.analytics import AnalyticsError, load_dashboards
    except ImportError as exc:  # pragma: no cover - depends on the install
        st.error(f"Analytics needs its extra: pip install 'intentrace[analytics]' ({exc.name})")
        return
    try:
        dashboards = load_dashboards()
    except AnalyticsError as exc:
        st.error("A dashboard file is not valid.")
        st.code(str(exc), language=None)
        return
    if not dashboards:
        st.info("No dashboards found.")
        return
    names = list(dashboards)
    wanted = st.query_params.get(DASHBOARD_PARAM)
    name = st.selectbox(
        "Dashboard",
        names,
        index=names.index(wanted) if wanted in names else 0,
        format_func=lambda n: dashboards[n].title,
    )
    st.query_params[DASHBOARD_PARAM] = name
    dashboard = dashboards[name]
    st.caption(dashboard.description)
    try:
        results: list[Any] = _data.dashboard_results(_data.ledger_url(), name, None)
    except AnalyticsError as exc:
        st.error("The ledger cannot be analysed.")
        st.code(str(exc), language=None)
        return
    for index, (panel, result) in enumerate(zip(dashboard.panels, results, strict=True)):
        _panel(name, index, panel, result)


def _panel(dashboard: str, index: int, panel: Any, result: Any) -> None:
    st.subheader(panel.title)
    if panel.description:
        st.caption(panel.description)
    frame = _text.frame(result.to_pandas())  # model-written cells: the display sanitizer
    chart = panel.chart
    if frame.empty:
        st.info("No rows (not enough calls yet for this analysis).")
    elif chart.type == "bar":
        st.altair_chart(
            alt.Chart(frame)
            .mark_bar()
            .encode(
                x=alt.X(f"{chart.x}:Q", title=chart.x),
                y=alt.Y(f"{chart.y}:N", title=chart.y, sort="-x"),
                tooltip=list(result.columns),
            ),
            width="stretch",
        )
    elif chart.type == "line":
        st.altair_chart(
            alt.Chart(frame)
            .mark_line(point=True)
            .encode(
                x=alt.X(f"{chart.x}:O", title=chart.x),
                y=alt.Y(f"{chart.y}:Q", title=chart.y),
                tooltip=list(result.columns),
            ),
            width="stretch",
        )
    st.dataframe(frame, hide_index=True, width="stretch")
    st.download_button(
        "Download CSV",
        result.to_csv(),
        file_name=f"{dashboard}-{index + 1}-{result.name}.csv",
        mime="text/csv",
        key=f"csv-{dashboard}-{index}",
    )
