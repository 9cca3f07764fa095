"""Read the intent from tool-call arguments that are still streaming from the provider.

``IntentStreamReader`` is an incremental state machine over the argument text: each ``feed``
looks only at the new chunk (plus at most a 12-character escape held back from the previous
one) and does nothing once the intent is complete or known to be absent. A hand-written
machine instead of re-parsing with jiter because re-parsing the accumulated prefix costs
O(n) per chunk (``bench/streaming.py`` measures both).

The intent must be the FIRST key (we inject it first so that it streams first). When the
provider reordered the keys, when the value is not a string, and on garbage, the reader
gives None for good. Never raises.
"""

from __future__ import annotations

import logging
import re
from codecs import utf_8_decode as _utf8_decode
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from tracing.diagnostics import ErrorLog

_log = logging.getLogger("tracing.intent")

_KEY: Final = "intent"  # tracing.intent._schema.INTENT_ARG (that module imports this one)

# states
_START: Final = 0  # before "{"
_KEY_START: Final = 1  # before the opening quote of the first key
_IN_KEY: Final = 2
_COLON: Final = 3
_VALUE_START: Final = 4
_IN_VALUE: Final = 5
_DONE: Final = 6  # the intent is complete
_DEAD: Final = 7  # no intent to read: reordered keys, a non-string value, garbage

_WS: Final = re.compile(r"[ \t\n\r]*")
# `{"intent": "` with JSON white space anywhere, and every prefix of it.
_PREAMBLE: Final = re.compile(r'[ \t\n\r]*\{[ \t\n\r]*"intent"[ \t\n\r]*:[ \t\n\r]*"')
_PREAMBLE_PREFIX: Final = re.compile(
    r'[ \t\n\r]*(?:\{[ \t\n\r]*(?:"(?:i(?:n(?:t(?:e(?:n(?:t'
    r'(?:"[ \t\n\r]*(?::[ \t\n\r]*)?)?)?)?)?)?)?)?)?)?'
)
_HEAD_LIMIT: Final = 64
_SPECIAL: Final = re.compile(r'["\\]')
_HEX: Final = frozenset("0123456789abcdefABCDEF")
_SIMPLE_ESCAPES: Final = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}
_REPLACEMENT: Final = "\ufffd"
"""Stands in for a lone surrogate escape: a lone surrogate would break every UTF-8 encoder
downstream (OTLP drops the whole batch)."""
_BYTES_SLICE: Final = 1 << 14

_ERRORS: Final = ErrorLog("intent", _log)


def count_internal_error(where: str, exc: BaseException) -> None:
    """Report an internal error of the intent primitives (a bug, never bad input)."""
    _ERRORS.report(where, exc)


@dataclass(frozen=True, slots=True)
class StreamingIntent:
    """The intent read so far from streaming arguments."""

    text: str
    """The decoded text so far (never ends in half an escape sequence)."""
    complete: bool
    """Whether the closing quote has arrived: ``text`` is final."""


_new_object = object.__new__
_slots: dict[str, Any] = dict(StreamingIntent.__dict__)
_set_text: Callable[[StreamingIntent, str], None] = _slots["text"].__set__
_set_complete: Callable[[StreamingIntent, bool], None] = _slots["complete"].__set__


def _result(text: str, complete: bool) -> StreamingIntent:
    """``StreamingIntent(text, complete)`` at half the cost: the frozen dataclass's generated
    ``__init__`` is the largest single cost of a ``feed`` (measured in bench/streaming.py)."""
    result = _new_object(StreamingIntent)
    _set_text(result, text)
    _set_complete(result, complete)
    return result


class _Garbage(Exception):
    """The input cannot be tool-call arguments with the intent first."""


