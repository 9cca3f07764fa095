"""Every built-in pattern against its example table; the key-name rule; docs match code."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import pytest

from redaction import BUILTIN_PATTERNS, KEY_CATEGORIES, RedactionPolicy, ScrubOptions, UserPattern
from tests.redaction.examples import INNOCENT_KEYS, SENSITIVE_KEYS, VALUE_EXAMPLES

DOC = Path(__file__).resolve().parents[2] / "docs" / "redaction.md"


@cache
def only(rule: str) -> RedactionPolicy:
    """A policy whose scrubber runs this one built-in value rule."""
    others = tuple(n for n in BUILTIN_PATTERNS if n != rule)
    return RedactionPolicy(scrubbing=ScrubOptions(emails=True, phones=True, disable=others))


def test_every_builtin_pattern_has_examples() -> None:
    assert set(VALUE_EXAMPLES) == set(BUILTIN_PATTERNS)
    for name, (positives, negatives) in VALUE_EXAMPLES.items():
        assert positives, f"{name} has no positive example"
        assert negatives, f"{name} has no must-not-match example"


POSITIVES = [(n, t, c) for n, (pos, _) in VALUE_EXAMPLES.items() for t, c in pos]
NEGATIVES = [(n, t) for n, (_, neg) in VALUE_EXAMPLES.items() for t in neg]


@pytest.mark.parametrize(("rule", "text", "core"), POSITIVES)
def test_pattern_catches(rule: str, text: str, core: str) -> None:
    out = only(rule).scrub(text)
    assert core not in out.value
    assert f"[redacted:{rule}]" in out.value
    assert {e.rule for e in out.trail} == {rule}


@pytest.mark.parametrize(("rule", "text"), NEGATIVES)
def test_pattern_leaves_alone(rule: str, text: str) -> None:
    out = only(rule).scrub(text)
    assert out.value == text and out.trail == ()


@pytest.mark.parametrize(("rule", "text", "core"), POSITIVES)
def test_full_scrubber_catches_every_example(rule: str, text: str, core: str) -> None:
    policy = RedactionPolicy(scrubbing=ScrubOptions(emails=True, phones=True))
    assert core not in policy.scrub_text(text)
    assert core not in json.dumps(policy.scrub({"note": text, "nested": [{"x": text}]}).value)


def test_emails_and_phones_are_off_by_default() -> None:
    text = "mail bob.smith@example.com or call 415-555-0100"
    assert RedactionPolicy.default().scrub_text(text) == text


@pytest.mark.parametrize("key", SENSITIVE_KEYS)
def test_sensitive_keys_are_redacted(key: str) -> None:
    out = RedactionPolicy.default().scrub({key: "v4lue-that-is-secret", "n": {key: 1234}})
    assert "v4lue-that-is-secret" not in json.dumps(out.value)
    assert out.value["n"][key].startswith("[redacted:key:")
    assert all(e.rule.startswith("key:") for e in out.trail)


@pytest.mark.parametrize("key", INNOCENT_KEYS)
def test_innocent_keys_stay(key: str) -> None:
    value = {key: "plain value", "n": {key: 1234}}
    out = RedactionPolicy.default().scrub(value)
    assert out.value == value and out.trail == ()


def test_key_rule_keeps_harmless_values() -> None:
    value = {"password": None, "token": "", "auth": True, "cookies": []}
    assert RedactionPolicy.default().scrub(value).value == value


def test_user_patterns_and_keys() -> None:
    policy = RedactionPolicy.from_toml(
        """
        [scrub]
        keys = ["(?:^|_)acme_ref(?:_|$)"]
        [[scrub.patterns]]
        name = "acme_id"
        regex = "ACME-[0-9]{8}"
        literals = ["ACME-"]
        """
    )
    out = policy.scrub({"note": "id ACME-12345678 here", "AcmeRef": "x1", "other": "ACME-1"})
    assert out.value == {
        "note": "id [redacted:acme_id] here",
        "AcmeRef": "[redacted:key:custom]",
        "other": "ACME-1",
    }


def _documented() -> tuple[list[str], list[str]]:
    text = DOC.read_text(encoding="utf-8")

    def section(marker: str) -> list[str]:
        m = re.search(rf"<!-- {marker}:start -->(.*?)<!-- {marker}:end -->", text, re.S)
        assert m, f"docs/redaction.md lacks the {marker} markers"
        return re.findall(r"^\| `([a-z_:]+)` \|", m.group(1), re.M)

    return section("patterns"), section("key-categories")


def test_documented_pattern_list_matches_code() -> None:
    patterns, categories = _documented()
    assert patterns == list(BUILTIN_PATTERNS)
    assert categories == list(KEY_CATEGORIES)


def test_prefilter_sees_literals_that_overlap() -> None:
    # the trigger search reports "abc" at 0; "bcd" (which starts inside it) must still run
    policy = RedactionPolicy(
        scrubbing=ScrubOptions(
            patterns=(
                UserPattern("first", "abcx", ("abc",)),
                UserPattern("second", "bcd[0-9]+", ("bcd",)),
            )
        )
    )
    assert policy.scrub_text("zabcd123") == "za[redacted:second]"
    assert policy.scrub_text("abcx and bcd9") == "[redacted:first] and [redacted:second]"
