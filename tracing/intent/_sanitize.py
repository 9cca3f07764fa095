"""Model-written text made safe to show: ``sanitize_label``.

Pure Python; on hot paths (span hooks, stream taps, every page of the viewer): never raises.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

# ESC [ ... final (CSI; also the 8-bit CSI U+009B); ESC ] / P / X / ^ / _ ... terminated by BEL
# or ESC \ (OSC, DCS, SOS, PM, APC; also their 8-bit forms, ST = U+009C). An unterminated ESC
# string sequence runs to the end of the text, as in a terminal; an unterminated 8-bit one is
# just a stray control character (UTF-8 terminals ignore 8-bit controls).
_ESCAPES: Final = re.compile(
    r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
    r"|\x1b[\]PX^_][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c|$)"
    r"|[\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"
)
_C1_OR_ESC: Final = re.compile(r"[\x1b\x90-\x9f]")
_SURROGATE: Final = re.compile(r"[\ud800-\udfff]")
_SURROGATE_PAIRS: Final = re.compile(r"[\ud800-\udbff][\udc00-\udfff]")
# C0/C1 controls and DEL (white space among them is handled below), bidi embeddings, overrides
# and isolates, and lone surrogates.
_REMOVE: Final = re.compile(
    r"[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
_SPACE: Final = re.compile(r"\s+")
_ELLIPSIS: Final = "…"

INTENT_MAX_CHARS: Final = 2000
"""How much of an intent (or outcome) is stored: whole, up to this many characters (redacted,
control characters removed). A sentence never needs more; the bound keeps a runaway model's
text from filling the ledger and every span."""
LABEL_MAX_CHARS: Final = 120
"""How much of it is shown where it is a label (span names, list rows): cut with ``…``."""
_LONG_INPUT: Final = 16


def _join_pair(m: re.Match[str]) -> str:
    return m.group().encode("utf-16-le", "surrogatepass").decode("utf-16-le")


def _extends(ch: str) -> bool:
    """Whether ``ch`` attaches to the character before it (grapheme extend or spacing mark)."""
    cp = ord(ch)
    return (
        unicodedata.category(ch) in ("Mn", "Me", "Mc")
        or cp == 0x200D  # zero width joiner
        or 0xFE00 <= cp <= 0xFE0F  # variation selectors
        or 0xE0100 <= cp <= 0xE01EF
        or 0x1F3FB <= cp <= 0x1F3FF  # emoji skin tones
        or 0xE0020 <= cp <= 0xE007F  # emoji tag sequences
        or 0x1160 <= cp <= 0x11FF  # Hangul medial vowels and final consonants
        or 0xD7B0 <= cp <= 0xD7FF
    )


def _is_regional(ch: str) -> bool:
    return 0x1F1E6 <= ord(ch) <= 0x1F1FF


def _grapheme_cut(text: str, cut: int) -> int:
    """The largest index <= ``cut`` that does not split a grapheme cluster."""
    while cut > 0 and (_extends(text[cut]) or text[cut - 1] == "\u200d"):
        cut -= 1
    if cut > 0 and _is_regional(text[cut]) and _is_regional(text[cut - 1]):
        run = 0  # regional indicators pair up from the start of their run
        i = cut - 1
        while i >= 0 and _is_regional(text[i]):
            run += 1
            i -= 1
        if run % 2:
            cut -= 1
    return cut


def sanitize_label(text: str, max_chars: int = LABEL_MAX_CHARS) -> str:
    """One line of plain text, safe to show in a terminal, a span name or a web page.

    Removes control characters, ANSI CSI sequences and OSC (and DCS/SOS/PM/APC) sequences
    terminated by BEL or ESC \\ (the visible text after them is kept; an unterminated one runs
    to the end), bidi embedding/override/isolate characters and lone surrogates (a surrogate
    pair becomes its character). Newlines and runs of white space become one space; the ends
    are trimmed. Longer results are cut to ``max_chars`` code points including a trailing
    ``…``, never inside a grapheme cluster (combining marks, ZWJ emoji, flags). Never raises.

    Very long inputs are first cut to ``16 * max_chars`` code points (at least 4096): a label
    never needs more, and the work stays bounded.
    """
    if not isinstance(text, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        text = "" if text is None else str(text)
    if max_chars <= 0:
        return ""
    text = text[: max(4096, _LONG_INPUT * max_chars)]
    if _C1_OR_ESC.search(text):
        text = _ESCAPES.sub("", text)
    if _SURROGATE.search(text):
        text = _SURROGATE_PAIRS.sub(_join_pair, text)
    text = _REMOVE.sub("", text)
    text = _SPACE.sub(" ", text).strip()
    if len(text) <= max_chars:
        return text
    cut = _grapheme_cut(text, max_chars - 1)
    return text[:cut].rstrip() + _ELLIPSIS
