"""``intentrace report`` (a dashboard or one analysis in the terminal) and ``intentrace sql``.

The analytics package (DuckDB) is imported when a command runs, not when the CLI starts.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Generator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click

from tracing.cli._options import ledger_option
from tracing.environment_variables import INTENTRACE_DASHBOARDS

if TYPE_CHECKING:
    from tracing.analytics import Analytics, Result


def _package():  # (its type: the module's own)
    """``tracing.analytics`` (DuckDB): imported when a command runs, with a one-line error when
    its extra is not installed."""
    try:
        # lazy: DuckDB and pyarrow (the analytics extra) load only for an analytics command
        import tracing.analytics as package
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise click.ClickException(
            f"analytics needs its extra: pip install 'intentrace[analytics]' ({exc.name} missing)"
        ) from None
    return package


@contextmanager
def _analytics(url: str | None) -> Generator[Analytics]:
    package = _package()
    try:
        engine: Analytics = package.Analytics(url)
    except package.AnalyticsError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        yield engine
    except package.AnalyticsError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        engine.close()


def readable_number(value: float) -> str:
    """A float with about four significant digits and never an exponent (``14720``,
    ``0.3333``, ``1.5``; ``1.472e+04`` reads badly in a table)."""
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = min(9, max(0, 3 - magnitude))
    text = f"{value:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return readable_number(value)
    return str(value)


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Rows as an aligned plain-text table (``-`` for NULL)."""
    body = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in body)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in body]
    if not body:
        lines.append("(no rows)")
    return "\n".join(lines)


def _parse_param(text: str) -> tuple[str, Any]:
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise click.BadParameter(f"{text!r}: write KEY=VALUE", param_hint="--param")
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    return key.strip(), value


def _plain(value: Any) -> Any:
    return list(cast(tuple[Any, ...], value)) if isinstance(value, tuple) else value


def _results_json(title: str, panels: list[tuple[str, Result]]) -> str:
    return json.dumps(
        {
            "title": title,
            "panels": [
                {
                    "title": panel_title,
                    "analysis": r.name,
                    "params": {k: _plain(v) for k, v in r.params.items()},
                    "columns": list(r.columns),
                    "rows": r.records(),
                }
                for panel_title, r in panels
            ],
        },
        ensure_ascii=False,
        indent=2,
        default=str,
    )


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "panel"


def _write_table(result: Result, fmt: str, path: Path) -> None:
    if fmt == "csv":
        path.write_text(result.to_csv(), encoding="utf-8")
    elif fmt == "json":
        path.write_text(result.to_json() + "\n", encoding="utf-8")
    else:
        result.to_parquet(path)


