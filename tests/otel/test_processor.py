"""IntentSpanProcessor, in memory: naming at start and at settle, outcomes, framing, the gate,
both naming modes, redaction, the ledger seam, background calls, activity labels."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, cast

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import Status, StatusCode

from redaction import RedactionError, RedactionPolicy
from tracing import IntentOptions, IntentRegistry, ToolCall, activity, harvest, session, tool_call
from tracing import attributes as A
from tracing.testing import Capture, RecordingLedger, capture

SECRET = "sk-live-0123456789abcdefghijklmnopqrstuv"
GH_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


class Probe(SpanProcessor):
    """A wrapped processor that records the live name at start and what it gets at end."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.ended: list[ReadableSpan] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.started.append(span.name)

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span)


def _cap(**kwargs: Any) -> tuple[Capture, Probe]:
    probe = Probe()
    return capture(processors=[probe], **kwargs), probe


def _live_name(call: ToolCall) -> str:
    return cast(ReadableSpan, call.span).name


def _dump(cap: Capture) -> str:
    return json.dumps(cap.dicts(), ensure_ascii=False) + json.dumps(
        list(cap.calls().values()), ensure_ascii=False
    )


def test_named_at_start_and_outcome_at_settle() -> None:
    cap, probe = _cap(options=IntentOptions(in_thread=False))  # the live span, synchronously
    with cap:
        args = json.dumps({"intent": "Searching for OAuth handling", "query": "oauth"})
        with tool_call("search_code", args, tracer=cap.tracer, label_bearing=True) as c:
            assert c.intent == "Searching for OAuth handling"
            assert c.args == {"query": "oauth"}  # stripped before the body runs
            assert _live_name(c) == "Searching for OAuth handling"
            c.set_result({"hits": 12}, outcome="Found 12 OAuth handlers")
        spans = cap.dicts()
        cap.assert_no_internal_errors()
    assert probe.started == ["Searching for OAuth handling"]
    assert [s["name"] for s in spans] == ["Found 12 OAuth handlers"]
    attrs = spans[0]["attributes"]
    assert attrs[A.ORIGINAL_NAME] == "execute_tool search_code"
    assert attrs[A.INTENT] == "Searching for OAuth handling"
    assert attrs[A.OUTCOME] == "Found 12 OAuth handlers"
    assert attrs[A.STATUS] == "success"
    assert attrs[A.LABEL] == "Found 12 OAuth handlers"
    assert attrs[A.LANGFUSE_TRACE_TAGS] == ["tool-intent"]
    assert cap.processor.stats()["named_at_start"] == 1


def test_threaded_mode_renames_the_live_span_moments_after_start() -> None:
    cap, probe = _cap()
    with cap:
        args = {"intent": "Searching for OAuth handling", "query": "oauth"}
        with tool_call("search_code", args, tracer=cap.tracer, label_bearing=True) as c:
            cap.processor.force_flush()  # let the processor's thread see the start
            assert _live_name(c) == "Searching for OAuth handling"
            assert cap.ledger.writes[-1]["status"] == "in_flight"
        (span,) = cap.dicts()
    assert probe.started == ["execute_tool search_code"]  # on_start ran before the rename
    assert span["name"] == "Searching for OAuth handling"
    assert cap.processor.stats()["renamed_live"] == 1


def test_named_at_settle_when_args_arrive_at_end() -> None:
    registry = IntentRegistry(["read_file"])
    cap, probe = _cap(registry=registry, options=IntentOptions(in_thread=False))
    with cap:
        span = cap.tracer.start_span("read_file")  # no attributes at start
        span.set_attributes(
            {
                A.GEN_AI_OPERATION_NAME: "execute_tool",
                A.GEN_AI_TOOL_NAME: "read_file",
                A.GEN_AI_TOOL_CALL_ARGUMENTS: '{"intent": "Reading the router", "path": "r.py"}',
                A.GEN_AI_TOOL_CALL_RESULT: '{"outcome_patch": {"from": "Reading", "to": "Read"}}',
            }
        )
        span.end()
        spans = cap.dicts()
    assert probe.started == ["read_file"]
    assert spans[0]["name"] == "Read the router"
    assert spans[0]["attributes"][A.ORIGINAL_NAME] == "read_file"
    assert cap.processor.stats()["named_at_settle"] == 1


