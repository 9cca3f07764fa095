"""Hypothesis properties: no generated secret survives wherever it is placed; scrubbing is
idempotent; the output matches no built-in pattern outside placeholders."""

from __future__ import annotations

import base64
import json
import re
import string
from typing import Any

from hypothesis import assume, given
from hypothesis import strategies as st

from redaction import RedactionPolicy, ScrubOptions
from redaction._patterns import VALUE_RULES
from redaction._scrubber import Scrubber

ALNUM = string.ascii_letters + string.digits
UPPER = string.ascii_uppercase + string.digits
POLICY = RedactionPolicy(scrubbing=ScrubOptions(emails=True, phones=True))
SCRUBBER: Scrubber = POLICY.scrubber


def _s(alphabet: str, n: int, m: int | None = None) -> st.SearchStrategy[str]:
    return st.text(alphabet, min_size=n, max_size=m or n)


def _digit(body: str) -> str:
    return body if any(c.isdigit() for c in body) else body[:-1] + "7"


def _luhn(prefix: str) -> str:
    total = 0
    for i, ch in enumerate(reversed(prefix)):
        d = int(ch) * (2 if i % 2 == 0 else 1)
        total += d - 9 if d > 9 else d
    return prefix + str((10 - total % 10) % 10)


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _jwt(payload: bytes, signature: bytes) -> str:
    return "eyJhbGciOiJIUzI1NiJ9." + _b64url(b'{"s":' + payload) + "." + _b64url(signature)


# kind -> strategy of (text to plant, part that must not survive)
SECRETS: dict[str, st.SearchStrategy[tuple[str, str]]] = {
    "private_key": st.lists(_s(ALNUM + "+/", 16, 64), min_size=1, max_size=4).map(
        lambda lines: (
            "-----BEGIN PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END PRIVATE KEY-----",
            lines[0],
        )
    ),
    "jwt": st.tuples(st.binary(min_size=8, max_size=40), st.binary(min_size=16, max_size=40)).map(
        lambda t: (x := _jwt(t[0], t[1]), x)
    ),
    "bearer": _s(ALNUM, 24, 48).map(lambda t: (f"Bearer {t}", t)),
    "basic_auth": st.tuples(_s(string.ascii_lowercase, 3, 10), _s(ALNUM, 8, 20)).map(
        lambda t: (
            "Basic " + (b := base64.b64encode(f"{t[0]}:{t[1]}".encode()).decode()),
            b.rstrip("="),
        )
    ),
    "aws_access_key": st.tuples(st.sampled_from(["AKIA", "ASIA"]), _s(UPPER, 16)).map(
        lambda t: (t[0] + t[1], t[0] + t[1])
    ),
    "github_token": _s(ALNUM, 36, 60).map(lambda t: ("ghp_" + t, "ghp_" + t)),
    "gitlab_token": _s(ALNUM, 20, 40).map(lambda t: ("glpat-" + t, "glpat-" + t)),
    "slack_token": st.tuples(_s(string.digits, 10, 13), _s(ALNUM, 12, 30)).map(
        lambda t: (x := f"xoxb-{t[0]}-{t[1]}", x)
    ),
    "stripe_key": _s(ALNUM, 24, 40).map(lambda t: ("sk_live_" + t, "sk_live_" + t)),
    "anthropic_key": _s(ALNUM + "_-", 40, 90).map(lambda t: ("sk-ant-api03-" + t, t)),
    "langfuse_key": st.uuids().map(lambda u: (f"sk-lf-{u}", f"sk-lf-{u}")),
    "openai_key": _s(ALNUM, 30, 60).map(lambda t: ("sk-proj-" + _digit(t), _digit(t))),
    "google_api_key": _s(ALNUM + "_-", 35).map(lambda t: ("AIza" + t, "AIza" + t)),
    "huggingface_token": _s(ALNUM, 34).map(lambda t: ("hf_" + _digit(t), "hf_" + _digit(t))),
    "connection_string": _s(ALNUM + "!$%*", 10, 24)
    # a password that is also a part of the URL (`postgresql`) would be seen to survive
    .filter(lambda pw: pw not in "postgresql://app:@db.internal:5432/app")
    .map(lambda pw: (f"postgresql://app:{pw}@db.internal:5432/app", pw)),
    "secret_assignment": _s(ALNUM, 10, 30).map(lambda t: (f"api_key={t}", t)),
    "credit_card": st.tuples(st.sampled_from(["4", "51", "37", "6011"]), _s(string.digits, 12)).map(
        lambda t: (c := _luhn((t[0] + t[1])[:15]), c)
    ),
    "email": st.tuples(_s(string.ascii_lowercase, 6, 12), _s(string.ascii_lowercase, 4, 10)).map(
        lambda t: (e := f"{t[0]}@{t[1]}.example.com", e)
    ),
    "phone": _s(string.digits, 7).map(lambda d: (p := f"+1 415 {d[:3]} {d[3:]}", p[3:])),
}
INNOCENT_KEYS = st.sampled_from(["data", "value", "note", "items", "x", "payload", "rows"])
PROSE = st.sampled_from(
    [
        "Looking up {} for the user",
        "ValueError: could not parse {} at line 3",
        "{}",
        "prefix text {} suffix, then more",
        "Traceback (most recent call last):\n  File 'x.py'\nRuntimeError: {}",
    ]
)


