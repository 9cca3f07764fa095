"""Hand-built ledgers with answers worked out by hand, on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.analytics.conftest import all_anchors, call, write_all
from tests.analytics.reference import reference
from tracing.analytics import Analytics
from tracing.ledger import Ledger

OAUTH = "Searching for OAuth handling"
ROUTER = "Reading the callback router"
LOCK = "Editing the lockfile by hand"


def _story() -> list:
    return [
        call("c1", "search_code", OAUTH, batch="b1", start_ms=0),
        call("c2", "read_file", ROUTER, batch="b1", start_ms=1),
        call("c3", "edit_file", LOCK, batch="b2", start_ms=2),
        call("c4", "run_tests", "Running the tests", status="error", batch="b3", start_ms=3),
        call("c5", "read_file", ROUTER, batch="b4", start_ms=4),
        call("c6", "edit_file", LOCK, batch="b5", start_ms=5),
        call("c7", "shell", "Running a build", status="error", batch="b6", start_ms=6),
    ]


def test_precursors_known(
    store_url: str,
    make_ledger: Callable[[str], Ledger],
    make_analytics: Callable[..., Analytics],
) -> None:
    ledger = make_ledger(store_url)
    write_all(ledger, _story())
    engine = make_analytics(store_url)
    result = engine.run("precursors", {"k": 2, "min_support": 0.0})
    # 7 settled calls, failures c4 and c7; windows of 2: c3{oauth,router} c4{router,lock}
    # c5{lock,tests} c6{tests,router} c7{router,lock}: router in 4 windows, lock in 3.
    assert result.columns == ("item", "count", "support", "lift", "windows", "occurrences")
    assert result.rows == [
        ("editing the lockfile by hand", 2, 1.0, (2 * 7) / (2 * 3), 3, 2),
        ("reading the callback router", 2, 1.0, (2 * 7) / (2 * 4), 4, 2),
    ]
    # k=1: only the call right before each failure (c3 before c4, c6 before c7)
    assert [r[:2] for r in engine.run("precursors", {"k": 1, "min_support": 0.0}).rows] == [
        ("editing the lockfile by hand", 2)
    ]
    # min_support keeps rare items out: nothing reaches 100% of failures at k=1 except lock
    assert engine.run("precursors", {"k": 2, "min_support": 1.0}).rows == result.rows
    phrases = engine.run("precursors", {"k": 2, "min_support": 0.0, "by": "phrase"})
    assert {r[0] for r in phrases.rows} == {"editing the", "reading the"}
    assert result.rows == reference("precursors", all_anchors(ledger), {"k": 2, "min_support": 0})


def test_vague_intents_known(
    store_url: str,
    make_ledger: Callable[[str], Ledger],
    make_analytics: Callable[..., Analytics],
) -> None:
    """Planted vague intents and their near-misses in four languages; no English word list."""
    ledger = make_ledger(store_url)
    write_all(
        ledger,
        [
            call("v1", "read_file", None),  # missing
            call("v2", "read_file", "Read"),  # short: 4 letters of information
            call("v3", "read_file", "読む"),  # short: a Han character (3) and a kana (2)
            # one word to a word counter, 29 letters of information: specific
            call("v4", "read_file", "設定ファイルを読んでいます"),
            # every character of it is in another of the tool's intents: generic
            call("v5", "read_file", "ファイルを読んでいます"),
            call("v6", "read_file", "Running read_file"),  # names the tool, adds 7 letters
            call("v7", "read_file", "Reading the file"),  # generic: the others say it too
            call("v8", "read_file", "Reading the config file"),  # 'config': specific
            call("v9", "read_file", "Reading the lockfile"),
            call("v10", "read_file", "Lese die Datei"),  # generic (German)
            call("v11", "read_file", "Lese die Datei setup.cfg"),
            # reused in the session for two different arguments
            call("v12", "read_file", "Reading the router", args={"path": "a.py"}),
            call("v13", "read_file", "reading the ROUTER", args={"path": "b.py"}),
            call("v14", "read_file", "Reading a secret", hidden=True),  # not counted
            call("v15", "grep", "Grepping TODOs"),  # two words, 13 letters: specific
        ],
    )
    engine = make_analytics(store_url)
    params = {"min_calls": 1, "common_min": 2}
    per_intent = engine.run("vague_intents", {**params, "by": "intent"})
    assert per_intent.columns == ("tool_name", "intent", "calls", "information", "reason")
    reasons = {r[1]: r[4] for r in per_intent.rows}
    assert reasons == {
        "grepping todos": None,
        None: "missing",
        "read": "short",
        "読む": "short",
        "設定ファイルを読んでいます": None,
        "ファイルを読んでいます": "generic",
        "running read file": "names_tool",
        "reading the file": "generic",
        "reading the config file": None,
        "reading the lockfile": None,
        "lese die datei": "generic",
        "lese die datei setup cfg": None,
        "reading the router": "reused",
    }
    info = {r[1]: r[3] for r in per_intent.rows}
    assert (info["読む"], info["設定ファイルを読んでいます"], info["grepping todos"]) == (5, 29, 13)
    result = engine.run("vague_intents", params)
    assert result.records() == [
        {
            "tool_name": "read_file",
            "calls": 13,
            "missing": 1,
            "short": 2,
            "names_tool": 1,
            "generic": 3,
            "reused": 2,
            "vague": 9,
            "vague_share": 9 / 13,
        },
        {
            "tool_name": "grep",
            "calls": 1,
            "missing": 0,
            "short": 0,
            "names_tool": 0,
            "generic": 0,
            "reused": 0,
            "vague": 0,
            "vague_share": 0.0,
        },
    ]
    # tokens need 3 intents to be common by default: nothing here is generic then
    # by default a token must be in 3 of the tool's intents to be common: of the generic
    # ones, only 'reading', 'the' and 'file' are
    by_default = engine.run("vague_intents", {"min_calls": 1, "by": "intent"}).rows
    assert [r[1] for r in by_default if r[4] == "generic"] == ["reading the file"]
    anchors = all_anchors(ledger)
    assert per_intent.rows == reference("vague_intents", anchors, {**params, "by": "intent"})
    assert result.rows == reference("vague_intents", anchors, params)


def test_redundancy_known(
    store_url: str,
    make_ledger: Callable[[str], Ledger],
    make_analytics: Callable[..., Analytics],
) -> None:
    """Redundant siblings are one batch's calls of one tool with equivalent arguments; repeats
    (an earlier batch) are apart; planted patterns and their near-misses."""
    ledger = make_ledger(store_url)
    write_all(
        ledger,
        [
            # same args in other words (and key order): a redundant sibling; the same intent
            # on another tool is not
            call("r1", "read_file", "Reading a.py", batch="bA", args={"path": "a.py", "n": 1}),
            call(
                "r2",
                "read_file",
                "Opening the a module",
                batch="bA",
                args='{ "n" : 1, "path": "a.py" }',
            ),
            call("r3", "grep", "Reading a.py", batch="bA", args={"path": "a.py", "n": 1}),
            # the same intent for different args in one batch: not redundant
            call("r4", "read_file", "Reading a.py", batch="bB", args={"path": "b.py"}),
            call("r5", "read_file", "Reading a.py", batch="bB", args={"path": "c.py"}),
            call("r6", "edit_file", "Editing a.py", batch="bC", args={"path": "a.py"}),
            # a re-read after the edit: a repeat (an earlier batch), not a redundant sibling
            call("r7", "read_file", "Re-reading a.py", batch="bD", args={"path": "a.py", "n": 1}),
            # the same grep after it failed is a retry, not a repeat
            call("r8", "grep", "Looking again", batch="bE", args={"q": "y"}, status="error"),
            call("r9", "grep", "Looking again", batch="bF", args={"q": "y"}),
            # other session: the same args are not a repeat across sessions
            call(
                "r10",
                "read_file",
                "Reading a.py",
                session="s2",
                batch="bG",
                args={"path": "a.py", "n": 1},
            ),
        ],
    )
    engine = make_analytics(store_url)
    by_tool = engine.run("redundancy", {"by": "tool"})
    assert by_tool.columns == (
        "tool_name", "calls", "sibling_batches", "redundant_batches", "redundant_batch_rate",
        "redundant_siblings", "repeats", "repeat_rate",
    )  # fmt: skip
    assert by_tool.rows == [
        ("read_file", 6, 2, 1, 0.5, 1, 1, 1 / 6),
        ("grep", 3, 0, 0, None, 0, 0, 0.0),
        ("edit_file", 1, 0, 0, None, 0, 0, 0.0),
    ]
    by_session = engine.run("redundancy", {"by": "session"}).rows
    assert by_session == [
        ("s1", 9, 2, 1, 0.5, 1, 1, 1 / 9),
        ("s2", 1, 0, 0, None, 0, 0, 0.0),
    ]
    anchors = all_anchors(ledger)
    assert by_tool.rows == reference("redundancy", anchors, {"by": "tool"})
    # a redundant or repeated call (they all start at the same time here)
    assert engine.examples(by_tool)[0] in {("s1", "r2"), ("s1", "r7")}


def _precedes_story() -> list:
    """Turn 1 of the main agent: a lockfile edit, then a step of two calls (the changelog read,
    then the failing test run); a subagent searches in between; turn 2 starts with a failure."""
    return [
        call("m1", "edit_file", LOCK, agent="main", turn=1, batch="b1", start_ms=0),
        call(
            "x1",
            "web_search",
            "Searching the web for docs",
            agent="sub",
            turn=1,
            batch="x",
            start_ms=1,
        ),
        call(
            "m3", "read_file", "Reading the changelog", agent="main", turn=1, batch="b2", start_ms=2
        ),
        call(
            "m2",
            "run_tests",
            "Running the tests",
            status="error",
            agent="main",
            turn=1,
            batch="b2",
            start_ms=3,
        ),
        call(
            "n1",
            "run_tests",
            "Running the tests",
            status="error",
            agent="main",
            turn=2,
            batch="b3",
            start_ms=4,
        ),
    ]


@pytest.mark.parametrize(
    ("options", "items"),
    [
        # the same agent and turn, before the failing call's step: the lockfile edit only
        ({}, {LOCK.lower(): 1}),
        # its sibling, read just before it in the same step, when asked for
        ({"include_siblings": True}, {"reading the changelog": 1}),
        # the subagent's search, between the two steps, across agents
        ({"across_agents": True}, {"searching the web for docs": 1}),
        # turn 2's first failure has a window only across turns: turn 1's failing call
        (
            {"across_turns": True},
            {LOCK.lower(): 1, "running the tests": 1},
        ),
    ],
)
def test_precedes_scope(
    options: dict,
    items: dict,
    store_url: str,
    make_ledger: Callable[[str], Ledger],
    make_analytics: Callable[..., Analytics],
) -> None:
    ledger = make_ledger(store_url)
    write_all(ledger, _precedes_story())
    engine = make_analytics(store_url)
    params = {"k": 1, "min_support": 0.0, **options}
    result = engine.run("precursors", params)
    assert {r[0]: r[1] for r in result.rows} == items
    assert result.rows == reference("precursors", all_anchors(ledger), params)


def test_precedes_k_counts_calls_before_the_step(
    store_url: str,
    make_ledger: Callable[[str], Ledger],
    make_analytics: Callable[..., Analytics],
) -> None:
    """k = 2 reaches two calls before the failing step (never into the step itself), and an
    intent twice in one window counts once."""
    ledger = make_ledger(store_url)
    write_all(
        ledger,
        [
            call("a", "read_file", ROUTER, batch="b1", start_ms=0),
            call("b", "read_file", ROUTER, batch="b2", start_ms=1),
            call("c", "grep", OAUTH, batch="b3", start_ms=2),
            call("d", "edit_file", LOCK, batch="b4", start_ms=3),
            call("e", "shell", "Running a build", status="error", batch="b4", start_ms=4),
        ],
    )
    engine = make_analytics(store_url)
    result = engine.run("precursors", {"k": 2, "min_support": 0.0})
    assert {r[0]: r[1] for r in result.rows} == {ROUTER.lower(): 1, OAUTH.lower(): 1}
    # the windows of the settled calls: c {router}, d {router, oauth}, e {router, oauth};
    # b {router}: router is in 4 windows (once each)
    assert {r[0]: r[4] for r in result.rows} == {ROUTER.lower(): 4, OAUTH.lower(): 2}
    wide = engine.run("precursors", {"k": 2, "min_support": 0.0, "include_siblings": True})
    assert {r[0]: r[1] for r in wide.rows} == {OAUTH.lower(): 1, LOCK.lower(): 1}


def test_tools_and_over_time_known(
    store_url: str,
    make_ledger: Callable[[str], Ledger],
    make_analytics: Callable[..., Analytics],
) -> None:
    ledger = make_ledger(store_url)
    day = 86_400_000
    write_all(
        ledger,
        [
            call("t1", "read_file", "Reading a", duration_ms=10, start_ms=0),
            call("t2", "read_file", "Reading bb", duration_ms=40, start_ms=1),
            call("t3", "read_file", None, duration_ms=30, start_ms=2, status="error"),
            call("t4", "read_file", "Reading the long file", duration_ms=20, start_ms=day),
            call("t5", "read_file", "Reading live", status="in_flight", start_ms=day + 1),
            call("t6", "grep", "Secret", hidden=True, duration_ms=5, start_ms=day + 2),
        ],
    )
    engine = make_analytics(store_url)
    tools = engine.run("tools").records()
    assert tools == [
        {
            "tool_name": "read_file",
            "calls": 5,
            "settled": 4,
            "failed": 1,
            "failure_rate": 0.25,
            "abandoned": 0,
            "p50_ms": 20.0,  # nearest rank: 2nd of 10, 20, 30, 40
            "p95_ms": 40.0,
            "labelled": 4,
            "label_coverage": 0.8,
        },
        {
            "tool_name": "grep",
            "calls": 1,
            "settled": 1,
            "failed": 0,
            "failure_rate": 0.0,
            "abandoned": 0,
            "p50_ms": 5.0,
            "p95_ms": 5.0,
            "labelled": 0,
            "label_coverage": None,  # its only intent was hidden
        },
    ]
    assert [r["tool_name"] for r in engine.run("tools", {"min_calls": 2}).records()] == [
        "read_file"
    ]
    days = engine.run("over_time", {"bucket": "day"}).records()
    assert days == [
        {
            "bucket": "2026-01-01",
            "calls": 3,
            "labelled": 2,
            "label_coverage": 2 / 3,
            "mean_intent_chars": (9 + 10) / 2,
            "mean_intent_info": (8 + 9) / 2,  # "reading a", "reading bb"
        },
        {
            "bucket": "2026-01-02",
            "calls": 2,
            "labelled": 2,
            "label_coverage": 1.0,
            "mean_intent_chars": (21 + 12) / 2,
            "mean_intent_info": (18 + 11) / 2,  # spaces carry nothing
        },
    ]
    weeks = engine.run("over_time", {"bucket": "week"}).rows
    assert [(r[0], r[1]) for r in weeks] == [("2025-12-29", 5)]  # the Monday before


def test_over_time_length_holds_across_scripts(
    store_url: str,
    make_ledger: Callable[[str], Ledger],
    make_analytics: Callable[..., Analytics],
) -> None:
    """An intent's length is its information (docs/analytics.md's worked example): a Japanese
    intent of one "word" is as long as the English one saying the same, not a quarter of it;
    a short English intent stays short whatever its word count."""
    ledger = make_ledger(store_url)
    day = 86_400_000
    write_all(
        ledger,
        [
            call("e", "read_file", "Reading the config file", start_ms=0),  # 4 words, 20
            call("j", "read_file", "設定ファイルを読んでいます", start_ms=1),  # 1 word, 29
            call("z", "read_file", "读取配置文件", start_ms=day),  # 1 word, 6 Han: 18
            call("s", "read_file", "Do it", start_ms=day + 1),  # 2 words, 4
        ],
    )
    engine = make_analytics(store_url)
    rows = engine.run("over_time", {"bucket": "day"}).records()
    assert [(r["bucket"], r["mean_intent_info"]) for r in rows] == [
        ("2026-01-01", (20 + 29) / 2),
        ("2026-01-02", (18 + 4) / 2),
    ]


def test_unknown_analysis_and_bad_params(sqlite_url: str, make_ledger, make_analytics) -> None:
    make_ledger(sqlite_url).flush()
    engine = make_analytics(sqlite_url)
    from tracing.analytics import AnalyticsError

    with pytest.raises(AnalyticsError, match="unknown analysis 'nope'"):
        engine.run("nope")
    with pytest.raises(AnalyticsError, match="'k' must be at most 32"):
        engine.run("precursors", {"k": 33})
    with pytest.raises(AnalyticsError, match="unknown parameter 'kk'"):
        engine.run("precursors", {"kk": 3})
    with pytest.raises(AnalyticsError, match="must be one of hour, day, week"):
        engine.run("over_time", {"bucket": "year"})
    assert engine.run("precursors").rows == []  # an empty ledger has no answers, no errors


def test_failure_rate_known(
    store_url: str,
    make_ledger: Callable[[str], Ledger],
    make_analytics: Callable[..., Analytics],
) -> None:
    """One definition of failed (error + cancelled) over settled (success, error, cancelled);
    abandoned calls apart; a bad day stands out; per agent."""
    ledger = make_ledger(store_url)
    day = 86_400_000
    writes = [call(f"ok{i}", "grep", "Looking", start_ms=i, agent="main") for i in range(9)]
    writes += [
        call("e1", "grep", "Looking", status="error", start_ms=20, agent="main"),
        call("d2a", "shell", "Building", status="error", start_ms=day, agent="sub"),
        call("d2b", "shell", "Building", status="cancelled", start_ms=day + 1, agent="sub"),
        call("d2c", "shell", "Building", start_ms=day + 2, agent="sub"),
        call("d2d", "shell", "Building", status="abandoned", start_ms=day + 3, agent="sub"),
        call("d2e", "shell", "Building", status="in_flight", start_ms=day + 4),
    ]
    write_all(ledger, writes)
    engine = make_analytics(store_url)
    days = engine.run("failure_rate", {"bucket": "day"}).rows
    assert days == [("2026-01-01", 10, 10, 1, 0.1, 0), ("2026-01-02", 5, 3, 2, 2 / 3, 1)]
    agents = engine.run("failure_rate", {"bucket": "all", "by": "agent"}).rows
    assert agents == [
        ("main", 10, 10, 1, 0.1, 0),
        ("sub", 4, 3, 2, 2 / 3, 1),
        (None, 1, 0, 0, None, 0),
    ]
    tools = {r["tool_name"]: r for r in engine.run("tools").records()}
    assert (tools["shell"]["failed"], tools["shell"]["settled"], tools["shell"]["abandoned"]) == (
        2,
        3,
        1,
    )
    hours = engine.run("failure_rate", {"bucket": "hour", "by": "tool"}, filters={"agent": "sub"})
    assert hours.rows == [("2026-01-02 00:00", "shell", 4, 3, 2, 2 / 3, 1)]
    assert hours.columns == ("bucket", "tool_name", *hours.columns[2:])


@pytest.mark.parametrize(
    ("intent", "normalized"),
    [
        ("Reading C# docs", "reading c# docs"),
        ("Reading C docs", "reading c docs"),  # a near miss: never the same as C#
        ("Fixing issue #42", "fixing issue ##"),
        ("Reading src/app_2.py", "reading src app # py"),
        ("Lesen: Straße — ﬁle", "lesen strasse file"),
        ("  !!  ", None),
    ],
)
def test_normalized_intent_keeps_hash(intent: str, normalized: str | None) -> None:
    """The docs' rule for '#' (docs/analytics.md, normalized intent) is the code's."""
    from tracing.analytics._definitions import normalize_intent

    assert normalize_intent(intent) == normalized