@pytest.mark.parametrize(
    ("attrs", "result", "expected"),
    [
        (
            {A.OUTCOME: "Found 3", A.OUTCOME_PATCH: '{"from": "Finding", "to": "Found"}'},
            None,
            "Found 3",
        ),
        ({A.OUTCOME_PATCH: '{"from": "Finding", "to": "Found"}'}, None, "Found auth code"),
        ({A.OUTCOME_PATCH: '{"from": "absent", "to": "x"}'}, None, "Finding auth code"),
        ({}, {"outcome": "Found 7 files", "files": []}, "Found 7 files"),
        ({}, {"outcome_patch": {"from": "auth", "to": "OAuth"}}, "Finding OAuth code"),
        ({}, {"files": ["a"]}, "Finding auth code"),
    ],
)
def test_outcome_precedence(attrs: dict[str, Any], result: Any, expected: str) -> None:
    with capture() as cap:
        with tool_call(
            "find", {"intent": "Finding auth code"}, tracer=cap.tracer, label_bearing=True
        ) as c:
            if result is not None:
                c.set_result(result)
            assert c.span is not None
            c.span.set_attributes(attrs)
        (span,) = cap.dicts()
    assert span["name"] == expected


def test_error_and_cancel_framing_never_past_tense() -> None:
    async def cancelled_call(cap: Capture) -> None:
        async with tool_call(
            "index", {"intent": "Indexing the repo"}, tracer=cap.tracer, label_bearing=True
        ):
            raise asyncio.CancelledError

    with capture() as cap:
        with (
            pytest.raises(ValueError),
            tool_call(
                "read_file", {"intent": "Reading the router"}, tracer=cap.tracer, label_bearing=True
            ) as c,
        ):
            c.set_outcome("Read the router")  # an outcome never hides a failure
            raise ValueError("no such file")
        with pytest.raises(asyncio.CancelledError):
            asyncio.run(cancelled_call(cap))
        spans = cap.dicts()
        anchors = cap.calls()
    assert [s["name"] for s in spans] == [
        "Reading the router · failed",
        "Indexing the repo · cancelled",
    ]
    assert [s["attributes"][A.STATUS] for s in spans] == ["error", "cancelled"]
    assert spans[0]["status_message"] == "ValueError: no such file"
    assert sorted(a["status"] for a in anchors.values()) == ["cancelled", "error"]
    assert {a["error"] for a in anchors.values() if a["status"] == "error"} == {
        "ValueError: no such file"
    }


def test_gate_business_intent_is_never_a_label() -> None:
    registry = IntentRegistry(["search"])
    with capture(registry=registry) as cap:
        # a CRM tool whose own parameter is called `intent`: not injected by us
        with tool_call("create_lead", {"intent": "purchase", "name": "Ada"}, tracer=cap.tracer):
            pass
        with tool_call("search", {"intent": "Searching docs"}, tracer=cap.tracer):
            pass
        # the explicit span flag wins over the registry
        with tool_call(
            "search", {"intent": "Searching logs"}, tracer=cap.tracer, label_bearing=False
        ) as c:
            assert c.args == {"intent": "Searching logs"}  # not stripped either
        spans = cap.dicts()
    assert [s["name"] for s in spans] == [
        "execute_tool create_lead",
        "Searching docs",
        "execute_tool search",
    ]
    assert A.INTENT not in spans[0]["attributes"]
    assert spans[0]["attributes"][A.LABEL] == "Ran create_lead"
    assert A.LANGFUSE_TRACE_TAGS not in spans[0]["attributes"]


def test_stable_naming_keeps_names_and_puts_labels_in_attributes() -> None:
    cap, probe = _cap(options=IntentOptions(naming="stable"))
    with cap:
        with tool_call(
            "search", {"intent": "Searching docs"}, tracer=cap.tracer, label_bearing=True
        ) as c:
            c.set_outcome("Found the docs")
        (span,) = cap.dicts()
    assert probe.started == ["execute_tool search"]
    assert span["name"] == "execute_tool search"
    assert span["attributes"][A.INTENT] == "Searching docs"
    assert span["attributes"][A.OUTCOME] == "Found the docs"
    assert span["attributes"][A.LABEL] == "Found the docs"


def test_naming_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INTENTRACE_NAMING", "stable")
    monkeypatch.setenv("INTENTRACE_LANGFUSE_TAG", "labelled")
    with capture() as cap:
        with tool_call("search", {"intent": "Searching"}, tracer=cap.tracer, label_bearing=True):
            pass
        (span,) = cap.dicts()
    assert span["name"] == "execute_tool search"
    assert span["attributes"][A.LANGFUSE_TRACE_TAGS] == ["labelled"]
    monkeypatch.setenv("INTENTRACE_NAMING", "fancy")
    from tracing import ConfigError

    with pytest.raises(ConfigError, match="naming must be"):
        capture()


