"""``secret_tail``: a growing text is never published cut inside a secret, by any rule."""

from __future__ import annotations

import re

import pytest
import regex
from hypothesis import given
from hypothesis import strategies as st

from redaction import RedactionPolicy, ScrubOptions, UserPattern, secret_tail
from redaction._partial import _matchers
from redaction._patterns import VALUE_RULES
from tests.redaction.examples import VALUE_EXAMPLES

EVERY = ScrubOptions(emails=True, phones=True)
POSITIVES = [(n, t, c) for n, (pos, _) in VALUE_EXAMPLES.items() for t, c in pos]


def cuts(text: str, core: str) -> range:
    """Every length of ``text`` that ends strictly inside ``core``."""
    at = text.index(core)
    return range(at + 1, at + len(core))


@pytest.mark.parametrize(("rule", "text", "core"), POSITIVES)
def test_no_example_secret_is_ever_published_in_part(rule: str, text: str, core: str) -> None:
    at = text.index(core)
    for n in cuts(text, core):
        held = secret_tail(text[:n], options=EVERY)
        assert held <= at, (rule, text[:n], text[:held])
        # and what is published is clean: it ends inside no secret either
        assert secret_tail(text[:held], options=EVERY) == held


@pytest.mark.parametrize(("rule", "text", "core"), POSITIVES)
def test_a_finished_secret_is_whole_for_the_scrubber(rule: str, text: str, core: str) -> None:
    # Once the text goes on past the secret, nothing is held for it: the scrubber sees it all.
    if rule == "private_key":
        pytest.skip("runs to the end of the text when truncated: held until the text is whole")
    policy = RedactionPolicy(scrubbing=EVERY)
    done = text + " and then some more words "
    published = done[: secret_tail(done, options=EVERY)]
    assert core in published and core not in policy.scrub_text(published)


@given(
    prose=st.text(max_size=30),
    example=st.sampled_from(POSITIVES),
    into=st.floats(0.01, 0.99),
)
def test_any_text_before_a_secret_cut_anywhere(
    prose: str, example: tuple[str, str, str], into: float
) -> None:
    _, text, core = example
    whole = f"{prose} {text}"
    at = len(prose) + 1 + text.index(core)
    n = at + max(1, min(len(core) - 1, int(len(core) * into)))
    assert secret_tail(whole[:n], options=EVERY) <= at


GROWING = st.text(alphabet="0123456789 4-:=abBeasrpkytoAIZ_/@.", max_size=40)


@given(text=GROWING, split=st.integers(0, 40))
def test_checking_only_the_new_part_gives_the_same_answer(text: str, split: int) -> None:
    k = min(split, len(text))
    if secret_tail(text[:k], options=EVERY) == k:  # a clean prefix, as the tap keeps
        assert secret_tail(text, k, EVERY) == secret_tail(text, options=EVERY)


INTENTS = [
    "Searching for the OAuth token ",
    "Reading the password reset handler ",
    "Opening config/retry.toml ",
    "Checking the API key rotation job ",
    "Grepping for 😀 in 日本語 docs ",
    "Listing files in src/auth ",
    "Running the 12 unit tests ",
]


@pytest.mark.parametrize("intent", INTENTS)
def test_ordinary_intents_are_not_held(intent: str) -> None:
    assert secret_tail(intent) == len(intent)


@pytest.mark.parametrize(
    ("text", "held"),
    [
        ("Paying with 4111 1111 ", "Paying with "),  # a card number's groups so far
        ("Paying with 4111 1111 1111 1111", "Paying with "),  # could grow to 19 digits
        ("Calling with Bearer ", "Calling with Bearer "),  # only the token is secret
        ("Calling with Bearer abcd", "Calling with Bearer "),
        ("Logging in with password: hün", "Logging in with password: "),  # non-ASCII too
        ("Using postgres://app:hunt", "Using postgres://app:"),
        ("Loading -----BEGIN RSA PRIVATE KEY-----\nMIIE", "Loading "),
    ],
)
def test_what_is_held(text: str, held: str) -> None:
    assert text[: secret_tail(text)] == held


def test_disabled_and_optional_rules_follow_the_options() -> None:
    text = "Mail bob.smith@exam"
    assert secret_tail(text) == len(text)  # emails are off by default: nothing to hold
    assert text[: secret_tail(text, options=EVERY)] == "Mail "
    off = ScrubOptions(disable=("credit_card",))
    assert secret_tail("Paying 4111 1111 ", options=off) == len("Paying 4111 1111 ")


def test_user_patterns_are_held_too() -> None:
    opts = ScrubOptions(patterns=(UserPattern("ticket", r"ACME-\d{6} [A-Z]{3}"),))
    text = "Filing ACME-123456 QX"
    assert text[: secret_tail(text, options=opts)] == "Filing "
    assert secret_tail(text) == len(text)  # not a secret under the default policy


def test_rules_with_a_secret_part_hold_only_that_part() -> None:
    # Derived from the patterns: every rule that names its secret group has a usable lead-in,
    # so a rule added later is held precisely or (no usable lead-in) as a whole, never less.
    matchers = _matchers(EVERY)
    assert matchers is not None
    for rule, matcher in zip(VALUE_RULES, matchers, strict=True):
        assert (matcher.head is not None) == (rule.secret is not None), rule.name


@pytest.mark.parametrize("rule", VALUE_RULES, ids=lambda r: r.name)
def test_the_regex_module_reads_every_rule_as_re_does(rule: object) -> None:
    pattern: re.Pattern[str] = rule.regex  # pyright: ignore[reportAttributeAccessIssue]
    again = regex.compile(pattern.pattern, pattern.flags)
    positives, negatives = VALUE_EXAMPLES[rule.name]  # pyright: ignore[reportAttributeAccessIssue]
    for text in [t for t, _ in positives] + negatives + INTENTS:
        assert [m.span() for m in pattern.finditer(text)] == [
            m.span() for m in again.finditer(text)
        ], text
