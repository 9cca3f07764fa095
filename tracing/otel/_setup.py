"""``configure(...)``: one call that sets up tracing with ``IntentSpanProcessor``.

Four setups (docs/tracing.md): plain OTLP (``OTEL_EXPORTER_OTLP_*``), Langfuse only, both,
and an app whose ``TracerProvider`` already exists (its processors get wrapped).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from typing import Any, cast
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from redaction import RedactionPolicy
from tracing.anchor import LedgerSink
from tracing.derive._call import Naming, PolicyLike, RegistryLike
from tracing.derive._conventions import DEFAULT_CONVENTIONS, Convention
from tracing.environment_variables import INTENTRACE_LEDGER_URL
from tracing.intent import IntentRegistry, default_registry
from tracing.intent._schema import tool_names_of
from tracing.ledger import open_ledger
from tracing.otel._langfuse import check_langfuse_clients, langfuse_span_mask
from tracing.otel._options import ConfigError, IntentOptions
from tracing.otel._processor import IntentSpanProcessor
from tracing.otel._spans import is_langfuse_processor

_OTLP_ENV = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
LANGFUSE_OTLP_PATH = "/api/public/otel"
"""The path of a Langfuse server's OTLP endpoint (``<host>/api/public/otel/v1/traces``)."""


def is_langfuse_endpoint(endpoint: str | None) -> bool:
    """Whether an OTLP endpoint URL is a Langfuse server's (its path holds ``/api/public/otel``)."""
    if not endpoint:
        return False
    return LANGFUSE_OTLP_PATH in urlsplit(endpoint.strip()).path.rstrip("/") + "/"


def _otlp_endpoint(otlp: bool | str) -> str | None:
    """The traces endpoint the OTLP exporter will use (as the exporter resolves it)."""
    if isinstance(otlp, str):
        return otlp
    traces = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if traces:
        return traces
    base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    return base.rstrip("/") + "/v1/traces" if base else None


@dataclass(frozen=True)
class TracingSetup:
    """What ``configure`` built."""

    provider: TracerProvider
    processor: IntentSpanProcessor
    langfuse: Any | None = None
    """The Langfuse client, when Langfuse is a destination."""
    ledger: LedgerSink | None = None
    registry: RegistryLike | None = None
    """The label-bearing tool names in use (``registry=`` or ``default_registry()``)."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Export everything ended so far (and write its anchors)."""
        ok = self.processor.force_flush(timeout_millis)
        flush = getattr(self.ledger, "flush", None)
        if callable(flush):
            ok = bool(cast("Callable[[float], Any]", flush)(timeout_millis / 1000)) and ok
        return ok

    def shutdown(self) -> None:
        """Flush and stop the processor, the exporters and the ledger writer."""
        self.processor.shutdown()
        close = getattr(self.ledger, "close", None)
        if callable(close):
            close()


def wrap_provider(provider: TracerProvider, processor: IntentSpanProcessor) -> None:
    """Put ``processor`` in front of the provider's processors, now and later.

    The processors already registered move under ``processor`` (they get its shaped copies);
    processors added to the provider afterwards (e.g. by a Langfuse client created later) are
    wrapped too. Raises ``ConfigError`` when the provider's internals are not the SDK's.
    """
    multi: Any = getattr(provider, "_active_span_processor", None)
    lock = getattr(multi, "_lock", None)
    if multi is None or lock is None or not hasattr(multi, "_span_processors"):
        raise ConfigError(
            "cannot wrap this TracerProvider's processors; add "
            "IntentSpanProcessor(<your exporting processors>) to it yourself (docs/tracing.md)"
        )
    with lock:
        existing = cast("tuple[SpanProcessor, ...]", multi._span_processors)
        multi._span_processors = (processor,)
    for item in existing:
        if isinstance(item, IntentSpanProcessor):
            for inner in item.processors:
                processor.add_processor(inner)
        else:
            processor.add_processor(item)

    def add_span_processor(span_processor: SpanProcessor) -> None:
        processor.add_processor(span_processor)
        if is_langfuse_processor(span_processor):  # a Langfuse client made on this provider
            key = getattr(span_processor, "public_key", None)
            check_langfuse_clients(key if isinstance(key, str) else None)

    provider.add_span_processor = add_span_processor


