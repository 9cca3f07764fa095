"""SQL panels: one read-only SELECT over the documented, versioned view ``calls_v1``."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.analytics.conftest import call, write_all
from tracing.analytics import Analytics, AnalyticsError
from tracing.analytics._dashboards import parse_dashboard
from tracing.analytics._view import VIEW_COLUMNS, VIEW_NAME, check_view_sql
from tracing.ledger import Ledger

DOCS = Path(__file__).resolve().parents[2] / "docs" / "analytics.md"

PANEL = '''title = "Mine"
filters = { agent = "main" }

[[panels]]
title = "Failed calls per tool"
sql = """
SELECT tool_name, count(*) FILTER (WHERE failed) AS failed, count(*) AS calls
FROM calls_v1 GROUP BY tool_name ORDER BY tool_name"""
chart = { type = "bar", x = "failed", y = "tool_name" }

[[panels]]
title = "Failed calls"
sql = "SELECT session_id, tool_call_id, intent FROM calls_v1 WHERE failed ORDER BY tool_call_id"
filters = { agent = ["main", "sub"] }
'''


def _ledger(url: str, make_ledger: Callable[[str], Ledger]) -> None:
    write_all(
        make_ledger(url),
        [
            call("a", "grep", "Looking for TODOs", agent="main", start_ms=0),
            call("b", "grep", "Looking again", agent="main", status="error", start_ms=1),
            call("c", "shell", "Building", agent="sub", status="error", start_ms=2),
            call("d", "shell", "Building", agent="main", session="s2", start_ms=3),
        ],
    )


def test_sql_panels_over_the_view(
    store_url: str,
    make_ledger: Callable[[str], Ledger],
    make_analytics: Callable[..., Analytics],
    tmp_path: Path,
) -> None:
    _ledger(store_url, make_ledger)
    dashboard = parse_dashboard(PANEL, path=tmp_path / "mine.toml")
    assert [p.analysis for p in dashboard.panels] == ["sql", "sql"]
    engine = make_analytics(store_url)
    (_, per_tool), (_, failed) = engine.dashboard(dashboard)
    # the dashboard's filter (agent main) holds in the view; the second panel's replaces it
    assert per_tool.columns == ("tool_name", "failed", "calls")
    assert per_tool.rows == [("grep", 1, 2), ("shell", 0, 1)]
    assert failed.rows == [("s1", "b", "Looking again"), ("s1", "c", "Building")]
    # every row opens its call
    assert engine.examples(failed) == [("s1", "b"), ("s1", "c")]
    # filters given at run time replace the file's, field by field
    (_, only_s2), _ = engine.dashboard(dashboard, filters={"session": "s2"})
    assert only_s2.rows == [("shell", 0, 1)]
    # after a panel the view holds every call again (intentrace sql --columnar reads it)
    assert engine.query(f"SELECT count(*) FROM {VIEW_NAME}").rows == [(4,)]
    rows = engine.run_sql(f"SELECT count(*) AS n FROM {VIEW_NAME} WHERE settled").rows
    assert rows == [(4,)]


@pytest.mark.parametrize(
    ("sql", "refused"),
    [
        ("DELETE FROM calls_v1", "DELETE refused"),
        ("UPDATE calls_v1 SET status = 'x'", "UPDATE refused"),
        ("CREATE TABLE x AS SELECT 1", "CREATE refused"),
        ("ATTACH 'other.db'", "ATTACH refused"),
        ("COPY calls_v1 TO 'out.csv'", "COPY refused"),
        ("SET threads = 1", "SET refused"),
        ("SELECT 1; SELECT 2", "one statement (2 given)"),
        ("SELECT * FROM calls", "'calls' refused"),  # the copy's own table
        ("SELECT (SELECT count(*) FROM calls)", "'calls' refused"),
        ("SELECT * FROM main.calls_v1", "main.calls_v1 refused (another schema)"),
        ("SELECT * FROM information_schema.tables", "refused (another schema)"),
        ("SELECT * FROM '/etc/passwd'", "'/etc/passwd' refused"),
        ("SELECT * FROM read_csv('/etc/passwd')", "read_csv() refused"),
        ("SELECT * FROM duckdb_settings()", "duckdb_settings() refused"),
        ("SELECT * FROM query('SELECT 1')", "query() refused"),
        ("SELECT getenv('HOME')", "getenv() refused"),
        ("SELECT nope FROM calls_v1", 'column "nope" not found'),
    ],
)
def test_a_sql_panel_only_reads_the_view(sql: str, refused: str, tmp_path: Path) -> None:
    text = f'title = "x"\n[[panels]]\ntitle = "p"\nsql = """{sql}"""\n'
    with pytest.raises(AnalyticsError) as info:
        parse_dashboard(text, path=tmp_path / "bad.toml")
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{tmp_path / 'bad.toml'}: panels/0/sql:")
    assert refused in message


def test_what_a_sql_panel_may_read() -> None:
    for sql in (
        "SELECT tool_name, count(*) FROM calls_v1 GROUP BY 1",
        "WITH f AS (SELECT * FROM calls_v1 WHERE failed) SELECT count(*) FROM f",
        "FROM calls_v1 SELECT session_id",
        "SELECT r.range FROM range(3) r",
        # a CTE may be called calls: it is the query's own, never the copy's table
        "WITH calls AS (SELECT * FROM calls_v1) SELECT count(*) FROM calls",
    ):
        check_view_sql(sql)


@pytest.mark.parametrize(
    ("panel", "expected"),
    [
        ('sql = "SELECT 1 AS one"\nparams = { k = 1 }\n', "panels/0"),
        ('sql = "SELECT 1 AS one"\nanalysis = "tools"\n', "panels/0"),
        (
            'sql = "SELECT 1 AS one"\nchart = { type = "bar", x = "two", y = "one" }\n',
            "panels/0/chart/x: 'two' is not a column of the panel's SQL (one)",
        ),
    ],
)
def test_sql_panel_schema(panel: str, expected: str, tmp_path: Path) -> None:
    text = f'title = "x"\n[[panels]]\ntitle = "p"\n{panel}'
    with pytest.raises(AnalyticsError, match=re.escape(expected)):
        parse_dashboard(text, path=tmp_path / "bad.toml")


def test_the_view_is_documented() -> None:
    """docs/analytics.md lists the view's columns, in order, with their types."""
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index(f"### The view `{VIEW_NAME}`") :]
    rows = re.findall(r"^\| `(\w+)` \| (\w+) \|", section, flags=re.MULTILINE)
    assert rows == [(name, kind) for name, kind, _ in VIEW_COLUMNS]