def test_secrets_are_scrubbed_everywhere() -> None:
    with capture() as cap:
        with (
            pytest.raises(RuntimeError),
            tool_call(
                "deploy",
                {"intent": f"Deploying with key {SECRET}", "token": GH_TOKEN},
                tracer=cap.tracer,
                label_bearing=True,
            ) as c,
        ):
            c.set_result({"log": f"used {SECRET}"}, outcome=f"Deployed with {GH_TOKEN}")
            raise RuntimeError(f"auth failed for {SECRET}")
        with tool_call(
            "deploy", {"intent": "Deploying v2"}, tracer=cap.tracer, label_bearing=True
        ) as c:
            c.set_result({"ok": True}, outcome=f"Deployed using {GH_TOKEN}")
        span = cap.tracer.start_span(f"custom {SECRET}")
        span.set_attributes({A.GEN_AI_OPERATION_NAME: "execute_tool", "note": SECRET})
        span.set_status(Status(StatusCode.ERROR, f"bad {GH_TOKEN}"))
        span.end()
        dump = _dump(cap)
        spans = cap.dicts()
    assert SECRET not in dump and GH_TOKEN not in dump
    assert spans[0]["name"].startswith("Deploying with key [redacted")
    assert spans[0]["name"].endswith("· failed")
    assert spans[1]["name"].startswith("Deployed using [redacted")
    assert spans[2]["name"].startswith("custom [redacted")
    assert spans[0]["attributes"][A.REDACTION_SCRUBBED] >= 4


def test_digit_only_secrets_in_attributes_and_events_are_scrubbed() -> None:
    card = "4111111111111111"  # a bare card number: digits only, Luhn-valid
    with capture() as cap:
        span = cap.tracer.start_span("execute_tool lookup")
        span.set_attributes({
            A.GEN_AI_OPERATION_NAME: "execute_tool",
            A.GEN_AI_TOOL_NAME: "lookup",
            "customer.card": card,
            "customer.cards": [card, "ok"],
            "http.status_code": "200",
        })  # fmt: skip
        span.add_event("payment", {"card": card})
        span.end()
        dump = _dump(cap)
        (shown,) = cap.dicts()
    assert card not in dump
    assert shown["attributes"]["http.status_code"] == "200"  # short numbers are not secrets
    assert shown["attributes"][A.REDACTION_SCRUBBED] >= 3


def test_policy_hides_intent_when_args_are_redacted() -> None:
    policy = RedactionPolicy.from_toml('[tools.read_secrets]\nargs = "redact"\n')
    cap, probe = _cap(policy=policy)
    with cap:
        with tool_call(
            "read_secrets",
            {"intent": "Reading the vault for prod", "path": "/vault/prod"},
            tracer=cap.tracer,
            label_bearing=True,
        ) as c:
            c.set_result("ok", outcome="Read the prod vault")
        (span,) = cap.dicts()
        (anchor,) = cap.calls().values()
    assert probe.started == ["execute_tool read_secrets"]
    assert span["name"] == "execute_tool read_secrets"
    attrs = span["attributes"]
    assert A.INTENT not in attrs and A.OUTCOME not in attrs
    assert attrs[A.LABEL] == "Ran read_secrets"
    assert attrs[A.REDACTION_INTENT_HIDDEN] is True
    assert attrs[A.REDACTION_OUTCOME_HIDDEN] is True
    assert attrs[A.GEN_AI_TOOL_CALL_ARGUMENTS] == "[redacted:policy]"
    assert "vault" not in json.dumps(span) and "vault" not in json.dumps(anchor)
    assert anchor["intent"] is None and anchor["label"] == "Ran read_secrets"
    assert json.loads(anchor["redaction"])["intent_hidden"] is True
    assert json.loads(anchor["redaction"])["outcome_hidden"] is True
    assert A.LANGFUSE_TRACE_TAGS not in attrs


class FailingForTool:
    """The real default policy, except that redaction cannot run for one tool (a broken
    hash key, a scrubber bug...): the failure mode redaction reports as RedactionError."""

    def __init__(self, tool: str) -> None:
        self.real = RedactionPolicy.default()
        self.tool = tool

    def redact_call(self, **kwargs: Any) -> Any:
        if kwargs.get("tool_name") == self.tool:
            raise RedactionError("redaction failed: test")
        return self.real.redact_call(**kwargs)

    def scrub(self, value: Any) -> Any:
        return self.real.scrub(value)

    def scrub_text(self, text: str) -> str:
        return self.real.scrub_text(text)


