"""The built-in secret patterns: value rules (text) and the key-name rule (mapping keys).

Each value rule is a compiled regex plus the literal substrings that must occur in a string for
the rule to be worth running (the prefilter: ``str.__contains__`` is a fast C scan, so a string
with none of a rule's literals costs one scan per rule instead of a regex pass). A rule may name
the part of its match that is secret (``secret`` group) so that, e.g., only the password of a
connection string is replaced, and may carry a validator (Luhn for cards).

The list of rule names is documented in ``docs/redaction.md``; a test fails when they differ.
"""

from __future__ import annotations

import base64
import binascii
import re
import string
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import product
from typing import Any, Final

# --------------------------------------------------------------------------------------------
# Key-name rule
# --------------------------------------------------------------------------------------------

# Applied to a *normalised* key: camelCase split, lower-cased, every run of non-alphanumerics
# turned into ``_`` (``X-Api-Key`` -> ``x_api_key``, ``accessToken`` -> ``access_token``).
# ``(?:^|_)`` / ``(?:_|$)`` are the word boundaries; substrings only for words that are
# unambiguous inside compounds (``dbpassword``). ``token`` is excluded when it is a count or a
# tokenizer (``max_tokens``, ``tokenizer``, ``token_count``), ``auth`` must be a whole word
# (``author``, ``oauth_provider`` stay) and ``session`` is not sensitive (``session_id`` stays).
_B: Final = r"(?:^|_)"
_E: Final = r"(?:_|$)"
KEY_RULE_SOURCE: Final = (
    r"(?P<password>pass(?:word|wd|phrase)|" + _B + r"pwd" + _E + r")"
    r"|(?P<secret>secret)"
    r"|(?P<token>token(?!s|i[sz]e|i[sz]er|i[sz]ation|_(?:count|limit|usage|budget|type|len|length"
    r"|estimate|ids?)" + _E + r"))"
    r"|(?P<auth>authori[sz]ation|" + _B + r"(?:auth|bearer)" + _E + r")"
    r"|(?P<cookie>cookie)"
    r"|(?P<credential>credential|" + _B + r"creds?" + _E + r")"
    r"|(?P<api_key>api_?key|access_?key)"
    r"|(?P<private_key>(?:private|signing|hmac|encryption|master|ssh|session)_?key)"
    r"|(?P<card>credit_?card|card_?number|" + _B + r"(?:cvv2?|cvc)" + _E + r")"
    r"|(?P<national_id>" + _B + r"ssn" + _E + r"|social_?security)"
    r"|(?P<pin>" + _B + r"(?:pin|otp|totp|mfa_code)" + _E + r")"
)
KEY_CATEGORIES: Final[tuple[str, ...]] = (
    "password",
    "secret",
    "token",
    "auth",
    "cookie",
    "credential",
    "api_key",
    "private_key",
    "card",
    "national_id",
    "pin",
)
"""Categories of the key-name rule; a redacted value says ``[redacted:key:<category>]``."""

KEY_RULE: Final = re.compile(KEY_RULE_SOURCE)

_CAMEL_1 = re.compile(r"([a-z0-9])([A-Z])")
_CAMEL_2 = re.compile(r"([A-Z]+)([A-Z][a-z])")
_NON_ALNUM = re.compile(r"[^a-z0-9]+")


@lru_cache(maxsize=8192)
def normalise_key(key: str) -> str:
    """``X-Api-Key`` -> ``x_api_key``; ``accessToken`` -> ``access_token``."""
    key = _CAMEL_2.sub(r"\1_\2", _CAMEL_1.sub(r"\1_\2", key))
    return _NON_ALNUM.sub("_", key.lower()).strip("_")


# --------------------------------------------------------------------------------------------
# Value rules
# --------------------------------------------------------------------------------------------

Validator = Callable[[str, "re.Match[str]"], bool]
"""``validator(text, match)``: extra check on a match (``text`` is the whole scanned string)."""


