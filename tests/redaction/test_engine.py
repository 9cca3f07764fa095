"""The fast path (Hyperscan candidates, exact rules) against the pure-Python path, its oracle:
identical output and trail on generated payloads; the anchors' own contracts."""

from __future__ import annotations

import json
import re
import string
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from redaction import PolicyError, RedactionPolicy, ScrubOptions, UserPattern
from redaction._patterns import (
    ASSIGNMENT_KEYWORDS,
    BARE_INNOCENT_KEYS,
    CASE_VARIANTS,
    VALUE_RULES,
    non_ascii_digits,
    sensitive_key,
)
from redaction._scrubber import Scrubber
from tests.redaction.examples import VALUE_EXAMPLES
from tests.redaction.test_properties import SECRETS

pytest.importorskip("hyperscan")

ALL = ScrubOptions(emails=True, phones=True)
USER = ScrubOptions(
    patterns=(
        UserPattern("acme_id", r"ACME-[0-9]{4,}", ("acme-",)),
        UserPattern("ticket", r"TK[0-9]{3}"),  # no literal: runs on every string
    ),
    keys=("(?:^|_)acme_ref(?:_|$)",),
)
PAIRS = {
    name: (
        Scrubber(ScrubOptions(**{**vars(o), "engine": "hyperscan"})),
        Scrubber(ScrubOptions(**{**vars(o), "engine": "python"})),
    )
    for name, o in (("default", ScrubOptions()), ("all", ALL), ("user", USER))
}

