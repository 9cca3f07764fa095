"""``intentrace sessions`` and ``intentrace summary``: read the ledger from the terminal."""

from __future__ import annotations

import json
from collections.abc import Generator
from contextlib import contextmanager
from datetime import datetime

import click

from tracing.cli._options import ledger_option
from tracing.ledger import Ledger, LedgerError, SessionInfo, dropped_notes, open_ledger
from tracing.status import STATUSES


@contextmanager
def reading(url: str | None) -> Generator[Ledger]:
    """A read-only ledger; every ledger error becomes a one-line click error."""
    try:
        ledger = open_ledger(url, read_only=True)
    except LedgerError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        yield ledger
    except LedgerError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        ledger.close()


def _when(ns: int | None) -> str:
    if ns is None:
        return "-"
    return datetime.fromtimestamp(ns / 1e9).strftime("%Y-%m-%d %H:%M:%S")


def _table(rows: list[SessionInfo]) -> str:
    shed = any(r["dropped"] for r in rows)  # (a column only when some calls were shed)
    headers = ["SESSION", "CALLS", "ERRORS", "LIVE", "TURN", "AGENTS", "TOOLS", "LAST ACTIVITY"]
    if shed:
        headers.insert(4, "SHED")
    body: list[list[str]] = []
    for r in rows:
        row = [
            r["session_id"] or "(none)",
            str(r["calls"]),
            str(r["errors"]),
            str(r["in_flight"]),
            str(r["last_turn"] or "-"),
            ",".join(r["agents"]) or "-",
            _short(",".join(r["tools"]), 40),
            _when(r["last_ns"]),
        ]
        if shed:
            row.insert(4, str(r["dropped"]))
        body.append(row)
    widths = [max(len(h), *(len(row[i]) for row in body)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in body
    ]
    return "\n".join(lines)


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@click.command()
@ledger_option
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--offset", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--agent", default=None, help="Only sessions with calls by this agent.")
@click.option("--tool", default=None, help="Only sessions that used this tool.")
@click.option(
    "--status",
    type=click.Choice([s.value for s in STATUSES]),
    default=None,
    help="Only sessions with a call in this status.",
)
@click.option("--search", default=None, help="Only sessions with a call whose intent, "
              "outcome or label contains this text.")  # fmt: skip
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
def sessions(  # noqa: PLR0917 - click passes options as arguments
    ledger_url: str | None,
    limit: int,
    offset: int,
    agent: str | None,
    tool: str | None,
    status: str | None,
    search: str | None,
    fmt: str,
) -> None:
    """List the ledger's sessions, most recent activity first."""
    with reading(ledger_url) as ledger:
        rows = ledger.sessions(
            limit=limit, offset=offset, agent=agent, tool=tool, status=status, search=search
        )
        total = ledger.count_sessions(agent=agent, tool=tool, status=status, search=search)
        notes = dropped_notes(ledger.dropped())
    for note in notes:  # (stderr: the table and the JSON stay machine-readable)
        click.echo(f"warning: {note}", err=True)
    if fmt == "json":
        click.echo(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    if not rows:
        click.echo("no sessions" + (" match" if any((agent, tool, status, search)) else ""))
        return
    click.echo(_table(rows))
    if total > offset + len(rows):
        click.echo(f"({offset + 1}-{offset + len(rows)} of {total}; --offset for more)")


@click.command()
@ledger_option
@click.argument("session_id")
@click.option("--turn", type=click.IntRange(min=1), default=None, help="Only this turn.")
@click.option(
    "--max-chars", type=click.IntRange(min=20), default=4000, show_default=True,
    help="Longest summary; the most recent calls are kept.",
)  # fmt: skip
def summary(ledger_url: str | None, session_id: str, turn: int | None, max_chars: int) -> None:
    """Print a compact timeline of SESSION_ID's settled calls (for a summarizer prompt):
    intent -> outcome, status and error per call, activity labels over their blocks."""
    with reading(ledger_url) as ledger:
        if ledger.session(session_id) is None:
            raise click.ClickException(f"no session {session_id!r} in the ledger {ledger.url}")
        click.echo(ledger.summary(session_id, turn=turn, max_chars=max_chars))
        for note in dropped_notes(ledger.dropped(session_id), session=True):
            click.echo(f"warning: {note}", err=True)
