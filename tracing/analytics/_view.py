"""The versioned view of the columnar copy that SQL panels query (``calls_v1``), and the check
that keeps their SQL read-only and inside that view.

The copy's own ``calls`` table changes with the definitions (``DERIVE_VERSION``); the view's
columns do not: a change to them is a new view (``calls_v2``) beside the old one. A panel's SQL
is one ``SELECT`` (``WITH``/``FROM`` forms included) that reads ``calls_v1`` and its own CTEs
only: no other table or schema, no table function but ``range``/``generate_series``/``unnest``
(no file, no ATTACH, no settings), no write or DDL. DuckDB's own parser decides
(``json_serialize_sql``), so quoting tricks cannot hide a table from the check.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Final, cast

import duckdb

from tracing.analytics._analyses import FAILED_SQL, SETTLED_SQL, AnalyticsError

VIEW_NAME: Final = "calls_v1"
"""The view SQL panels read (its version is in its name)."""
VIEW_VERSION: Final = 1

VIEW_COLUMNS: Final[tuple[tuple[str, str, str], ...]] = (
    ("tool_call_id", "VARCHAR", "the call's id (the anchor's identity)"),
    ("session_id", "VARCHAR", "its session (conversation)"),
    ("seq", "BIGINT", "its sequence number in the session (the ledger's order)"),
    ("turn", "BIGINT", "its turn, when the writer knew it"),
    ("batch_id", "VARCHAR", "its batch: the calls of one model step"),
    ("parent_call_id", "VARCHAR", "the call that spawned the subagent making this call"),
    ("agent_id", "VARCHAR", "the agent that made it"),
    ("tool_name", "VARCHAR", "the tool"),
    ("status", "VARCHAR", "success, error, cancelled, abandoned, or a live status"),
    ("failed", "BOOLEAN", "status is error or cancelled"),
    ("settled", "BOOLEAN", "status is success, error or cancelled"),
    ("intent", "VARCHAR", "the intent as stored (model-written; redacted or NULL if hidden)"),
    ("error", "VARCHAR", "the scrubbed error message"),
    ("start_ns", "BIGINT", "start, nanoseconds since the epoch (UTC)"),
    ("start_time", "TIMESTAMP", "start as a UTC timestamp (microseconds)"),
    ("duration_ms", "DOUBLE", "duration of a settled call"),
    ("norm_intent", "VARCHAR", "the normalized intent (docs/analytics.md)"),
    ("phrase", "VARCHAR", "its leading phrase (first two words)"),
    ("intent_words", "INTEGER", "words of the normalized intent"),
    ("intent_chars", "INTEGER", "characters of the intent as stored"),
    ("intent_info", "INTEGER", "information of the normalized intent (Latin-letter equivalents)"),
    ("hidden", "BOOLEAN", "the redaction policy hid the intent"),
    ("names_tool", "BOOLEAN", "the intent names its own tool"),
    ("rn", "BIGINT", "position of the call in its session"),
    ("scope_rn", "BIGINT", "position among the calls of the same session, agent and turn"),
    ("step_rn", "BIGINT", "the scope position where the call's model step began"),
    ("sibling", "BOOLEAN", "its batch has at least two calls of its tool"),
    ("redundant_sibling", "BOOLEAN", "an earlier call of its batch and tool has equivalent args"),
    (
        "repeat",
        "BOOLEAN",
        "repeats an earlier batch's call (same tool, equivalent args, not after a failure)",
    ),
    ("reused", "BOOLEAN", "its intent was used in the session for different arguments"),
)
"""The view's columns: name, DuckDB type, meaning (docs/analytics.md lists them)."""

_COMPUTED: Final = {
    "failed": f"status IN {FAILED_SQL}",
    "settled": f"status IN {SETTLED_SQL}",
    "start_time": "make_timestamp(start_ns // 1000)",
}
_TABLE_FUNCTIONS: Final = frozenset({"range", "generate_series", "unnest"})
_FUNCTIONS_REFUSED: Final = frozenset({"getenv", "current_setting", "read_text", "read_blob"})

FILTER_TABLE: Final = "_view_filter"
"""A one-row temporary table with the filters the view applies (none: every call)."""