def test_copy_has_turn_parent_raw_intent_and_error(
    store_url: str,
    make_ledger: Callable[[str], Ledger],
    make_analytics: Callable[..., Analytics],
) -> None:
    ledger = make_ledger(store_url)
    write_all(
        ledger,
        [
            call("p1", "spawn", "Asking a subagent", turn=2, agent="main"),
            call(
                "k1",
                "grep",
                "Looking for TODOs",
                turn=2,
                agent="sub",
                parent="p1",
                status="error",
                error="grep: bad regex",
            ),
            call("h1", "grep", "Secret", hidden=True, turn=3),
        ],
    )
    engine = make_analytics(store_url)
    rows = engine.query(
        "SELECT tool_call_id, turn, parent_call_id, agent_id, intent, error FROM calls ORDER BY 1"
    ).rows
    assert rows == [
        ("h1", 3, None, None, None, None),
        ("k1", 2, "p1", "sub", "Looking for TODOs", "grep: bad regex"),
        ("p1", 2, None, "main", "Asking a subagent", None),
    ]


def test_examples_drill_down_to_the_calls(
    sqlite_url: str,
    make_ledger: Callable[[str], Ledger],
    make_analytics: Callable[..., Analytics],
) -> None:
    ledger = make_ledger(sqlite_url)
    write_all(
        ledger,
        [
            call("a", "grep", "Looking around", start_ms=0, session="s1"),
            call("b", "grep", "Looking around", start_ms=1, session="s1", status="error"),
            call("c", "grep", "Looking around", start_ms=2, session="s2"),
            call("d", "shell", "Building it", start_ms=3, session="s2", agent="sub"),
        ],
    )
    engine = make_analytics(sqlite_url)
    tools = engine.run("tools")
    assert engine.examples(tools) == [("s1", "b"), ("s2", "d")]  # the failed grep call first
    only_s2 = engine.run("tools", filters={"session": "s2"})
    assert engine.examples(only_s2) == [("s2", "c"), ("s2", "d")]  # within the filters
    agents = engine.run("failure_rate", {"bucket": "day", "by": "agent"})
    assert engine.examples(agents) == [("s2", "d"), ("s1", "b")]  # rows: sub, then no agent
    sessions = engine.run("redundancy", {"by": "session"})
    assert engine.examples(sessions) == [("s1", None), ("s2", None)]
    # a row of every call (no time bucket, no dimension) opens the latest failed call
    whole = engine.run("failure_rate", {"bucket": "all"})
    assert engine.examples(whole) == [("s1", "b")]
    # every row of every analysis, in each of its shapes, opens something
    shapes: list[tuple[str, dict[str, Any]]] = [
        ("precursors", {"k": 1, "min_support": 0.0}),
        ("precursors", {"k": 1, "min_support": 0.0, "by": "phrase"}),
        ("vague_intents", {"min_calls": 1}),
        ("vague_intents", {"min_calls": 1, "by": "intent"}),
        ("redundancy", {"by": "tool"}),
        ("redundancy", {"by": "session"}),
        ("tools", {}),
        *(("over_time", {"bucket": b}) for b in ("hour", "day", "week")),
        *(
            ("failure_rate", {"bucket": b, "by": d})
            for b in ("hour", "day", "week", "all")
            for d in ("none", "agent", "tool")
        ),
    ]
    for name, params in shapes:
        result = engine.run(name, params)
        assert result.rows, (name, params)
        assert None not in engine.examples(result), (name, params)


