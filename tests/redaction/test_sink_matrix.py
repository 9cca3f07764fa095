"""Nothing a policy hides, and no secret, leaves by any path (tests/redaction/matrix.py).

Every entry path x every sink x every secret kind of the corpus x every placement: zero
survivors; innocent payloads unchanged; a hidden tool's intent and args in no sink. The matrix
runs once per module (``run_matrix``); each (path, sink) cell is one test. Set
``INTENTRACE_MATRIX_SABOTAGE=scrub_off`` (scrubbing switched off) or ``=raw_plain`` (the
processor forwards the spans that are not tool spans raw) to watch it fail;
``test_the_matrix_fails_when_*`` check that it does, on a smaller run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from redaction import RedactionPolicy
from tests.redaction.matrix import (
    HASH_KEY,
    IN_PROCESS,
    INNOCENT,
    KINDS,
    PATHS,
    PLACEMENTS,
    POLICY_TOML,
    SABOTAGE_ENV,
    SABOTAGES,
    SINKS,
    Matrix,
    applies,
    run_matrix,
    survivors,
    unwrap,
    wire_args,
    wire_result,
)
from tests.support.secrets import make_secret
from tracing import attributes as A
from tracing.status import Status, default_label

pytestmark = pytest.mark.postgres

CELLS = [(path, sink) for path in PATHS for sink in SINKS if applies(path, sink)]


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory, postgres_url: str) -> Matrix:
    sabotage = os.environ.get(SABOTAGE_ENV) or None
    return run_matrix(tmp_path_factory.mktemp("matrix"), postgres_url, sabotage=sabotage)


@pytest.mark.parametrize(("path", "sink"), CELLS)
def test_nothing_survives(matrix: Matrix, path: str, sink: str) -> None:
    found = survivors(matrix, path, sink)
    assert not found, f"{len(found)} survivors:\n" + "\n".join(found[:40])


def test_the_matrix_is_complete(matrix: Matrix) -> None:
    for path in PATHS:
        planted = {(p.kind, p.placement) for p in matrix.gardens[path].plants}
        assert planted == {(k, p) for k in KINDS for p in PLACEMENTS}, path
        assert matrix.gardens[path].hidden
    cells = len(CELLS) * len(KINDS) * len(PLACEMENTS)
    assert cells > 10_000  # paths x sinks x kinds x placements


REACHED = ("otlp", "langfuse", "sqlite_rows", "sqlite_bytes", "postgres_rows", "viewer", "cli")


@pytest.mark.parametrize(("path", "sink"), [c for c in CELLS if c[1] in REACHED])
def test_every_path_reached_every_sink(matrix: Matrix, path: str, sink: str) -> None:
    """No vacuous cell: the path's data did arrive there (scrubbed)."""
    session = matrix.gardens[path].session.encode()
    content = matrix.sinks.content(path, sink)
    assert any(session in data for _, data in content), (path, sink)
    if sink in ("otlp", "sqlite_rows", "viewer"):
        assert any(b"[redacted:" in data for _, data in content), (path, sink)


