"""Our own instrumentation, for apps without a framework: ``tool_call``, ``tool``, ``session``,
``turn``, ``activity``, ``harvest``.

Tool calls become OpenTelemetry GenAI semconv ``execute_tool`` spans with the args as START
attributes, so ``IntentSpanProcessor`` names them from the first moment. The intent is read
and stripped before the tool body runs; the outcome comes from the return value (a mapping
with ``outcome``/``outcome_patch``) or from ``set_result(..., outcome=...)``; exceptions set
error status, cancellation its own; a call can go to the background and be harvested later.
"""

from __future__ import annotations

import functools
import inspect
import json
import threading
from collections.abc import Awaitable, Callable, Mapping
from contextvars import Token
from typing import Any, Final, ParamSpec, TypeVar, cast, overload

from opentelemetry import context as context_api
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode, Tracer

from tracing import __version__
from tracing import attributes as A
from tracing._context import CURRENT_CALL, SESSION, SessionInfo
from tracing.anchor import anchor_id as make_anchor_id
from tracing.derive import RegistryLike
from tracing.derive._conventions import to_json_text
from tracing.intent import INTENT_ARG, default_registry, read_intent, strip_intent
from tracing.otel._processor import IntentSpanProcessor, notify_background
from tracing.status import Status as CallStatus

P = ParamSpec("P")
R = TypeVar("R")

TRACER_NAME: Final = "intentrace"

_BACKGROUND: Final[dict[str, ToolCall]] = {}
_BACKGROUND_LOCK: Final = threading.Lock()


def _tracer(tracer: Tracer | None) -> Tracer:
    return tracer if tracer is not None else trace.get_tracer(TRACER_NAME, __version__)


def registry_of(tracer: Tracer) -> RegistryLike:
    """The registry of the ``IntentSpanProcessor`` behind ``tracer`` (the one ``configure``
    was given), else ``default_registry()``."""
    real: Any = getattr(tracer, "_real_tracer", None) or tracer  # (the API's proxy tracer)
    active: Any = getattr(real, "span_processor", None)
    inner: Any = getattr(active, "_span_processors", None)
    wrapped = cast("tuple[object, ...]", inner) if isinstance(inner, tuple) else ()
    for processor in (active, *wrapped):
        if isinstance(processor, IntentSpanProcessor):
            return processor.registry
    return default_registry()


def _as_mapping(args: Any) -> Any:
    if isinstance(args, str | bytes):
        try:
            parsed = json.loads(args)
        except (ValueError, RecursionError):
            return args
        return parsed
    return args


def _turn_attributes(info: SessionInfo) -> dict[str, Any]:
    """The turn span's attributes: GenAI semconv, OpenInference, Langfuse and ours."""
    attrs: dict[str, Any] = {
        A.GEN_AI_OPERATION_NAME: A.GEN_AI_INVOKE_AGENT,
        A.GEN_AI_CONVERSATION_ID: info.session_id,
        A.OPENINFERENCE_SPAN_KIND: A.OPENINFERENCE_AGENT,
        A.SESSION_ID_KEY: info.session_id,
        A.LANGFUSE_SESSION_ID: info.session_id,
        A.SESSION_ID: info.session_id,
    }
    if info.agent_id:
        attrs[A.GEN_AI_AGENT_NAME] = info.agent_id
        attrs[A.OI_AGENT_NAME] = info.agent_id
        attrs[A.AGENT_ID] = info.agent_id
    if info.user_id:
        attrs[A.OI_USER_ID] = info.user_id
        attrs[A.LANGFUSE_USER_ID] = info.user_id
    if info.turn is not None:
        attrs[A.TURN] = info.turn
    return attrs


