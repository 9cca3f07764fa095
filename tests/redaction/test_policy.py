"""The policy: actions, the label rule's truth table, overlays, hashing, file loading."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from redaction import (
    AgentOverlay,
    Decision,
    PolicyError,
    RedactionError,
    RedactionPolicy,
    Rule,
    ToolRule,
)
from redaction._rules import ACTIONS
from tracing.environment_variables import INTENTRACE_REDACTION_HASH_KEY, INTENTRACE_REDACTION_POLICY

KEY = b"k" * 32
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"


@pytest.mark.parametrize(("args", "output"), list(itertools.product(ACTIONS, ACTIONS)))
def test_label_rule_truth_table(args: str, output: str) -> None:
    policy = RedactionPolicy(default_rule=Rule(args, output), hash_key=KEY)  # pyright: ignore[reportArgumentType]
    d = policy.decide("search")
    assert (d.args, d.output) == (args, output)
    assert d.show_intent is (args == "keep")
    assert d.show_outcome is (args == "keep" and output == "keep")
    call = policy.redact_call(
        tool_name="search",
        args={"q": "oauth"},
        intent="Searching for OAuth handling",
        outcome="Found 12 OAuth handlers",
        output={"hits": 12},
    )
    assert call.intent == ("Searching for OAuth handling" if d.show_intent else None)
    assert call.outcome == ("Found 12 OAuth handlers" if d.show_outcome else None)
    if args == "keep":
        assert call.args == {"q": "oauth"}
    elif args == "redact":
        assert call.args == "[redacted:policy]"
    else:
        assert set(call.args) == {"q"} and call.args["q"].startswith("[hmac:")
    rendered = json.dumps([call.args, call.output, call.intent, call.outcome])
    if not d.show_intent:
        assert "OAuth" not in rendered and "oauth" not in rendered


def test_decision_flags_cannot_be_set_by_hand() -> None:
    with pytest.raises(TypeError):
        Decision("redact", "keep", show_intent=True)  # pyright: ignore[reportCallIssue]
    assert Decision("redact", "keep").show_intent is False


def test_tool_rules_exact_beats_glob_first_glob_wins() -> None:
    policy = RedactionPolicy(
        tools=(
            ToolRule("db_*", args="redact"),
            ToolRule("db_read", output="redact"),
            ToolRule("db_r*", args="hash"),
        ),
        hash_key=KEY,
    )
    assert policy.decide("db_read") == Decision("keep", "redact")
    assert policy.decide("db_rows") == Decision("redact", "keep")
    assert policy.decide("search") == Decision("keep", "keep")


def test_agent_overlays_only_tighten() -> None:
    policy = RedactionPolicy(
        tools=(ToolRule("db_*", args="hash"),),
        agents=(
            AgentOverlay("billing-*", output="redact", tools=(ToolRule("db_*", args="redact"),)),
        ),
        hash_key=KEY,
    )
    assert policy.decide("db_write", "billing-eu") == Decision("redact", "redact")
    assert policy.decide("db_write", "coder") == Decision("hash", "keep")
    assert policy.decide("search", "billing-eu") == Decision("keep", "redact")


def test_looser_agent_overlay_is_an_error_naming_the_rule() -> None:
    with pytest.raises(PolicyError) as exc:
        RedactionPolicy(
            tools=(ToolRule("db_*", args="redact"),),
            agents=(AgentOverlay("coder", tools=(ToolRule("db_write", args="keep"),)),),
        )
    msg = str(exc.value)
    assert "\n" not in msg
    assert '[agents."coder".tools."db_write"] args' in msg
    assert '[tools."db_*"]' in msg and "looser" in msg


def test_hash_is_keyed_and_correlates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(INTENTRACE_REDACTION_HASH_KEY, raising=False)
    a = RedactionPolicy(default_rule=Rule("hash", "keep"), hash_key=KEY)
    b = RedactionPolicy(default_rule=Rule("hash", "keep"), hash_key=b"z" * 32)
    one = a.redact_call(tool_name="t", args={"user": "alice", "n": 3}).args
    two = a.redact_call(tool_name="t", args={"user": "alice", "n": 4}).args
    other = b.redact_call(tool_name="t", args={"user": "alice", "n": 3}).args
    assert one["user"] == two["user"] != other["user"]
    assert one["n"] != two["n"]
    assert "alice" not in json.dumps(one)
    as_text = a.redact_call(tool_name="t", args='{"user": "alice"}').args
    assert isinstance(as_text, str) and json.loads(as_text) == {"user": one["user"]}


def test_hash_without_key_is_a_policy_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(INTENTRACE_REDACTION_HASH_KEY, raising=False)
    with pytest.raises(
        PolicyError, match=r"\[tools\.\"db\"\] output.*INTENTRACE_REDACTION_HASH_KEY"
    ):
        RedactionPolicy.from_toml('[tools.db]\noutput = "hash"\n', source="p.toml")
    monkeypatch.setenv(INTENTRACE_REDACTION_HASH_KEY, "a-long-enough-test-key")
    assert RedactionPolicy.from_toml('[tools.db]\noutput = "hash"\n').decide("db").output == "hash"


def test_redact_call_scrubs_kept_text_and_errors() -> None:
    call = RedactionPolicy.default().redact_call(
        tool_name="fetch",
        args=json.dumps({"url": "https://x", "token": "t0ps3cr3t"}),
        intent=f"Fetching with {JWT}",
        error=f"401 for Authorization: Bearer {JWT}",
    )
    assert isinstance(call.args, str) and "t0ps3cr3t" not in call.args
    assert json.loads(call.args)["url"] == "https://x"
    assert call.intent == "Fetching with [redacted:jwt]"
    assert call.error is not None and JWT not in call.error
    assert call.scrubbed == len(call.trail) >= 3
    assert {e.path for e in call.trail} >= {"args.token", "intent", "error"}


def test_redact_call_fails_closed() -> None:
    class Boom:
        def __str__(self) -> str:
            raise ValueError("secret sk-live")

    with pytest.raises(RedactionError) as exc:
        RedactionPolicy.default().redact_call(tool_name="t", args={"x": Boom()})
    assert "sk-live" not in str(exc.value)


def test_load_precedence_and_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "policy.toml"
    f.write_text('[default]\nargs = "redact"\n')
    monkeypatch.delenv(INTENTRACE_REDACTION_POLICY, raising=False)
    assert RedactionPolicy.load() is RedactionPolicy.default()
    monkeypatch.setenv(INTENTRACE_REDACTION_POLICY, str(f))
    assert RedactionPolicy.load().decide("t").args == "redact"
    g = tmp_path / "other.toml"
    g.write_text('[default]\noutput = "redact"\n')
    assert RedactionPolicy.load(g).decide("t") == Decision("keep", "redact")
    with pytest.raises(PolicyError, match=r"missing\.toml: cannot read"):
        RedactionPolicy.load(tmp_path / "missing.toml")


BAD_FILES = [
    ('[default]\nargz = "keep"\n', "[default]", "unknown key 'argz'"),
    ("bogus = 1\n", "top level", "unknown key 'bogus'"),
    ('[tools."db_["]\nargs = "redact"\n', '[tools."db_["]', "unclosed '['"),
    ('[tools.db]\nargs = "drop"\n', '[tools."db"] args', "'drop' is not one of"),
    ('[[scrub.patterns]]\nname = "acme"\nregex = "ACME-("\n', "[[scrub.patterns]][0]", "bad regex"),
    ('[scrub]\nkeys = ["(unclosed"]\n', "[scrub] keys[0]", "bad regex"),
    ('[scrub]\ndisable = ["nope"]\n', "[scrub] disable[0]", "unknown built-in pattern"),
    ('[default]\nargs = "redact"\n[agents.x]\nargs = "hash"\n', '[agents."x"] args', "looser"),
    ("[default\n", "", "not valid TOML"),
]


@pytest.mark.parametrize(("text", "entry", "problem"), BAD_FILES)
def test_bad_files_fail_at_load_with_one_line(
    tmp_path: Path, text: str, entry: str, problem: str
) -> None:
    f = tmp_path / "bad.toml"
    f.write_text(text)
    with pytest.raises(PolicyError) as exc:
        RedactionPolicy.load(f)
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith(f"{f}: ")
    assert entry in msg and problem in msg


def test_import_redaction_pulls_no_opentelemetry() -> None:
    code = "import sys, redaction; redaction.RedactionPolicy.default().scrub({'a': 1}); print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_hashing_hashed_data_changes_nothing() -> None:
    policy = RedactionPolicy(tools=(ToolRule("q", args="hash"),), hash_key=b"k" * 16)
    args = {"sql": "select 1", "n": 2, "nested": ["a", {"b": "c"}]}
    once = policy.redact_call(tool_name="q", args=args).args
    assert policy.redact_call(tool_name="q", args=once).args == once
    text = policy.redact_call(tool_name="q", args=json.dumps(args)).args
    assert policy.redact_call(tool_name="q", args=text).args == text


def test_strictest_action_of_any_call() -> None:
    assert RedactionPolicy().strictest("args") == "keep"
    policy = RedactionPolicy(
        tools=(ToolRule("a", output="hash"),),
        agents=(AgentOverlay("x", tools=(ToolRule("b", args="redact"),)),),
        hash_key=b"k" * 16,
    )
    assert policy.strictest("args") == "redact"
    assert policy.strictest("output") == "hash"


def test_langfuse_mask_keeps_langfuse_media_references() -> None:
    class LangfuseMedia:  # what Langfuse hands to `mask` in place of a base64 data URI
        pass

    media = LangfuseMedia()
    out = RedactionPolicy().langfuse_mask(data={"image": media, "note": ["ghp_" + "a1" * 18]})
    assert out["image"] is media
    assert out["note"] == ["[redacted:github_token]"]
