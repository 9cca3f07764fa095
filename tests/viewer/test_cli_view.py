"""``intentrace view`` and ``run_viewer``: clean errors, loopback by default, read-only app."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from tracing.cli import main
from tracing.cli._view import check_ledger, viewer_argv
from viewer import APP_PATH


def test_view_help() -> None:
    result = CliRunner().invoke(main, ["view", "--help"])
    assert result.exit_code == 0, result.output
    for option in ("--ledger", "--host", "--port"):
        assert option in result.output
    assert "127.0.0.1" in result.output


def test_view_missing_ledger_is_one_clean_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope.db"
    result = CliRunner().invoke(main, ["view", "--ledger", f"sqlite:///{missing}"])
    assert result.exit_code == 1
    assert result.output.startswith("Error: no ledger database at ")
    assert len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output
    assert not missing.exists()  # the viewer never creates a ledger


def test_view_bad_url_and_not_a_ledger(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["view", "--ledger", "mysql://x"])
    assert result.exit_code == 1
    assert "unsupported ledger URL" in result.output
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 100)
    result = CliRunner().invoke(main, ["view", "--ledger", str(junk)])
    assert result.exit_code == 1
    assert len(result.output.strip().splitlines()) == 1


def test_viewer_command_binds_loopback_headless(fixture_url: str) -> None:
    argv = viewer_argv()
    assert argv[:5] == [sys.executable, "-m", "streamlit", "run", str(APP_PATH)]
    flags = dict(zip(argv[5::2], argv[6::2], strict=True))
    assert flags["--server.address"] == "127.0.0.1"
    assert flags["--server.port"] == "8501"
    assert flags["--server.headless"] == "true"
    assert flags["--browser.gatherUsageStats"] == "false"
    assert flags["--runner.magicEnabled"] == "false"
    assert check_ledger(fixture_url) == fixture_url


def test_viewer_imports_no_opentelemetry_and_opens_read_only(fixture_url: str) -> None:
    # A fresh interpreter: import every viewer module, read through the data module, and
    # check that nothing imported OpenTelemetry and that the ledger connection is read-only.
    code = f"""
import sys, importlib, pkgutil, viewer, viewer._pages
for info in [*pkgutil.walk_packages(viewer.__path__, "viewer.")]:
    importlib.import_module(info.name)
import viewer.app
from tracing.ledger import open_ledger
ledger = open_ledger({fixture_url!r}, read_only=True)
assert ledger.count_sessions() > 0
try:
    ledger._query("DELETE FROM anchors")
except Exception as exc:
    print("write refused:", type(exc).__name__)
assert ledger.count_sessions() > 0
loaded = sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")
print("otel:", loaded)
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "otel: []" in out
    assert "write refused: LedgerError" in out


def test_viewer_code_has_no_write_calls() -> None:
    # The data module is the only one that talks to the ledger, and only through readers.
    writers = ("record(", "set_activity(", "next_turn(", "flush(", "read_only=False")
    for path in Path(APP_PATH).parent.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for word in writers:
            assert word not in text, (path, word)
        if path.name != "_data.py":
            assert "open_ledger" not in text, path
