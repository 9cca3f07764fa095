"""Options of the stream taps (one frozen object; ``TapOptions()`` suits an agent app)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class TapOptions:
    """How often a tapped stream writes the growing intent to the ledger, and what it writes.

    Per tool call the ledger gets one write when the call first appears (``Running <tool>``),
    at most ``max_updates_per_call`` growth writes spaced at least ``publish_interval_millis``
    apart (a pause's flush is one of them), one when the intent is complete, and one more if
    the stream ends before the call's arguments did. The count is bounded whatever the chunk
    size and the argument length.
    """

    publish_interval_millis: int = 100
    """Least time between two growth writes of one call (the label grows at most ~10x/s)."""
    max_updates_per_call: int = 16
    """Most growth writes per call (the first sighting and the completion are not counted)."""
    whole_words: bool = True
    """While the model writes, grow the label a word at a time (a trailing run of printable
    ASCII waits for a space or the closing quote). Text in scripts without spaces (CJK) still
    grows character by character. Secrets do not depend on it: whatever this says, a trailing
    part that could still become a secret under the policy's rules (``redaction.secret_tail``:
    a half-written token, the first groups of a spaced card number) is never published."""
    abandon_incomplete: bool = True
    """When the stream errors or ends before a call's arguments are complete, settle that
    call as ``abandoned`` (its tool can never run with those arguments), with the reason (the
    provider's message when it sent one) in ``error``; ``False`` leaves it ``streaming`` for
    the ledger's reaper. A call the application has taken over is never abandoned."""
    flush_pending: bool = True
    """When the model pauses mid-intent (no delta for ``publish_interval_millis``), publish
    what the interval or the word rule held back: all of it but a trailing part that could
    still become a secret. So the ledger is never more than the interval behind what the
    application received. One daemon thread for the whole process does it (real time)."""
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)
    """Seconds, monotonic (tests and benchmarks replace it to simulate a paced stream)."""
