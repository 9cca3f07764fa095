"""The multi-pattern engine: one pass over a text finds where any built-in rule may match.

Hyperscan (Vectorscan on ARM, through the ``hyperscan`` wheel) compiles every rule's anchors
(``redaction._patterns.Anchor``) into one automaton and scans the UTF-8 bytes of a text once,
at hundreds of MB/s, reporting where an anchor match ends. The scrubber then runs a rule's own
Python regex only at the candidate starts those ends imply. Without the wheel (or when the
policy asks for it) the scrubber uses its pure-Python path, which stays the reference the fast
path is tested against.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final, Literal

from redaction.environment_variables import INTENTRACE_SCRUB_ENGINE

EngineChoice = Literal["auto", "hyperscan", "python"]
ENGINE_CHOICES: Final[tuple[str, ...]] = ("auto", "hyperscan", "python")


@dataclass(frozen=True)
class EngineInfo:
    """Which engine a scrubber uses and why."""

    name: Literal["hyperscan", "python"]
    """``hyperscan``: the multi-pattern automaton finds candidates; ``python``: every rule's
    regex runs over every string (behind a literal prefilter)."""
    detail: str
    """The engine's version, or why the pure-Python path is used."""


class EngineUnavailable(Exception):
    """The engine asked for cannot run here (the message says why)."""


def _collect(_id: int, _start: int, end: int, _flags: int, hits: list[tuple[int, int]]) -> None:
    hits.append((end, _id))


class Automaton:
    """A compiled Hyperscan database; thread-safe (one scratch space per thread)."""

    def __init__(self, expressions: Sequence[tuple[str, bool]]) -> None:
        """``expressions``: (Hyperscan expression, case-insensitive)."""
        # hyperscan has no wheel on some platforms: imported here, where it is first needed
        import hyperscan

        self._hs: Any = hyperscan
        db: Any = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        n = len(expressions)
        db.compile(
            expressions=[e.encode("ascii") for e, _ in expressions],
            ids=list(range(n)),
            elements=n,
            flags=[hyperscan.HS_FLAG_CASELESS if ci else 0 for _, ci in expressions],
        )
        self._db = db
        self.expressions = tuple(expressions)
        """What it was compiled from (``(expression, case-insensitive)``, by index)."""
        self._local = threading.local()
        self.version = str(getattr(hyperscan, "__version__", "?"))

    def scan(self, data: bytes) -> list[tuple[int, int]]:
        """``(end offset, expression index)`` of every anchor match in ``data``, in no order."""
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = self._local.scratch = self._hs.Scratch(self._db)
        hits: list[tuple[int, int]] = []
        if data:
            self._db.scan(data, match_event_handler=_collect, context=hits, scratch=scratch)
        return hits


@lru_cache(maxsize=64)
def _compiled(expressions: tuple[tuple[str, bool], ...]) -> Automaton:
    return Automaton(expressions)


def resolve_choice(choice: str | None) -> str:
    """The engine asked for: the argument, else ``$INTENTRACE_SCRUB_ENGINE``, else ``auto``."""
    if choice is None:
        choice = os.environ.get(INTENTRACE_SCRUB_ENGINE, "").strip().lower() or "auto"
    return choice


def automaton(
    expressions: tuple[tuple[str, bool], ...], choice: str
) -> tuple[Automaton | None, EngineInfo]:
    """The automaton for ``expressions`` (cached), or ``None`` and why not.

    Raises:
        EngineUnavailable: ``choice`` is ``hyperscan`` and it cannot run here.
    """
    if choice == "python":
        return None, EngineInfo("python", "asked for (engine = python)")
    if not expressions:
        return None, EngineInfo("python", "no built-in rule is enabled")
    try:
        auto = _compiled(expressions)
    except ImportError:
        reason = "the hyperscan package is not installed (pip install hyperscan)"
    except Exception as exc:  # an unsupported CPU, a broken wheel: fall back, say why
        reason = f"hyperscan failed to start: {type(exc).__name__}: {exc}"
    else:
        return auto, EngineInfo("hyperscan", f"hyperscan {auto.version}")
    if choice == "hyperscan":
        raise EngineUnavailable(reason)
    return None, EngineInfo("python", reason)