def _resolve_policy(policy: PolicyLike | str | PathLike[str] | None) -> PolicyLike:
    if policy is not None and not isinstance(policy, str | PathLike):
        return policy
    return RedactionPolicy.load(policy)


def _resolve_ledger(ledger: LedgerSink | str | bool | None) -> LedgerSink | None:
    if ledger is False:
        return None
    if ledger is None:
        url = os.environ.get(INTENTRACE_LEDGER_URL)
        if not url:
            return None
        ledger = url
    if ledger is True or isinstance(ledger, str):
        return open_ledger(None if ledger is True else ledger)
    return ledger


def _langfuse_client(
    langfuse: bool | Mapping[str, Any] | Any, provider: TracerProvider, policy: PolicyLike
) -> Any:
    if langfuse is True or isinstance(langfuse, Mapping):
        # lazy: the Langfuse SDK is the optional `langfuse` extra
        try:
            from langfuse import Langfuse
        except ImportError as exc:
            raise ConfigError(
                "langfuse=... needs the Langfuse SDK: pip install 'intentrace[langfuse]'"
            ) from exc
        kwargs: dict[str, Any] = (
            dict(cast("Mapping[str, Any]", langfuse)) if isinstance(langfuse, Mapping) else {}
        )
        kwargs.setdefault("tracer_provider", provider)
        mask = getattr(policy, "langfuse_mask", None)
        if mask is not None:
            kwargs.setdefault("mask", mask)
        if isinstance(policy, RedactionPolicy):
            # the export-time hook: the processor's rule once more on what Langfuse sends (spans
            # the SDK's own processor got without passing through ours, e.g. a client the app
            # registered on another provider)
            kwargs.setdefault("mask_otel_spans", langfuse_span_mask(policy))
        client = Langfuse(**kwargs)
        check_langfuse_clients()  # beside an app's own client with other keys: @observe breaks
        return client
    return langfuse  # a client the app made (its processor is on the provider it was given)


def _member_tools(holder: Any) -> list[Any] | None:
    """The tools a framework's agent or toolset holds, or None when it holds none: pydantic-ai's
    ``toolsets`` (each with a ``tools`` mapping), else a ``tools`` list or mapping (OpenAI Agents,
    Agno, CrewAI, Google ADK agents; pydantic-ai ``FunctionToolset``; MCP ``ListToolsResult``)."""
    if isinstance(holder, str | bytes | Mapping):
        return None
    found: list[Any] = []
    toolsets = getattr(holder, "toolsets", None)
    if isinstance(toolsets, Iterable) and not isinstance(toolsets, str | bytes):
        for toolset in cast("Iterable[Any]", toolsets):
            found.extend(_member_tools(toolset) or [])
    tools = getattr(holder, "tools", None)
    if isinstance(tools, Mapping):
        found.extend(cast("Mapping[Any, Any]", tools).values())
    elif isinstance(tools, list | tuple):
        found.extend(cast("Sequence[Any]", tools))
    return found or None


def _register_tools(registry: RegistryLike, intent_tools: Iterable[Any] | Any) -> None:
    """Add the names of ``intent_tools`` to ``registry`` (ConfigError: one without a name).
    An agent stands for its tools (never for its own name)."""
    items: Any = [intent_tools] if isinstance(intent_tools, str | Mapping) else intent_tools
    if not isinstance(items, Iterable):
        items = [items]  # one tool object
    names: list[str] = []
    for tool in cast("Iterable[Any]", items):
        members = _member_tools(tool)
        found = (
            [n for member in members for n in tool_names_of(member)]
            if members is not None
            else tool_names_of(tool)
        )
        if not found:
            raise ConfigError(
                f"intent_tools: cannot tell the name of {type(tool).__name__} {tool!r:.60}; "
                "pass the tool's name as a string"
            )
        names.extend(found)
    update = getattr(registry, "update", None)
    if not callable(update):
        raise ConfigError(
            "intent_tools=... needs a registry with update(names) (an IntentRegistry); "
            "add the names to your registry yourself"
        )
    cast("Callable[[Iterable[str]], None]", update)(names)


