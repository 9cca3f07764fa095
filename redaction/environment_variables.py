"""Environment variables read by ``redaction``. Each is defined once here (``tracing``
re-exports them in ``tracing.environment_variables``, beside its own).

Precedence everywhere: explicit argument > environment variable > default.
"""

from __future__ import annotations

INTENTRACE_REDACTION_POLICY = "INTENTRACE_REDACTION_POLICY"
"""Path of a TOML redaction policy file."""

INTENTRACE_REDACTION_HASH_KEY = "INTENTRACE_REDACTION_HASH_KEY"
"""Key for the ``hash`` redaction action (HMAC-SHA256). Required when a rule uses ``hash``."""

INTENTRACE_SCRUB_ENGINE = "INTENTRACE_SCRUB_ENGINE"
"""Secret-scrubber engine: ``auto`` (Hyperscan when installed, else pure Python), ``hyperscan``
(required) or ``python`` (the pure-Python path). ``[scrub] engine`` in a policy wins."""