@dataclass(frozen=True)
class ValueRule:
    """One value pattern. ``literals``: substrings one of which must occur in the lower-cased
    text (``None``: always run, or a digit run for DIGIT_RULES); ``secret``: regex group that is
    the secret (default: the whole match); ``validator``: extra check on the secret text."""

    name: str
    regex: re.Pattern[str]
    literals: tuple[str, ...] | None
    secret: str | None = None
    validator: Validator | None = None
    optional: bool = False
    """Off unless enabled (emails, phone numbers)."""
    requires: str = ""
    """Characters one of which must also occur in the string (``:=`` for assignments)."""
    description: str = field(default="", compare=False)
    anchors: tuple[Anchor, ...] = field(default=(), compare=False)
    """Where a match can start, for a multi-pattern engine (see ``Anchor``)."""


@dataclass(frozen=True)
class Anchor:
    """A rule's candidate finder for a multi-pattern engine (Hyperscan, Vectorscan).

    ``pattern`` is a Hyperscan expression over the UTF-8 bytes of the text, without look-around,
    that matches a prefix of every match of the rule (a superset: it may match where the rule
    does not). The engine reports where a match of it *ends*; the rule is then tried only at the
    candidate starts that end implies, and those must include every position where the rule's
    regex matches:

    * ``length`` > 0: the anchor always spans ``length`` characters; the one candidate is
      ``end - length``;
    * ``whole``: the rule runs over the whole string, as the pure-Python path runs it;
    * otherwise the candidates are the matches of ``starts`` (a Python regex) in the ``back``
      characters before ``end`` (before the final ``:``/``=``, the blanks and the one quote in
      front of it, when ``skip`` is set).
    """

    pattern: str
    """Hyperscan syntax; non-ASCII characters as ``\\xHH`` UTF-8 byte escapes."""
    length: int = 0
    back: int = 0
    starts: re.Pattern[str] | None = None
    skip: bool = False
    whole: bool = False
    caseless: bool = False
    starts_lower: re.Pattern[str] | None = None
    """Optional, for speed: finds the same starts in the lower-cased window when it is ASCII
    (a case-insensitive ``starts`` is slow)."""
    """Compiled case-insensitively (ASCII letters; look-alikes are anchors of their own)."""


# Characters that Python's case-insensitive matching (and ``str.lower``) takes for an ASCII
# letter: ``(?i:basic)`` matches "baſic", ``(?i:pin)`` matches "pİn". A test derives the table
# again from the whole Unicode range.
CASE_VARIANTS: Final[dict[str, tuple[str, ...]]] = {
    "i": ("\u0130", "\u0131"),
    "k": ("\u212a",),
    "s": ("\u017f",),
}

# The non-ASCII characters that Python's ``\d`` matches (Unicode 14.0, Python 3.11); other
# Unicode versions compute theirs (a test checks the table).
_ND_RANGES_14: Final = (
    (0x660, 0x669), (0x6F0, 0x6F9), (0x7C0, 0x7C9), (0x966, 0x96F), (0x9E6, 0x9EF),
    (0xA66, 0xA6F), (0xAE6, 0xAEF), (0xB66, 0xB6F), (0xBE6, 0xBEF), (0xC66, 0xC6F),
    (0xCE6, 0xCEF), (0xD66, 0xD6F), (0xDE6, 0xDEF), (0xE50, 0xE59), (0xED0, 0xED9),
    (0xF20, 0xF29), (0x1040, 0x1049), (0x1090, 0x1099), (0x17E0, 0x17E9), (0x1810, 0x1819),
    (0x1946, 0x194F), (0x19D0, 0x19D9), (0x1A80, 0x1A89), (0x1A90, 0x1A99), (0x1B50, 0x1B59),
    (0x1BB0, 0x1BB9), (0x1C40, 0x1C49), (0x1C50, 0x1C59), (0xA620, 0xA629), (0xA8D0, 0xA8D9),
    (0xA900, 0xA909), (0xA9D0, 0xA9D9), (0xA9F0, 0xA9F9), (0xAA50, 0xAA59), (0xABF0, 0xABF9),
    (0xFF10, 0xFF19), (0x104A0, 0x104A9), (0x10D30, 0x10D39), (0x11066, 0x1106F),
    (0x110F0, 0x110F9), (0x11136, 0x1113F), (0x111D0, 0x111D9), (0x112F0, 0x112F9),
    (0x11450, 0x11459), (0x114D0, 0x114D9), (0x11650, 0x11659), (0x116C0, 0x116C9),
    (0x11730, 0x11739), (0x118E0, 0x118E9), (0x11950, 0x11959), (0x11C50, 0x11C59),
    (0x11D50, 0x11D59), (0x11DA0, 0x11DA9), (0x16A60, 0x16A69), (0x16AC0, 0x16AC9),
    (0x16B50, 0x16B59), (0x1D7CE, 0x1D7FF), (0x1E140, 0x1E149), (0x1E2F0, 0x1E2F9),
    (0x1E950, 0x1E959), (0x1FBF0, 0x1FBF9),
)  # fmt: skip


