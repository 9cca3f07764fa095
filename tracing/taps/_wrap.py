"""``StreamTap``: tap an SDK stream so that its tool calls' intents are published live.

How a stream is tapped (the application keeps the very objects the SDK gave it):

* an ``openai``/``anthropic`` ``Stream``/``AsyncStream``: its ``_iterator`` (the generator
  every way of consuming the stream goes through: iteration, ``until_done()``,
  ``get_final_*()``, ``text_stream``) is replaced in place by a pass-through generator. Same
  object, same events, same order;
* the SDKs' helper streams (``ChatCompletionStream``, ``ResponseStream``, ``MessageStream`` and
  their async twins): their underlying raw stream is tapped the same way;
* their stream managers (``client.chat.completions.stream(...)``, ``client.responses.stream``,
  ``client.messages.stream``): a thin context-manager proxy whose ``__enter__`` taps the stream
  the manager returns;
* an awaitable (``AsyncOpenAI().chat.completions.create(..., stream=True)`` not awaited yet):
  a coroutine that awaits it and taps the result;
* any other iterable of SDK events: a pass-through proxy (attributes are forwarded).

The pass-through generator hands each event on first and reads it when the application asks
for the next one, so the tap's work overlaps the wait for the network instead of delaying
the event.
"""

from __future__ import annotations

import inspect
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from functools import cache
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

from redaction import RedactionPolicy
from tracing._context import current_session
from tracing.intent import IntentRegistry, default_registry
from tracing.ledger import open_ledger
from tracing.taps._options import TapOptions
from tracing.taps._tracker import (
    STATS,
    AnchorRecorder,
    IntentCallback,
    TapContext,
    ToolCallTracker,
)

if TYPE_CHECKING:
    from redaction import RedactionPolicy

T = TypeVar("T")

_NOTHING: Final = object()
_TAPPED: weakref.WeakSet[Any] = weakref.WeakSet()
"""Iterators we made (a stream tapped twice is tapped once)."""
_LEDGERS: dict[str, AnchorRecorder] = {}
_LEDGERS_LOCK: Final = threading.Lock()


def _tapped(events: Iterator[T], tracker: ToolCallTracker) -> Iterator[T]:
    event: Any = _NOTHING
    observe = tracker.observe
    try:
        for event in events:
            yield event
            observe(event)
    except GeneratorExit:  # the application stopped reading (closed or dropped the stream)
        if event is not _NOTHING:
            observe(event)
        tracker.close(early=True)
        raise
    except BaseException as exc:  # the stream failed: the application gets the same error
        tracker.close(exc)
        raise
    tracker.close()


async def _atapped(events: AsyncIterator[T], tracker: ToolCallTracker) -> AsyncIterator[T]:
    event: Any = _NOTHING
    observe = tracker.observe
    try:
        async for event in events:
            yield event
            observe(event)
    except GeneratorExit:
        if event is not _NOTHING:
            observe(event)
        tracker.close(early=True)
        raise
    except BaseException as exc:
        tracker.close(exc)
        raise
    tracker.close()


def _finish(events: Any, tracker: ToolCallTracker) -> None:
    """The application closed the stream: close our generator, so that the last event it
    received is read and the tracker closes (``early``); directly if the generator is busy."""
    try:
        events.close()
    except Exception:  # running in another thread: the tracker itself, then
        tracker.close(early=True)


async def _afinish(events: Any, tracker: ToolCallTracker) -> None:
    try:
        await events.aclose()
    except Exception:  # being awaited by another task
        tracker.close(early=True)


def _hook_close(holder: Any, events: Any, tracker: ToolCallTracker) -> None:
    """Make ``holder.close()`` (also what ``with stream:`` calls on exit) finish the tap, there
    and then: without it a closed stream's calls stay "writing…" until a garbage collection."""
    try:
        original = getattr(holder, "close", None)
        if original is None or not callable(original):
            return
        if inspect.iscoroutinefunction(original):

            async def aclose(*args: Any, **kwargs: Any) -> Any:
                try:
                    return await original(*args, **kwargs)
                finally:
                    await _afinish(events, tracker)

            holder.close = aclose
        else:

            def close(*args: Any, **kwargs: Any) -> Any:
                try:
                    return original(*args, **kwargs)
                finally:
                    _finish(events, tracker)

            holder.close = close
    except Exception:  # a stream that takes no attribute: it is still tapped, closed at GC
        return


def _tap_in_place(stream: Any, make: Callable[[], ToolCallTracker], also: Any = None) -> bool:
    """Replace ``stream._iterator`` by a pass-through generator; False when it has none.
    ``stream.close`` (and ``also.close``: the helper stream around it) then finish the tap."""
    try:
        events = getattr(stream, "_iterator", None)
    except Exception:
        return False
    if events is None:
        return False
    if events in _TAPPED:
        return True
    tracker = make()
    if hasattr(events, "__anext__"):
        tapped: Any = _atapped(events, tracker)
    elif hasattr(events, "__next__"):
        tapped = _tapped(events, tracker)
    else:
        return False
    try:
        stream._iterator = tapped
    except Exception:
        return False
    _TAPPED.add(tapped)
    _hook_close(stream, tapped, tracker)
    if also is not None and also is not stream:
        _hook_close(also, tapped, tracker)
    return True