class turn:
    """One turn of a session: its own trace, under an ``invoke_agent <agent>`` span.

    Usage::

        with session("conv-42", agent_id="coder", user_id="u-7"):
            with turn(3):
                ...  # tool calls and activity blocks: children of the turn span

    The span follows the GenAI semantic conventions (``gen_ai.operation.name=invoke_agent``,
    ``gen_ai.agent.name``, ``gen_ai.conversation.id``), is an AGENT span for OpenInference
    readers (``openinference.span.kind``, ``session.id``, ``user.id``) and carries Langfuse's
    session and user keys, so Langfuse and Phoenix show the turn as one trace of the session.
    ``session(..., turn=N)`` opens one itself. Sync and async ``with``; an exception sets
    error status.

    Args:
        number: the turn number.
        session_id / agent_id / user_id: default to those of the enclosing ``session``.
        tracer: the tracer to use (default: the global provider's ``intentrace`` tracer).
    """

    def __init__(
        self,
        number: int,
        *,
        session_id: str | None = None,
        agent_id: str | None = None,
        user_id: str | None = None,
        tracer: Tracer | None = None,
    ) -> None:
        self.number = number
        self._ids = (session_id, agent_id, user_id)
        self._tracer = tracer
        self.info: SessionInfo | None = None
        self.span: Span | None = None
        self._session_token: Token[SessionInfo | None] | None = None
        self._token: object = None

    def __enter__(self) -> Span:
        outer = SESSION.get()
        session_id, agent_id, user_id = self._ids
        info = SessionInfo(
            str(session_id or (outer.session_id if outer else "")),
            agent_id or (outer.agent_id if outer else None),
            self.number,
            user_id or (outer.user_id if outer else None),
        )
        self.info = info
        self._session_token = SESSION.set(info)
        name = (
            f"{A.GEN_AI_INVOKE_AGENT} {info.agent_id}" if info.agent_id else A.GEN_AI_INVOKE_AGENT
        )
        attrs = _turn_attributes(info)
        if not info.session_id:
            for key in (A.GEN_AI_CONVERSATION_ID, A.SESSION_ID_KEY, A.LANGFUSE_SESSION_ID):
                attrs.pop(key, None)
        self.span = _tracer(self._tracer).start_span(name, attributes=attrs)
        self._token = context_api.attach(trace.set_span_in_context(self.span))
        return self.span

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any):
        if self._token is not None:
            context_api.detach(self._token)  # pyright: ignore[reportArgumentType]
            self._token = None
        if self.span is not None:
            if exc is not None:
                self.span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            self.span.end()
            self.span = None
        if self._session_token is not None:
            SESSION.reset(self._session_token)
            self._session_token = None

    async def __aenter__(self) -> Span:
        return self.__enter__()

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.__exit__(exc_type, exc, tb)


class session:
    """Carry a session (conversation), agent, turn and user to every span started inside.

    Usage::

        with session("conv-42", agent_id="coder", turn=3, user_id="u-7"):
            ...

    With a ``turn`` it also opens the turn's ``invoke_agent <agent>`` span (see ``turn``),
    which parents the calls and activity blocks inside: one trace per turn
    (``turn_span=False``: no span, the session is only carried). Works with ``with`` and
    ``async with``; nests (the innermost wins).
    """

    def __init__(
        self,
        session_id: str,
        *,
        agent_id: str | None = None,
        turn: int | None = None,
        user_id: str | None = None,
        tracer: Tracer | None = None,
        turn_span: bool = True,
    ):
        self.info = SessionInfo(str(session_id), agent_id, turn, user_id)
        self._turn = _turn_context(turn, tracer) if turn is not None and turn_span else None
        self._token: Token[SessionInfo | None] | None = None

    def __enter__(self) -> SessionInfo:
        self._token = SESSION.set(self.info)
        if self._turn is not None:
            self._turn.__enter__()
        return self.info

    def __exit__(self, *exc: Any) -> None:
        if self._turn is not None:
            self._turn.__exit__(*exc)
        if self._token is not None:
            SESSION.reset(self._token)
            self._token = None

    async def __aenter__(self) -> SessionInfo:
        return self.__enter__()

    async def __aexit__(self, *exc: Any) -> None:
        self.__exit__(*exc)


def _turn_context(number: int, tracer: Tracer | None) -> turn:
    # (inside ``session.__init__`` its ``turn`` parameter hides the class)
    return turn(number, tracer=tracer)


def _session_attributes() -> dict[str, Any]:
    info = SESSION.get()
    if info is None:
        return {}
    out: dict[str, Any] = {
        A.SESSION_ID: info.session_id,
        A.SESSION_ID_KEY: info.session_id,
        A.GEN_AI_CONVERSATION_ID: info.session_id,
    }
    if info.agent_id:
        out[A.AGENT_ID] = info.agent_id
    if info.turn is not None:
        out[A.TURN] = info.turn
    if info.user_id:
        out[A.OI_USER_ID] = info.user_id
    return out


