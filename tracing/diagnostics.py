"""Internal errors: one way for every component to report a bug it swallowed.

Hot paths (span hooks, the stream reader, the taps, the OTLP feed and receiver, the ledger's
threads) never raise into the host app. When one of them catches an exception that is a bug of
ours — never bad input, never a database or network fault, which each component counts in its
own ``stats()`` — it calls :meth:`ErrorLog.report`: the error is counted, logged once per kind
(component, place, exception type) and kept among the last ones, for the component's ``stats()``
and for :func:`internal_errors`.

Tests see every one of them: the suite's ``conftest.py`` fails any test during which a new
internal error was reported (unless the test is marked ``internal_errors`` because it injects
faults on purpose), so a swallowed bug cannot pass unnoticed.

    from tracing.diagnostics import internal_errors
    assert internal_errors() == []
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass
from typing import Final

from redaction import RedactionPolicy, placeholder

__all__ = ["ErrorLog", "InternalError", "clear_internal_errors", "internal_errors", "last_seq"]

KEEP: Final = 100
"""How many of the latest internal errors each component keeps (and the process, ten times)."""


@dataclass(frozen=True, slots=True)
class InternalError:
    """One swallowed bug."""

    component: str
    """``processor``, ``feed``, ``receiver``, ``ledger``, ``intent``, ``taps``..."""
    where: str
    """The place in the component (a hook, a stage, a thread)."""
    error: str
    """``ExceptionType: first line of its message``."""
    seq: int
    """Process-wide order of reports (1, 2, ...)."""
    time_ns: int


_lock = threading.Lock()
_seq = itertools.count(1)
_recent: deque[InternalError] = deque(maxlen=KEEP * 10)
_logged: set[tuple[str, str, str]] = set()


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _scrubbed(text: str) -> str:
    """``text`` scrubbed by the built-in rules: an exception's message may quote data, and logs
    are a sink like any other (docs/redaction.md). Fails closed."""
    try:
        return RedactionPolicy.default().scrub_text(text)
    except Exception:
        return placeholder("error")


class ErrorLog:
    """The internal errors of one component (one per processor, feed, ledger, ...).

    Args:
        component: the component's name in reports.
        logger: where the first error of each kind is logged (``WARNING``, with traceback).
    """

    def __init__(self, component: str, logger: logging.Logger) -> None:
        self.component = component
        self._logger = logger
        self._count = 0
        self._recent: deque[InternalError] = deque(maxlen=KEEP)

    def report(self, where: str, exc: BaseException, *, level: int = logging.WARNING) -> None:
        """Count ``exc`` (a bug we swallowed at ``where``), log its kind once, keep it. Never
        raises."""
        try:
            entry = InternalError(
                self.component, where, _scrubbed(_one_line(exc)), 0, time.time_ns()
            )
            kind = (self.component, where, type(exc).__name__)
            with _lock:
                entry = InternalError(
                    entry.component, entry.where, entry.error, next(_seq), entry.time_ns
                )
                self._count += 1
                self._recent.append(entry)
                _recent.append(entry)
                first = kind not in _logged
                _logged.add(kind)
            if first:
                told = "".join(traceback.format_exception(exc))
                shown = _scrubbed(told)
                if shown == told:  # nothing to remove: the traceback goes as it is
                    self._logger.log(
                        level,
                        "intentrace %s: internal error in %s (counted, not raised; logged once)",
                        self.component,
                        where,
                        exc_info=exc,
                    )
                else:  # the scrubbed text instead of the exception itself
                    self._logger.log(
                        level,
                        "intentrace %s: internal error in %s (counted, not raised; logged "
                        "once)\n%s",
                        self.component,
                        where,
                        shown.rstrip(),
                    )
        except Exception:  # pragma: no cover - reporting must never be the thing that raises
            pass

    @property
    def count(self) -> int:
        """Internal errors reported so far."""
        return self._count

    def recent(self) -> list[InternalError]:
        """The latest internal errors of this component, oldest first."""
        with _lock:
            return list(self._recent)


def internal_errors(since: int = 0) -> list[InternalError]:
    """The latest internal errors of every component in this process (``seq > since``)."""
    with _lock:
        return [e for e in _recent if e.seq > since]


def last_seq() -> int:
    """The ``seq`` of the latest report (0 when none): a mark for :func:`internal_errors`."""
    with _lock:
        return _recent[-1].seq if _recent else 0


def clear_internal_errors() -> None:
    """Forget the process-wide list (components keep their own counts)."""
    with _lock:
        _recent.clear()
        _logged.clear()
