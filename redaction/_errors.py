"""The two error types of ``redaction``: configuration errors and run-time failures."""

from __future__ import annotations


class PolicyError(ValueError):
    """A redaction policy cannot be built or loaded.

    ``str()`` is one line that names the file (or ``<python>``/``<string>``) and the entry,
    e.g. ``policy.toml: [tools."db_*"] args: 'drop' is not one of keep, redact, hash``.
    """

    def __init__(self, source: str, entry: str, problem: str) -> None:
        self.source = source
        self.entry = entry
        self.problem = problem
        text = f"{source}: {entry}: {problem}" if entry else f"{source}: {problem}"
        super().__init__(" ".join(text.split()))


class RedactionError(RuntimeError):
    """Redaction could not run. Callers drop the span or anchor (and count it): fail closed.

    The message never contains the data being redacted.
    """
