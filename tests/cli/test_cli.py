"""The ``intentrace`` command group: --version, and --help on every registered command."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from tracing import __version__
from tracing.cli import main


def test_version() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"intentrace, version {__version__}"


def test_group_help_lists_commands() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0, result.output
    assert "tool calls named by what they are for" in result.output
    for name in main.commands:
        assert name in result.output


@pytest.mark.parametrize("name", sorted(main.commands) or ["<none>"])
def test_every_command_has_help(name: str) -> None:
    if name == "<none>":
        pytest.skip("no sub-command registered yet")
    command = main.commands[name]
    assert isinstance(command, click.Command)
    result = CliRunner().invoke(main, [name, "--help"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Usage: ")
