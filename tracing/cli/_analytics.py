"""``intentrace report`` (a dashboard or one analysis in the terminal) and ``intentrace sql``.

The analytics package (DuckDB) is imported when a command runs, not when the CLI starts.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Generator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

import click

from tracing.cli._ledger import ledger_option
from tracing.environment_variables import INTENTRACE_DASHBOARDS

if TYPE_CHECKING:
    from tracing.analytics import Analytics, Result


def _package() -> Any:
    """``tracing.analytics`` (DuckDB): imported when a command runs, with a one-line error when
    its extra is not installed."""
    try:
        return importlib.import_module("tracing.analytics")
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise click.ClickException(
            f"analytics needs its extra: pip install 'intentrace[analytics]' ({exc.name} missing)"
        ) from None


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


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
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


@click.command()
@click.argument("name", required=False)
@ledger_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json"]),
    default="table",
    show_default=True,
    help="csv: one block per panel, each after a '# title' line.",
)
@click.option(
    "--param",
    "-p",
    "params",
    multiple=True,
    metavar="KEY=VALUE",
    help="Parameter of an analysis run by name (VALUE is JSON, else text).",
)
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
    params: tuple[str, ...],
    folder: str | None,
    list_: bool,
) -> None:
    """Print a dashboard (or one analysis) over the ledger, as in the viewer's Analytics page.

    NAME is a dashboard (``intentrace report --list``) or an analysis run with its defaults
    and any --param.
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
    if name in dashboards:
        if given:
            raise click.UsageError("--param applies to an analysis, not a dashboard")
        dashboard = dashboards[name]
        with _analytics(ledger_url) as engine:
            results = [(p.title, r) for p, r in engine.dashboard(dashboard)]
        title = dashboard.title
    elif name in ANALYSES:
        with _analytics(ledger_url) as engine:
            result = engine.run(name, given)
        results = [(result.title, result)]
        title = result.title
    else:
        known = ", ".join([*dashboards, *ANALYSES])
        raise click.ClickException(f"unknown dashboard or analysis {name!r} (known: {known})")
    if fmt == "json":
        click.echo(_results_json(title, results))
        return
    blocks: list[str] = []
    for panel_title, r in results:
        if fmt == "csv":
            blocks.append(f"# {panel_title}\n{r.to_csv()}")
        else:
            blocks.append(f"{panel_title}\n{format_table(r.columns, r.rows)}\n")
    if fmt == "table":
        click.echo(f"{title}\n")
    click.echo("\n".join(blocks).rstrip("\n"))


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