def _is_manager(obj: Any) -> bool:
    iterable = hasattr(obj, "__iter__") or hasattr(obj, "__aiter__")
    return not iterable and (hasattr(obj, "__enter__") or hasattr(obj, "__aenter__"))


def _tap(obj: Any, make: Callable[[], ToolCallTracker]) -> Any:
    if _is_manager(obj):
        return _TappedManager(obj, make)
    if inspect.isawaitable(obj) and not hasattr(obj, "__aiter__"):
        return _await_and_tap(obj, make)
    raw = getattr(obj, "_raw_stream", None)
    if raw is not None and _tap_in_place(raw, make, also=obj):
        return obj
    if _tap_in_place(obj, make):
        return obj
    if hasattr(obj, "__iter__") or hasattr(obj, "__aiter__"):
        return TappedStream(obj, make())
    raise TypeError(
        f"StreamTap.wrap() takes a stream of SDK events, not {type(obj).__name__} "
        "(pass what client.chat.completions.create(..., stream=True), client.responses.create("
        "..., stream=True), client.messages.create(..., stream=True) or a .stream(...) returns)"
    )


async def _await_and_tap(awaitable: Awaitable[Any], make: Callable[[], ToolCallTracker]) -> Any:
    return _tap(await awaitable, make)


class TappedStream:
    """A pass-through proxy over an iterable of SDK events that is not an SDK stream.

    Iterating it yields the very events of the wrapped stream; every other attribute is the
    wrapped stream's.
    """

    def __init__(self, stream: Any, tracker: ToolCallTracker) -> None:
        self._stream = stream
        self._tracker = tracker
        self._events: Any = None

    def __iter__(self) -> Iterator[Any]:
        if self._events is None:
            self._events = _tapped(iter(self._stream), self._tracker)
        return self._events

    def __next__(self) -> Any:
        return next(self.__iter__())

    def __aiter__(self) -> AsyncIterator[Any]:
        if self._events is None:
            self._events = _atapped(aiter(self._stream), self._tracker)
        return self._events

    async def __anext__(self) -> Any:
        return await anext(self.__aiter__())

    def __enter__(self) -> Any:
        inner = self._stream.__enter__()
        return self if inner is self._stream else inner

    def __exit__(self, *exc: object) -> Any:
        return self._stream.__exit__(*exc)

    async def __aenter__(self) -> Any:
        inner = await self._stream.__aenter__()
        return self if inner is self._stream else inner

    async def __aexit__(self, *exc: object) -> Any:
        return await self._stream.__aexit__(*exc)

    def close(self) -> Any:
        """Finish the tap (the calls left incomplete are abandoned), then close the stream."""
        events = self._events
        if events is not None and hasattr(events, "close"):
            _finish(events, self._tracker)
        else:
            self._tracker.close(early=True)
        inner = getattr(self._stream, "close", None)
        return inner() if callable(inner) else None

    async def aclose(self) -> Any:
        """``close`` for an async stream (``await stream.aclose()``)."""
        events = self._events
        if events is not None and hasattr(events, "aclose"):
            await _afinish(events, self._tracker)
        else:
            self._tracker.close(early=True)
        inner: Callable[[], Awaitable[Any]] | None = getattr(self._stream, "aclose", None)
        return await inner() if inner is not None else None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _our_events(stream: Any) -> Any:
    """The pass-through generator the tap put into ``stream`` (None if none)."""
    if isinstance(stream, TappedStream):
        return stream._events  # pyright: ignore[reportPrivateUsage]
    for holder in (getattr(stream, "_raw_stream", None), stream):
        events = getattr(holder, "_iterator", None) if holder is not None else None
        if events is not None and events in _TAPPED:
            return events
    return None


class _TappedManager:
    """Proxy of a stream manager (``with client.messages.stream(...) as stream``): the stream
    it returns is tapped; leaving the block finishes the tap (a stream left unfinished settles
    its incomplete calls as abandoned there and then, not when it is garbage collected)."""

    def __init__(self, manager: Any, make: Callable[[], ToolCallTracker]) -> None:
        self._manager = manager
        self._make = make
        self._stream: Any = None

    def __enter__(self) -> Any:
        self._stream = _tap(self._manager.__enter__(), self._make)
        return self._stream

    def __exit__(self, *exc: object) -> Any:
        try:
            return self._manager.__exit__(*exc)
        finally:
            events = _our_events(self._stream)
            if events is not None and hasattr(events, "close"):
                events.close()

    async def __aenter__(self) -> Any:
        self._stream = _tap(await self._manager.__aenter__(), self._make)
        return self._stream

    async def __aexit__(self, *exc: object) -> Any:
        try:
            return await self._manager.__aexit__(*exc)
        finally:
            events = _our_events(self._stream)
            if events is not None and hasattr(events, "aclose"):
                await events.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._manager, name)


def _open_recorder(url: str | None) -> AnchorRecorder:
    key = url or ""
    with _LEDGERS_LOCK:
        found = _LEDGERS.get(key)
        if found is None:
            found = _LEDGERS[key] = open_ledger(url)
        return found