@st.composite
def planted(draw: st.DrawFn) -> tuple[Any, str, str]:
    """(nested value holding one secret, the part that must vanish, the planted text)."""
    kind = draw(st.sampled_from(sorted(SECRETS)))
    text, core = draw(SECRETS[kind])
    value: Any = draw(PROSE).format(text)
    json_layers = 0
    for _ in range(draw(st.integers(0, 8))):
        shape = draw(st.sampled_from(["dict", "list", "json"]))
        if shape == "json":
            json_layers += 1
            if json_layers > 3:  # each layer doubles the escapes
                shape = "dict"
        if shape == "dict":
            value = {draw(INNOCENT_KEYS): value, "ok": True, "n": 3}
        elif shape == "list":
            value = ["before", value, 42]
        else:
            value = json.dumps({draw(INNOCENT_KEYS): value})
    return value, core, text


def _all_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


@given(planted())
def test_no_planted_secret_survives(case: tuple[Any, str, str]) -> None:
    value, core, _ = case
    out = POLICY.scrub(value)
    assert core not in _all_text(out.value)
    assert out.trail


@given(planted(), planted())
def test_no_secret_survives_redact_call(a: tuple[Any, str, str], b: tuple[Any, str, str]) -> None:
    # a secret in the intent sentence and one in the error message, the args and the output
    assume(a[1] not in b[2] and b[1] not in a[2])  # one's secret is no innocent part of the other
    call = POLICY.redact_call(
        tool_name="search",
        args=a[0],
        intent=f"Searching with {a[2]} for the report",
        outcome=f"Found {b[2]}",
        output=b[0],
        error=f"HTTP 401: {b[2]} rejected",
    )
    text = _all_text([call.args, call.intent, call.outcome, call.output, call.error])
    assert a[1] not in text and b[1] not in text


JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(max_size=40)
    | st.one_of(*(s.map(lambda t: t[0]) for s in SECRETS.values())),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(max_size=12) | INNOCENT_KEYS | st.sampled_from(["password", "token"]),
            children,
            max_size=4,
        )
        | children.map(json.dumps)
    ),
    max_leaves=8,
)


@given(JSONISH)
def test_scrub_is_idempotent(value: Any) -> None:
    once = POLICY.scrub(value)
    twice = POLICY.scrub(once.value)
    assert twice.value == once.value
    assert twice.trail == ()


@given(st.text(max_size=80) | st.one_of(*(s.map(lambda t: t[0]) for s in SECRETS.values())))
def test_scrub_text_is_idempotent(text: str) -> None:
    once = POLICY.scrub_text(text)
    assert POLICY.scrub_text(once) == once


_PLACEHOLDER = re.compile(r"\[(?:redacted:[a-z_:]+|hmac:[0-9a-f]{32})\]")


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [*_strings(k), *_strings(v)]]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


@given(st.one_of(JSONISH, planted().map(lambda t: t[0])))
def test_output_matches_no_pattern_outside_placeholders(value: Any) -> None:
    out = POLICY.scrub(value).value
    for s in _strings(out):
        placeholders = [m.span() for m in _PLACEHOLDER.finditer(s)]
        for rule in VALUE_RULES:
            for m in rule.regex.finditer(s):
                if rule.validator is not None and not rule.validator(s, m):
                    continue
                a, b = m.span()
                assert any(a < pe and ps < b for ps, pe in placeholders), (rule.name, s)
