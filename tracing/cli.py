"""The ``intentrace`` command line (click group). Each command lives in its own module.

Domain errors become one-line messages (``click.ClickException``), never tracebacks.
"""

from __future__ import annotations

import importlib

import click

from tracing import __version__

# (module, attribute) of each sub-command; a module owns its command(s).
_COMMANDS: tuple[tuple[str, str], ...] = (
    ("tracing._cli_demo", "demo"),
    ("tracing._cli_collect", "collect"),
    ("tracing._cli_collect", "import_"),
    ("tracing._cli_ledger", "sessions"),
    ("tracing._cli_ledger", "summary"),
    ("tracing._cli_view", "view"),
    ("tracing._cli_analytics", "report"),
    ("tracing._cli_analytics", "sql"),
    ("tracing._cli_watch", "watch"),
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="intentrace")
def main() -> None:
    """intentrace: tool calls named by what they are for.

    Record agent tool calls in the anchor ledger, read them as a story in the viewer,
    and ask the ledger which intents precede failures.
    """


def _register() -> None:
    for module_name, attr in _COMMANDS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:  # a command whose module is not written yet
            if exc.name != module_name:
                raise
            continue
        command = getattr(module, attr, None)
        if isinstance(command, click.Command):
            main.add_command(command)


_register()
