"""Reading the intent from a call's arguments, stripping it before the tool runs, and
resolving the tool-authored outcome.

Pure Python (no OpenTelemetry); on hot paths (span hooks, stream taps): never raises.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final, TypeVar, cast

import jiter

from tracing.intent._schema import INTENT_ARG, has_intent_marker
from tracing.intent._streaming import count_internal_error, read_streaming_intent

_T = TypeVar("_T")


def _decode_object(text: str | bytes) -> Any:
    """Parse JSON text, tolerating truncation; None when it is not JSON at all."""
    try:
        return jiter.from_json(
            text.encode() if isinstance(text, str) else text, partial_mode="trailing-strings"
        )
    except ValueError:
        pass
    try:  # what jiter refuses but Python accepts (lone surrogate escapes, raw control chars)
        return json.loads(text, strict=False)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def _text(value: Any) -> str | None:
    """A string with something in it, else None (an intent of only white space is none)."""
    return value if isinstance(value, str) and value and not value.isspace() else None


def read_intent(
    args: Mapping[str, Any] | str | bytes | None, *, schema: Mapping[str, Any] | None = None
) -> str | None:
    """The ``intent`` string of a call's arguments, or None. Never raises.

    Args:
        args: the arguments as a mapping, or JSON text (``str``/``bytes``), possibly truncated:
            a truncated intent value gives the text that arrived.
        schema: the tool's schema; when given, only an ``intent`` that carries our marker is
            read (a business ``intent`` parameter gives None).
    """
    try:
        if schema is not None and not has_intent_marker(schema):
            return None
        if args is None:
            return None
        if isinstance(args, Mapping):
            return _text(args.get(INTENT_ARG))
        if not isinstance(args, str | bytes):  # pyright: ignore[reportUnnecessaryIsInstance]
            return None
        fast = read_streaming_intent(args)  # intent first: stops at its end
        if fast is not None and fast.complete:
            return _text(fast.text)
        parsed = _decode_object(args)
        if isinstance(parsed, dict):
            return _text(cast("dict[str, Any]", parsed).get(INTENT_ARG))
        return None
    except Exception as exc:  # never raise into a hot path
        count_internal_error("read_intent", exc)
        return None


_FIRST_INTENT: Final = re.compile(
    r'\{\s*"intent"\s*:\s*"(?:[^"\\]|\\.)*"\s*(?:,\s*|(?=\}))', re.DOTALL
)
_FIRST_INTENT_B: Final = re.compile(_FIRST_INTENT.pattern.encode(), re.DOTALL)


def _strip_text(text: _T) -> _T:
    if isinstance(text, str):
        m = _FIRST_INTENT.match(text.lstrip())
        if m is not None:
            rest = text.lstrip()[m.end() :]
            if '"intent"' not in rest:
                return cast("_T", "{" + rest)
    elif isinstance(text, bytes):
        m = _FIRST_INTENT_B.match(text.lstrip())
        if m is not None:
            rest_b = text.lstrip()[m.end() :]
            if b'"intent"' not in rest_b:
                return cast("_T", b"{" + rest_b)
    # The general case: parse, drop the key, write back.
    try:
        parsed = json.loads(cast("str | bytes", text))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return text  # truncated or not JSON: leave it alone
    if not isinstance(parsed, dict) or INTENT_ARG not in parsed:
        return text
    obj = cast("dict[str, Any]", parsed)
    del obj[INTENT_ARG]
    dumped = json.dumps(obj, ensure_ascii=False)
    return cast("_T", dumped.encode() if isinstance(text, bytes) else dumped)


def strip_intent(args: _T, *, schema: Mapping[str, Any] | None = None) -> _T:
    """``args`` without the injected ``intent`` key, the same kind out as in. Never raises.

    A mapping gives a new ``dict`` (the input is not mutated); JSON text gives JSON text
    (``str`` or ``bytes``), edited in place when ``intent`` is the first key, else re-encoded;
    text that is not a JSON object comes back unchanged, and so does anything else.

    Args:
        args: the call's arguments.
        schema: the tool's schema; when given, the key is stripped only if that schema's
            ``intent`` carries our marker (a business ``intent`` parameter stays).
    """
    value: Any = args
    try:
        if schema is not None and not has_intent_marker(schema):
            return args
        if isinstance(value, Mapping):
            mapping = cast("Mapping[str, Any]", value)
            return cast("_T", {k: v for k, v in mapping.items() if k != INTENT_ARG})
        if isinstance(value, str | bytes):
            return cast("_T", _strip_text(value))
    except Exception as exc:  # never raise into the tool call
        count_internal_error("strip_intent", exc)
    return args


# --------------------------------------------------------------------------------------------
# outcome and display


def apply_outcome(
    intent: str, *, outcome: str | None = None, outcome_patch: Mapping[str, Any] | None = None
) -> str:
    """The settled label text of a successful call. Never raises.

    Precedence: ``outcome`` (a full replacement, when non-empty) > ``outcome_patch`` (``{"from":
    ..., "to": ...}``: the first occurrence of ``from`` in the intent becomes ``to``,
    case-sensitive; no change when ``from`` is absent) > the intent unchanged. There is
    deliberately no tense rewriting.
    """
    if isinstance(outcome, str) and outcome and not outcome.isspace():
        return outcome  # (an outcome of only white space is none: the intent stays)
    if isinstance(outcome_patch, Mapping):
        old, new = outcome_patch.get("from"), outcome_patch.get("to")
        if isinstance(old, str) and old and isinstance(new, str):
            patched = intent.replace(old, new, 1)
            return patched if patched and not patched.isspace() else intent
    return intent
