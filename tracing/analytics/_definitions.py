"""Per-anchor definitions the analyses share (pure Python, applied once per anchor as it is copied).

* ``normalize_intent``: NFKC, case-folded, every run of digits becomes ``#``, every run of other
  characters that are not letters/digits/``#`` becomes one space, trimmed; ``None`` when nothing
  is left. A literal ``#`` stays (``C#`` is a word): ``"Reading C# docs"`` -> ``"reading c# docs"``;
  ``"Reading src/app_2.py"`` -> ``"reading src app # py"``.
* ``leading_phrase``: the first ``words`` words of the normalized intent.
* ``canonical_args``: the args JSON parsed and re-serialized with sorted keys and no whitespace
  (so key order and spacing do not make two calls different); text that is not JSON stays as is.
* ``intent_hidden``: the redaction record says the policy hid the intent.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

import orjson

_DIGITS: Final = re.compile(r"\d+")
_SEPARATORS: Final = re.compile(r"(?:[^\w#]|_)+")
_HIDDEN: Final = re.compile(r'"intent_hidden"\s*:\s*true')


def normalize_intent(intent: str | None) -> str | None:
    """The normalized form of an intent (see the module docstring); None when empty."""
    if not intent:
        return None
    text = unicodedata.normalize("NFKC", intent).casefold()
    text = _DIGITS.sub("#", text)
    text = " ".join(_SEPARATORS.sub(" ", text).split())
    return text or None


def leading_phrase(normalized: str | None, words: int) -> str | None:
    """The first ``words`` words of a normalized intent."""
    if not normalized:
        return None
    return " ".join(normalized.split(" ")[: max(1, words)])


def word_count(normalized: str | None) -> int:
    """Words in a normalized intent (0 for none)."""
    return len(normalized.split(" ")) if normalized else 0


def canonical_args(args: str | None) -> str | None:
    """The args JSON with sorted keys and no whitespace; text that is not JSON as is (it can
    never equal the canonical form of JSON, which is itself JSON)."""
    if args is None:
        return None
    try:
        # decoded at once: orjson's output buffers, kept by the hundred thousand, cost several
        # times the parse itself in allocator work; the str copy does not
        return orjson.dumps(orjson.loads(args), option=orjson.OPT_SORT_KEYS).decode()
    except orjson.JSONDecodeError:
        return args
    except TypeError:  # e.g. an integer beyond 64 bits: keep the text
        return args


def intent_hidden(redaction: str | None) -> bool:
    """Whether the redaction record says the intent was hidden by the policy."""
    return bool(redaction) and _HIDDEN.search(redaction or "") is not None


_ARGS_REDACTED: Final = re.compile(r'"args"\s*:\s*"redact"')


def args_redacted(redaction: str | None) -> bool:
    """Whether the redaction record says the args were replaced by a placeholder."""
    return bool(redaction) and _ARGS_REDACTED.search(redaction or "") is not None


def names_tool(normalized: str | None, tool_name: str) -> bool:
    """Whether a normalized intent names its own tool (``"Running read_file"``)."""
    tool = normalize_intent(tool_name)
    if not normalized or not tool:
        return False
    return f" {tool} " in f" {normalized} "


PHRASE_WORDS: Final = 2
"""Words in an intent's leading phrase (``"Searching for OAuth handling"`` -> ``searching for``)."""


# --- information an intent carries, across scripts ----------------------------------------------
# Scripts written without spaces between words: every character is a token of its own (a word
# boundary cannot be told without a dictionary; single characters are what a tool's other
# intents can be compared on). Weights: a character's information relative to a Latin letter
# (a Han character is about a word, a kana or a Hangul syllable about a syllable).
_PER_CHAR: Final[tuple[tuple[int, int, int], ...]] = (
    (0x0E00, 0x0EFF, 1),  # Thai, Lao
    (0x1000, 0x109F, 1),  # Myanmar
    (0x1780, 0x17FF, 1),  # Khmer
    (0x3040, 0x30FF, 2),  # Hiragana, Katakana
    (0x3400, 0x4DBF, 3),  # Han, extension A
    (0x4E00, 0x9FFF, 3),  # Han
    (0xF900, 0xFAFF, 3),  # Han compatibility
    (0x20000, 0x3FFFF, 3),  # Han, extensions B and later
)
_HANGUL: Final = (0xAC00, 0xD7AF)
HANGUL_WEIGHT: Final = 2


def _per_char_weight(ch: str) -> int:
    """The weight of a character of a script written without spaces (0: not one)."""
    code = ord(ch)
    if code < 0x0E00:
        return 0
    for low, high, weight in _PER_CHAR:
        if low <= code <= high:
            return weight
    return 0


def intent_tokens(normalized: str | None) -> str | None:
    """The tokens of a normalized intent, space-separated: its words, and every character of a
    script written without spaces on its own (``"todoを検索"`` -> ``"todo を 検 索"``); None when
    they are the words of the normalized intent themselves (the common case, stored as NULL)."""
    if not normalized or normalized.isascii():  # no script written without spaces
        return None
    out: list[str] = []
    split = False
    for word in normalized.split(" "):
        run: list[str] = []
        for ch in word:
            if _per_char_weight(ch):
                if run:
                    out.append("".join(run))
                    run = []
                out.append(ch)
                split = True
            else:
                run.append(ch)
        if run:
            out.append("".join(run))
    return " ".join(out) if split else None


def information(normalized: str | None) -> int:
    """The information of a normalized intent in Latin-letter equivalents: every letter, digit
    run (``#``) or other character 1, a kana 2, a Hangul syllable 2, a Han character 3; spaces
    0 (``"reading"`` 7, ``"検索中"`` 9, ``"ファイル"`` 8)."""
    if not normalized:
        return 0
    if normalized.isascii():  # every character 1, spaces 0
        return len(normalized) - normalized.count(" ")
    total = 0
    for ch in normalized:
        if ch == " ":
            continue
        weight = _per_char_weight(ch)
        if not weight:
            weight = HANGUL_WEIGHT if _HANGUL[0] <= ord(ch) <= _HANGUL[1] else 1
        total += weight
    return total


def information_sql(expr: str) -> str:
    """DuckDB SQL computing ``information`` of the text ``expr`` (the same weights)."""
    ranges = " ".join(
        f"WHEN unicode(ch) BETWEEN {low} AND {high} THEN {weight}"
        for low, high, weight in _PER_CHAR
    )
    hangul = f"WHEN unicode(ch) BETWEEN {_HANGUL[0]} AND {_HANGUL[1]} THEN {HANGUL_WEIGHT}"
    return (
        f"coalesce(list_sum(list_transform(string_split({expr}, ''), lambda ch: "
        f"CASE WHEN ch = ' ' THEN 0 {ranges} {hangul} ELSE 1 END)), 0)"
    )
