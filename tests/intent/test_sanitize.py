"""sanitize_label: model-written text made into one safe line of plain text."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracing import sanitize_label

FAMILY = "👨\u200d👩\u200d👧"  # one grapheme, five code points
FLAG_FR = "🇫🇷"  # two regional indicators
THUMB_DARK = "👍🏿"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Searching for OAuth handlers", "Searching for OAuth handlers"),
        ("  Reading\tthe\n\nrouter  \r\n", "Reading the router"),
        ("line\u2028sep\u2029para\x85nel\xa0nbsp", "line sep para nel nbsp"),
        ("\x1b[31mred\x1b[0m text", "red text"),
        ("\x1b[1;32;40mbold\x1b[m", "bold"),
        ("clear\x1b[2J\x1b[Hscreen", "clearscreen"),
        ("\x9b31mC1 CSI", "C1 CSI"),
        ("\x1b]0;evil title\x07visible", "visible"),
        ("\x1b]8;;https://evil.example\x1b\\click here\x1b]8;;\x1b\\ now", "click here now"),
        ("\x9d8;;https://x\x9clink", "link"),
        ("before \x1b]0;unterminated title", "before"),
        ("\x1bPdcs payload\x1b\\after", "after"),
        ("lone ESC\x1b here", "lone ESC here"),
        ("nul\x00 bell\x07 del\x7f c1\x90\x9f done", "nul bell del c1 done"),
        ("back\bspace", "backspace"),
        ("abc\u202edcba\u202c ok", "abcdcba ok"),
        (
            "\u2066isolate\u2069 \u202aembed\u202c \u200ertl mark stays\u200f",
            "isolate embed \u200ertl mark stays\u200f",
        ),
        ("lone \ud800 high and \udfff low", "lone high and low"),
        ("pair \ud83d\ude00 joined", "pair 😀 joined"),
        ("café naïve 日本語 😀", "café naïve 日本語 😀"),
        ("", ""),
        (" \n\t ", ""),
    ],
)
def test_table(text: str, expected: str) -> None:
    assert sanitize_label(text) == expected


@pytest.mark.parametrize(
    ("text", "max_chars", "expected"),
    [
        ("abcdef", 6, "abcdef"),
        ("abcdefg", 6, "abcde…"),
        ("abcd fg", 6, "abcd…"),  # no space before the ellipsis
        ("abcdefg", 1, "…"),
        ("abcdefg", 0, ""),
        ("e\u0301" * 10, 6, "e\u0301e\u0301…"),  # never split a letter from its accent
        ("abc" + FAMILY + "xyz", 6, "abc…"),  # nor a ZWJ sequence
        ("abc" + FAMILY + "xyz", 9, "abc" + FAMILY + "…"),
        ("ab" + FLAG_FR + FLAG_FR, 5, "ab" + FLAG_FR + "…"),  # nor a flag
        ("a" + FLAG_FR * 3, 5, "a" + FLAG_FR + "…"),
        ("abc" + THUMB_DARK + "z", 5, "abc…"),  # nor a skin tone
        ("\u1100\u1161\u11a8\u1100\u1161\u11a8", 5, "\u1100\u1161\u11a8…"),  # Hangul jamo
        ("x" * 200, 120, "x" * 119 + "…"),
    ],
)
def test_truncation(text: str, max_chars: int, expected: str) -> None:
    assert sanitize_label(text, max_chars) == expected


def test_very_long_input_stays_bounded() -> None:
    assert sanitize_label("Searching " + "x" * 1_000_000) == "Searching " + "x" * 109 + "…"
    # a flood of escape sequences is cut before the work starts (documented)
    assert sanitize_label("Searching " + "\x1b[31m" * 100_000 + "tail") == "Searching"


def test_non_string_input() -> None:
    assert sanitize_label(None) == ""  # pyright: ignore[reportArgumentType]
    assert sanitize_label(42) == "42"  # pyright: ignore[reportArgumentType]


def _forbidden(ch: str) -> bool:
    return (
        unicodedata.category(ch) in ("Cc", "Cs")
        or "\u202a" <= ch <= "\u202e"
        or "\u2066" <= ch <= "\u2069"
    )


nasty = st.lists(
    st.characters(codec=None, exclude_categories=())
    | st.sampled_from(
        [
            "\x1b[",
            "\x1b]",
            "\x07",
            "\x1b\\",
            "\u202e",
            "\u200d",
            "\u0301",
            "🇫",
            "\ud83d",
            "\ude00",
            "\n",
        ]
    ),
    max_size=80,
).map("".join)


@given(nasty, st.integers(min_value=0, max_value=50))
def test_properties(text: str, max_chars: int) -> None:
    out = sanitize_label(text, max_chars)
    assert len(out) <= max_chars
    assert not any(_forbidden(ch) for ch in out)
    assert "  " not in out and out == out.strip()
    out.encode("utf-8")  # no lone surrogate can break an encoder
    assert sanitize_label(out, max_chars) == out  # idempotent


@given(st.text(alphabet=st.characters(categories=["L", "N", "P", "S"]), max_size=60).map(str.strip))
def test_plain_text_is_kept(text: str) -> None:
    assert sanitize_label(text, 200) == text