class activity:
    """A block of sibling tool calls with an activity label (its group header).

    Starts a span named by the label carrying ``intentrace.activity``; tool calls inside are
    its children, so they share its span id as their batch. Sync and async ``with``.
    """

    def __init__(self, label: str, *, tracer: Tracer | None = None):
        self.label = label
        self._tracer = _tracer(tracer)
        self.span: Span | None = None
        self._token: object = None

    def __enter__(self) -> Span:
        attrs: dict[str, Any] = {A.ACTIVITY: self.label, **_session_attributes()}
        self.span = self._tracer.start_span(self.label, attributes=attrs)
        self._token = context_api.attach(trace.set_span_in_context(self.span))
        return self.span

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any):
        if self._token is not None:
            context_api.detach(self._token)  # pyright: ignore[reportArgumentType]
            self._token = None
        if self.span is not None:
            if exc is not None:
                self.span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            self.span.end()

    async def __aenter__(self) -> Span:
        return self.__enter__()

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.__exit__(exc_type, exc, tb)


class ToolCall:
    """One tool call: an ``execute_tool`` span, sync or async context manager.

    Args:
        name: the tool name.
        args: the call's arguments (a mapping, or JSON text as the provider sent it).
        call_id: the provider's tool call id (``gen_ai.tool.call.id``).
        label_bearing: whether the tool had the intent injected (default: the tool is in
            ``registry``). Only label-bearing calls are named by their intent, and only
            theirs is stripped from ``args``.
        tracer: the tracer to use (default: the global provider's ``intentrace`` tracer).
        registry: label-bearing tool names (default: the registry of the intent processor
            behind ``tracer``, i.e. the one given to ``configure``; else
            ``default_registry()``).
        attributes: extra start attributes.
        background_timeout_s: for ``to_background()``: settle as an error after this long.
    """

    def __init__(
        self,
        name: str,
        args: Any = None,
        *,
        call_id: str | None = None,
        label_bearing: bool | None = None,
        tracer: Tracer | None = None,
        attributes: Mapping[str, Any] | None = None,
        background_timeout_s: float | None = None,
        registry: RegistryLike | None = None,
    ) -> None:
        self.name = name
        self.call_id = call_id
        self._tracer = _tracer(tracer)
        self._explicit_gate = label_bearing is not None
        if label_bearing is None:
            gate = registry if registry is not None else registry_of(self._tracer)
            label_bearing = gate.is_label_bearing(name)
        self.label_bearing = label_bearing
        self.raw_args = args
        parsed = _as_mapping(args)
        self.intent: str | None = read_intent(parsed) if self.label_bearing else None
        self.args: Any = strip_intent(parsed) if self.label_bearing else parsed
        """The args without the injected intent (a dict when given a JSON object)."""
        self._extra = dict(attributes or {})
        self._timeout = background_timeout_s
        self.span: Span | None = None
        self._session: SessionInfo | None = None
        self._token: object = None
        self._call_token: Token[Any] | None = None
        self._background = False
        self._ended = False
        self.result: Any = None

    # ------------------------------------------------------------------------- lifecycle
    def start(self) -> ToolCall:
        attrs: dict[str, Any] = {
            A.GEN_AI_OPERATION_NAME: A.GEN_AI_EXECUTE_TOOL,
            A.GEN_AI_TOOL_NAME: self.name,
            **_session_attributes(),
            **self._extra,
        }
        if self.call_id:
            attrs[A.GEN_AI_TOOL_CALL_ID] = self.call_id
        text = to_json_text(self.raw_args)
        if text is not None:
            attrs[A.GEN_AI_TOOL_CALL_ARGUMENTS] = text
        if self.label_bearing or self._explicit_gate:
            attrs[A.LABEL_BEARING] = self.label_bearing
        self._session = SESSION.get()
        self.span = self._tracer.start_span(f"execute_tool {self.name}", attributes=attrs)
        return self

    def __enter__(self) -> ToolCall:
        if self.span is None:
            self.start()
        assert self.span is not None
        self._token = context_api.attach(trace.set_span_in_context(self.span))
        self._call_token = CURRENT_CALL.set(self)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        if self._call_token is not None:
            CURRENT_CALL.reset(self._call_token)
            self._call_token = None
        if self._token is not None:
            context_api.detach(self._token)  # pyright: ignore[reportArgumentType]
            self._token = None
        if exc is not None:
            self._fail(exc)
            self._end()
        elif not self._background:
            self._end()

    async def __aenter__(self) -> ToolCall:
        return self.__enter__()

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.__exit__(exc_type, exc, tb)

    def _end(self) -> None:
        if self._ended or self.span is None:
            return
        self._ended = True
        self.span.end()
        if self._background:
            with _BACKGROUND_LOCK:
                for key in (self.anchor_id, self.call_id):
                    if key and _BACKGROUND.get(key) is self:
                        del _BACKGROUND[key]

    def _fail(self, exc: BaseException) -> None:
        span = self.span
        if span is None or not span.is_recording():
            return
        if isinstance(exc, Exception):
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        else:  # CancelledError, KeyboardInterrupt, ...
            span.set_attribute(A.STATUS, str(CallStatus.CANCELLED))
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))

    # ------------------------------------------------------------------------- results
    @property
    def anchor_id(self) -> str:
        """The call's anchor id in the ledger (``tracing.anchor.anchor_id``: of the session,
        turn and call id in effect at start, else of the span); '' before start."""
        if self.span is None:
            return ""
        ctx = self.span.get_span_context()
        info = self._session
        return make_anchor_id(
            self.call_id,
            session_id=info.session_id if info is not None else None,
            turn=info.turn if info is not None else None,
            trace_id=trace.format_trace_id(ctx.trace_id),
            span_id=trace.format_span_id(ctx.span_id),
        )

    def set_result(
        self,
        result: Any,
        *,
        outcome: str | None = None,
        outcome_patch: Mapping[str, str] | None = None,
    ) -> Any:
        """Record the tool's result (and its outcome); returns ``result``."""
        self.result = result
        span = self.span
        if span is not None and span.is_recording():
            text = to_json_text(result)
            if text is not None:
                span.set_attribute(A.GEN_AI_TOOL_CALL_RESULT, text)
        self.set_outcome(outcome, outcome_patch)
        return result

    def set_outcome(
        self, outcome: str | None = None, outcome_patch: Mapping[str, str] | None = None
    ) -> None:
        """The tool-authored outcome: a full replacement, or ``{"from", "to"}`` on the intent."""
        span = self.span
        if span is None or not span.is_recording():
            return
        if outcome:
            span.set_attribute(A.OUTCOME, outcome)
        if outcome_patch:
            span.set_attribute(A.OUTCOME_PATCH, json.dumps(dict(outcome_patch)))

    def fail(self, error: BaseException | str) -> None:
        """Mark the call failed without raising (e.g. a tool that returns an error)."""
        if isinstance(error, BaseException):
            self._fail(error)
        elif self.span is not None and self.span.is_recording():
            self.span.set_status(Status(StatusCode.ERROR, error))

    # ------------------------------------------------------------------------- background
    def to_background(self, timeout_s: float | None = None) -> ToolCall:
        """Dispatch to the background: the call stays in flight (``· in background``) after
        the ``with`` block until ``harvest(...)``; not harvested within the timeout, it
        settles as an error (``· timed out``)."""
        span = self.span
        if span is None or self._background:
            return self
        self._background = True
        with _BACKGROUND_LOCK:
            _BACKGROUND[self.anchor_id] = self
            if self.call_id:
                _BACKGROUND[self.call_id] = self  # (the provider's id works too)
        span.set_attribute(A.BACKGROUND, True)
        notify_background(span, timeout_s if timeout_s is not None else self._timeout)  # pyright: ignore[reportArgumentType]

        return self

    def harvest(
        self,
        result: Any = None,
        *,
        outcome: str | None = None,
        outcome_patch: Mapping[str, str] | None = None,
        error: BaseException | str | None = None,
    ) -> bool:
        """Settle a background call with its result (or error). False if already settled."""
        if self._ended or self.span is None or not self.span.is_recording():
            with _BACKGROUND_LOCK:
                for key in (self.anchor_id, self.call_id):
                    if key and _BACKGROUND.get(key) is self:
                        del _BACKGROUND[key]
            return False
        if error is not None:
            self.fail(error)
        else:
            self.set_result(result, outcome=outcome, outcome_patch=outcome_patch)
        self._end()
        return True