@click.command()
@click.argument("name", required=False)
@ledger_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json", "parquet"]),
    default="table",
    show_default=True,
    help="csv/json/parquet: one table (an analysis, or the dashboard panel --panel picks); "
    "with --output DIR a dashboard writes one file per panel. json without --panel: the whole "
    "dashboard as one document.",
)
@click.option(
    "--panel",
    type=click.IntRange(min=1),
    default=None,
    help="Only this panel of the dashboard (1 = the first).",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=True, path_type=Path),
    default=None,
    help="Write there instead of standard output: a file for one table, a folder (one file per "
    "panel) for a dashboard. parquet needs it.",
)
@click.option(
    "--param",
    "-p",
    "params",
    multiple=True,
    metavar="KEY=VALUE",
    help="Parameter (VALUE is JSON, else text); for a dashboard, of every panel that takes it.",
)
@click.option("--since", default=None, metavar="TIME", help="Calls that started at/after (ISO).")
@click.option("--until", default=None, metavar="TIME", help="Calls that started before (ISO).")
@click.option("--agent", multiple=True, help="Calls of this agent (repeat for several).")
@click.option("--tool", multiple=True, help="Calls of this tool (repeat for several).")
@click.option("--session", multiple=True, help="Calls of this session (repeat for several).")
@click.option("--status", multiple=True, help="Calls with this status (repeat for several).")
@click.option(
    "--dashboards",
    "folder",
    metavar="DIR",
    default=None,
    help=f"Folder of extra dashboards (default: ${INTENTRACE_DASHBOARDS}).",
)
@click.option("--list", "list_", is_flag=True, help="List the dashboards and analyses.")
def report(  # noqa: PLR0917 - click passes options as arguments
    name: str | None,
    ledger_url: str | None,
    fmt: str,
    panel: int | None,
    output: Path | None,
    params: tuple[str, ...],
    since: str | None,
    until: str | None,
    agent: tuple[str, ...],
    tool: tuple[str, ...],
    session: tuple[str, ...],
    status: tuple[str, ...],
    folder: str | None,
    list_: bool,
) -> None:
    """Print a dashboard (or one analysis) over the ledger, as in the viewer's Analytics page.

    NAME is a dashboard (``intentrace report --list``) or an analysis run with its defaults
    and any --param. --since/--until/--agent/--tool/--session/--status filter the calls
    counted, over any filters the dashboard file sets.
    """
    package = _package()
    ANALYSES, AnalyticsError = package.ANALYSES, package.AnalyticsError
    load_dashboards = package.load_dashboards
    try:
        dashboards = load_dashboards(None if folder is None else [folder])
    except AnalyticsError as exc:
        raise click.ClickException(str(exc)) from None
    if list_ or name is None:
        if name is None and not list_:
            raise click.UsageError("give a dashboard or analysis NAME (or --list)")
        for d in dashboards.values():
            click.echo(f"{d.name:<18} dashboard  {d.title}")
        for a in ANALYSES.values():
            click.echo(f"{a.name:<18} analysis   {a.title}")
        return
    given = dict(_parse_param(p) for p in params)
    raw_filters = {
        k: v
        for k, v in (
            ("since", since),
            ("until", until),
            ("agent", list(agent)),
            ("tool", list(tool)),
            ("session", list(session)),
            ("status", list(status)),
        )
        if v
    }
    if fmt == "parquet" and output is None:
        raise click.UsageError("--format parquet writes a file: give --output PATH")
    try:
        filters = package.Filters.of(raw_filters)
    except AnalyticsError as exc:
        raise click.ClickException(str(exc)) from None
    if name in dashboards:
        dashboard = dashboards[name]
        if panel is not None and panel > len(dashboard.panels):
            raise click.UsageError(f"{name} has {len(dashboard.panels)} panels (--panel {panel})")
        with _analytics(ledger_url) as engine:
            results = [(p.title, r) for p, r in engine.dashboard(dashboard, filters=filters,
                                                                   params=given)]  # fmt: skip
        if panel is not None:
            results = [results[panel - 1]]
        title = dashboard.title
        single = panel is not None
    elif name in ANALYSES:
        if panel is not None:
            raise click.UsageError("--panel picks a panel of a dashboard, not of an analysis")
        with _analytics(ledger_url) as engine:
            result = engine.run(name, given, filters=filters)
        results = [(result.title, result)]
        title = result.title
        single = True
    else:
        known = ", ".join([*dashboards, *ANALYSES])
        raise click.ClickException(f"unknown dashboard or analysis {name!r} (known: {known})")
    _emit(title, results, fmt, output, single=single)


def _emit(
    title: str, results: list[tuple[str, Result]], fmt: str, output: Path | None, *, single: bool
) -> None:
    if fmt == "table":
        blocks = [f"{t}\n{format_table(r.columns, r.rows)}\n" for t, r in results]
        if not single:  # an analysis (or one panel) is its own title
            blocks.insert(0, f"{title}\n")
        text = "\n".join(blocks).rstrip("\n") + "\n"
        if output is None:
            click.echo(text, nl=False)
        else:
            output.write_text(text, encoding="utf-8")
        return
    if single:
        result = results[0][1]
        if output is None:
            click.echo(result.to_json() if fmt == "json" else result.to_csv().rstrip("\n"))
        else:
            _write_table(result, fmt, output)
        return
    if output is not None:
        output.mkdir(parents=True, exist_ok=True)
        for i, (panel_title, r) in enumerate(results, start=1):
            path = output / f"{i:02d}-{_slug(panel_title)}.{fmt}"
            _write_table(r, fmt, path)
            click.echo(str(path))
        return
    if fmt == "json":
        click.echo(_results_json(title, results))
        return
    raise click.UsageError(
        f"a dashboard has {len(results)} tables: pick one with --panel N, or write one file "
        "per panel with --output DIR"
    )


@click.command()
@click.argument("query")
@ledger_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv"]),
    default="table",
    show_default=True,
)
@click.option(
    "--columnar",
    is_flag=True,
    help="Run in DuckDB over the analytics copy (table 'calls') instead of the ledger itself.",
)
def sql(query: str, ledger_url: str | None, fmt: str, columnar: bool) -> None:
    """Run one read-only SQL statement over the ledger (tables anchors, sessions, blocks).

    The ledger's own dialect (SQLite or PostgreSQL) and the documented schema (docs/ledger.md);
    with --columnar, DuckDB over the analytics copy (docs/analytics.md).
    """
    with _analytics(ledger_url) as engine:
        if columnar:
            result = engine.query(query)
            columns, rows = list(result.columns), result.rows
        else:
            columns, rows = engine.ledger_sql(query)
    if fmt == "csv":
        # lazy: DuckDB and pyarrow (the `analytics` extra) load only to analyse
        from tracing.analytics import Result

        click.echo(Result("sql", query, tuple(columns), rows).to_csv(), nl=False)
    else:
        click.echo(format_table(columns, rows))
