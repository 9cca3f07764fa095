"""The analyses: documented parameters, their validation, and the SQL over the columnar copy.

Every analysis reads the ``calls`` table of the copy (see ``_engine``); each returns rows in a
total order (ties broken by the key), so the fast path and the reference implementation in
``_reference`` can be compared row for row. Definitions: docs/analytics.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from tracing.analytics._definitions import NAME_JOINER, information_sql
from tracing.analytics._structure import MAX_WINDOW, PLANES
from tracing.status import Status


class AnalyticsError(ValueError):
    """A bad analysis name, parameter, dashboard or query; the message is one line."""


def _sql_list(values: frozenset[str]) -> str:
    return "(" + ", ".join(f"'{v}'" for v in sorted(values)) + ")"


FAILED: Final[frozenset[str]] = frozenset({Status.ERROR, Status.CANCELLED})
"""What *failed* means in every analysis: the call settled with an error or was cancelled."""
SETTLED: Final[frozenset[str]] = frozenset({Status.SUCCESS, *FAILED})
"""The denominator of every failure rate: the spec's settled statuses. An ``abandoned`` call
(never settled by the app; settled by the ledger after a timeout) is neither: it is counted
apart (``abandoned`` columns), so a reaped background call does not pass for a failure."""
SETTLED_SQL: Final = _sql_list(SETTLED)
FAILED_SQL: Final = _sql_list(FAILED)


@dataclass(frozen=True)
class Param:
    """One parameter of an analysis."""

    kind: str
    """``int``, ``float``, ``bool``, ``choice`` or ``words`` (a list of strings)."""
    default: Any
    doc: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()

    def json_schema(self) -> dict[str, Any]:
        """The JSON Schema of this parameter (for dashboards/schema.json)."""
        schema: dict[str, Any]
        if self.kind == "int":
            schema = {"type": "integer"}
        elif self.kind == "float":
            schema = {"type": "number"}
        elif self.kind == "bool":
            schema = {"type": "boolean"}
        elif self.kind == "choice":
            schema = {"type": "string", "enum": list(self.choices)}
        else:
            schema = {"type": "array", "items": {"type": "string"}}
        if self.minimum is not None:
            schema["minimum"] = self.minimum
        if self.maximum is not None:
            schema["maximum"] = self.maximum
        schema["description"] = self.doc
        return schema

    def check(self, analysis: str, name: str, value: Any) -> Any:
        """The validated value; AnalyticsError (one line) when it does not fit."""
        where = f"{analysis}: parameter {name!r}"
        if self.kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise AnalyticsError(f"{where} must be an integer, not {value!r}")
        elif self.kind == "float":
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise AnalyticsError(f"{where} must be a number, not {value!r}")
            value = float(value)
        elif self.kind == "bool":
            if not isinstance(value, bool):
                raise AnalyticsError(f"{where} must be true or false, not {value!r}")
        elif self.kind == "choice":
            if value not in self.choices:
                raise AnalyticsError(f"{where} must be one of {', '.join(self.choices)}")
        else:
            if isinstance(value, str) or not isinstance(value, list | tuple):
                raise AnalyticsError(f"{where} must be a list of words")
            items: list[Any] = list(value)  # pyright: ignore[reportUnknownArgumentType]
            if not all(isinstance(v, str) for v in items):
                raise AnalyticsError(f"{where} must be a list of words")
            value = tuple(str(v) for v in items)
        if self.minimum is not None and value < self.minimum:
            raise AnalyticsError(f"{where} must be at least {self.minimum:g}")
        if self.maximum is not None and value > self.maximum:
            raise AnalyticsError(f"{where} must be at most {self.maximum:g}")
        return value


Query = tuple[str, dict[str, Any]]

SCOPE_FILTER: Final = "_scope_filter"
"""Set by the engine when the filters select by session and agent only: the masks' owners
are then filtered exactly with the calls that hold them."""
MASKS_EXACT: Final = "_masks_exact"
"""Set by the engine in the parameters ``precursors`` gets: the copy's precursor masks are
exact (no model step has 1 << PLANES settled calls or more)."""


@dataclass(frozen=True)
class Analysis:
    """An analysis: name, parameters, result columns, and the SQL builder."""

    name: str
    title: str
    description: str
    params: Mapping[str, Param]
    columns: Callable[[Mapping[str, Any]], tuple[str, ...]]
    sql: Callable[[Mapping[str, Any], str], Query] = field(repr=False)
    """(resolved parameters, the filter's SQL condition over ``calls``, ``TRUE`` for none)
    -> (SQL, named parameters)."""

    def resolve(self, given: Mapping[str, Any] | None) -> dict[str, Any]:
        """Defaults filled in, every value validated (AnalyticsError on a bad one)."""
        given = dict(given or {})
        unknown = sorted(set(given) - set(self.params))
        if unknown:
            raise AnalyticsError(
                f"{self.name}: unknown parameter {unknown[0]!r} "
                f"(known: {', '.join(self.params) or 'none'})"
            )
        out: dict[str, Any] = {}
        for name, param in self.params.items():
            value = given.get(name, param.default)
            out[name] = param.check(self.name, name, value)
        return out


# --- 1. failure precursors -------------------------------------------------------------------
_PRECURSOR_COLUMNS: Final = ("item", "count", "support", "lift", "windows", "occurrences")


def _precursors_sql(p: Mapping[str, Any], where: str) -> Query:
    item, gap = ("phrase", "gap_phrase") if p["by"] == "phrase" else ("norm_intent", "gap_intent")
    binds = {"k": p["k"], "min_support": p["min_support"], "limit": p["limit"]}
    ranked = """
SELECT g.item, count, count / fl AS support, (count * n) / (fl * windows) AS lift,
       windows, occurrences
FROM g, t
WHERE count > 0 AND count / fl >= $min_support
ORDER BY lift DESC, count DESC, g.item
LIMIT $limit"""
    tail = f"""
o AS (
  SELECT {item} AS item, count(*)::BIGINT AS occurrences
  FROM calls WHERE {item} IS NOT NULL AND {where} GROUP BY 1),
wg AS (
  SELECT item, count(*) FILTER (failed)::BIGINT AS count, count(*)::BIGINT AS windows
  FROM w GROUP BY item),
g AS (
  SELECT wg.item, count, windows, coalesce(o.occurrences, 0)::BIGINT AS occurrences
  FROM wg LEFT JOIN o ON o.item = wg.item){ranked}"""
    default_scope = not (p["across_turns"] or p["across_agents"] or p["include_siblings"])
    if default_scope and p.get(MASKS_EXACT) and (where == "TRUE" or p.get(SCOPE_FILTER)):
        # every settled call owns a window: the masks count them without a join (an item is
        # credited to its last occurrence in a window: the gap to the next one cuts its mask)
        count = " + ".join(f"{1 << b} * bit_count(fail{b} & m)" for b in range(PLANES))
        windows = " + ".join(f"{1 << b} * bit_count(owner{b} & m)" for b in range(PLANES))
        sql = f"""
WITH t AS (
  SELECT count(*) FILTER (status IN {SETTLED_SQL}) AS n,
         count(*) FILTER (status IN {FAILED_SQL}) AS fl
  FROM calls WHERE {where}),
y AS (
  SELECT {item} AS item, {", ".join(f"owner{b}, fail{b}" for b in range(PLANES))},
         (1::BIGINT << (CASE WHEN {gap} > 0 AND {gap} < $k THEN {gap} ELSE $k END)) - 1 AS m
  FROM calls WHERE {item} IS NOT NULL AND {where}),
g AS (
  SELECT item, sum({count})::BIGINT AS count, sum({windows})::BIGINT AS windows,
         count(*)::BIGINT AS occurrences
  FROM y GROUP BY item){ranked}"""
        return sql, binds
    if default_scope:
        # the default scope is precomputed: a window is the k scope positions before the
        # owner's step began; an item is credited to its last occurrence in a window. The
        # positions are columns before the join, so that both keys hash (with the distance
        # from a joined range, DuckDB hashed the scope alone and filtered ten times the rows)
        sql = f"""
WITH s AS (
  SELECT scope_key, step_rn, status IN {FAILED_SQL} AS failed
  FROM calls WHERE status IN {SETTLED_SQL} AND {where}),
t AS (SELECT count(*) AS n, count(*) FILTER (failed) AS fl FROM s),
p AS (
  SELECT scope_key, step_rn, failed, unnest(range(greatest(step_rn - $k, 1), step_rn)) AS pos
  FROM s),
w AS (
  SELECT c.{item} AS item, p.failed
  FROM p JOIN calls c ON c.scope_key = p.scope_key AND c.scope_rn = p.pos
  WHERE c.{item} IS NOT NULL AND (c.{gap} < 0 OR c.scope_rn + c.{gap} >= p.step_rn)),{tail}"""
        return sql, binds
    # a widened scope: positions computed here (window functions), each window deduplicated
    part = ", ".join(
        ["session_id"]
        + ([] if p["across_agents"] else ["agent_id"])
        + ([] if p["across_turns"] else ["turn"])
    )
    step = (
        "sp"
        if p["include_siblings"]
        else "CASE WHEN batch_id IS NULL THEN sp "
        f"ELSE min(sp) OVER (PARTITION BY {part}, batch_id) END"
    )
    sql = f"""
WITH b AS (
  SELECT *, hash({part}) AS pk, row_number() OVER (PARTITION BY {part} ORDER BY rn) AS sp
  FROM calls),
e AS (SELECT *, {step} AS se FROM b),
s AS (
  SELECT pk, sp, se, status IN {FAILED_SQL} AS failed
  FROM e WHERE status IN {SETTLED_SQL} AND {where}),
t AS (SELECT count(*) AS n, count(*) FILTER (failed) AS fl FROM s),
w AS (
  SELECT DISTINCT s.pk, s.sp, s.failed, c.{item} AS item
  FROM s CROSS JOIN range(1, $k + 1) AS d(d)
  JOIN e c ON c.pk = s.pk AND c.sp = s.se - d.d
  WHERE c.{item} IS NOT NULL),{tail}"""
    return sql, binds


PRECURSORS = Analysis(
    name="precursors",
    title="Failure precursors",
    description=(
        "Normalized intents (or their leading phrase) among the calls the model made before "
        "deciding failed (error or cancelled) calls — the k calls of the same agent and turn "
        "before the failing call's model step, its siblings left out — ranked by lift: how "
        "much more often they precede a failure than they precede any settled call."
    ),
    params={
        "k": Param("int", 3, "calls before the model step that form a window", 1, MAX_WINDOW),
        "by": Param(
            "choice", "intent", "rank intents or their leading phrase", choices=("intent", "phrase")
        ),
        "min_support": Param(
            "float", 0.01, "least share of failure windows an item must appear in", 0.0, 1.0
        ),
        "limit": Param("int", 25, "rows to return", 1, 10_000),
        "across_turns": Param("bool", False, "windows reach into earlier turns of the session"),
        "across_agents": Param(
            "bool", False, "windows hold the calls of every agent of the session"
        ),
        "include_siblings": Param(
            "bool", False, "windows hold the earlier calls of the failing call's own model step"
        ),
    },
    columns=lambda p: _PRECURSOR_COLUMNS,
    sql=_precursors_sql,
)


# --- 2. vague intents per tool ---------------------------------------------------------------
_VAGUE_COLUMNS: Final = (
    "tool_name", "calls", "missing", "short", "names_tool", "generic", "reused", "vague",
    "vague_share",
)  # fmt: skip
_VAGUE_INTENT_COLUMNS: Final = ("tool_name", "intent", "calls", "information", "reason")
DEFAULT_MIN_INFO: Final = 10
"""An intent carrying less information (Latin-letter equivalents, ``information``) is short."""
_REASONS: Final = ("missing", "short", "names_tool", "generic", "reused")
_NOVEL: Final = information_sql("tok.t")


def _vague_sql(p: Mapping[str, Any], where: str) -> Query:
    # one pass over the calls, grouped by tool and intent: every rule but `reused` is the
    # intent's own, so the rules run on the groups (tens of thousands), not on every call.
    # An intent is generic when the tokens of it that are not common among its tool's distinct
    # intents carry too little information (the whole ledger: what a call is compared with is
    # never filtered), and it names nothing (a path, file, module or identifier as written:
    # `Reading file src/db.py` is specific however often its template repeats)
    common = f"""
WITH a AS (
  SELECT tool_name AS g_tool, norm_intent AS g_n,
         max(coalesce(tokens, norm_intent)) AS toks, any_value(intent_info) AS info,
         coalesce(bool_or(contains(tokens, '{NAME_JOINER}')), false) AS named,
         any_value(tool_info) AS tinfo, bool_or(names_tool) AS nt,
         count(*) FILTER (NOT hidden AND {where}) AS n,
         count(*) FILTER (NOT hidden AND reused AND {where}) AS n_reused
  FROM calls GROUP BY tool_name, norm_intent),
di AS (SELECT g_tool, g_n, toks FROM a WHERE g_n IS NOT NULL),
per_tool AS (SELECT g_tool, count(*) AS intents FROM di GROUP BY g_tool),
tok AS (
  SELECT DISTINCT g_tool, g_n, t
  FROM (SELECT g_tool, g_n, unnest(string_split(toks, ' ')) AS t FROM di)),
common AS (
  SELECT tok.g_tool, t FROM tok JOIN per_tool USING (g_tool)
  GROUP BY tok.g_tool, t, intents
  HAVING count(*) >= greatest($common_min, $common_share * intents)),
generic AS (
  SELECT tok.g_tool, tok.g_n FROM tok LEFT JOIN common c ON c.g_tool = tok.g_tool AND c.t = tok.t
  GROUP BY tok.g_tool, tok.g_n
  HAVING coalesce(sum({_NOVEL}) FILTER (c.t IS NULL), 0) < $min_novel),
c AS (
  SELECT a.g_tool AS tool_name, a.g_n AS norm_intent, info AS intent_info, n, n_reused,
         CASE WHEN a.g_n IS NULL THEN 1
              WHEN info < $min_info THEN 2
              WHEN nt AND info - tinfo < $min_info THEN 3
              WHEN generic.g_n IS NOT NULL AND NOT named THEN 4
              ELSE 0 END AS cat
  FROM a LEFT JOIN generic ON generic.g_tool = a.g_tool AND generic.g_n = a.g_n
  WHERE n > 0)"""
    binds: dict[str, Any] = {
        "min_info": p["min_info"],
        "common_share": p["common_share"],
        "common_min": p["common_min"],
        "min_novel": p["min_novel"],
        "min_calls": p["min_calls"],
    }
    if p["by"] == "intent":
        reasons = ", ".join(f"'{r}'" for r in _REASONS)
        sql = f"""{common}
SELECT tool_name, norm_intent, n AS calls, intent_info AS information,
       CASE WHEN cat > 0 THEN [{reasons}][cat] WHEN n_reused > 0 THEN 'reused' END AS reason
FROM c WHERE n >= $min_calls
ORDER BY reason IS NULL, tool_name, calls DESC, norm_intent NULLS FIRST"""
        return sql, binds

    def total(condition: str, column: str = "n") -> str:
        return f"coalesce(sum({column}) FILTER ({condition}), 0)::BIGINT"

    vague = f"({total('cat > 0')} + {total('cat = 0', 'n_reused')})"
    sql = f"""{common}
SELECT tool_name, sum(n)::BIGINT AS calls,
       {total("cat = 1")} AS missing, {total("cat = 2")} AS short,
       {total("cat = 3")} AS names_tool, {total("cat = 4")} AS generic,
       {total("cat = 0", "n_reused")} AS reused, {vague} AS vague,
       {vague} / sum(n) AS vague_share
FROM c GROUP BY tool_name HAVING sum(n) >= $min_calls
ORDER BY vague_share DESC, calls DESC, tool_name"""
    return sql, binds


VAGUE = Analysis(
    name="vague_intents",
    title="Vague intents per tool",
    description=(
        "Share of each tool's calls whose intent is missing, carries too little information "
        "(weighted per script), adds too little beyond the tool's name, is made only of what "
        "the tool's other intents say too, or was reused in the session for different "
        "arguments (the first that applies); tools ranked by that share. by = intent: each "
        "intent with its reason."
    ),
    params={
        "by": Param(
            "choice", "tool", "a row per tool, or per intent of a tool", choices=("tool", "intent")
        ),
        "min_info": Param(
            "int", DEFAULT_MIN_INFO, "an intent with less information (letters) is short", 1, 1000
        ),
        "common_share": Param(
            "float", 0.03, "a token in this share of a tool's intents is common", 0.0, 1.0
        ),
        "common_min": Param("int", 3, "... and in at least this many of them", 1, None),
        "min_novel": Param(
            "int", 6, "an intent whose uncommon tokens carry less information is generic", 1, 1000
        ),
        "min_calls": Param("int", 20, "rows with fewer calls are left out", 1, None),
    },
    columns=lambda p: _VAGUE_INTENT_COLUMNS if p["by"] == "intent" else _VAGUE_COLUMNS,
    sql=_vague_sql,
)


# --- 3. redundant siblings and repeated calls --------------------------------------------------
_REDUNDANCY_TAIL: Final = (
    "calls", "sibling_batches", "redundant_batches", "redundant_batch_rate",
    "redundant_siblings", "repeats", "repeat_rate",
)  # fmt: skip


def _redundancy_columns(p: Mapping[str, Any]) -> tuple[str, ...]:
    return ("tool_name" if p["by"] == "tool" else "session_id", *_REDUNDANCY_TAIL)


def _redundancy_sql(p: Mapping[str, Any], where: str) -> Query:
    key = "tool_name" if p["by"] == "tool" else "session_id"
    sql = f"""
SELECT {key}, count(*) AS calls,
       count(*) FILTER (batch_head) AS sibling_batches,
       count(*) FILTER (batch_redundant) AS redundant_batches,
       CASE WHEN count(*) FILTER (batch_head) > 0
            THEN count(*) FILTER (batch_redundant) / count(*) FILTER (batch_head)
       END AS redundant_batch_rate,
       count(*) FILTER (redundant_sibling) AS redundant_siblings,
       count(*) FILTER (repeat) AS repeats,
       count(*) FILTER (repeat) / count(*) AS repeat_rate
FROM calls WHERE {where} GROUP BY {key} HAVING count(*) >= $min_calls
ORDER BY redundant_siblings + repeats DESC, calls DESC, {key}
LIMIT $limit"""
    return sql, {"min_calls": p["min_calls"], "limit": p["limit"]}


REDUNDANCY = Analysis(
    name="redundancy",
    title="Redundant siblings and repeated calls",
    description=(
        "Per model step (batch) and tool: sibling calls with equivalent arguments (all but the "
        "first are redundant), counted per batch and per call; apart, repeats: calls with the "
        "same tool and equivalent arguments as a call of an earlier step of the session that "
        "did not fail. Per tool or per session."
    ),
    params={
        "by": Param("choice", "tool", "group per tool or per session", choices=("tool", "session")),
        "min_calls": Param("int", 1, "groups with fewer calls are left out", 1, None),
        "limit": Param("int", 50, "rows to return", 1, 100_000),
    },
    columns=_redundancy_columns,
    sql=_redundancy_sql,
)

# --- 4. per tool -----------------------------------------------------------------------------
_TOOL_COLUMNS: Final = (
    "tool_name", "calls", "settled", "failed", "failure_rate", "abandoned", "p50_ms", "p95_ms",
    "labelled", "label_coverage",
)  # fmt: skip


def _tools_sql(p: Mapping[str, Any], where: str) -> Query:
    sql = f"""
WITH g AS (
  SELECT tool_name, count(*) AS calls,
         count(*) FILTER (status IN {SETTLED_SQL}) AS settled,
         count(*) FILTER (status IN {FAILED_SQL}) AS failed,
         count(*) FILTER (status = 'abandoned') AS abandoned,
         quantile_disc(duration_ms, 0.5) FILTER (status IN {SETTLED_SQL}) AS p50_ms,
         quantile_disc(duration_ms, 0.95) FILTER (status IN {SETTLED_SQL}) AS p95_ms,
         count(*) FILTER (norm_intent IS NOT NULL) AS labelled,
         count(*) FILTER (NOT hidden) AS visible
  FROM calls WHERE {where} GROUP BY tool_name)
SELECT tool_name, calls, settled, failed,
       CASE WHEN settled > 0 THEN failed / settled END AS failure_rate, abandoned,
       p50_ms, p95_ms, labelled,
       CASE WHEN visible > 0 THEN labelled / visible END AS label_coverage
FROM g WHERE settled >= $min_calls
ORDER BY calls DESC, tool_name"""
    return sql, {"min_calls": p["min_calls"]}


TOOLS = Analysis(
    name="tools",
    title="Per tool",
    description=(
        "Calls, failure rate (error or cancelled) over settled calls (the denominator is "
        "shown), abandoned calls apart, P50/P95 duration of settled calls, and label coverage "
        "(calls with an intent among those whose intent was not hidden by redaction)."
    ),
    params={
        "min_calls": Param("int", 1, "tools with fewer settled calls are left out", 0, None),
    },
    columns=lambda p: _TOOL_COLUMNS,
    sql=_tools_sql,
)


# --- 5. over time ----------------------------------------------------------------------------
BUCKETS: Final[dict[str, tuple[int, int, str]]] = {  # width ns, offset ns, label format
    "hour": (3_600_000_000_000, 0, "%Y-%m-%d %H:00"),
    "day": (86_400_000_000_000, 0, "%Y-%m-%d"),
    "week": (7 * 86_400_000_000_000, 4 * 86_400_000_000_000, "%Y-%m-%d"),  # Mondays
}
_TIME_COLUMNS: Final = (
    "bucket", "calls", "labelled", "label_coverage", "mean_intent_chars", "mean_intent_info",
)  # fmt: skip


def _time_sql(p: Mapping[str, Any], where: str) -> Query:
    width, offset, fmt = BUCKETS[p["bucket"]]
    sql = f"""
WITH b AS (
  SELECT start_ns - ((((start_ns - {offset}) % {width}) + {width}) % {width}) AS b,
         norm_intent IS NOT NULL AS labelled, intent_chars, intent_info
  FROM calls WHERE NOT hidden AND {where}),
g AS (
  SELECT b, count(*) AS calls, count(*) FILTER (labelled) AS labelled,
         sum(intent_chars) FILTER (labelled)::BIGINT AS chars,
         sum(intent_info) FILTER (labelled)::BIGINT AS info
  FROM b GROUP BY b)
SELECT strftime(make_timestamp(b // 1000), '{fmt}') AS bucket, calls, labelled,
       labelled / calls AS label_coverage,
       CASE WHEN labelled > 0 THEN chars / labelled END AS mean_intent_chars,
       CASE WHEN labelled > 0 THEN info / labelled END AS mean_intent_info
FROM g ORDER BY g.b"""
    return sql, {}


OVER_TIME = Analysis(
    name="over_time",
    title="Label coverage and intent length over time",
    description=(
        "Per hour, day or week (UTC, by call start): calls whose intent was not hidden, how many "
        "carried an intent, and the mean length of those intents in characters as stored and in "
        "information (letters weighted per script, as vague_intents measures it: a Han "
        "character 3, a kana 2, so a Japanese or Chinese intent is not one short 'word')."
    ),
    params={
        "bucket": Param("choice", "day", "width of a time bucket", choices=("hour", "day", "week")),
    },
    columns=lambda p: _TIME_COLUMNS,
    sql=_time_sql,
)


# --- 6. failure rate (over time, per agent or tool) ---------------------------------------
_DIMENSIONS: Final = {"none": None, "agent": "agent_id", "tool": "tool_name"}
_FAILURE_TAIL: Final = ("calls", "settled", "failed", "failure_rate", "abandoned")


def _failure_columns(p: Mapping[str, Any]) -> tuple[str, ...]:
    dim = _DIMENSIONS[p["by"]]
    return (
        *(("bucket",) if p["bucket"] != "all" else ()),
        *((dim,) if dim else ()),
        *_FAILURE_TAIL,
    )


def _failure_sql(p: Mapping[str, Any], where: str) -> Query:
    dim = _DIMENSIONS[p["by"]]
    keys: list[str] = []
    select: list[str] = []
    order: list[str] = []
    if p["bucket"] != "all":
        width, offset, fmt = BUCKETS[p["bucket"]]
        keys.append(f"start_ns - ((((start_ns - {offset}) % {width}) + {width}) % {width})")
        select.append(f"strftime(make_timestamp(k0 // 1000), '{fmt}') AS bucket")
        order.append("k0")
    if dim:
        keys.append(dim)
        select.append(f"k{len(keys) - 1} AS {dim}")
        order.append(f"k{len(keys) - 1} NULLS LAST")
    key_select = "".join(f"{k} AS k{i}, " for i, k in enumerate(keys))
    group = ", ".join(f"k{i}" for i in range(len(keys))) or "()"
    sql = f"""
WITH g AS (
  SELECT {key_select}count(*) AS calls,
         count(*) FILTER (status IN {SETTLED_SQL}) AS settled,
         count(*) FILTER (status IN {FAILED_SQL}) AS failed,
         count(*) FILTER (status = 'abandoned') AS abandoned
  FROM calls WHERE {where} GROUP BY {group})
SELECT {"".join(s + ", " for s in select)}calls, settled, failed,
       CASE WHEN settled > 0 THEN failed / settled END AS failure_rate, abandoned
FROM g WHERE calls >= $min_calls
ORDER BY {", ".join(order) or "calls"}"""
    return sql, {"min_calls": p["min_calls"]}


FAILURE_RATE = Analysis(
    name="failure_rate",
    title="Failure rate",
    description=(
        "Failed calls (error or cancelled) over settled calls (success, error, cancelled), per "
        "hour, day or week (UTC, by call start) and/or per agent or tool; abandoned calls "
        "counted apart."
    ),
    params={
        "bucket": Param(
            "choice",
            "day",
            "time bucket (all: no time dimension)",
            choices=("hour", "day", "week", "all"),
        ),
        "by": Param("choice", "none", "second dimension", choices=tuple(_DIMENSIONS)),
        "min_calls": Param("int", 1, "groups with fewer calls are left out", 1, None),
    },
    columns=_failure_columns,
    sql=_failure_sql,
)


ANALYSES: Final[dict[str, Analysis]] = {
    a.name: a for a in (PRECURSORS, VAGUE, REDUNDANCY, TOOLS, OVER_TIME, FAILURE_RATE)
}
"""Every analysis by name."""


def get_analysis(name: str) -> Analysis:
    """The analysis called ``name`` (AnalyticsError when there is none)."""
    try:
        return ANALYSES[name]
    except KeyError:
        raise AnalyticsError(f"unknown analysis {name!r} (known: {', '.join(ANALYSES)})") from None
