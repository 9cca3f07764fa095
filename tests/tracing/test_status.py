"""Label resolution and the group header (tracing.status)."""

from __future__ import annotations

import pytest

from tracing.status import HeaderCall, Status, default_label, frame_label, group_header


@pytest.mark.parametrize(
    ("status", "intent", "outcome", "expected"),
    [
        ("streaming", "Searching for OAuth", None, "Searching for OAuth"),
        ("in_flight", "Searching for OAuth", None, "Searching for OAuth"),
        ("success", "Searching for OAuth", "Found 12 results", "Found 12 results"),
        ("success", "Searching for OAuth", None, "Searching for OAuth"),
        ("error", "Reading the router", None, "Reading the router · failed"),
        ("cancelled", "Reading the router", None, "Reading the router · cancelled"),
        ("background", "Indexing the repo", None, "Indexing the repo · in background"),
        ("abandoned", "Indexing the repo", None, "Indexing the repo · abandoned"),
        ("success", None, None, "Ran search_code"),
        ("in_flight", None, None, "Running search_code"),
        ("error", None, None, "search_code · failed"),
    ],
)
def test_frame_label(
    status: Status, intent: str | None, outcome: str | None, expected: str
) -> None:
    assert frame_label(tool_name="search_code", status=status, intent=intent, outcome=outcome) == (
        expected
    )


def test_timed_out_background_is_an_error_label() -> None:
    assert (
        frame_label(tool_name="t", status=Status.ERROR, intent="Indexing", timed_out=True)
        == "Indexing · timed out"
    )
    assert (
        frame_label(tool_name="t", status=Status.ERROR, intent=None, timed_out=True)
        == "t · timed out"
    )


def test_default_label_never_past_tense_for_failures() -> None:
    assert default_label("x", Status.CANCELLED) == "x · cancelled"


def test_group_header_precedence() -> None:
    live = HeaderCall(status=Status.IN_FLIGHT, intent="Reading b", label="Reading b", seq=2)
    older_live = HeaderCall(status=Status.IN_FLIGHT, intent="Reading a", label="Reading a", seq=1)
    done = HeaderCall(
        status=Status.SUCCESS, intent="Searching", label="Found 3", seq=0, settle_seq=5
    )
    # a live call's intent is the live edge, before the activity label (phase 1)
    assert group_header([older_live, live, done], activity_label="Explored auth") == "Reading b"
    assert group_header([done], activity_label="Explored auth") == "Explored auth"
    # latest in-flight intent by sequence, not list order
    assert group_header([live, older_live, done]) == "Reading b"
    assert group_header([done]) == "Found 3"
    assert group_header([]) == "Used 0 tools"
    plain = HeaderCall(status=Status.SUCCESS, intent=None, label="Ran x", seq=1, settle_seq=2)
    assert group_header([plain]) == "Ran x"  # a block of one call is the call
    assert group_header([plain, plain]) == "Used 2 tools"


def test_late_settlement_never_rewinds_header() -> None:
    # b started later but a settled later: the latest settled outcome is a's (by settle_seq)
    a = HeaderCall(status=Status.SUCCESS, intent="A", label="A done", seq=1, settle_seq=9)
    b = HeaderCall(status=Status.SUCCESS, intent="B", label="B done", seq=2, settle_seq=4)
    assert group_header([a, b]) == "A done"
