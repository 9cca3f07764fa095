"""The pure-Python walker: the fallback where the engine cannot run, and the oracle of the fast
path (``redaction._fast``), which must give the same output and trail.

It walks nested mappings and sequences (and JSON text inside strings, which it re-serialises
only when something was removed), applies the key-name rule to mapping keys and the value rules
to every string, and replaces what it finds by a placeholder that says why. Beyond the
depth/size bounds it fails closed: the value is replaced, never passed through.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from redaction._base import (
    BIG_INT,
    JSON_OPENERS,
    NOT_JSON,
    PASS_TYPES,
    SCALARS,
    Walk,
)

if TYPE_CHECKING:
    from redaction._scrubber import Scrubber


class Walker(Walk):
    """One scrub call: the trail and the node budget."""

    __slots__ = ("s",)

    def __init__(self, scrubber: Scrubber) -> None:
        o = scrubber.options
        super().__init__(
            o.max_depth, o.max_nodes, o.max_string_chars, scrubber.find, scrubber.clean_keys
        )
        self.s = scrubber

    def walk(self, v: Any, path: Any, depth: int) -> Any:
        self.nodes += 1
        if self.nodes > self.max_nodes:
            return self._cut(path, "size")
        t = cast("type[object]", type(v))
        if t is str:
            return self.text(v, path, depth)
        if t is int and not -BIG_INT < v < BIG_INT:
            # a card number can travel as a JSON number
            text = str(v)
            before = len(self.trail)
            new = self._replace(text, path)
            return v if len(self.trail) == before else new
        if isinstance(v, PASS_TYPES):
            return v
        if isinstance(v, str):  # a str subclass
            return self.text(str(v), path, depth)
        if depth >= self.max_depth:
            return self._cut(path, "depth")
        if isinstance(v, Mapping):
            return self._mapping(cast("Mapping[Any, Any]", v), path, depth)
        if isinstance(v, list | tuple):
            items = cast("list[Any] | tuple[Any, ...]", v)
            out: list[Any] = []
            append = out.append
            for i, x in enumerate(items):
                tx = cast("type[object]", type(x))
                if tx in SCALARS or (tx is int and -BIG_INT < x < BIG_INT):
                    self.nodes += 1  # fast path: numbers, booleans and null carry no secret
                    append(x)
                else:
                    append(self.walk(x, (path, i), depth + 1))
            return tuple(out) if isinstance(v, tuple) else out
        if isinstance(v, bytes | bytearray):
            raw = bytes(v)
            if len(raw) > self.max_string:
                return self._cut(path, "size")
            text = raw.decode("utf-8", "surrogateescape")
            before = len(self.trail)
            new = self.text(text, path, depth)
            if len(self.trail) == before:
                return v
            return new.encode("utf-8", "surrogateescape")
        # Anything else (objects, sets, enums): scrub its text form; never pass it raw.
        if isinstance(v, set | frozenset):
            items2 = sorted(cast("set[Any]", v), key=repr)
            return [self.walk(x, (path, i), depth + 1) for i, x in enumerate(items2)]
        return self.text(str(v), path, depth)

    def _mapping(self, v: Mapping[Any, Any], path: Any, depth: int) -> dict[Any, Any]:
        s = self.s
        out: dict[Any, Any] = {}
        for k, x in v.items():
            if isinstance(k, str):
                key = self._key_text(k, path)
                kp = (path, key)
                cat = s.key_category(k)
                if cat is not None and s.hidden_by_key(x):
                    self.nodes += 1
                    out[key] = self._cut(kp, f"key:{cat}")
                    continue
                out[key] = self.walk(x, kp, depth + 1)
            else:
                out[k] = self.walk(x, (path, repr(k)), depth + 1)
        return out

    def text(self, s: str, path: Any, depth: int) -> str:
        if len(s) > self.max_string:
            return self._cut(path, "size")
        if s[:1] in JSON_OPENERS or (s[:1].isspace() and s.lstrip()[:1] in JSON_OPENERS):
            try:
                obj = json.loads(s)
            except RecursionError:
                return self._cut(path, "depth")
            except ValueError:
                obj = NOT_JSON
            if isinstance(obj, dict | list):
                before = len(self.trail)
                new = self.walk(obj, path, depth + 1)
                if len(self.trail) == before:
                    return s
                try:
                    return json.dumps(new, ensure_ascii=False)
                except (RecursionError, ValueError, TypeError):
                    return self._cut(path, "error")
        return self._replace(s, path)

    def _replace(self, s: str, path: Any) -> str:
        spans = self.find(s)
        return self._patched(s, spans, path) if spans else s