@lru_cache(maxsize=1)
def non_ascii_digits() -> tuple[str, ...]:
    """Every non-ASCII character Python's ``\\d`` matches (this interpreter's Unicode)."""
    if unicodedata.unidata_version == "14.0.0":
        return tuple(chr(c) for lo, hi in _ND_RANGES_14 for c in range(lo, hi + 1))
    return tuple(chr(c) for c in range(128, 0x110000) if chr(c).isdecimal())


NON_ASCII_DIGIT: Final = "<non-ASCII digit>"
"""An anchor pattern the engine expands to every non-ASCII ``\\d`` character (on first use)."""


def hs_text(text: str) -> str:
    """``text`` as a literal Hyperscan expression (non-ASCII as UTF-8 byte escapes)."""
    out: list[str] = []
    for ch in text:
        if ch.isascii() and ch.isalnum():
            out.append(ch)
        elif ch.isascii():
            out.append("\\" + ch)
        else:
            out.append("".join(f"\\x{b:02X}" for b in ch.encode("utf-8", "surrogatepass")))
    return "".join(out)


def spellings(text: str) -> list[str]:
    """``text`` and its spellings with the look-alikes of ``CASE_VARIANTS`` (plain first)."""
    options = [(ch, *CASE_VARIANTS.get(ch.lower(), ())) if ch.isascii() else (ch,) for ch in text]
    return ["".join(p) for p in product(*options)]


def _lits(*texts: str) -> tuple[Anchor, ...]:
    return tuple(Anchor(hs_text(t), length=len(t)) for t in texts)


def _ci(*texts: str) -> tuple[Anchor, ...]:
    """Anchors for ``(?i:text)``: case-insensitive, and one per look-alike spelling."""
    return tuple(
        Anchor(hs_text(v), length=len(t), caseless=True) for t in texts for v in spellings(t)
    )


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _card_ok(text: str, m: re.Match[str]) -> bool:
    digits = m.group().replace(" ", "").replace("-", "")
    # Issuer prefixes start with 2-6 (Mastercard 2-series, Amex/Diners/JCB 3, Visa 4,
    # Mastercard/Maestro 5, Discover/UnionPay 6): rules out timestamps and most ids.
    return 13 <= len(digits) <= 19 and digits[0] in "23456" and _luhn(digits)


def _has_digit(text: str) -> bool:
    return any(c.isdigit() for c in text)


def _bearer_ok(text: str, m: re.Match[str]) -> bool:
    # "Bearer authentication" is prose; real tokens carry digits or are long.
    token = m.group("secret")
    return _has_digit(token) or len(token) >= 24


