"""Dashboard files: every built-in one validates against the schema; bad files fail in one line."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import jsonschema
import pytest

from tracing.analytics import AnalyticsError, dashboard_schema, load_dashboards
from tracing.analytics._dashboards import builtin_dashboards_dir, parse_dashboard

BUILTIN = builtin_dashboards_dir()


def test_schema_file_is_the_generated_schema() -> None:
    on_disk = json.loads((BUILTIN / "schema.json").read_text(encoding="utf-8"))
    assert on_disk == dashboard_schema()


@pytest.mark.parametrize("path", sorted(BUILTIN.glob("*.toml")), ids=lambda p: p.stem)
def test_builtin_dashboard_validates(path: Path) -> None:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    jsonschema.validate(data, dashboard_schema())
    dashboard = parse_dashboard(path.read_text(encoding="utf-8"), path=path)
    assert dashboard.title and dashboard.description and dashboard.panels


def test_builtin_set() -> None:
    assert set(load_dashboards([])) == {
        "failures",
        "intent_quality",
        "redundant_calls",
        "tool_health",
    }


BAD = [
    ('title = "x"\n', "panels"),
    ('title = "x"\npanels = []\n', "panels"),
    ('title = "x"\n[[panels]]\ntitle = "p"\nanalysis = "nope"\n', "panels/0/analysis"),
    (
        'title = "x"\n[[panels]]\ntitle = "p"\nanalysis = "precursors"\nparams = { k = 0 }\n',
        "panels/0/params/k",
    ),
    (
        'title = "x"\n[[panels]]\ntitle = "p"\nanalysis = "precursors"\nparams = { kk = 1 }\n',
        "panels/0/params",
    ),
    (
        'title = "x"\n[[panels]]\ntitle = "p"\nanalysis = "tools"\nchart = { type = "pie" }\n',
        "panels/0/chart/type",
    ),
    (
        'title = "x"\n[[panels]]\ntitle = "p"\nanalysis = "tools"\nchart = { type = "bar", x = "lift", y = "tool_name" }\n',
        "panels/0/chart/x",
    ),
    (
        'title = "x"\n[[panels]]\ntitle = "p"\nanalysis = "tools"\nchart = { type = "bar", x = "calls" }\n',
        "needs x and y",
    ),
    (
        'title = "x"\n[[panels]]\ntitle = "p"\nanalysis = "redundancy"\nparams = { by = "tool" }\n'
        'chart = { type = "bar", x = "calls", y = "session_id" }\n',
        "not a column of redundancy",
    ),
    ("title = ", "not valid TOML"),
    (
        'title = "x"\nfilters = { tol = "a" }\n[[panels]]\ntitle = "p"\nanalysis = "tools"\n',
        "filters",
    ),
    (
        'title = "x"\n[[panels]]\ntitle = "p"\nanalysis = "tools"\nfilters = { since = "soon" }\n',
        "panels/0/filters: filter 'since': 'soon' is not an ISO 8601 time",
    ),
    (
        'title = "x"\n[[panels]]\ntitle = "p"\nanalysis = "tools"\nfilters = { status = "failed" }\n',
        "panels/0/filters: filter 'status': 'failed' is not a status",
    ),
]


@pytest.mark.parametrize(("text", "expected"), BAD)
def test_bad_dashboard_is_one_line(text: str, expected: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    with pytest.raises(AnalyticsError) as info:
        parse_dashboard(text, path=path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    assert expected in message


def test_user_folder_adds_and_replaces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "mine.toml").write_text(
        'title = "Mine"\n[[panels]]\ntitle = "All tools"\nanalysis = "tools"\n', encoding="utf-8"
    )
    (tmp_path / "failures.toml").write_text(
        'title = "My failures"\n[[panels]]\ntitle = "k=5"\nanalysis = "precursors"\n'
        "params = { k = 5 }\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("INTENTRACE_DASHBOARDS", str(tmp_path))
    found = load_dashboards()
    assert found["mine"].panels[0].analysis == "tools"
    assert found["failures"].title == "My failures"
    assert "tool_health" in found
    with pytest.raises(AnalyticsError, match="no dashboards folder"):
        load_dashboards([tmp_path / "missing"])


def test_dashboard_and_panel_filters(tmp_path: Path) -> None:
    from tracing.analytics import Filters

    text = (
        'title = "x"\nfilters = { since = "2026-01-01", tool = ["grep", "shell"] }\n'
        '[[panels]]\ntitle = "a"\nanalysis = "tools"\n'
        '[[panels]]\ntitle = "b"\nanalysis = "tools"\nfilters = { tool = "shell", agent = "sub" }\n'
    )
    d = parse_dashboard(text, path=tmp_path / "x.toml")
    assert d.filters == Filters(since=1_767_225_600_000_000_000, tool=("grep", "shell"))
    second = d.panels[1].filters.over(d.filters)
    assert second == Filters(since=d.filters.since, tool=("shell",), agent=("sub",))
    assert Filters.of({"until": "2026-01-02"}).over(second).as_dict() == {
        "since": "2026-01-01T00:00:00Z",
        "until": "2026-01-02T00:00:00Z",
        "agent": ["sub"],
        "tool": ["shell"],
    }