def tool_call(
    name: str,
    args: Any = None,
    *,
    call_id: str | None = None,
    label_bearing: bool | None = None,
    tracer: Tracer | None = None,
    attributes: Mapping[str, Any] | None = None,
    background_timeout_s: float | None = None,
    registry: RegistryLike | None = None,
) -> ToolCall:
    """One tool call as a context manager (``with`` / ``async with``). See :class:`ToolCall`.

    Usage::

        with tool_call("search_code", call.arguments, call_id=call.id) as c:
            c.set_result(search_code(**c.args), outcome="Found 12 OAuth handlers")
    """
    return ToolCall(
        name,
        args,
        call_id=call_id,
        label_bearing=label_bearing,
        tracer=tracer,
        attributes=attributes,
        background_timeout_s=background_timeout_s,
        registry=registry,
    )


def current_call() -> ToolCall | None:
    """The innermost ``tool_call``/``@tool`` call running in this context, or None."""
    return cast("ToolCall | None", CURRENT_CALL.get())


def harvest(
    call_id: str,
    result: Any = None,
    *,
    outcome: str | None = None,
    outcome_patch: Mapping[str, str] | None = None,
    error: BaseException | str | None = None,
) -> bool:
    """Settle the background call with this anchor id (or the provider call id it was started
    with). False when none is waiting."""
    with _BACKGROUND_LOCK:
        call = _BACKGROUND.get(call_id)
    if call is None:
        return False
    return call.harvest(result, outcome=outcome, outcome_patch=outcome_patch, error=error)


