"""A realistic synthetic anchor ledger for the analytics benchmark (deterministic by seed).

Sessions of agent turns; each model step is a batch of 1-4 sibling calls; 15 tools with their own
durations and error rates; intents from templates, with missing, short, generic, tool-naming and
reused intents; duplicated sibling intents; repeated calls with equivalent arguments (some with
the keys in another order) and retries after errors; a few "risky" intents that make the next
calls fail more often (so failure precursors have something to find); hidden intents (redaction);
a few calls still live. Rows go straight into the ledger's own ``anchors`` table (the schema comes
from ``open_ledger``), in arrival order, in batches.
"""

from __future__ import annotations

import json
import random
import sqlite3
import string
from collections.abc import Iterator
from typing import Any

from tracing.anchor import anchor_id
from tracing.status import Status, frame_label

TOOLS: dict[str, tuple[float, float]] = {  # tool -> (median duration ms, error rate)
    "search_code": (400, 0.03),
    "read_file": (40, 0.05),
    "write_file": (60, 0.04),
    "edit_file": (80, 0.06),
    "run_tests": (9000, 0.15),
    "list_dir": (20, 0.01),
    "grep": (150, 0.02),
    "web_search": (1500, 0.05),
    "fetch_url": (900, 0.09),
    "shell": (2500, 0.12),
    "git_diff": (120, 0.02),
    "ask_user": (30000, 0.01),
    "plan": (10, 0.005),
    "sql_query": (300, 0.08),
    "browse": (4000, 0.1),
}
VERBS: dict[str, str] = {
    "search_code": "Searching for",
    "read_file": "Reading",
    "write_file": "Writing",
    "edit_file": "Editing",
    "run_tests": "Running the tests for",
    "list_dir": "Listing",
    "grep": "Looking for uses of",
    "web_search": "Searching the web for",
    "fetch_url": "Fetching the docs of",
    "shell": "Running a build of",
    "git_diff": "Checking the diff of",
    "ask_user": "Asking the user about",
    "plan": "Planning the change to",
    "sql_query": "Querying the table of",
    "browse": "Opening the page of",
}
GENERIC = [
    "Doing the next step",
    "Checking",
    "Working on it",
    "Getting more information",
    "Trying again",
    "Continuing",
]
SHORT = ["Search", "Reading", "Look", "Fix", "Run it", "Checking this"]
RISKY = [
    "Editing the lockfile by hand",
    "Running the migration against production",
    "Deleting the cache folder",
    "Force pushing the branch",
]
_AREAS = [
    "auth", "billing", "search", "api", "ui", "db", "cache", "queue", "mail", "admin",
    "reports", "export", "import", "sync", "oauth", "webhooks", "payments", "profile",
]  # fmt: skip
_THINGS = [
    "callback router", "retry policy", "session store", "error handler", "config loader",
    "rate limiter", "schema", "migration", "token refresh", "date parsing", "unit tests",
    "logging setup", "feature flag", "pagination", "serializer", "connection pool",
]  # fmt: skip


def _objects(rng: random.Random, n: int) -> list[str]:
    out: list[str] = []
    for _ in range(n):
        area, thing = rng.choice(_AREAS), rng.choice(_THINGS)
        if rng.random() < 0.5:
            out.append(f"the {thing} in {area}")
        else:
            out.append(f"src/{area}/{thing.replace(' ', '_')}.py")
    return out


def _id(rng: random.Random, prefix: str, n: int) -> str:
    return prefix + "".join(rng.choices(string.ascii_letters + string.digits, k=n))


def _args_for(rng: random.Random, tool: str, obj: str) -> dict[str, Any]:
    if tool in ("read_file", "write_file", "edit_file", "list_dir", "git_diff"):
        args: dict[str, Any] = {"path": obj, "start_line": rng.randint(1, 400)}
        if tool == "edit_file":
            args["old"] = "x = 1"
            args["new"] = f"x = {rng.randint(2, 99)}"
        return args
    if tool in ("web_search", "search_code", "grep"):
        return {"query": obj, "limit": rng.choice([10, 20, 50])}
    if tool == "fetch_url":
        return {"url": f"https://docs.example.com/{obj.replace(' ', '-')}"}
    if tool == "sql_query":
        return {"sql": f"select * from t where name = '{obj}' limit {rng.randint(1, 99)}"}
    return {"target": obj, "verbose": rng.random() < 0.5}


def _shuffled_json(rng: random.Random, args: dict[str, Any]) -> str:
    items = list(args.items())
    rng.shuffle(items)
    return json.dumps(dict(items), separators=(",", ":"))


_REDACT_KEEP = json.dumps(
    {
        "args": "keep",
        "output": "keep",
        "intent_hidden": False,
        "outcome_hidden": False,
        "scrubbed": 0,
    }
)
_REDACT_HIDE = json.dumps(
    {
        "args": "redact",
        "output": "keep",
        "intent_hidden": True,
        "outcome_hidden": True,
        "scrubbed": 0,
    }
)


