"""Declarative dashboards: one TOML file per dashboard, validated against a JSON Schema.

    title = "Failure precursors"
    description = "Which intents come before failed calls."

    [[panels]]
    title = "Intents before failures"
    analysis = "precursors"
    params = { k = 3, by = "intent" }
    chart = { type = "bar", x = "lift", y = "item" }

The built-in dashboards ship in the wheel (``tracing/_dashboards``) and live in ``dashboards/`` in a
checkout; a user folder (``$INTENTRACE_DASHBOARDS`` or an argument) adds more, and a user file
with the same name replaces a built-in one. The schema is generated from the analyses
(``dashboard_schema``); ``dashboards/schema.json`` is a copy for editors, kept equal by a test.
"""

from __future__ import annotations

import itertools
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

from tracing.analytics._analyses import ANALYSES, Analysis, AnalyticsError
from tracing.analytics._filters import FILTER_KEYS, Filters
from tracing.analytics._view import VIEW_NAME, view_sql_columns
from tracing.environment_variables import INTENTRACE_DASHBOARDS

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

CHART_TYPES: Final = ("bar", "line", "table")


@dataclass(frozen=True)
class Chart:
    """How a panel is drawn: ``bar`` (x quantitative, y categories), ``line`` (x ordered), or
    ``table`` (no chart; every panel shows its table anyway)."""

    type: str = "table"
    x: str | None = None
    y: str | None = None
    color: str | None = None


@dataclass(frozen=True)
class Panel:
    """One analysis with its parameters and chart."""

    title: str
    analysis: str
    """One of ``ANALYSES``, or ``sql`` for a SQL panel."""
    params: Mapping[str, Any]
    """The parameters as written in the file (defaults apply to the rest)."""
    chart: Chart
    description: str = ""
    filters: Filters = field(default_factory=Filters)
    """The panel's own filters, laid over the dashboard's (each field given replaces it)."""
    sql: str | None = None
    """A SQL panel's query: one read-only SELECT over the view ``calls_v1``."""


@dataclass(frozen=True)
class Dashboard:
    """A dashboard file, validated."""

    name: str
    """The file name without ``.toml`` (what ``intentrace report NAME`` takes)."""
    title: str
    description: str
    panels: tuple[Panel, ...]
    path: Path
    filters: Filters = field(default_factory=Filters)
    """Filters of every panel (a panel's own replace them field by field)."""


def _column_choices(analysis: Analysis) -> list[str]:
    choice_params = {n: p.choices for n, p in analysis.params.items() if p.kind == "choice"}
    columns: list[str] = []
    for combo in itertools.product(*choice_params.values()):
        resolved = analysis.resolve(dict(zip(choice_params, combo, strict=True)))
        for column in analysis.columns(resolved):
            if column not in columns:
                columns.append(column)
    return columns


_FILTER_DOCS: Final = {
    "since": "calls that started at or after this time (ISO 8601, UTC unless it says otherwise)",
    "until": "calls that started before this time (ISO 8601, UTC unless it says otherwise)",
    "agent": "calls of this agent (agent_id) or of any of these",
    "tool": "calls of this tool (tool_name) or of any of these",
    "session": "calls of this session (session_id) or of any of these",
    "status": "calls with this status or any of these",
}


def _filters_schema() -> dict[str, Any]:
    names: dict[str, Any] = {
        "oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]
    }
    return {
        "type": "object",
        "additionalProperties": False,
        "description": "Which calls the panels count (docs/analytics.md, Filters).",
        "properties": {
            k: ({"type": "string"} if k in ("since", "until") else names)
            | {"description": _FILTER_DOCS[k]}
            for k in FILTER_KEYS
        },
    }


def _chart_schema(column: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["type"],
        "properties": {
            "type": {"enum": list(CHART_TYPES)},
            "x": column,
            "y": column,
            "color": column,
        },
    }


def dashboard_schema() -> dict[str, Any]:
    """The JSON Schema of a dashboard file (generated from the analyses)."""
    variants: list[dict[str, Any]] = []
    for name, analysis in ANALYSES.items():
        columns = _column_choices(analysis)
        column: dict[str, Any] = {"type": "string", "enum": columns}
        variants.append(
            {
                "if": {"required": ["analysis"], "properties": {"analysis": {"const": name}}},
                "then": {
                    "properties": {
                        "params": {
                            "type": "object",
                            "additionalProperties": False,
                            "properties": {
                                p: spec.json_schema() for p, spec in analysis.params.items()
                            },
                        },
                        "chart": _chart_schema(column),
                    }
                },
            }
        )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "intentrace dashboard",
        "description": "One dashboard: a title, a description and panels (analysis + parameters "
        "+ chart). See docs/analytics.md.",
        "type": "object",
        "additionalProperties": False,
        "required": ["title", "panels"],
        "properties": {
            "title": {"type": "string", "minLength": 1},
            "description": {"type": "string"},
            "filters": _filters_schema(),
            "panels": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["title"],
                    "oneOf": [{"required": ["analysis"]}, {"required": ["sql"]}],
                    "properties": {
                        "title": {"type": "string", "minLength": 1},
                        "description": {"type": "string"},
                        "analysis": {"enum": list(ANALYSES)},
                        "sql": {
                            "type": "string",
                            "minLength": 1,
                            "description": f"Instead of an analysis: one read-only SELECT over "
                            f"the view {VIEW_NAME} (docs/analytics.md, SQL panels); chart "
                            "columns are its result columns.",
                        },
                        "params": {"type": "object"},
                        "chart": {"type": "object"},
                        "filters": _filters_schema(),
                    },
                    "allOf": [
                        *variants,
                        {
                            "if": {"required": ["sql"]},
                            "then": {
                                "not": {"required": ["params"]},
                                "properties": {"chart": _chart_schema({"type": "string"})},
                            },
                        },
                    ],
                },
            },
        },
    }