def _bind(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    try:
        bound = inspect.signature(fn).bind_partial(*args, **kwargs)
    except (TypeError, ValueError):
        return dict(kwargs)
    out: dict[str, Any] = {}
    for key, value in bound.arguments.items():
        param = bound.signature.parameters[key]
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            out.update(cast("dict[str, Any]", value))
        elif param.kind is inspect.Parameter.VAR_POSITIONAL:
            out[key] = list(cast("tuple[Any, ...]", value))
        else:
            out[key] = value
    return out


def _accepts_intent(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return True
    return INTENT_ARG in params or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()
    )


@overload
def tool(fn: Callable[P, R], /) -> Callable[P, R]: ...
@overload
def tool(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    label_bearing: bool | None = None,
    tracer: Tracer | None = None,
    registry: RegistryLike | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
def tool(
    fn: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    label_bearing: bool | None = None,
    tracer: Tracer | None = None,
    registry: RegistryLike | None = None,
) -> Any:
    """Decorate a tool function (sync or async): each call is a ``tool_call``.

    The ``intent`` keyword is read, then removed before the body runs unless the function
    declares it; the return value is recorded as the result, and a returned mapping with
    ``outcome``/``outcome_patch`` sets the outcome. Inside, ``current_call()`` gives the call.
    """

    def decorate(func: Callable[P, R]) -> Callable[P, R]:
        tool_name = name or func.__name__
        keep_intent = _accepts_intent(func)

        def prepare(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[ToolCall, Any]:
            call = ToolCall(
                tool_name,
                _bind(func, args, kwargs),
                label_bearing=label_bearing,
                tracer=tracer,
                registry=registry,
            )
            if call.label_bearing and not keep_intent:
                kwargs.pop(INTENT_ARG, None)
            return call, kwargs

        def settle(call: ToolCall, result: Any) -> None:
            outcome = patch = None
            if isinstance(result, Mapping):
                mapping = cast("Mapping[str, Any]", result)
                value = mapping.get("outcome")
                outcome = value if isinstance(value, str) else None
                raw_patch = mapping.get("outcome_patch")
                patch = (
                    cast("Mapping[str, str]", raw_patch) if isinstance(raw_patch, Mapping) else None
                )
            call.set_result(result, outcome=outcome, outcome_patch=patch)

        if inspect.iscoroutinefunction(func):
            afunc = cast("Callable[..., Awaitable[Any]]", func)

            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                call, kw = prepare(args, dict(kwargs))
                async with call:
                    result = await afunc(*args, **kw)
                    settle(call, result)
                    return result

            return cast("Callable[P, R]", async_wrapper)

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            call, kw = prepare(args, dict(kwargs))
            with call:
                result = cast("Callable[..., Any]", func)(*args, **kw)
                settle(call, result)
                return result

        return cast("Callable[P, R]", wrapper)

    if fn is not None:
        return decorate(fn)
    return decorate