def anchors(
    n: int, *, seed: int = 7, start_ns: int = 1_767_225_600_000_000_000
) -> Iterator[tuple[Any, ...]]:
    """Yield ``n`` anchor rows (in ``ANCHOR_COLUMNS`` order), in arrival order."""
    rng = random.Random(seed)
    objects = _objects(rng, 3000)
    tools = list(TOOLS)
    weights = [8, 12, 4, 6, 3, 4, 5, 3, 2, 3, 2, 1, 1, 2, 1]
    made = 0
    updated = 0
    session_no = 0
    span_days = 30
    while made < n:
        session_no += 1
        session_id = f"sess-{session_no:06d}"
        agent = rng.choice(["coder", "researcher", "reviewer"])
        t = start_ns + rng.randrange(span_days * 86_400) * 1_000_000_000
        size = max(5, int(rng.lognormvariate(5.0, 0.6)))  # ~150 calls per session
        size = min(size, n - made)
        seq = 0
        turn = 0
        history: list[tuple[str, str, str | None, str]] = []  # tool, args, intent, status
        risky_until = -1
        made_in_session = 0
        while made_in_session < size:
            if rng.random() < 0.15 or turn == 0:
                turn += 1
            batch_id = _id(rng, "", 16)
            width = rng.choices([1, 2, 3, 4], weights=[60, 25, 10, 5])[0]
            width = min(width, size - made_in_session)
            sibling_intent: str | None = None
            for _ in range(width):
                seq += 1
                tool = rng.choices(tools, weights=weights)[0]
                obj = rng.choice(objects)
                args_text = json.dumps(_args_for(rng, tool, obj))
                r = rng.random()
                if r < 0.07:
                    intent: str | None = None
                elif r < 0.11:
                    intent = rng.choice(GENERIC)
                elif r < 0.14:
                    intent = rng.choice(SHORT)
                elif r < 0.16:
                    intent = f"Running {tool}"
                elif r < 0.175:
                    intent = rng.choice(RISKY)
                    risky_until = seq + 3
                else:
                    intent = f"{VERBS[tool]} {obj}"
                if history and rng.random() < 0.05:  # repeat an earlier call, same args
                    tool, args_text, intent, _ = rng.choice(history[-30:])
                    if rng.random() < 0.3:
                        args_text = _shuffled_json(rng, json.loads(args_text))
                elif history and history[-1][3] == "error" and rng.random() < 0.5:
                    tool, args_text, intent, _ = history[-1]  # a retry after an error
                if sibling_intent is not None and rng.random() < 0.15:
                    intent = sibling_intent  # the model ignored "sibling calls must differ"
                sibling_intent = intent
                hidden = rng.random() < 0.02
                median, err = TOOLS[tool]
                if seq <= risky_until:
                    err = min(0.9, err * 5 + 0.1)
                r = rng.random()
                live = made_in_session >= size - 2 and rng.random() < 0.02
                if live:
                    status = Status.IN_FLIGHT
                elif r < err:
                    status = Status.ERROR
                elif r < err + 0.01:
                    status = Status.CANCELLED
                elif r < err + 0.013:
                    status = Status.ABANDONED
                else:
                    status = Status.SUCCESS
                history.append((tool, args_text, intent, status))
                duration_ns = int(rng.lognormvariate(0, 0.8) * median * 1_000_000)
                start = t
                t += rng.randrange(1, 5_000) * 1_000_000
                end = None if live else start + duration_ns
                shown = None if hidden else intent
                outcome = None
                if status == Status.SUCCESS and shown and rng.random() < 0.4:
                    outcome = f"Found {rng.randint(0, 40)} results"
                label = frame_label(tool_name=tool, status=status, intent=shown, outcome=outcome)
                updated += 1  # distinct stamps: the time of the last write plus a counter
                provider = _id(rng, "call_", 24)
                yield (
                    anchor_id(provider, session_id=session_id, turn=turn),
                    session_id,
                    seq,
                    None if live else seq,
                    turn,
                    batch_id,
                    None,
                    agent,
                    tool,
                    shown,
                    outcome,
                    label,
                    status,
                    start,
                    end,
                    None if end is None else (end - start) / 1e6,
                    _id(rng, "", 32),
                    _id(rng, "", 16),
                    "Tool raised: something went wrong" if status == "error" else None,
                    None if hidden else args_text,
                    None if live else '{"ok": true, "items": 3}',
                    _REDACT_HIDE if hidden else _REDACT_KEEP,
                    (end or start) + updated % 1_000_000,
                    provider,
                    updated,  # the row version: one counter, in write order
                )
                made += 1
                made_in_session += 1
            t += rng.randrange(1, 20_000) * 1_000_000


def fill(conn: sqlite3.Connection, n: int, *, seed: int = 7, batch: int = 20_000) -> int:
    """Insert ``n`` synthetic anchors into an open SQLite ledger; returns the rows written."""
    from tracing.ledger import ANCHOR_COLUMNS

    sql = (
        f"INSERT INTO anchors ({', '.join(ANCHOR_COLUMNS)}) "
        f"VALUES ({', '.join('?' for _ in ANCHOR_COLUMNS)})"
    )
    rows: list[tuple[Any, ...]] = []
    written = 0
    for row in anchors(n, seed=seed):
        rows.append(row)
        if len(rows) >= batch:
            conn.executemany(sql, rows)
            conn.commit()
            written += len(rows)
            rows.clear()
    if rows:
        conn.executemany(sql, rows)
        conn.commit()
        written += len(rows)
    return written