def test_the_corpus_is_caught_by_the_scrubber(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INTENTRACE_REDACTION_HASH_KEY", HASH_KEY)
    policy = RedactionPolicy.from_toml(POLICY_TOML)
    for kind in KINDS:
        for n in range(20):
            secret = make_secret(kind, n)
            for text in (secret.text, f"see {secret.text} here", json.dumps({"v": secret.text})):
                assert secret.vanish not in policy.scrub_text(text), (kind, text)


def test_innocent_payloads_arrive_unchanged(matrix: Matrix) -> None:
    for path in IN_PROCESS:
        for sink in ("otlp", "langfuse"):
            spans = [
                s
                for s in matrix.sinks.wire.get((path, sink), [])
                if s.attributes.get(A.TOOL_NAME) == "read_docs"
            ]
            assert spans, (path, sink)
            expected = dict(INNOCENT)
            if sink == "langfuse" or path == "langfuse":
                # the Langfuse SDK itself swaps base64 media for a media reference
                assert "@@@langfuseMedia:type=image/png" in json.dumps(wire_args(spans[0]))
                expected.pop("image")
            args = unwrap(wire_args(spans[0]))
            result = wire_result(spans[0])
            for got in (args, result):
                shown = {k: v for k, v in got.items() if k in expected}
                assert shown == expected, (path, sink)
    docs = [a for a in matrix.sinks.anchors if a["tool_name"] == "read_docs"]
    assert len(docs) >= len(PATHS)
    for anchor in docs:
        expected = dict(INNOCENT)
        if anchor["session_id"].startswith("matrix-langfuse"):  # (the SDK's media reference)
            expected.pop("image")
        for got in (json.loads(anchor["args"]), json.loads(anchor["result"])):
            shown = {k: v for k, v in got.items() if k in expected}
            assert shown == expected, anchor["session_id"]
            assert set(got) - {"image"} == set(expected) - {"image"}


def test_hidden_tools_show_their_tool_name_only(matrix: Matrix) -> None:
    vault = [a for a in matrix.sinks.anchors if a["tool_name"] == "vault_read"]
    query = [a for a in matrix.sinks.anchors if a["tool_name"] == "db_query"]
    assert len(vault) >= len(PATHS) and len(query) >= len(PATHS)
    for anchor in vault:
        assert anchor["intent"] is None and anchor["outcome"] is None
        assert anchor["args"] == anchor["result"] == "[redacted:policy]"
        assert anchor["label"] == default_label("vault_read", Status(anchor["status"]))
    for anchor in query:
        assert anchor["intent"] is None
        args: Any = json.loads(anchor["args"])
        assert all(str(v).startswith("[hmac:") for v in unwrap(args).values())


def test_the_ledger_password_is_never_shown(matrix: Matrix) -> None:
    needle = matrix.postgres_password.encode()
    for sink, content in matrix.sinks.blobs.items():
        for where, data in content:
            assert needle not in data, f"{sink}: {where}"


def test_files_we_write_are_private(matrix: Matrix) -> None:
    modes = matrix.sinks.file_modes
    snapshots = [name for name in modes if name.endswith(".parquet")]
    assert len(snapshots) == 2, modes  # the PostgreSQL one in the cache, SQLite's beside it
    assert any(name.endswith("ledger.db") for name in modes)
    assert all(mode == 0o600 for mode in modes.values()), modes


def test_no_internal_errors(matrix: Matrix) -> None:
    assert not matrix.internal_errors


@pytest.mark.internal_errors
@pytest.mark.parametrize("sabotage", SABOTAGES)
def test_the_matrix_fails_when_switched_off(
    sabotage: str, tmp_path: Path, postgres_url: str
) -> None:
    """Scrubbing off, or the spans that are not tool spans forwarded raw: survivors appear."""
    run = run_matrix(tmp_path, postgres_url, paths=("genai",), sabotage=sabotage, full=False)
    found = survivors(run, "genai", "otlp")
    placements = {line.split(" @ ")[1].split(" ->")[0] for line in found if " @ " in line}
    assert "model_span_call" in placements and "activity_label" in placements, found[:10]
    if sabotage == "raw_plain":  # tool spans are still redacted; model and agent spans are not
        assert any(line.startswith("hidden data") for line in found)
        assert not survivors(run, "genai", "sqlite_rows")
    else:
        assert {"intent", "result", "error_message"} <= placements
        assert survivors(run, "genai", "sqlite_rows")


def test_the_docs_describe_this_matrix() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "redaction.md").read_text()
    section = doc[doc.index("### The sink matrix") :]
    for count, what in (
        (len(PATHS), "paths"),
        (len(SINKS), "sinks"),
        (len(KINDS), "secret kinds"),
        (len(PLACEMENTS), "placements"),
    ):
        assert f"{count} {what}" in " ".join(section.split()), what
    for sabotage in SABOTAGES:
        assert sabotage in section