def view_ddl() -> list[str]:
    """The statements creating the filter table and the view (temporary: the connection's)."""
    select = ", ".join(f"{_COMPUTED.get(name, name)} AS {name}" for name, _, _ in VIEW_COLUMNS)
    return [
        f"CREATE OR REPLACE TEMP TABLE {FILTER_TABLE} (f_since BIGINT, f_until BIGINT, "
        "f_agent VARCHAR[], f_tool VARCHAR[], f_session VARCHAR[], f_status VARCHAR[])",
        f"INSERT INTO {FILTER_TABLE} VALUES (NULL, NULL, [], [], [], [])",
        f"CREATE OR REPLACE TEMP VIEW {VIEW_NAME} AS SELECT {select} "
        f"FROM calls, {FILTER_TABLE} f "
        "WHERE (f.f_since IS NULL OR start_ns >= f.f_since) "
        "AND (f.f_until IS NULL OR start_ns < f.f_until) "
        "AND (len(f.f_agent) = 0 OR list_contains(f.f_agent, agent_id)) "
        "AND (len(f.f_tool) = 0 OR list_contains(f.f_tool, tool_name)) "
        "AND (len(f.f_session) = 0 OR list_contains(f.f_session, session_id)) "
        "AND (len(f.f_status) = 0 OR list_contains(f.f_status, status))",
    ]


def _nodes(tree: Any, scope: frozenset[str]) -> Iterator[tuple[dict[str, Any], frozenset[str]]]:
    """Every object of a serialized parse tree with the CTE names visible where it is."""
    if isinstance(tree, list):
        for item in tree:  # pyright: ignore[reportUnknownVariableType]
            yield from _nodes(item, scope)
        return
    if not isinstance(tree, dict):
        return
    node: dict[str, Any] = tree  # pyright: ignore[reportUnknownVariableType]
    cte_map: Any = node.get("cte_map")
    ctes: list[Any] = []
    if isinstance(cte_map, dict):
        ctes = cast("dict[str, list[Any]]", cte_map).get("map", [])
    if ctes:
        scope = scope | {str(c["key"]).lower() for c in ctes}
    yield node, scope
    for value in node.values():
        yield from _nodes(value, scope)


def check_view_sql(sql: str) -> None:
    """Refuse anything but one read-only ``SELECT`` over ``calls_v1`` (AnalyticsError, one
    line, saying what was refused)."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise AnalyticsError(f"SQL error: {_first_line(exc)}") from None
    if len(statements) != 1:
        raise AnalyticsError(f"a SQL panel is one statement ({len(statements)} given)")
    kind = statements[0].type.name
    if kind != "SELECT":
        raise AnalyticsError(
            f"a SQL panel only reads: {kind} refused (one SELECT over {VIEW_NAME})"
        )
    with duckdb.connect(":memory:") as db:
        row = db.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()
    tree = json.loads(row[0]) if row else {"error": True}
    if tree.get("error"):
        raise AnalyticsError(f"SQL error: {tree.get('error_message', 'cannot parse')}")
    for node, scope in _nodes(tree.get("statements", []), frozenset()):
        kind = node.get("type")
        if kind == "BASE_TABLE":
            name = str(node.get("table_name", ""))
            if node.get("schema_name") or node.get("catalog_name"):
                path = ".".join(node["qualified_name"]["path"])
                raise AnalyticsError(
                    f"a SQL panel reads {VIEW_NAME} only: {path} refused (another schema)"
                )
            if name.lower() != VIEW_NAME and name.lower() not in scope:
                raise AnalyticsError(f"a SQL panel reads {VIEW_NAME} only: {name!r} refused")
        elif kind == "TABLE_FUNCTION":
            function = node.get("function", {})
            name = str(function.get("function_name", ""))
            if name.lower() not in _TABLE_FUNCTIONS or function.get("schema"):
                raise AnalyticsError(f"a SQL panel reads {VIEW_NAME} only: {name}() refused")
        elif node.get("class") == "FUNCTION":
            name = str(node.get("function_name", ""))
            if name.lower() in _FUNCTIONS_REFUSED:
                raise AnalyticsError(f"a SQL panel reads {VIEW_NAME} only: {name}() refused")


def view_sql_columns(sql: str) -> tuple[str, ...]:
    """The result columns of a checked panel SQL (against an empty ``calls_v1``; AnalyticsError
    on an unknown column or function, one line)."""
    check_view_sql(sql)
    columns = ", ".join(f"{name} {kind}" for name, kind, _ in VIEW_COLUMNS)
    with duckdb.connect(":memory:") as db:
        db.execute(f"CREATE TABLE {VIEW_NAME} ({columns})")
        try:
            cursor = db.execute(f"SELECT * FROM ({sql}) LIMIT 0")
        except duckdb.Error as exc:
            raise AnalyticsError(f"SQL error: {_first_line(exc)}") from None
        return tuple(d[0] for d in cursor.description or ())


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
