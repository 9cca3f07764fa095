"""The walker: shapes, JSON inside strings, bounds (fail closed), trails without values."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from uuid import UUID

import pytest

from redaction import PolicyError, RedactionPolicy, Rule, ScrubOptions

POLICY = RedactionPolicy.default()
GH = "ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5"


def test_shapes_are_kept() -> None:
    when = datetime(2024, 1, 2, tzinfo=UTC)
    uid = UUID(int=7)
    value = {
        "t": (1, GH),
        "s": {GH},
        "b": f"x {GH}".encode(),
        "n": [None, True, 1.5, 3, when, uid],
        7: "int key",
    }
    out = POLICY.scrub(value).value
    assert out["t"] == (1, "[redacted:github_token]")
    assert out["s"] == ["[redacted:github_token]"]
    assert out["b"] == b"x [redacted:github_token]"
    assert out["n"] == [None, True, 1.5, 3, when, uid]
    assert out[7] == "int key"


def test_untouched_bytes_and_json_text_are_returned_as_they_are() -> None:
    raw = b"\xff\xfe binary \x00 payload"
    assert POLICY.scrub(raw).value is raw
    text = '{"a":1,  "b":[2,3]}'  # odd spacing survives when nothing is removed
    assert POLICY.scrub(text).value is text


def test_json_inside_strings_is_walked_and_reserialised() -> None:
    inner = json.dumps({"password": "hunter2", "list": [json.dumps({"k": GH})]})
    out = POLICY.scrub({"payload": inner})
    decoded = json.loads(out.value["payload"])
    assert decoded["password"] == "[redacted:key:password]"
    assert json.loads(decoded["list"][0]) == {"k": "[redacted:github_token]"}
    assert [e.path for e in out.trail] == ["$.payload.password", "$.payload.list[0].k"]


def test_objects_are_scrubbed_as_text_never_passed_raw() -> None:
    @dataclass
    class Config:
        token: str

    out = POLICY.scrub({"cfg": Config(GH)})
    assert out.value == {
        "cfg": "test_objects_are_scrubbed_as_text_never_passed_raw.<locals>"
        ".Config(token='[redacted:github_token]')"
    }


def test_card_numbers_as_json_numbers() -> None:
    assert POLICY.scrub({"n": 4111111111111111}).value == {"n": "[redacted:credit_card]"}
    assert POLICY.scrub({"n": 1700000000000000000}).value == {"n": 1700000000000000000}


def test_secrets_used_as_keys_are_scrubbed() -> None:
    out = POLICY.scrub({GH: 1})
    assert out.value == {"[redacted:github_token]": 1}
    assert GH not in json.dumps([e.path for e in out.trail])


def test_trail_never_holds_values() -> None:
    value = {"a": {"password": "hunter2"}, "b": [f"Bearer {GH}"], "c": "postgres://u:pw123456@h/d"}
    out = POLICY.scrub(value)
    trail = json.dumps([(e.path, e.rule) for e in out.trail])
    for secret in ("hunter2", GH, "pw123456"):
        assert secret not in trail
    assert out.scrubbed == 3


SMALL = RedactionPolicy(scrubbing=ScrubOptions(max_depth=4, max_string_chars=100, max_nodes=20))


def test_beyond_depth_fails_closed() -> None:
    value: object = GH
    for _ in range(10):
        value = {"x": value}
    out = SMALL.scrub(value)
    assert GH not in json.dumps(out.value)
    assert "[redacted:depth]" in json.dumps(out.value)
    assert out.trail[-1].rule == "depth"


def test_deep_json_text_fails_closed() -> None:
    deep = "[" * 100_000 + "]" * 100_000  # the JSON parser gives up
    assert POLICY.scrub({"x": deep}).value == {"x": "[redacted:depth]"}


def test_long_strings_and_many_nodes_fail_closed() -> None:
    out = SMALL.scrub({"long": "a" * 101, "short": "ok"})
    assert out.value == {"long": "[redacted:size]", "short": "ok"}
    many = SMALL.scrub([f"item {i}" for i in range(40)]).value
    assert many[:19] == [f"item {i}" for i in range(19)]
    assert set(many[19:]) == {"[redacted:size]"}


def test_placeholders_are_left_alone() -> None:
    text = "postgresql://app:[redacted:connection_string]@db/app and [hmac:" + "0" * 32 + "]"
    assert POLICY.scrub_text(text) == text
    assert POLICY.scrub({"password": "[redacted:key:password]"}).trail == ()


def test_a_fake_placeholder_cannot_smuggle_a_secret() -> None:
    text = f"[redacted:{GH}]"
    assert GH not in POLICY.scrub_text(text)


def test_user_pattern_name_rules() -> None:
    with pytest.raises(PolicyError, match="already a pattern name"):
        RedactionPolicy.from_toml('[[scrub.patterns]]\nname = "jwt"\nregex = "x"\n')
    with pytest.raises(PolicyError, match="matches the empty string"):
        RedactionPolicy.from_toml('[[scrub.patterns]]\nname = "e"\nregex = "x*"\n')
    with pytest.raises(PolicyError, match="lower-case"):
        RedactionPolicy.from_toml('[[scrub.patterns]]\nname = "Bad Name"\nregex = "x"\n')


def test_short_hash_key_is_refused() -> None:
    with pytest.raises(PolicyError, match="at least 16 bytes"):
        RedactionPolicy(default_rule=Rule("hash", "keep"), hash_key=b"short")
