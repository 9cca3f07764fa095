"""``intentrace report`` and ``intentrace sql`` with CliRunner, on a real SQLite ledger."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.analytics.conftest import call, write_all
from tracing.cli import main
from tracing.ledger import Ledger


@pytest.fixture
def url(sqlite_url: str, make_ledger: Callable[[str], Ledger]) -> str:
    ledger = make_ledger(sqlite_url)
    write_all(
        ledger,
        [
            call("c1", "read_file", "Editing the lockfile by hand", start_ms=0),
            call("c2", "shell", "Running a build", status="error", start_ms=1),
            call("c3", "read_file", "Editing the lockfile by hand", start_ms=2),
            call("c4", "shell", "Running a build", status="error", start_ms=3),
            call("c5", "grep", None, start_ms=4),
        ],
    )
    return sqlite_url


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def test_report_dashboard_formats(url: str) -> None:
    code, out = _run("report", "failures", "--ledger", url)
    assert code == 0, out
    assert out.startswith("Failure precursors\n")
    assert "Intents before failures" in out
    assert "editing the lockfile by hand" in out
    code, out = _run("report", "failures", "--ledger", url, "--format", "json")
    assert code == 0, out
    data = json.loads(out)
    assert [p["analysis"] for p in data["panels"]] == ["precursors", "precursors", "tools"]
    first = data["panels"][0]["rows"][0]
    assert first["item"] == "editing the lockfile by hand" and first["count"] == 2
    code, out = _run("report", "tool_health", "--ledger", url, "--format", "csv")
    assert code == 0, out
    block = out.split("\n\n")[0].splitlines()
    assert block[0] == "# Per tool"
    rows = list(csv.DictReader(io.StringIO("\n".join(block[1:]))))
    assert {r["tool_name"]: r["errors"] for r in rows} == {
        "read_file": "0",
        "shell": "2",
        "grep": "0",
    }


def test_report_analysis_with_params(url: str) -> None:
    code, out = _run("report", "precursors", "-p", "k=1", "-p", "by=phrase", "--ledger", url,
                     "--format", "csv")  # fmt: skip
    assert code == 0, out
    lines = out.splitlines()
    assert lines[1] == "item,count,support,lift,windows,occurrences"
    assert lines[2].startswith("editing the,2,1.0,")


def test_report_list_and_errors(url: str) -> None:
    code, out = _run("report", "--list")
    assert code == 0 and "failures" in out and "precursors" in out
    code, out = _run("report", "nope", "--ledger", url)
    assert code == 1
    assert out.startswith("Error: unknown dashboard or analysis 'nope'") and out.count("\n") == 1
    code, out = _run("report", "precursors", "-p", "k=99", "--ledger", url)
    assert code == 1 and out == "Error: precursors: parameter 'k' must be at most 32\n"
    code, out = _run("report", "failures", "--ledger", url + ".missing")
    assert code == 1 and out.startswith("Error: no ledger database at") and out.count("\n") == 1


def test_sql_on_the_ledger(url: str) -> None:
    code, out = _run("sql", "SELECT status, count(*) AS n FROM anchors GROUP BY 1 ORDER BY 1",
                     "--ledger", url, "--format", "csv")  # fmt: skip
    assert code == 0, out
    assert out == "status,n\nerror,2\nsuccess,3\n"
    code, out = _run("sql", "SELECT tool_name FROM anchors ORDER BY seq LIMIT 1", "--ledger", url)
    assert code == 0 and out.splitlines() == ["TOOL_NAME", "read_file"]


def test_sql_columnar(url: str) -> None:
    code, out = _run("sql", "SELECT count(*) FILTER (WHERE dup_sibling OR repeat) AS r, "
                     "count(*) AS n FROM calls", "--columnar", "--ledger", url, "--format", "csv")  # fmt: skip
    assert code == 0, out
    assert out == "r,n\n0,5\n"


@pytest.mark.parametrize(
    "query",
    [
        "DELETE FROM calls WHERE status = 'error'",
        "UPDATE calls SET status = 'success'",
        "CREATE TABLE mine AS SELECT * FROM calls",
        "COPY calls TO '/tmp/intentrace-copy.csv'",
        "DROP TABLE calls",
        "SELECT 1; DELETE FROM calls",
        "CHECKPOINT",
    ],
)
def test_sql_columnar_never_writes_the_shared_copy(url: str, query: str, tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    count = ["sql", "SELECT count(*) AS n FROM calls", "--columnar", "--ledger", url]
    result = CliRunner().invoke(main, ["sql", query, "--columnar", "--ledger", url], env=env)
    assert result.exit_code == 1
    out = result.output
    assert out.startswith("Error: the analytics copy ") and out.count("\n") == 1, out
    assert "Traceback" not in out
    again = CliRunner().invoke(main, [*count, "--format", "csv"], env=env)
    assert again.output == "n\n5\n"  # (and the snapshot it saved holds all five)


def test_sql_columnar_runs_reads_only_and_leaves_nothing_behind(url: str) -> None:
    from tracing.analytics import Analytics, AnalyticsError, AnalyticsOptions

    with Analytics(url, options=AnalyticsOptions(snapshot=False)) as engine:
        assert engine.query("WITH c AS (SELECT * FROM calls) SELECT count(*) FROM c").rows == [(5,)]
        assert engine.query("FROM calls SELECT count(*)").rows == [(5,)]
        assert engine.query("EXPLAIN SELECT * FROM calls").rows
        with pytest.raises(AnalyticsError, match="read-only: INSERT refused"):
            engine.query("INSERT INTO calls SELECT * FROM calls")
        assert engine.query("SELECT count(*) FROM calls").rows == [(5,)]


@pytest.mark.parametrize(
    ("query", "columnar"),
    [("SELEC 1", False), ("DELETE FROM anchors", False), ("SELECT nope FROM calls", True)],
)
def test_bad_sql_is_one_line(url: str, query: str, columnar: bool) -> None:
    args = ["sql", query, "--ledger", url] + (["--columnar"] if columnar else [])
    code, out = _run(*args)
    assert code == 1
    assert out.startswith("Error: SQL error: ") and out.count("\n") == 1