# Pieces that make rules start, stop, overlap and nearly match; Unicode that Python's
# case-insensitive matching, ``str.lower`` and ``\d`` treat specially.
FRAGMENTS = [
    *("sk-", "sk-ant-", "sk-lf-", "sk-proj-", "eyJ", "AKIA", "ASIA", "A3T", "ghp_", "github_pat_"),
    *("glpat-", "xoxb-", "https://hooks.slack.com/services/", "sk_live_", "whsec_", "AIza"),
    *(
        "hf_",
        "SG.",
        "pypi-AgE",
        "npm_",
        "-----BEGIN RSA PRIVATE KEY-----",
        "-----END RSA PRIVATE KEY-----",
    ),
    *("PuTTY-User-Key-File-2:", "Private-MAC: ab", "Bearer ", "bearer\t", "Basic ", "baſic "),
    *(
        "postgres://",
        "u:",
        "@",
        "@db.",
        ".com",
        "://",
        "password",
        "passwd",
        "pa\u017fs",
        "api_key",
    ),
    *("Token", "to\u212aen", "p\u0130n", "p\u0131n", "secret", "auth", "cookie", "cvv", "otp"),
    *("=", ":", ": ", "='", '"', "'", " ", "\t", "\n", ",", ";", "-", "_", ".", "/", "+", "(", ")"),
    *(
        "4111",
        "1111",
        "5555",
        "0000",
        "4",
        "1",
        " ",
        "\u0663",
        "\u0967",
        "+1 ",
        "415",
        "555",
        "0100",
    ),
    *("aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5", "0123456789abcdef", "dXNlcjpwYXNzd29yZA=="),
    *(
        "[redacted:jwt]",
        "[redacted:",
        "ACME-",
        "ACME-12345",
        "TK123",
        "x",
        "é",
        "日本",
        "\U0001f600",
    ),
    *("\ud800", "{", "}", "[", "]", "true", "null"),
]
SOUP = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=6), max_size=24).map("".join)
# `<key> = <value>` in text, with the keys' Unicode look-alikes and long key parts
ASSIGNMENT = st.tuples(
    st.sampled_from(
        [
            *("pass", "pa\u017fs", "to\u212aen", "p\u0130n", "\u017fecret", "SECRET", "api"),
            # keys the key-name rule finds innocent (the fast path skips their matches)
            *("tokens", "max_tokens", "Tokens", "tokenS", "key", "sort_key", "author", "x" * 39),
        ]
    ),
    st.sampled_from(["", "_key", "word", "_for_the_production_database_backup_2", "x" * 41]),
    st.sampled_from(["=", ": ", '" : ', "'='", "\t=\t", ":"]),
    st.sampled_from(
        [
            *("hunter22", "Bearer abc123def456ghi789", "'q1w2e3'", "ab", "null", ""),
            # a match that runs on over the next assignment, or stops at a line's end
            *("client.x(code=secret_key=s3cr3t)", "token\tpassword=hunter22", "v\npassword=x2"),
        ]
    ),
).map("".join)
TRICKY = [
    "to\u212aen=hunter2222",
    "basic then Ba\u017fic dXNlcjpwYXNzd29yZA==",
    "password_for_the_production_database_backup_v2=hunter22",
    "api_key = 'abc' and token: xyz123 and p\u0130n=1234 and pin",
    "\u017fecret_password=abc123 secret",
    "4111-1111-1111-1111 and 4 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 and 4111 1111 1111 1111",
    "\u0664\u0661\u0661\u0661\u0661\u0661\u0661\u0661\u0661\u0661\u0661\u0661\u0661\u0661\u0661\u0661 412",
    "+1 (415) 555-0100, 415.555.0100, +44 20 7946 0958, call +1 ٤١٥ 555 0100",
    "mail bob.smith@example.com, a@b.co, x" + "y" * 70 + "@example.org, " + "z" * 50 + "@ex.io",
    "postgres://u:p@h/ and mysql+pymysql://root:s3cr3t@db:3306/x and ://a:b@",
    "-----BEGIN RSA PRIVATE KEY-----\nabc\n-----BEGIN PUBLIC KEY-----",
    "sk-ant-api03-" + "a" * 30 + " sk-lf-12345678 sk-abc123def456ghi789jkl0",
    "tokens = client.exchange(code=x, password=hunter22)\n    tokens=secret_key=abc123",
    "max_tokens=5 tokens: password=hunter22\v token_count=3\u2028secret=abc123 tokens=",
    "    " * 30 + "tokens = pass\n" + "key=" * 30 + "tokens=" + "secret=abc123",
    # an assignment's key run: look-alikes inside and at its edge, keys past the 40-character
    # extension, keywords after the run's left edge
    "\u212apassword=hunter22 a\u017fpassword=hunter22 tokens\u212apassword=hunter22",
    "x" * 50 + "password=hunter22 " + "x" * 35 + "tokens=abc123 password" + "x" * 45 + "=abc123",
    "tokens.password=abc123 max_tokens.to\u212aen: 'abc123' \u0130pin=1234 sort_key.pin=1234",
    "my_tokens_secret_key_for_the_prod_db_backup_x = hunter22; tokens_tokens_token=abc123",
]
PLANTED = st.one_of(*(s.map(lambda t: t[0]) for s in SECRETS.values()))
TEXT = st.one_of(
    SOUP,
    st.lists(ASSIGNMENT | SOUP, min_size=1, max_size=4).map(" ".join),
    st.tuples(st.text(max_size=20), PLANTED, st.text(max_size=20)).map("".join),
    st.text(max_size=60),
)
KEYS = st.one_of(
    st.sampled_from(["password", "accessToken", "X-Api-Key", "max_tokens", "session_id", "note"]),
    st.sampled_from(["acme_ref", "AcmeRef", "author", "pin", "ssn", "creditCard", "q"]),
    SOUP.filter(lambda k: len(k) < 40),
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=4_000_000_000_000, max_value=6_999_999_999_999_999),
    st.floats(allow_nan=False),
    TEXT,
)


def _tree(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=5),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(KEYS, children, max_size=5),
        st.dictionaries(KEYS, children, max_size=3).map(json.dumps),
        st.lists(children, max_size=3).map(lambda v: json.dumps(v, ensure_ascii=False)),
    )


VALUES = st.recursive(SCALARS, _tree, max_leaves=24)


def _same(name: str, value: Any) -> None:
    fast, python = PAIRS[name]
    assert fast.scrub(value) == python.scrub(value)
    if isinstance(value, str):
        assert fast.scrub_text(value) == python.scrub_text(value)
        assert fast.find(value) == python.find_python(value)


FAST_SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@FAST_SETTINGS
@given(TEXT, st.sampled_from(sorted(PAIRS)))
def test_fast_path_finds_what_the_python_path_finds(text: str, pair: str) -> None:
    _same(pair, text)


@FAST_SETTINGS
@given(VALUES, st.sampled_from(sorted(PAIRS)))
def test_fast_walker_gives_the_python_walkers_output_and_trail(value: Any, pair: str) -> None:
    _same(pair, value)


# Any code point, astral characters and lone surrogates among them
UNICODE = st.text(
    st.characters(categories=["Cs", "Lo", "Lu", "Ll", "Mn", "Nd", "Zs", "Zl", "Cc", "So"]),
    max_size=12,
)
PIECE = st.one_of(PLANTED, ASSIGNMENT, SOUP, UNICODE)