def _basic_ok(text: str, m: re.Match[str]) -> bool:
    token = m.group("secret")
    try:
        raw = base64.b64decode(token + "=" * (-len(token) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return b":" in raw and raw.isascii() and all(32 <= b < 127 for b in raw)


def _phone_ok(text: str, m: re.Match[str]) -> bool:
    return 10 <= sum(c.isdigit() for c in m.group()) <= 15


def _digit_in_secret(text: str, m: re.Match[str]) -> bool:
    return _has_digit(m.group("secret") if "secret" in m.re.groupindex else m.group())


_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_NOT_SECRETS = frozenset({"true", "false", "null", "none", "undefined", "nil", "required"})


@lru_cache(maxsize=8192)
def sensitive_key(key: str) -> bool:
    """The key-name rule finds ``key`` sensitive (cached: keys repeat, in code above all)."""
    return KEY_RULE.search(normalise_key(key)) is not None


def assignment_key_start(text: str, start: int) -> int:
    """Where ``secret_assignment``'s validator starts the key whose keyword is at ``start``:
    up to 40 key characters to the left."""
    lo = start
    while lo > 0 and start - lo < 40 and text[lo - 1] in _KEY_CHARS:
        lo -= 1
    return lo


def _assignment_ok(text: str, m: re.Match[str]) -> bool:
    # The regex starts at the keyword; extend the key to the left and judge it by the key rule.
    start = m.start()
    key = text[assignment_key_start(text, start) : start] + m.group("key")
    if not sensitive_key(key):
        return False
    return m.group("secret").lower() not in _NOT_SECRETS


_NB = r"(?<![A-Za-z0-9_-])"  # not preceded by a token character
_NA = r"(?![A-Za-z0-9_-])"  # not followed by one


def _r(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(pattern, flags)


ASSIGNMENT_KEYWORDS: Final = (
    *("pass", "pwd", "secret", "token", "auth", "key", "cookie", "cred", "pin"),
    *("otp", "ssn", "cvv", "cvc"),
)
_SCHEME_ANCHOR: Final = Anchor(
    r"[A-Za-z][A-Za-z0-9+.\-]{0,30}:\/\/", back=34, starts=re.compile(r"[A-Za-z]")
)
# the keyword, then key characters, an optional quote, blanks and ':' or '=' (the key part is
# at most 6 + 40 characters: the rule's own bound)
_KEY_CLASS: Final = r"[A-Za-z0-9_.\-]"
_ASSIGNMENT_END: Final = _KEY_CLASS + r"*[\"']?[ \t]*[:=]"
_ASSIGNMENT_STARTS: Final = re.compile("(?=(?i:" + "|".join(ASSIGNMENT_KEYWORDS) + "))")
_ASSIGNMENT_STARTS_LOWER: Final = re.compile("(?=(?:" + "|".join(ASSIGNMENT_KEYWORDS) + "))")
BARE_INNOCENT_KEYS: Final[dict[str, tuple[str, ...]]] = {
    "token": ("s", "izer", "_count", "_limit", "_usage", "_type", "_ids"),
    "key": ("", "s", "_id", "_name", "word", "words"),
    "auth": ("or", "ors"),
}
"""Keys the key-name rule finds innocent, by keyword and what follows it: the commonest
near-misses of agent code and JSON (``tokens = ...``, ``"key": ...``, ``"author": ...``). When
such a key is lower-case and no key character precedes it, its key run (the key, and the
validator's extension to the left) is the key itself: no match can be kept there, so the
anchors do not report it (a test checks that every one is innocent)."""
_RUN_BEFORE: Final = (
    "(?:" + "|".join([_KEY_CLASS, *(hs_text(c) for v in CASE_VARIANTS.values() for c in v)]) + ")"
)
"""A key character or a keyword letter's look-alike: a key run goes on to the left."""


def trie(words: Iterable[str]) -> dict[str, Any]:
    """``words`` as nested dicts by character; ``""`` marks where a word ends."""
    root: dict[str, Any] = {}
    for w in words:
        node = root
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}
    return root


def _complement(suffixes: tuple[str, ...]) -> str:
    """A Hyperscan expression for the strings of key characters that are not ``suffixes``."""
    key_chars = string.ascii_letters + string.digits + "_.-"

    def comp(node: dict[str, Any]) -> str:
        taken = sorted(c for c in node if c)
        others = "".join(hs_text(c) for c in key_chars if c not in taken)
        alts = [f"[{others}]{_KEY_CLASS}*", *(hs_text(c) + comp(node[c]) for c in taken)]
        body = "(?:" + "|".join(alts) + ")"
        return body if "" in node else body + "?"

    return comp(trie(suffixes))


def _assignment_anchor(pattern: str, caseless: bool) -> Anchor:
    return Anchor(
        pattern,
        back=46,
        starts=_ASSIGNMENT_STARTS,
        starts_lower=_ASSIGNMENT_STARTS_LOWER,
        skip=True,
        caseless=caseless,
    )


def _assignment_anchors(keyword: str) -> tuple[Anchor, ...]:
    bare = BARE_INNOCENT_KEYS.get(keyword)
    plain = [v for v in spellings(keyword) if v.isascii()]
    out = [
        _assignment_anchor(hs_text(v) + _ASSIGNMENT_END, True)
        for v in spellings(keyword)
        if bare is None or not v.isascii()
    ]
    if bare is not None and plain:
        # every match but a bare innocent key: after a key character (any case, any key), the
        # keyword in some upper case (any key), the keyword in lower case with another key
        not_lower = "|".join(
            keyword[:i]
            + keyword[i].upper()
            + (f"(?i:{rest})" if (rest := keyword[i + 1 :]) else "")
            for i in range(len(keyword))
        )
        out += [
            _assignment_anchor(_RUN_BEFORE + f"(?i:{keyword})" + _ASSIGNMENT_END, False),
            _assignment_anchor(f"(?:{not_lower})" + _ASSIGNMENT_END, False),
            _assignment_anchor(keyword + _complement(bare) + r"[\"']?[ \t]*[:=]", False),
        ]
    return tuple(out)


_ASSIGNMENT_ANCHORS: Final = tuple(a for k in ASSIGNMENT_KEYWORDS for a in _assignment_anchors(k))
# ASCII digits here; a string with a non-ASCII digit runs the digit rules as a whole
_WIDE_DIGITS: Final = Anchor(NON_ASCII_DIGIT, whole=True)
_CARD_ANCHORS: Final = (
    Anchor(r"[2-6](?:[ \-]?[0-9]){12}", back=25, starts=re.compile("[2-6]")),
    _WIDE_DIGITS,
)
_EMAIL_ANCHOR: Final = Anchor(
    r"@[A-Za-z0-9\-]", back=66, starts=re.compile(r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]")
)
_PHONE_ANCHORS: Final = (
    Anchor(
        r"(?:\([0-9]{3}\) ?|[0-9]{3}[.\-])[0-9]{3}[.\-][0-9]{4}",
        back=19,
        starts=re.compile(r"[+(\d]"),
    ),
    Anchor(r"\+[1-9]", length=2),
    _WIDE_DIGITS,
)

# Order matters only for overlapping matches: overlapping spans are merged and labelled by the
# rule that starts first.
VALUE_RULES: Final[tuple[ValueRule, ...]] = (
    ValueRule(
        "private_key",
        _r(
            r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
            r"(?:-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|\Z)"
            r"|PuTTY-User-Key-File-\d+:[\s\S]*?(?:Private-MAC: *[0-9a-fA-F]+|\Z)"
        ),
        ("PRIVATE KEY", "PuTTY-User-Key-File"),
        anchors=_lits("-----BEGIN", "PuTTY-User-Key-File-"),
        description="PEM/OpenSSH/PGP private key blocks (to the end of the text when truncated)",
    ),
    ValueRule(
        "jwt",
        _r(_NB + r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*" + _NA),
        ("eyJ",),
        anchors=_lits("eyJ"),
        description="JSON Web Tokens (header.payload.signature, base64url)",
    ),
    ValueRule(
        "bearer",
        _r(r"(?i:\bbearer)\s+(?P<secret>[A-Za-z0-9._~+/-]{16,}=*)"),
        ("bearer",),
        secret="secret",
        validator=_bearer_ok,
        anchors=_ci("bearer"),
        description="`Bearer <token>` (the token)",
    ),
    ValueRule(
        "basic_auth",
        _r(r"(?i:\bbasic)\s+(?P<secret>[A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])"),
        ("basic",),
        secret="secret",
        validator=_basic_ok,
        anchors=_ci("basic"),
        description="`Basic <base64 user:password>` (decoded and checked for `:`)",
    ),
    ValueRule(
        "aws_access_key",
        _r(r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Z0-9])"),
        ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
        anchors=(Anchor("(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])", length=4),),
        description="AWS access key ids (`AKIA…`, `ASIA…`)",
    ),
    ValueRule(
        "github_token",
        _r(
            r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})"
            r"(?![A-Za-z0-9_])"
        ),
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        anchors=(Anchor("gh[pousr]_", length=4), *_lits("github_pat_")),
        description="GitHub tokens (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`)",
    ),
    ValueRule(
        "gitlab_token",
        _r(_NB + r"(?:glpat|gldt|glft|glsoat|glrt|glcbt|glptt)-[A-Za-z0-9_-]{20,64}" + _NA),
        ("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "glcbt-", "glptt-"),
        anchors=_lits("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "glcbt-", "glptt-"),
        description="GitLab tokens (`glpat-`, …)",
    ),
    ValueRule(
        "slack_token",
        _r(
            r"(?<![A-Za-z0-9])xox[abposre]-[A-Za-z0-9-]{10,}"
            r"|https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]{8,}"
        ),
        ("xox", "hooks.slack.com"),
        anchors=(Anchor("xox[abposre]-", length=5), *_lits("https://hooks.slack.com/")),
        description="Slack tokens (`xoxb-`, `xoxp-`, …) and webhook URLs",
    ),
    ValueRule(
        "stripe_key",
        _r(r"(?<![A-Za-z0-9])(?:(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,})"),
        ("_live_", "_test_", "whsec_"),
        anchors=(Anchor("[sr]k_(?:live|test)_", length=8), *_lits("whsec_")),
        description="Stripe secret/restricted keys and webhook secrets",
    ),
    ValueRule(
        "anthropic_key",
        _r(_NB + r"sk-ant-[A-Za-z0-9_-]{20,}"),
        ("sk-ant-",),
        anchors=_lits("sk-ant-"),
        description="Anthropic API keys (`sk-ant-…`)",
    ),
    ValueRule(
        "langfuse_key",
        _r(_NB + r"sk-lf-[A-Za-z0-9-]{8,}"),
        ("sk-lf-",),
        anchors=_lits("sk-lf-"),
        description="Langfuse secret keys (`sk-lf-…`)",
    ),
    ValueRule(
        "openai_key",
        _r(_NB + r"sk-(?!ant-|lf-)(?:proj-|svcacct-|admin-)?(?P<secret>[A-Za-z0-9_-]{20,})"),
        ("sk-",),
        validator=_digit_in_secret,
        anchors=_lits("sk-"),
        description="OpenAI-style keys (`sk-…`, `sk-proj-…`; at least one digit)",
    ),
    ValueRule(
        "google_api_key",
        _r(r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}" + _NA),
        ("AIza",),
        anchors=_lits("AIza"),
        description="Google API keys (`AIza…`)",
    ),
    ValueRule(
        "huggingface_token",
        _r(r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{30,}(?![A-Za-z0-9_])"),
        ("hf_",),
        validator=_digit_in_secret,
        anchors=_lits("hf_"),
        description="Hugging Face tokens (`hf_…`)",
    ),
    ValueRule(
        "sendgrid_key",
        _r(r"(?<![A-Za-z0-9])SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{30,64}" + _NA),
        ("SG.",),
        anchors=_lits("SG."),
        description="SendGrid API keys (`SG.x.y`)",
    ),
    ValueRule(
        "pypi_token",
        _r(r"(?<![A-Za-z0-9])pypi-AgE[A-Za-z0-9_-]{50,}"),
        ("pypi-AgE",),
        anchors=_lits("pypi-AgE"),
        description="PyPI upload tokens",
    ),
    ValueRule(
        "npm_token",
        _r(r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9_])"),
        ("npm_",),
        anchors=_lits("npm_"),
        description="npm access tokens (`npm_…`)",
    ),
    ValueRule(
        "connection_string",
        _r(r"[A-Za-z][A-Za-z0-9+.-]{0,30}://[^\s/:@?#\"'<>]*:(?P<secret>[^\s@/?#\"'<>]+)@"),
        ("://",),
        secret="secret",
        anchors=(_SCHEME_ANCHOR,),
        description="passwords in URLs and connection strings (`scheme://user:PASSWORD@host`)",
    ),
    ValueRule(
        "secret_assignment",
        # The key is checked by the key-name rule (the validator gets the whole match).
        _r(
            r"(?P<key>(?i:pass|pwd|secret|token|auth|key|cookie|cred|pin|otp|ssn|cvv|cvc)"
            r"[A-Za-z0-9_.-]{0,40})[\"']?[ \t]*[:=][ \t]*[\"']?"
            r"(?P<secret>(?:(?i:bearer|basic|token|bot)[ \t]+)?[^\s\"',;&)}\]]{3,})"
        ),
        ASSIGNMENT_KEYWORDS,
        secret="secret",
        validator=_assignment_ok,
        requires=":=",
        anchors=_ASSIGNMENT_ANCHORS,
        description="`<sensitive key>=value` / `<sensitive key>: value` inside text "
        "(the key is judged by the key-name rule)",
    ),
    ValueRule(
        "credit_card",
        # not inside a longer token: hex ids and hashes hold digit runs that pass Luhn
        _r(r"(?<![A-Za-z0-9_.-])[2-6](?:[ -]?\d){12,18}(?![A-Za-z0-9_])"),
        None,  # needs a digit run; the prefilter is _DIGIT_RUN below
        validator=_card_ok,
        anchors=_CARD_ANCHORS,
        description="payment card numbers (13-19 digits, issuer prefix 2-6, Luhn-checked)",
    ),
    ValueRule(
        "email",
        _r(
            r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})*"
            r"\.[A-Za-z]{2,24}(?![A-Za-z0-9])"
        ),
        ("@",),
        optional=True,
        anchors=(_EMAIL_ANCHOR,),
        description="email addresses (off by default: `[scrub] emails = true`)",
    ),
    ValueRule(
        "phone",
        _r(
            r"(?<![\w+.-])(?:\+\d{1,3}[ .-])?(?:\(\d{3}\) ?|\d{3}[.-])\d{3}[.-]\d{4}(?![\w-])"
            r"|(?<![\w+])\+[1-9]\d{0,3}(?:[ .-]?\d{2,5}){2,5}(?![\w-])"
        ),
        None,
        validator=_phone_ok,
        optional=True,
        anchors=_PHONE_ANCHORS,
        description="phone numbers (off by default: `[scrub] phones = true`)",
    ),
)

DIGIT_RULES: Final = frozenset({"credit_card", "phone"})
"""Rules whose prefilter is a run of digits (see ``DIGIT_RUN``)."""
DIGIT_RUN: Final = re.compile(r"\d\d\d")

BUILTIN_PATTERNS: Final[tuple[str, ...]] = tuple(r.name for r in VALUE_RULES)
"""Names of the built-in value rules, in order (documented in docs/redaction.md)."""
