"""The Analytics page: every dashboard (``dashboards/`` and the user folder), chart + table + CSV.

Filters (time range, agent, tool, session, status) sit above the panels and are kept in the URL
(``?since=…&tool=…``); every table row has an *open* link to the call behind it in the viewer
(``session?session=…&anchor=…``, or the session for rows that are sessions), and a chart mark's
tooltip carries the same link (``href``: clicking a mark opens it).

Dashboards are declarative files (docs/analytics.md); each panel runs one analysis over the
columnar copy of the ledger (``tracing.analytics``). Values written by models (intents) appear
only in tables (``st.dataframe``) and Altair charts, never as Markdown.
"""

from __future__ import annotations

import json
from typing import Any, Final
from urllib.parse import urlencode

import altair as alt
import streamlit as st

from viewer import _data, _text
from viewer._ui import ANCHOR_PARAM, SESSION_PARAM

DASHBOARD_PARAM = "dashboard"
"""Query parameter naming the dashboard shown (``/analytics?dashboard=failures``)."""
FILTER_PARAMS: Final = ("since", "until", "agent", "tool", "session", "status")
"""Query parameters of the filters (lists comma-separated: ``?tool=grep,shell``)."""
LINK_COLUMN: Final = "open"
"""The drill-down column of every table: a link to the call (or session) behind the row."""


def drill_link(example: Any) -> str | None:
    """The viewer URL (relative) of a row's example: ``(session, call)`` or ``(session, None)``."""
    if not example:
        return None
    session_id, call_id = example
    query = {SESSION_PARAM: session_id} | ({ANCHOR_PARAM: call_id} if call_id else {})
    return "session?" + urlencode(query)


def _filters() -> dict[str, Any]:
    """The filter inputs (their values kept in the URL), as ``Filters.of`` takes them."""
    params = st.query_params
    out: dict[str, Any] = {}
    with st.expander("Filters", expanded=any(k in params for k in FILTER_PARAMS)):
        columns = st.columns(3)
        for i, key in enumerate(FILTER_PARAMS):
            hint = "ISO time, e.g. 2026-01-31" if key in ("since", "until") else "comma-separated"
            value = columns[i % 3].text_input(
                key, value=params.get(key, ""), key=f"filter-{key}", placeholder=hint
            )
            value = value.strip()
            if value:
                st.query_params[key] = value
                out[key] = (
                    value
                    if key in ("since", "until")
                    else [v.strip() for v in value.split(",") if v.strip()]
                )
            elif key in params:
                del st.query_params[key]
    return out


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
    unknown = bool(wanted) and wanted not in names
    name = st.selectbox(
        "Dashboard",
        names,
        index=None if unknown else names.index(wanted) if wanted in names else 0,
        format_func=lambda n: dashboards[n].title,
        placeholder="Choose a dashboard",
    )
    if name is None:
        # a bad link: say so and open no other dashboard in its place (the URL keeps the name)
        st.warning("There is no dashboard with this name:", icon=":material/search_off:")
        st.text(_text.one_line(wanted, 200))
        return
    st.query_params[DASHBOARD_PARAM] = name
    dashboard = dashboards[name]
    st.caption(dashboard.description)
    filters = _filters()
    try:
        results: list[Any] = _data.dashboard_results(
            _data.ledger_url(), name, None, json.dumps(filters, sort_keys=True)
        )
    except AnalyticsError as exc:
        st.error("The ledger cannot be analysed.")
        st.code(str(exc), language=None)
        return
    for index, (panel, (result, examples)) in enumerate(
        zip(dashboard.panels, results, strict=True)
    ):
        _panel(name, index, panel, result, examples)


def _panel(dashboard: str, index: int, panel: Any, result: Any, examples: list[Any]) -> None:
    st.subheader(panel.title)
    if panel.description:
        st.caption(panel.description)
    frame = _text.frame(result.to_pandas())  # model-written cells: the display sanitizer
    # ids URL-encoded into a relative link to this app (not model text rendered as markup)
    # first, so the link is in view however wide the table is
    frame.insert(0, LINK_COLUMN, [drill_link(e) for e in examples])
    chart = panel.chart
    tooltip = [*result.columns, LINK_COLUMN]
    if frame.empty:
        st.info("No rows (not enough calls yet for this analysis).")
    elif chart.type == "bar":
        st.altair_chart(
            alt.Chart(frame)
            .mark_bar()
            .encode(
                x=alt.X(f"{chart.x}:Q", title=chart.x),
                y=alt.Y(f"{chart.y}:N", title=chart.y, sort="-x"),
                tooltip=tooltip,
                href=alt.Href(f"{LINK_COLUMN}:N"),
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
                tooltip=tooltip,
                href=alt.Href(f"{LINK_COLUMN}:N"),
            ),
            width="stretch",
        )
    st.dataframe(  # pyright: ignore[reportUnknownMemberType]  # streamlit's signature names pyarrow's Array without its type argument
        frame,
        hide_index=True,
        width="stretch",
        column_config={LINK_COLUMN: st.column_config.LinkColumn(LINK_COLUMN, display_text="open")},
    )
    st.download_button(
        "Download CSV",
        result.to_csv(),
        file_name=f"{dashboard}-{index + 1}-{result.name}.csv",
        mime="text/csv",
        key=f"csv-{dashboard}-{index}",
    )