@pytest.mark.internal_errors
def test_redaction_error_drops_the_span_and_counts() -> None:
    policy = FailingForTool("lookup")
    with capture(policy=policy) as cap:
        with tool_call(
            "lookup",
            {"intent": "Looking up ssn-7731-zq", "ssn": "ssn-7731-zq"},
            tracer=cap.tracer,
            label_bearing=True,
        ) as c:
            c.set_result("found")
        with tool_call("other", {"q": 1}, tracer=cap.tracer):
            pass
        spans = cap.dicts()
        anchors = cap.calls()
    assert [s["name"] for s in spans] == ["execute_tool other"]
    assert cap.processor.stats()["dropped"] == 1
    assert any("RedactionError" in e for _, e in cap.processor.internal_errors())
    assert "ssn-7731-zq" not in json.dumps(anchors)


def test_ledger_in_flight_then_settled_with_batch_session_and_parent_call() -> None:
    ledger = RecordingLedger()
    with capture(ledger=ledger) as cap:
        with (
            session("conv-7", agent_id="coder", turn=3),
            cap.tracer.start_as_current_span("agent step") as step,
            tool_call(
                "delegate",
                {"intent": "Asking the reviewer"},
                tracer=cap.tracer,
                call_id="call_A",
                label_bearing=True,
            ),
        ):
            cap.processor.force_flush()
            first = dict(ledger.writes[-1])
            assert first["status"] == "in_flight"
            assert first["intent"] == "Asking the reviewer"
            assert first["label"] == "Asking the reviewer"
            with tool_call(
                "read_file",
                {"intent": "Reading the diff"},
                tracer=cap.tracer,
                call_id="call_B",
                label_bearing=True,
            ):
                pass
        step_id = format(step.get_span_context().span_id, "016x")
        anchors = cap.calls()
    a, b = anchors["call_A"], anchors["call_B"]
    assert a["status"] == b["status"] == "success"
    assert a["session_id"] == b["session_id"] == "conv-7"
    assert a["agent_id"] == "coder" and a["turn"] == 3
    assert a["batch_id"] == step_id
    assert b["parent_call_id"] == a["tool_call_id"]  # the parent anchor's own id
    assert a.get("parent_call_id") is None
    assert a["end_ns"] >= a["start_ns"] > 0
    assert json.loads(str(b["args"])) == {}


def test_session_inherited_from_ancestor_span_attributes() -> None:
    with capture() as cap:
        with (
            cap.tracer.start_as_current_span("run", attributes={A.GEN_AI_CONVERSATION_ID: "c9"}),
            tool_call("t", {"intent": "Doing it"}, tracer=cap.tracer, label_bearing=True),
        ):
            pass
        (anchor,) = cap.calls().values()
    assert anchor["session_id"] == ""  # an ancestor's attribute is not our session(...)
    with capture() as cap:
        with session("s1"):
            root = cap.tracer.start_span("root")
        ctx_span = root
        from opentelemetry import trace

        with (
            trace.use_span(ctx_span, end_on_exit=True),
            tool_call("t", {"intent": "Doing it"}, tracer=cap.tracer, label_bearing=True),
        ):
            pass
        (anchor,) = cap.calls().values()
    assert anchor["session_id"] == "s1"  # inherited from the ancestor started in session(...)


def test_background_call_stays_in_flight_until_harvested() -> None:
    ledger = RecordingLedger()
    cap, _ = _cap(ledger=ledger)
    with cap:
        with tool_call(
            "index", {"intent": "Indexing the repo"}, tracer=cap.tracer, label_bearing=True
        ) as c:
            c.to_background()
            cap.processor.force_flush()
            assert _live_name(c) == "Indexing the repo · in background"
        assert cap.anchors()[c.anchor_id]["status"] == "background"
        assert cap.anchors()[c.anchor_id]["label"] == "Indexing the repo · in background"
        assert cap.spans() == []  # not settled yet
        assert harvest(c.anchor_id, {"files": 10}, outcome="Indexed 10 files")
        assert not harvest(c.anchor_id, None)
        (span,) = cap.dicts()
        anchor = cap.anchors()[c.anchor_id]
    assert span["name"] == "Indexed 10 files"
    assert span["attributes"][A.BACKGROUND] is True
    assert anchor["status"] == "success" and anchor["label"] == "Indexed 10 files"


def test_background_call_times_out_to_an_error_label() -> None:
    with capture(options=IntentOptions(background_timeout_s=0.05)) as cap:
        with tool_call(
            "crawl", {"intent": "Crawling the docs"}, tracer=cap.tracer, label_bearing=True
        ) as c:
            c.to_background()
        deadline = time.monotonic() + 5
        while not cap.exporter.get_finished_spans() and time.monotonic() < deadline:
            time.sleep(0.01)
        (span,) = cap.dicts()
        anchor = cap.anchors()[c.anchor_id]
        assert not c.harvest("late")
    assert span["name"] == "Crawling the docs · timed out"
    assert span["attributes"][A.TIMED_OUT] is True
    assert anchor["status"] == "error" and anchor["label"] == "Crawling the docs · timed out"
    assert cap.processor.stats()["background_timed_out"] == 1


