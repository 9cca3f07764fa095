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
    assert [p["analysis"] for p in data["panels"]] == [
        "precursors", "precursors", "failure_rate", "failure_rate", "tools"
    ]  # fmt: skip
    first = data["panels"][0]["rows"][0]
    assert first["item"] == "editing the lockfile by hand" and first["count"] == 2
    code, out = _run("report", "tool_health", "--ledger", url, "--format", "csv", "--panel", "1")
    assert code == 0, out
    rows = list(csv.DictReader(io.StringIO(out)))  # one loadable table, nothing else
    assert {r["tool_name"]: r["failed"] for r in rows} == {
        "read_file": "0",
        "shell": "2",
        "grep": "0",
    }


def test_report_analysis_with_params(url: str) -> None:
    code, out = _run("report", "precursors", "-p", "k=1", "-p", "by=phrase", "--ledger", url,
                     "--format", "csv")  # fmt: skip
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == "item,count,support,lift,windows,occurrences"
    assert lines[1].startswith("editing the,2,1.0,")


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
    code, out = _run("sql", "SELECT count(*) FILTER (WHERE redundant_sibling OR repeat) AS r, "
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


def test_report_filters_and_dashboard_params(url: str) -> None:
    code, out = _run("report", "tools", "--ledger", url, "--format", "json", "--tool", "shell")
    assert code == 0, out
    assert [r["tool_name"] for r in json.loads(out)] == ["shell"]
    code, out = _run("report", "tools", "--ledger", url, "--format", "json",
                     "--since", "2026-01-01T00:00:00.002Z", "--status", "success")  # fmt: skip
    assert code == 0, out
    assert {r["tool_name"]: r["calls"] for r in json.loads(out)} == {"read_file": 1, "grep": 1}
    code, out = _run("report", "failures", "--ledger", url, "--format", "json", "-p", "k=1",
                     "--session", "s1")  # fmt: skip
    assert code == 0, out
    panels = json.loads(out)["panels"]
    assert [p["params"]["k"] for p in panels[:2]] == [1, 1]  # every panel that takes k
    code, out = _run("report", "failures", "--ledger", url, "-p", "min_info=2")
    assert code == 1 and out == "Error: dashboard failures: no panel takes parameter 'min_info'\n"
    code, out = _run("report", "tools", "--ledger", url, "--since", "yesterday")
    assert code == 1 and out.startswith("Error: filter 'since': 'yesterday' is not an ISO 8601")
    code, out = _run("report", "tools", "--ledger", url, "--status", "failed")
    assert code == 1 and out.startswith("Error: filter 'status': 'failed' is not a status")


def test_report_outputs_one_table_per_file(url: str, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    code, out = _run("report", "tool_health", "--ledger", url, "--format", "csv")
    assert code == 2 and "pick one with --panel N" in out
    code, out = _run("report", "tool_health", "--ledger", url, "--format", "csv",
                     "-o", str(tmp_path / "out"))  # fmt: skip
    assert code == 0, out
    files = sorted((tmp_path / "out").iterdir())
    assert [f.name for f in files] == [
        "01-per-tool.csv", "02-p95-duration-per-tool-ms.csv", "03-label-coverage-per-tool.csv",
        "04-slowest-failed-calls.csv",
    ]  # fmt: skip
    assert files[0].read_text().startswith("tool_name,calls,")
    code, out = _run("report", "tools", "--ledger", url, "--format", "parquet")
    assert code == 2 and "--output" in out
    code, out = _run("report", "tools", "--ledger", url, "--format", "parquet",
                     "-o", str(tmp_path / "t.parquet"))  # fmt: skip
    assert code == 0, out
    table = pq.read_table(tmp_path / "t.parquet")
    assert table.column_names[:2] == ["tool_name", "calls"] and table.num_rows == 3


def test_report_table_title_once(url: str) -> None:
    code, out = _run("report", "tools", "--ledger", url)
    assert code == 0, out
    assert out.count("Per tool") == 1


@pytest.mark.parametrize(
    ("value", "text"),
    [(14720.3, "14720"), (1.0, "1"), (0.5, "0.5"), (1 / 3, "0.3333"), (2 / 3 * 100, "66.67"),
     (0.000123456, "0.0001235"), (-3.25, "-3.25"), (1e12 + 0.4, "1000000000000"), (0.0, "0")],
)  # fmt: skip
def test_numbers_are_readable(value: float, text: str) -> None:
    from tracing.cli._analytics import readable_number

    assert readable_number(value) == text
