"""The ``intentrace`` command line (click group). Each command lives in its own module.

Domain errors become one-line messages (``click.ClickException``), never tracebacks.
"""

from __future__ import annotations

import click

from tracing import __version__
from tracing.cli._analytics import report, sql
from tracing.cli._collect import collect, import_
from tracing.cli._demo import demo
from tracing.cli._doctor import doctor
from tracing.cli._ledger import sessions, summary
from tracing.cli._view import run_viewer, view
from tracing.cli._watch import watch

__all__ = ["main", "run_viewer"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="intentrace")
def main() -> None:
    """intentrace: tool calls named by what they are for.

    Record agent tool calls in the anchor ledger, read them as a story in the viewer,
    and ask the ledger which intents precede failures.
    """


for _command in (demo, doctor, collect, import_, sessions, summary, view, report, sql, watch):
    main.add_command(_command)