class IntentStreamReader:
    """Incremental reader of the intent at the start of streaming tool-call arguments.

    Feed the argument deltas as they arrive (all ``str`` or all ``bytes``; UTF-8 split across
    byte chunks is fine). Each ``feed`` returns the latest ``StreamingIntent``, or None while
    the ``intent`` key and the value's opening quote have not arrived yet and for good once the
    first key turns out not to be ``intent`` (or the input is garbage). Work per ``feed`` is
    proportional to the chunk, and nothing once ``done``. Never raises.

    Example::

        reader = IntentStreamReader()
        for delta in deltas:
            live = reader.feed(delta)
            if live is not None:
                show(live.text)
            if reader.done:
                break  # nothing more to learn from this call's arguments
    """

    __slots__ = ("_head", "_key", "_pending", "_state", "_tail", "_text", "result")

    def __init__(self) -> None:
        self._state = _START
        self._pending = ""  # an escape cut at the end of the previous chunk
        self._tail = b""  # a UTF-8 sequence cut at the end of the previous byte chunk
        self._head = ""  # the preamble so far, while it is still a prefix of `{"intent":"`
        self._key = ""
        self._text = ""
        self.result: StreamingIntent | None = None
        """The latest result (what the last ``feed`` returned)."""

    @property
    def done(self) -> bool:
        """True once nothing more can change: the intent is complete, or there is none."""
        return self._state >= _DONE

    @property
    def complete(self) -> bool:
        """True once the intent's closing quote has arrived."""
        return self._state == _DONE

    def feed(self, chunk: str | bytes) -> StreamingIntent | None:
        """Take the next piece of the argument text; return the intent so far (or None)."""
        if self._state >= _DONE:
            return self.result
        try:
            if not isinstance(chunk, str):
                if len(chunk) > _BYTES_SLICE:  # decode no more than the intent needs
                    for start in range(0, len(chunk), _BYTES_SLICE):
                        self.feed(chunk[start : start + _BYTES_SLICE])
                        if self._state >= _DONE:
                            break
                    return self.result
                if self._tail:
                    chunk = self._tail + chunk
                text, used = _utf8_decode(chunk, "replace", False)
                self._tail = bytes(chunk[used:]) if used < len(chunk) else b""
                chunk = text
            if self._state == _START:
                # Until the preamble is complete, keep it (a few characters) and match it
                # whole: cheaper than the char machine for small chunks.
                head = self._head + chunk
                if (
                    _PREAMBLE.match(head) is None
                    and len(head) <= _HEAD_LIMIT
                    and _PREAMBLE_PREFIX.fullmatch(head)
                ):
                    self._head = head
                    return self.result
                self._head = ""
                chunk = head  # the char machine decides (escaped key, garbage, reordering)
            # The hot path: more intent text with nothing special in it.
            if (
                self._state == _IN_VALUE
                and not self._pending
                and '"' not in chunk
                and "\\" not in chunk
            ):
                if chunk:
                    self._text += chunk
                    self.result = _result(self._text, False)
                return self.result
            self._run(chunk)
        except _Garbage:
            self._die()
        except Exception as exc:  # a bug: degrade to "no intent", count it, never raise
            count_internal_error("IntentStreamReader.feed", exc)
            self._die()
        return self.result

    def _die(self) -> None:
        self._state = _DEAD
        self._pending = ""
        self.result = None

    def _run(self, chunk: str) -> None:
        if self._pending:
            chunk = self._pending + chunk
            self._pending = ""
        pos = 0
        if self._state == _START:  # the whole preamble in one chunk: skip the char machine
            m = _PREAMBLE.match(chunk)
            if m is not None:
                pos = m.end()
                self._state = _IN_VALUE
                self.result = _result("", False)
        end = len(chunk)
        while pos < end:
            state = self._state
            if state == _IN_VALUE:
                piece, pos, closed = self._string(chunk, pos)
                if piece:
                    self._text += piece
                if closed:
                    self._state = _DONE
                    self.result = _result(self._text, True)
                    return
                if piece:
                    self.result = _result(self._text, False)
                continue
            if state == _IN_KEY:
                piece, pos, closed = self._string(chunk, pos)
                self._key += piece
                if not _KEY.startswith(self._key) or (closed and self._key != _KEY):
                    raise _Garbage  # the first key is not "intent": the provider reordered
                if closed:
                    self._state = _COLON
                continue
            if state >= _DONE:
                return
            m = _WS.match(chunk, pos)
            pos = m.end() if m else pos
            if pos >= end:
                return
            char = chunk[pos]
            pos += 1
            if state == _START and char == "{":
                self._state = _KEY_START
            elif state == _KEY_START and char == '"':
                self._state = _IN_KEY
            elif state == _COLON and char == ":":
                self._state = _VALUE_START
            elif state == _VALUE_START and char == '"':
                self._state = _IN_VALUE
                self.result = _result("", False)
            else:
                raise _Garbage

    def _string(self, chunk: str, pos: int) -> tuple[str, int, bool]:
        """Decode string content from ``pos``: (text, new position, closing quote seen).

        An escape cut by the end of the chunk is kept in ``_pending`` for the next feed.
        """
        end = len(chunk)
        parts: list[str] = []
        while True:
            m = _SPECIAL.search(chunk, pos)
            if m is None:
                parts.append(chunk[pos:])
                return "".join(parts), end, False
            at = m.start()
            if at > pos:
                parts.append(chunk[pos:at])
            if chunk[at] == '"':
                return "".join(parts), at + 1, True
            decoded, pos = self._escape(chunk, at)
            if decoded is None:  # cut: wait for the rest
                self._pending = chunk[at:]
                return "".join(parts), end, False
            parts.append(decoded)

    @staticmethod
    def _hex4(chunk: str, at: int) -> int | None:
        """The code unit of ``\\uXXXX`` at ``at``, or None when it is cut by the chunk's end."""
        digits = chunk[at + 2 : at + 6]
        if any(d not in _HEX for d in digits):
            raise _Garbage
        if len(digits) < 4:
            return None
        return int(digits, 16)

    def _escape(self, chunk: str, at: int) -> tuple[str | None, int]:
        """Decode the escape at ``at`` (a backslash): (text, position after it), or
        (None, _) when the chunk ends inside it."""
        end = len(chunk)
        if at + 1 >= end:
            return None, end
        kind = chunk[at + 1]
        simple = _SIMPLE_ESCAPES.get(kind)
        if simple is not None:
            return simple, at + 2
        if kind != "u":
            raise _Garbage
        unit = self._hex4(chunk, at)
        if unit is None:
            return None, end
        after = at + 6
        if 0xDC00 <= unit <= 0xDFFF:  # a low surrogate on its own
            return _REPLACEMENT, after
        if not 0xD800 <= unit <= 0xDBFF:
            return chr(unit), after
        # A high surrogate: its pair may still be on its way.
        if after >= end:
            return None, end
        if chunk[after] != "\\":
            return _REPLACEMENT, after
        if after + 1 >= end:
            return None, end
        if chunk[after + 1] != "u":
            return _REPLACEMENT, after
        low = self._hex4(chunk, after)
        if low is None:
            return None, end
        if 0xDC00 <= low <= 0xDFFF:
            return chr(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)), after + 6
        return _REPLACEMENT, after  # the next escape is decoded on its own


def read_streaming_intent(prefix: str | bytes) -> StreamingIntent | None:
    """The intent at the start of a (possibly incomplete) argument string. Never raises.

    Same rules as ``IntentStreamReader``: None before the ``intent`` key and its value's opening
    quote have arrived, when the first key is not ``intent``, when its value is not a string,
    and on garbage. Stops reading at the intent's closing quote.
    """
    return IntentStreamReader().feed(prefix)