@st.composite
def _payloads(draw: st.DrawFn) -> dict[str, Any]:
    """A payload of many strings scanned at once: secrets of every kind at random places among
    near-miss assignments, look-alike Unicode, astral characters and lone surrogates; one long
    text, the same inside JSON text (escaped or not), strings under keys the key-name rule
    judges, and a list of them."""
    text = "".join(draw(st.lists(PIECE, min_size=1, max_size=40)))
    strings = draw(st.lists(PIECE, min_size=1, max_size=60))
    keys = draw(st.lists(KEYS, min_size=len(strings), max_size=len(strings)))
    inner = {"inner": text, "more": strings[:5], "n": draw(st.integers())}
    return {
        "text": text,
        "json": json.dumps(inner, ensure_ascii=draw(st.booleans())),
        # JSON text after white space (any Unicode white space) is JSON text too
        "spaced": draw(st.sampled_from([" ", "\n\t", "\u3000", "\u2028", "\x1c"]))
        + json.dumps(strings[:3]),
        "items": [
            dict(zip(keys[i : i + 3], strings[i : i + 3], strict=True))
            for i in range(0, len(strings), 3)
        ],
        "flat": strings,
    }


@FAST_SETTINGS
@given(_payloads(), st.sampled_from(sorted(PAIRS)))
def test_fast_path_gives_the_python_paths_output_on_large_payloads(
    payload: dict[str, Any], pair: str
) -> None:
    _same(pair, payload)
    _same(pair, payload["text"])
    _same(pair, payload["json"])


@pytest.mark.parametrize(
    "text",
    [
        *(t for pos, _ in VALUE_EXAMPLES.values() for t, _ in pos),
        *(t for _, neg in VALUE_EXAMPLES.values() for t in neg),
        *TRICKY,
    ],
)
def test_every_example_gives_the_same_result(text: str) -> None:
    for name in PAIRS:
        _same(name, text)
        _same(name, {"note": text, "deep": [{"x": text}], "json": json.dumps({"v": text})})