def test_activity_label_names_the_block() -> None:
    with capture() as cap:
        with (
            session("conv-1", turn=1),
            activity("Exploring the auth flow", tracer=cap.tracer) as block,
        ):
            if True:
                for intent in ("Reading login.py", "Reading oauth.py"):
                    with tool_call(
                        "read", {"intent": intent}, tracer=cap.tracer, label_bearing=True
                    ):
                        pass
        block_id = format(block.get_span_context().span_id, "016x")
        anchors = cap.calls()
    assert cap.ledger.activities == [
        {
            "session_id": "conv-1",
            "batch_id": block_id,
            "label": "Exploring the auth flow",
            "turn": 1,
        }
    ]
    assert {a["batch_id"] for a in anchors.values()} == {block_id}


class Exploding(SpanProcessor):
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        raise RuntimeError("boom at start")

    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError("boom at end")


@pytest.mark.internal_errors
def test_a_failing_wrapped_processor_never_reaches_the_app() -> None:
    with capture(processors=[Exploding()]) as cap:
        with tool_call("t", {"intent": "Doing"}, tracer=cap.tracer, label_bearing=True):
            pass
        names = [s["name"] for s in cap.dicts()]
    assert names == ["Doing"]  # the in-memory exporter still got it
    assert cap.processor.stats()["internal_errors"] == 2


def test_lone_surrogate_names_are_sanitized() -> None:
    with capture() as cap:
        cap.tracer.start_span("plain \ud800 span").end()
        with tool_call(
            "t", {"intent": "Reading \udc00 file"}, tracer=cap.tracer, label_bearing=True
        ):
            pass
        names = [s["name"] for s in cap.dicts()]
    for name in names:
        name.encode("utf-8")  # would raise on a lone surrogate


def test_langfuse_destination_gets_the_label_as_the_name_it_will_show() -> None:
    langfuse_probe = Probe()
    with capture() as cap:
        cap.processor.add_processor(langfuse_probe, langfuse=True)
        with tool_call(
            "search", {"intent": "Searching docs"}, tracer=cap.tracer, label_bearing=True
        ):
            pass
        (plain,) = cap.dicts()
    (copy,) = langfuse_probe.ended
    assert plain["attributes"][A.GEN_AI_TOOL_NAME] == "search"
    attrs = copy.attributes or {}
    assert copy.name == "Searching docs"
    assert A.GEN_AI_TOOL_NAME not in attrs  # the server would name it `search` otherwise
    assert attrs[A.TOOL_NAME] == "search"
    assert attrs[A.LANGFUSE_OBSERVATION_TYPE] == "tool"
    assert attrs[A.GEN_AI_OPERATION_NAME] == "execute_tool"


def _two_calls(cap: Capture) -> None:
    with (
        session("conv-9", agent_id="coder", turn=2),
        tool_call(
            "delegate",
            {"intent": "Asking the reviewer", "token": SECRET},
            tracer=cap.tracer,
            call_id="call_A",
            label_bearing=True,
        ),
        tool_call(
            "read_file",
            {"intent": "Reading the diff", "path": "a.py"},
            tracer=cap.tracer,
            call_id="call_B",
            label_bearing=True,
        ) as inner,
    ):
        inner.set_outcome("Read the diff")


def test_a_span_ended_before_its_start_is_handled_settles_as_a_live_one() -> None:
    # the processor's thread often sees a short call's start after it ended: its settle then
    # reuses the view read at start, and must give what a live call's settle gives
    live = capture(options=IntentOptions(in_thread=False))
    with live:
        _two_calls(live)
    late = capture()
    with late:
        with late.processor._lock:
            _two_calls(late)  # (the thread waits: both spans end before it sees their starts)
        late.processor.force_flush()
    assert late.dicts() == live.dicts()

    def timeless(cap: Capture) -> dict[str, dict[str, Any]]:
        return {
            k: {f: v for f, v in dict(a).items() if f not in ("start_ns", "end_ns")}
            for k, a in cap.calls().items()
        }

    assert timeless(late) == timeless(live)
    assert late.calls()["call_B"]["parent_call_id"] == late.calls()["call_A"]["tool_call_id"]
    assert SECRET not in _dump(late)
    assert late.processor.internal_errors() == []