@cache
def _default_policy() -> RedactionPolicy:
    return RedactionPolicy.load()


def _session_context() -> tuple[str | None, str | None, int | None]:
    """(session, agent, turn) of the enclosing ``tracing.session(...)``, when there is one."""
    current = current_session()
    if current is None:
        return None, None, None
    return current.session_id, current.agent_id, current.turn


class StreamTap:
    """Publishes the intent of each tool call while the model is still writing its arguments.

    One ``StreamTap`` holds the configuration; ``wrap`` taps one stream. Only calls of
    label-bearing tools (the registry: tools whose schema ``inject_intent`` changed) are
    tapped. Each such call becomes a ``streaming`` anchor keyed by the provider's tool call id,
    which the span processor's in-flight and settled writes later update in place. What is
    published goes through the redaction policy first (the intent is hidden when the tool's
    args are redacted) and ``sanitize_label``.

    Example::

        tap = StreamTap(session_id="conv-42", agent_id="coder")
        stream = tap.wrap(client.chat.completions.create(model=..., tools=tools, stream=True))
        for chunk in stream:  # the same chunks as without the tap
            ...

    Args:
        ledger: a ``Ledger`` (or anything with ``record(AnchorWrite)``), a ledger URL, None
            for ``$INTENTRACE_LEDGER_URL`` or the default ledger file, or False for no ledger
            (``on_intent`` only). Ledgers opened from a URL are shared by every tap.
        policy: the redaction policy (default ``RedactionPolicy.load()``).
        registry: the label-bearing tools (default ``tracing.default_registry()``).
        session_id: the session written on the anchors (default: the enclosing
            ``tracing.session(...)``, if any).
        agent_id: the agent (same default).
        turn: the turn (same default).
        on_intent: ``on_intent(call_id, tool_name, intent)`` each time a call's intent grows
            (``intent.text`` is sanitized, not redacted: it is for the application's own UI).
        options: publishing options (``TapOptions()``).

    Raises:
        LedgerError: the ledger URL is bad.
        PolicyError: the redaction policy file is bad.
    """

    def __init__(
        self,
        *,
        ledger: AnchorRecorder | str | bool | None = None,
        policy: RedactionPolicy | None = None,
        registry: IntentRegistry | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        turn: int | None = None,
        on_intent: IntentCallback | None = None,
        options: TapOptions | None = None,
    ) -> None:
        if ledger is False:
            recorder: AnchorRecorder | None = None
        elif ledger is None or ledger is True:
            recorder = _open_recorder(None)
        elif isinstance(ledger, str):
            recorder = _open_recorder(ledger)
        else:
            recorder = ledger
        self.recorder: AnchorRecorder | None = recorder
        """Where anchors go (None: nowhere, only ``on_intent``)."""
        self.policy: RedactionPolicy = policy if policy is not None else _default_policy()
        self.registry: IntentRegistry = registry if registry is not None else default_registry()
        self.session_id = session_id
        self.agent_id = agent_id
        self.turn = turn
        self.on_intent = on_intent
        self.options: TapOptions = options or TapOptions()

    def tracker(
        self,
        *,
        session_id: str | None = None,
        agent_id: str | None = None,
        turn: int | None = None,
        batch_id: str | None = None,
    ) -> ToolCallTracker:
        """A tracker for one stream that you feed yourself (``observe(event)``, ``close()``).

        The arguments override the tap's own for this stream; ``batch_id`` groups the calls of
        the stream (default: the provider's response id).
        """
        ctx_session, ctx_agent, ctx_turn = _session_context()
        context = TapContext(
            session_id=session_id or self.session_id or ctx_session,
            agent_id=agent_id or self.agent_id or ctx_agent,
            turn=turn if turn is not None else self.turn if self.turn is not None else ctx_turn,
            batch_id=batch_id,
        )
        return ToolCallTracker(
            recorder=self.recorder,
            policy=self.policy,
            registry=self.registry,
            context=context,
            on_intent=self.on_intent,
            options=self.options,
        )

    def wrap(
        self,
        stream: T,
        *,
        session_id: str | None = None,
        agent_id: str | None = None,
        turn: int | None = None,
        batch_id: str | None = None,
    ) -> T:
        """Tap ``stream`` and return it (the same object for the SDKs' streams; see the module
        notes for managers, awaitables and other iterables).

        Raises:
            TypeError: ``stream`` is not a stream of events.
        """

        def make() -> ToolCallTracker:
            return self.tracker(
                session_id=session_id, agent_id=agent_id, turn=turn, batch_id=batch_id
            )

        try:
            return cast("T", _tap(stream, make))
        except TypeError:
            raise
        except Exception as exc:  # tapping must never break the application's stream
            STATS.error("internal_errors", "StreamTap.wrap", exc)
            return stream


def tap_stream(stream: T, **kwargs: Any) -> T:
    """``StreamTap(**kwargs).wrap(stream)`` (see ``StreamTap`` for the arguments)."""
    return StreamTap(**kwargs).wrap(stream)