def test_bounds_and_shapes_match() -> None:
    small = ScrubOptions(max_depth=3, max_nodes=12, max_string_chars=40)
    fast = Scrubber(ScrubOptions(**{**vars(small), "engine": "hyperscan"}))
    python = Scrubber(ScrubOptions(**{**vars(small), "engine": "python"}))
    gh = "ghp_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5"
    for value in [
        {"a": {"b": {"c": {"d": gh}}}},
        [gh] * 20,
        {"long": "x" * 41 + gh, "ok": gh},
        json.dumps({"a": [[[[gh]]]]}),
        {"t": (1, gh, (gh,)), "s": {gh}, "b": gh.encode(), 7: gh},
        {gh: 1, "ghp_" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBaZy": 2},  # keys that collide
    ]:
        assert fast.scrub(value) == python.scrub(value)


def test_engine_is_reported_and_can_be_chosen() -> None:
    assert RedactionPolicy.default().scrubber.stats()["engine"] == "hyperscan"
    python = RedactionPolicy(scrubbing=ScrubOptions(engine="python")).scrubber.stats()
    assert python == {"engine": "python", "engine_detail": "asked for (engine = python)"}
    policy = RedactionPolicy.from_toml('[scrub]\nengine = "python"\n')
    assert policy.scrubber.engine.name == "python"
    with pytest.raises(PolicyError, match="engine"):
        RedactionPolicy(scrubbing=ScrubOptions(engine="fastest"))


def test_engine_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INTENTRACE_SCRUB_ENGINE", "python")
    assert Scrubber(ScrubOptions()).engine.name == "python"
    assert Scrubber(ScrubOptions(engine="hyperscan")).engine.name == "hyperscan"


def test_case_variants_table_is_complete() -> None:
    # every non-ASCII character that (?i) matching takes for an ASCII letter, or whose
    # lower-case form holds an ASCII letter, is in the table the anchors are built from
    letters = re.compile("(?i)[a-z]")
    found: dict[str, set[str]] = {}
    for cp in range(128, 0x110000):
        ch = chr(cp)
        if letters.match(ch) or any(c.isascii() and c.isalpha() for c in ch.lower()):
            for c in string.ascii_lowercase:
                if re.match("(?i)" + c, ch) or c in ch.lower():
                    found.setdefault(c, set()).add(ch)
    assert found == {c: set(v) for c, v in CASE_VARIANTS.items()}


@pytest.mark.parametrize("rule", VALUE_RULES, ids=lambda r: r.name)
def test_every_builtin_rule_has_anchors(rule: Any) -> None:
    assert rule.anchors
    for anchor in rule.anchors:
        assert anchor.whole or anchor.length > 0 or (anchor.back > 0 and anchor.starts is not None)


def test_non_ascii_digit_table_is_this_pythons() -> None:
    digits = re.compile(r"\d")
    assert set(non_ascii_digits()) == {
        chr(c) for c in range(128, 0x110000) if digits.match(chr(c)) is not None
    }


def test_assignment_anchors_share_one_window() -> None:
    # the fast path remembers candidate starts by the text before an anchor's key end alone
    rule = next(r for r in VALUE_RULES if r.name == "secret_assignment")
    assert {(a.back, a.starts, a.starts_lower, a.skip) for a in rule.anchors} == {
        (rule.anchors[0].back, rule.anchors[0].starts, rule.anchors[0].starts_lower, True)
    }


def test_bare_innocent_keys_are_innocent() -> None:
    # the anchors skip them: every one must be a key the validator rejects, whatever follows
    for keyword, suffixes in BARE_INNOCENT_KEYS.items():
        assert keyword in ASSIGNMENT_KEYWORDS
        for suffix in suffixes:
            assert not sensitive_key(keyword + suffix), keyword + suffix


def _assignment_hits(fast: Scrubber, text: str) -> int:
    engine = fast._fast
    assert engine is not None
    hits = engine.auto.scan(text.encode("utf-8", "surrogatepass"))
    rules = [engine.targets[expr][0] for _, expr in hits]
    return sum(idx >= 0 and fast.rules[idx].name == "secret_assignment" for idx in rules)


@pytest.mark.parametrize("keyword", sorted(BARE_INNOCENT_KEYS))
def test_bare_innocent_keys_are_skipped_exactly(keyword: str) -> None:
    fast, python = PAIRS["default"]
    suffixes = [*BARE_INNOCENT_KEYS[keyword], "", "s", "S", "x", "_secret", "s_password", "_"]
    spellings = [keyword, keyword.upper(), keyword.title(), keyword[:-1] + keyword[-1].upper()]
    before = ["", " ", "\n", '"', "(", "x", "_", "-", ".", "7", "\u212a", "\u017f", "max_"]
    before += ["bearer_", "Bearer", "password_", "\u0130"]
    after = ["=", " = ", '": ', "'=", ":\t", ":"]
    skipped = 0
    for spelling in spellings:
        for suffix in suffixes:
            for b in before:
                for a in after:
                    text = f"{b}{spelling}{suffix}{a}hunter2secret and more"
                    assert fast.find(text) == python.find_python(text), text
                    bare = spelling == keyword and suffix in BARE_INNOCENT_KEYS[keyword]
                    if bare and not (b and (b[-1].isalnum() or b[-1] in "_.-\u212a\u017f")):
                        assert _assignment_hits(fast, text) == 0, text  # skipped by the engine
                        skipped += 1
                    elif not bare:
                        assert _assignment_hits(fast, text) > 0, text
    assert skipped


def test_innocent_assignments_in_code_are_skipped_alike() -> None:
    fast, python = PAIRS["default"]
    lines = [
        "    tokens = client.exchange(code=request.args['code'], redirect_uri=CALLBACK_URL)",
        "    max_tokens=512; key = 'a'",
        "    password = hunter22",
        "    tokens=secret_key=abc123",
    ]
    text = "\n".join(lines * 40)
    assert fast.find(text) == python.find_python(text)
    # each copy: `password = hunter22`, and `secret_key=abc123` inside the innocent `tokens=` match
    assert len(fast.find(text)) == 80


@pytest.mark.parametrize("engine", ["hyperscan", "python"])
@pytest.mark.parametrize(
    "text",
    [
        "tokens=secret_key=abc123",
        "key = password=hunter2hunter2",
        "max_tokens=secret=abc123xyz",
        "auth_mode: token=ghs_notreallyatoken99",
        "pin=required password=hunter22",
    ],
)
def test_a_rejected_match_never_hides_a_secret_inside_it(engine: str, text: str) -> None:
    fast, python = PAIRS["default"]
    scrubbed = (fast if engine == "hyperscan" else python).scrub_text(text)[0]
    secret = text.rsplit("=", 1)[1]
    assert secret not in scrubbed, scrubbed
    assert "[redacted:" in scrubbed
