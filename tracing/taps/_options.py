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
    apart, one when the intent is complete, and one more if the stream ends before the call's
    arguments did. The count is bounded whatever the chunk size and the argument length.
    """

    publish_interval_millis: int = 100
    """Least time between two growth writes of one call (the label grows at most ~10x/s)."""
    max_updates_per_call: int = 16
    """Most growth writes per call (the first sighting and the completion are not counted)."""
    whole_words: bool = True
    """Publish a growing intent up to its last complete word (a trailing run of printable ASCII
    is held back until a space or the closing quote arrives), so that a secret the model is
    still writing is never published half-written, where the scrubber could not recognise it.
    Text in scripts without spaces (CJK) still grows character by character."""
    abandon_incomplete: bool = True
    """When the stream errors or ends before a call's arguments are complete, settle that
    call as ``abandoned`` (its tool can never run with those arguments); ``False`` leaves it
    ``streaming`` for the ledger's reaper."""
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)
    """Seconds, monotonic (tests and benchmarks replace it to simulate a paced stream)."""