class SetupRegistry(IntentRegistry):
    """The registry of one ``configure(intent_tools=...)`` without ``registry=``: its own
    names, over ``default_registry()`` (what ``inject_intent`` fills, now and later), which it
    never changes. ``add``/``update``/``discard`` act on its own names."""

    __slots__ = ("_base",)

    def __init__(self, names: Iterable[str] = (), *, base: IntentRegistry | None = None) -> None:
        super().__init__(names)
        self._base = base if base is not None else default_registry()

    def names(self) -> frozenset[str]:
        return super().names() | self._base.names()

    def is_label_bearing(self, tool_name: str | None) -> bool:
        return super().is_label_bearing(tool_name) or self._base.is_label_bearing(tool_name)

    def __contains__(self, name: object) -> bool:
        return super().__contains__(name) or name in self._base

    def __len__(self) -> int:
        return len(self.names())

    def __repr__(self) -> str:
        return f"SetupRegistry({sorted(super().names())!r}, base={self._base!r})"


def configure(
    *,
    otlp: bool | str | None = None,
    langfuse_otlp: bool | None = None,
    langfuse: bool | Mapping[str, Any] | Any | None = None,
    policy: PolicyLike | str | PathLike[str] | None = None,
    naming: Naming | None = None,
    ledger: LedgerSink | str | bool | None = None,
    registry: RegistryLike | None = None,
    intent_tools: Iterable[Any] | None = None,
    provider: TracerProvider | None = None,
    resource: Resource | None = None,
    set_global: bool = True,
    options: IntentOptions | None = None,
    exporters: Iterable[SpanExporter] = (),
    processors: Iterable[SpanProcessor] = (),
    conventions: Sequence[Convention] | None = None,
) -> TracingSetup:
    """Set up tracing: a ``TracerProvider`` whose exporters get intent-named, redacted spans.

    Args:
        otlp: export OTLP/HTTP, configured by the standard ``OTEL_EXPORTER_OTLP_*`` variables.
            Default: on when ``OTEL_EXPORTER_OTLP_ENDPOINT``/``..._TRACES_ENDPOINT`` is set
            (and the provider is ours; for an existing provider only when True). A string is
            the traces endpoint URL (``http://host:4318/v1/traces``).
        langfuse_otlp: the OTLP destination is a Langfuse server (directly or through a
            Collector): it gets the copy shaped for Langfuse (the label as the observation's
            name, TOOL type, session). Default: when the endpoint's path holds
            ``/api/public/otel``. Copies for other destinations add no ``gen_ai.tool.name``
            the original span did not have (the server would name the observation by it).
        langfuse: ``True`` (a ``Langfuse()`` client from ``LANGFUSE_*`` variables), a mapping of
            ``Langfuse(...)`` arguments (e.g. ``public_key``, ``secret_key``, ``base_url``), or
            a client the app already made.
        policy: a ``RedactionPolicy`` or the path of a policy file (default
            ``RedactionPolicy.load()``: ``$INTENTRACE_REDACTION_POLICY`` or the default).
        naming: ``intent`` (default, ``$INTENTRACE_NAMING``) or ``stable``.
        ledger: a ledger object, a URL, ``True`` (the default ledger file) or ``False``;
            default: ``$INTENTRACE_LEDGER_URL`` when set, else no ledger.
        registry: label-bearing tool names (default ``default_registry()``; with
            ``intent_tools``, a registry of this setup's own that also sees every name of
            ``default_registry()``): the processor and the
            tool spans of ``tool_call`` read it.
        intent_tools: tools whose calls carry our ``intent`` (their functions declare it, or
            their schemas were injected elsewhere), added to ``registry`` (never to
            ``default_registry()`` unless it is passed as ``registry``): names, schemas
            (OpenAI, Anthropic, MCP), a framework's tool objects (their ``name``: pydantic-ai
            ``Tool``, LangChain ``BaseTool``, OpenAI Agents ``FunctionTool``, MCP ``Tool``, ...),
            a framework's agent or toolset (its tools), or a plain function (its ``__name__``).
            The one line that makes a framework's calls named.
        provider: an existing provider to wrap instead of making one (its processors move
            under the intent processor). Default: the global provider when it is already an SDK
            provider, else a new one.
        resource: the resource of a new provider.
        set_global: make a new provider the global one.
        options: further processor options (``naming`` here wins over ``options.naming``).
        exporters: more exporters (each behind a ``BatchSpanProcessor``).
        processors: more processors to wrap.
        conventions: how tool spans are recognised, in order (default ``DEFAULT_CONVENTIONS``:
            GenAI semconv, OpenInference, OpenLLMetry, Langfuse); put a ``Convention`` of your
            own first to recognise a framework's tool spans that none of them matches.

    Raises:
        ConfigError: a bad option (one line saying how to fix it).
    """
    opts = options or IntentOptions()
    if naming is not None:
        opts = dataclasses.replace(opts, naming=naming)
    resolved_policy = _resolve_policy(policy)
    sink = _resolve_ledger(ledger)
    used_registry: RegistryLike
    if registry is not None:
        used_registry = registry
    elif intent_tools is not None:
        used_registry = SetupRegistry()  # this setup's names; default_registry() stays as it is
    else:
        used_registry = default_registry()
    if intent_tools is not None:
        _register_tools(used_registry, intent_tools)
    processor = IntentSpanProcessor(
        policy=resolved_policy,
        registry=used_registry,
        ledger=sink,
        options=opts,
        conventions=DEFAULT_CONVENTIONS if conventions is None else conventions,
    )

    existing = provider
    if existing is None:
        current = trace.get_tracer_provider()
        if isinstance(current, TracerProvider):
            existing = current
    if existing is not None:
        target = existing
        use_otlp = otlp is True or isinstance(otlp, str)
    else:
        target = TracerProvider(resource=resource) if resource else TracerProvider()
        use_otlp = bool(otlp) if otlp is not None else any(os.environ.get(k) for k in _OTLP_ENV)
    wrap_provider(target, processor)

    if use_otlp:
        # lazy: requests and protobuf load only when OTLP export is on
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        endpoint = _otlp_endpoint(otlp if isinstance(otlp, str) else True)
        to_langfuse = langfuse_otlp if langfuse_otlp is not None else is_langfuse_endpoint(endpoint)
        exporter = OTLPSpanExporter(endpoint=otlp) if isinstance(otlp, str) else OTLPSpanExporter()
        processor.add_processor(BatchSpanProcessor(exporter), langfuse=to_langfuse)
    for extra_exporter in exporters:
        endpoint = getattr(extra_exporter, "_endpoint", None)  # OTLP exporters keep their URL
        marked = isinstance(endpoint, str) and is_langfuse_endpoint(endpoint)
        processor.add_processor(BatchSpanProcessor(extra_exporter), langfuse=marked or None)
    for extra in processors:
        processor.add_processor(extra)
    client = None
    if langfuse is not None and langfuse is not False:
        client = _langfuse_client(langfuse, target, resolved_policy)
    if existing is None and set_global:
        trace.set_tracer_provider(target)
    return TracingSetup(
        provider=target, processor=processor, langfuse=client, ledger=sink, registry=used_registry
    )
