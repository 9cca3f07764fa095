"""Fixtures: receivers on free loopback ports, each feeding a recording ledger."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.collect import scenarios
from tracing.collect._feed import SpanFeed
from tracing.collect._receiver import CollectOptions, CollectReceiver
from tracing.testing import RecordingLedger


class Collected:
    """A running receiver and what it wrote."""

    def __init__(self, options: CollectOptions, ledger_stats: Any = None) -> None:
        self.ledger = RecordingLedger()
        self.feed = SpanFeed(self.ledger, policy=scenarios.POLICY, registry=scenarios.registry())
        self.receiver = CollectReceiver(self.feed, options, ledger_stats=ledger_stats)

    @property
    def url(self) -> str:
        return self.receiver.traces_url


@pytest.fixture
def collect() -> Iterator[Callable[..., Collected]]:
    """Start receivers (``collect(token=..., max_body_bytes=...)``); stopped and checked after."""
    started: list[Collected] = []

    def start(ledger_stats: Any = None, **options: Any) -> Collected:
        rx = Collected(CollectOptions(port=0, **options), ledger_stats)
        rx.receiver.start()
        started.append(rx)
        return rx

    yield start
    for rx in started:
        rx.receiver.stop()
        assert rx.feed.internal_errors() == []
        assert rx.receiver.stats().get("internal_errors", 0) == 0


@pytest.fixture
def collected(collect: Callable[..., Collected]) -> Collected:
    return collect()
