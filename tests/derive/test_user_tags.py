"""Who a call ran for and its trace's tags: read from the span as its exports show it."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from redaction import RedactionPolicy
from tests.collect import scenarios
from tracing import attributes as A
from tracing import session, tool_call
from tracing.anchor import tag_list, tag_patterns, tags_text
from tracing.derive._call import user_and_tags
from tracing.testing import capture

KEEP = RedactionPolicy()


def test_the_conventions_give_the_user_and_the_tags() -> None:
    assert user_and_tags({A.LANGFUSE_USER_ID: "u-1", A.OI_USER_ID: "u-2"}, KEEP) == ("u-1", None)
    assert user_and_tags({A.OI_USER_ID: "u-2", A.OI_TAG_TAGS: ["b", "a"]}, KEEP) == (
        "u-2",
        '["a","b"]',
    )
    assert user_and_tags({A.ENDUSER_ID: "u-3"}, KEEP) == ("u-3", None)
    # Langfuse's tags and OpenInference's together; JSON text or one tag; ours left out
    both = {A.LANGFUSE_TRACE_TAGS: '["x","tool-intent"]', A.OI_TAG_TAGS: "y"}
    assert user_and_tags(both, KEEP) == (None, '["x","y"]')
    assert user_and_tags({A.LANGFUSE_TRACE_TAGS: ["activity-label"]}, KEEP) == (None, None)
    assert user_and_tags({"other": 1}, KEEP) == (None, None)


def test_a_user_key_the_policy_finds_sensitive_is_stored_hidden_as_exported() -> None:
    policy = RedactionPolicy.from_toml('[scrub]\nkeys = ["user"]\n')
    cap = capture(policy=policy)
    with (
        cap,
        session("conv-1", user_id="alice@example.com"),
        tool_call("search", {"q": 1}, tracer=cap.tracer),
    ):
        pass
    (anchor,) = cap.calls().values()
    assert anchor["user_id"] is not None and "alice" not in anchor["user_id"]
    exported = [s.attributes.get(A.OI_USER_ID) for s in cap.spans() if s.attributes]
    assert anchor["user_id"] in exported  # the same placeholder as the export (fail closed)


def test_a_secret_in_a_tag_is_scrubbed() -> None:
    _, tags = user_and_tags({A.LANGFUSE_TRACE_TAGS: [f"t {scenarios.GH_TOKEN}"]}, KEEP)
    assert tags is not None and scenarios.GH_TOKEN not in tags


def test_session_user_reaches_every_call_through_the_processor() -> None:
    cap = capture()
    with (
        cap,
        session("conv-1", agent_id="a", turn=1, user_id="u-7"),
        tool_call("search", {"q": 1}, tracer=cap.tracer),
    ):
        pass
    (anchor,) = cap.calls().values()
    assert anchor["user_id"] == "u-7"


def test_the_equivalence_scenario_carries_users_and_tags() -> None:
    cap = capture(policy=scenarios.POLICY, registry=scenarios.registry())
    with cap:
        scenarios.run(cap.tracer)
    by_tool = {(a["tool_name"], a.get("session_id")): a for a in cap.calls().values()}
    assert by_tool[("search_code", "conv-eq")]["user_id"] == "u-42"
    assert by_tool[("lookup", "conv-oi")].get("tags") == '["beta","prod"]'
    summarize = by_tool[("summarize", "conv-oi")]
    assert summarize["user_id"] == "u-lf"
    tags = tag_list(summarize["tags"])
    assert "nightly" in tags and "tool-intent" not in tags
    assert not any(scenarios.GH_TOKEN in t for t in tags)


@given(st.lists(st.text(max_size=12), max_size=6), st.text(max_size=12))
def test_a_tag_pattern_finds_exactly_the_stored_tags(tags: list[str], probe: str) -> None:
    text = tags_text(tags)
    stored = tag_list(text)
    assert stored == sorted(set(stored))
    if text is not None:
        assert json.loads(text) == stored
    for tag in [*stored, probe]:
        found = text is not None and any(p in text for p in tag_patterns(tag))
        assert found == (tag in stored)