_validators: list[Validator] = []


def _validator() -> Validator:
    if not _validators:
        # jsonschema is slow to import: only once a dashboard file is read
        from jsonschema import validators

        schema = dashboard_schema()
        _validators.append(validators.validator_for(schema)(schema))
    return _validators[0]


def parse_dashboard(text: str, *, path: Path) -> Dashboard:
    """Parse and validate one dashboard file's text (AnalyticsError, one line, naming the file)."""
    where = str(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise AnalyticsError(f"{where}: not valid TOML: {exc}") from None
    errors = sorted(_validator().iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        error = errors[0]
        at = "/".join(str(p) for p in error.absolute_path) or "(top)"
        raise AnalyticsError(f"{where}: {at}: {error.message}")
    try:
        top_filters = Filters.of(data.get("filters"))
    except AnalyticsError as exc:
        raise AnalyticsError(f"{where}: filters: {exc}") from None
    panels: list[Panel] = []
    for i, raw in enumerate(cast(list[dict[str, Any]], data["panels"])):
        params = dict(raw.get("params", {}))
        sql: str | None = raw.get("sql")
        if sql is not None:
            name = "sql"
            try:
                columns = view_sql_columns(sql)
            except AnalyticsError as exc:
                raise AnalyticsError(f"{where}: panels/{i}/sql: {exc}") from None
        else:
            analysis = ANALYSES[raw["analysis"]]
            name = analysis.name
            try:
                resolved = analysis.resolve(params)
            except AnalyticsError as exc:
                raise AnalyticsError(f"{where}: panels/{i}: {exc}") from None
            columns = analysis.columns(resolved)
        chart = Chart(**raw.get("chart", {}))
        for axis in ("x", "y", "color"):
            value = getattr(chart, axis)
            if value is not None and value not in columns:
                what = "the panel's SQL" if sql is not None else name
                raise AnalyticsError(
                    f"{where}: panels/{i}/chart/{axis}: {value!r} is not a column of "
                    f"{what} ({', '.join(columns)})"
                )
        if chart.type in ("bar", "line") and (chart.x is None or chart.y is None):
            raise AnalyticsError(f"{where}: panels/{i}/chart: a {chart.type} chart needs x and y")
        try:
            panel_filters = Filters.of(raw.get("filters"))
        except AnalyticsError as exc:
            raise AnalyticsError(f"{where}: panels/{i}/filters: {exc}") from None
        panels.append(
            Panel(
                title=raw["title"],
                analysis=name,
                params=params,
                chart=chart,
                description=raw.get("description", ""),
                filters=panel_filters,
                sql=sql,
            )
        )
    return Dashboard(
        name=path.stem,
        title=data["title"],
        description=data.get("description", ""),
        panels=tuple(panels),
        path=path,
        filters=top_filters,
    )


def builtin_dashboards_dir() -> Path:
    """The built-in dashboards: ``tracing/_dashboards`` when installed, else ``dashboards/``."""
    package = Path(__file__).resolve().parent.parent
    installed = package / "_dashboards"
    if installed.is_dir():
        return installed
    return package.parent / "dashboards"


def load_dashboards(
    folders: Sequence[str | os.PathLike[str]] | None = None, *, builtin: bool = True
) -> dict[str, Dashboard]:
    """Every dashboard by name: the built-in ones, then each folder's (argument >
    ``$INTENTRACE_DASHBOARDS``, several separated by ``os.pathsep``); a later file with the
    same name replaces an earlier one.

    Raises:
        AnalyticsError: a file does not validate, or a folder does not exist (one line).
    """
    dirs: list[Path] = [builtin_dashboards_dir()] if builtin else []
    if folders is None:
        env = os.environ.get(INTENTRACE_DASHBOARDS, "").strip()
        folders = [p for p in env.split(os.pathsep) if p] if env else []
    for folder in folders:
        path = Path(folder).expanduser()
        if not path.is_dir():
            raise AnalyticsError(f"no dashboards folder at {path}")
        dirs.append(path)
    found: dict[str, Dashboard] = {}
    for folder in dirs:
        for file in sorted(folder.glob("*.toml")):
            dashboard = parse_dashboard(file.read_text(encoding="utf-8"), path=file)
            found[dashboard.name] = dashboard
    return found