def test_precedes_with_a_wide_step_is_exact(
    sqlite_url: str,
    make_ledger: Callable[[str], Ledger],
    make_analytics: Callable[..., Analytics],
) -> None:
    """A model step of 9 settled calls is beyond the masks' counts (7): the windows are counted
    by the join, with the same answers as the reference."""
    ledger = make_ledger(sqlite_url)
    writes = [call("a", "edit_file", LOCK, batch="b0", start_ms=0)]
    writes += [
        call(
            f"w{i}",
            "grep",
            f"Looking for item {i}",
            batch="b1",
            start_ms=1 + i,
            status="error" if i % 2 else "success",
        )
        for i in range(9)
    ]
    write_all(ledger, writes)
    engine = make_analytics(sqlite_url)
    params = {"k": 2, "min_support": 0.0}
    result = engine.run("precursors", params)
    assert {r[0]: r[1] for r in result.rows} == {LOCK.lower(): 4}  # every failure of the step
    assert result.rows == reference("precursors", all_anchors(ledger), params)


def test_templated_intents_that_name_things_are_not_generic(
    store_url: str,
    make_ledger: Callable[[str], Ledger],
    make_analytics: Callable[..., Analytics],
) -> None:
    """A template that repeats (`Reading file src/a.py`, `src/b.py`, ...: every word of it
    common, each file name a letter) is specific when its slot names a thing; near-misses
    without a name stay generic: the template with a full stop, a number, a demonstrative."""
    ledger = make_ledger(store_url)
    files = ["a", "b", "c", "d"]
    write_all(
        ledger,
        [
            *(call(f"t{f}", "read_file", f"Reading file src/{f}.py") for f in files),
            *(call(f"j{f}", "read_file", f"src/{f}.pyを読んでいます") for f in files),
            *(call(f"z{f}", "read_file", f"读取文件src/{f}.py") for f in files),
            call("n1", "read_file", "Reading file src."),  # a full stop names nothing
            call("n2", "read_file", "Reading file 3.12"),  # a number is not a name
            call("n3", "read_file", "Reading this file"),
            call("n4", "read_file", "Reading the file"),
            call("n5", "read_file", "Reading file src/a.py"),  # the same intent again
            call("n6", "read_file", "読んでいます"),  # 13: nothing beyond the others
            call("n7", "read_file", "读取文件"),  # 12: not short, nothing beyond the others
        ],
    )
    engine = make_analytics(store_url)
    params = {"min_calls": 1, "by": "intent"}
    reasons = {r[1]: r[4] for r in engine.run("vague_intents", params).rows}
    for f in files:
        assert reasons[f"reading file src {f} py"] is None
        assert reasons[f"src {f} pyを読んでいます"] is None
        assert reasons[f"读取文件src {f} py"] is None
    assert reasons["reading file src"] == "generic"
    assert reasons["reading file # #"] == "generic"
    assert reasons["reading this file"] == "generic"
    assert reasons["reading the file"] == "generic"
    assert reasons["読んでいます"] == "generic"
    assert reasons["读取文件"] == "generic"
    assert engine.run("vague_intents", params).rows == reference(
        "vague_intents", all_anchors(ledger), params
    )
