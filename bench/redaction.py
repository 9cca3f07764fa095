"""Scrub ~100 KB of nested tool args with ~1% planted secrets: ours vs Logfire's scrubber.

Both run in the same process on the same payload. Besides time, it counts what each caught of
the planted set (secrets under innocent keys, inside prose, inside JSON-in-a-string and under
sensitive keys) and the false positives: removals on the same payload with every planted
secret swapped for innocent text of the same shape.

    .venv/bin/python bench/redaction.py [--repeat 30] [--seed 7]

Prints ``name: ours X, peer Y, ratio Z`` lines (ratio = ours / peer; below 1 is faster).
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import statistics
import string
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ALNUM = string.ascii_letters + string.digits
UPPER = string.ascii_uppercase + string.digits
WORDS = [
    "the",
    "agent",
    "reads",
    "a",
    "file",
    "then",
    "searches",
    "the",
    "code",
    "base",
    "for",
    "oauth",
    "handling",
    "and",
    "callback",
    "routes",
    "before",
    "it",
    "writes",
    "a",
    "summary",
    "of",
    "what",
    "the",
    "session",
    "found",
    "including",
    "tokens",
    "per",
    "request",
    "author",
    "notes",
    "password",
    "reset",
    "flows",
    "cookie",
    "banners",
    "and",
    "the",
    "secret",
    "sauce",
    "of",
    "the",
    "tokenizer",
]


def _rand(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _luhn_complete(prefix: str) -> str:
    total = 0
    for i, ch in enumerate(reversed(prefix)):
        d = int(ch)
        if i % 2 == 0:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return prefix + str((10 - total % 10) % 10)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


# kind -> generator of one secret (the exact text that must not survive)
def secret_makers() -> dict[str, Callable[[random.Random], str]]:
    def jwt(r: random.Random) -> str:
        head = _b64url(b'{"alg":"HS256","typ":"JWT"}')
        body = _b64url(
            json.dumps({"sub": _rand(r, ALNUM, 10), "iat": r.randint(1, 10**9)}).encode()
        )
        return f"{head}.{body}.{_b64url(r.randbytes(32))}"

    def card(r: random.Random) -> str:
        prefix = r.choice(["4", "52", "6011"])
        return _luhn_complete(prefix + _rand(r, string.digits, 15 - len(prefix)))

    return {
        "aws_access_key": lambda r: "AKIA" + _rand(r, UPPER, 16),
        "github_token": lambda r: "ghp_" + _rand(r, ALNUM, 36),
        "slack_token": lambda r: f"xoxb-{_rand(r, string.digits, 12)}-{_rand(r, ALNUM, 24)}",
        "stripe_key": lambda r: "sk_live_" + _rand(r, ALNUM, 24),
        "openai_key": lambda r: "sk-proj-" + _rand(r, ALNUM, 40) + str(r.randint(0, 9)),
        "anthropic_key": lambda r: "sk-ant-api03-" + _rand(r, ALNUM + "_-", 80),
        "google_api_key": lambda r: "AIza" + _rand(r, ALNUM + "_-", 35),
        "jwt": jwt,
        "bearer": lambda r: "Bearer " + _rand(r, ALNUM, 30) + "7",
        "private_key": lambda r: (
            "-----BEGIN RSA PRIVATE KEY-----\n"
            + "\n".join(_rand(r, ALNUM + "+/", 64) for _ in range(4))
            + "\n-----END RSA PRIVATE KEY-----"
        ),
        "credit_card": card,
        "connection_string": lambda r: (
            f"postgresql://app:{_rand(r, ALNUM, 16)}@db.internal:5432/app"
        ),
        "password_key": lambda r: _rand(r, ALNUM + "!#%", 14),
        "assignment": lambda r: "api_key=" + _rand(r, ALNUM, 28),
    }


def secret_core(kind: str, text: str) -> str:
    """The part of a planted text that must be gone (e.g. the password of a DSN)."""
    if kind == "connection_string":
        return text.split(":")[2].split("@", maxsplit=1)[0]
    if kind == "bearer":
        return text.split(" ", 1)[1]
    if kind == "assignment":
        return text.split("=", 1)[1]
    if kind == "private_key":
        return text.splitlines()[1]
    return text


def _prose(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _count_leaves(value: Any) -> int:
    if isinstance(value, dict):
        return sum(_count_leaves(v) for v in value.values())  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    if isinstance(value, list):
        return sum(_count_leaves(v) for v in value)  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    return 1


def _build(
    seed: int, n_records: int | None, plant: set[int], target_bytes: int
) -> tuple[dict[str, Any], dict[str, Any], list[tuple[str, str]], int]:
    rng = random.Random(seed)  # the payload's shape and innocent text
    srng = random.Random(seed + 1)  # planted secrets and their stand-ins
    makers = secret_makers()
    kinds = sorted(makers)
    planted: list[tuple[str, str]] = []
    slots = 0

    def slot() -> tuple[Any, Any]:
        """A text leaf: innocent, or (if its index was drawn) a planted secret."""
        nonlocal slots
        index = slots
        slots += 1
        v = rng.choice(
            [
                _prose(rng, rng.randint(4, 30)),
                uuid.UUID(int=rng.getrandbits(128)).hex,
                rng.randbytes(20).hex(),  # git SHA-like
                f"src/{_rand(rng, string.ascii_lowercase, 8)}.py",
                str(rng.randint(0, 10**6)),
            ]
        )
        where = rng.randrange(4)
        if index not in plant:
            return v, v
        kind = kinds[len(planted) % len(kinds)]
        text = makers[kind](srng)
        stand_in = _rand(srng, string.ascii_lowercase + " ", len(text))
        if kind == "password_key":
            planted.append((kind, text))
            return {"password": text}, {"display_name": stand_in}
        planted.append((kind, secret_core(kind, text)))
        if where <= 1:  # bare, under an innocent key
            return text, stand_in
        if where == 2:  # inside prose (an intent or an error message)
            return (
                f"Calling the API with {text} as asked",
                f"Calling the API with {stand_in} as asked",
            )
        return json.dumps({"value": text, "ok": True}), json.dumps({"value": stand_in, "ok": True})

    records: list[dict[str, Any]] = []
    cleans: list[dict[str, Any]] = []
    size = 0
    while (n_records is None and size < target_bytes) or (
        n_records is not None and len(records) < n_records
    ):
        sid = str(uuid.UUID(int=rng.getrandbits(128)))
        rows = [
            {"line": rng.randint(1, 900), "col": rng.randint(0, 80), "kind": "ref", "ok": True}
            for _ in range(rng.randint(4, 12))
        ]
        common = {
            "session_id": sid,
            "max_tokens": 512,
            "tokenizer": "cl100k_base",
            "author": "ada",
            "rows": rows,
            "offsets": [rng.randint(0, 5000) for _ in range(rng.randint(60, 120))],
        }
        rec: dict[str, Any] = dict(common)
        cln: dict[str, Any] = dict(common)
        for key in ("query", "note", "value"):
            rec[key], cln[key] = slot()
        q, qc = slot()
        rec["config"] = {
            "model": "gpt-x",
            "temperature": 0.2,
            "extra": q,
            "usage": {"input_tokens": 31},
        }
        cln["config"] = {
            "model": "gpt-x",
            "temperature": 0.2,
            "extra": qc,
            "usage": {"input_tokens": 31},
        }
        f, fc = slot()
        sha = rng.randbytes(20).hex()
        rec["files"] = [{"path": "src/app.py", "content": f, "sha": sha}]
        cln["files"] = [{"path": "src/app.py", "content": fc, "sha": sha}]
        trace = _prose(rng, 6)
        m, mc = slot()
        rec["metadata"] = json.dumps({"trace": trace, "item": m})
        cln["metadata"] = json.dumps({"trace": trace, "item": mc})
        records.append(rec)
        cleans.append(cln)
        size += len(json.dumps(cln))
    return {"calls": records}, {"calls": cleans}, planted, slots


def build_payload(
    seed: int, target_bytes: int = 100_000, rate: float = 0.01
) -> tuple[dict[str, Any], dict[str, Any], list[tuple[str, str]]]:
    """(payload with secrets, same payload with innocent stand-ins, planted (kind, core)).

    ``rate`` of all leaves carry a planted secret (placed in text leaves)."""
    clean, _, _, slots = _build(seed, None, set(), target_bytes)
    n_records = len(clean["calls"])
    n_secrets = min(slots, round(rate * _count_leaves(clean)))
    plant = set(random.Random(seed + 2).sample(range(slots), n_secrets))
    payload, clean, planted, _ = _build(seed, n_records, plant, target_bytes)
    return payload, clean, planted


def _median_ms(fn: Callable[[], object], repeat: int, setup: Callable[[], object]) -> float:
    fn()  # warm up
    times: list[float] = []
    for _ in range(repeat):
        setup()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rate", type=float, default=0.01, help="share of leaves with a secret")
    opts = parser.parse_args()

    # Run as a script, this file's folder is sys.path[0] and its name shadows the package.
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != here]
    sys.path.insert(0, str(Path(here).parent))
    sys.modules.pop("redaction", None)

    from logfire._internal.scrubbing import Scrubber as LogfireScrubber

    from redaction import RedactionPolicy

    payload, clean, planted = build_payload(opts.seed, rate=opts.rate)
    ours = RedactionPolicy.default()
    peer = LogfireScrubber(patterns=None)

    def run_ours(value: Any) -> tuple[Any, int]:
        s = ours.scrub(value)
        return s.value, len(s.trail)

    def run_peer(value: Any) -> tuple[Any, int]:
        out, notes = peer.scrub_value(("attributes",), value)
        return out, len(notes)

    print(
        f"payload: {len(json.dumps(payload)) / 1000:.1f} KB, {_count_leaves(payload)} leaves, "
        f"{len(planted)} planted secrets of {len({k for k, _ in planted})} kinds"
    )
    results: dict[str, tuple[float, int, int, list[str]]] = {}
    # Ours remembers short strings and keys found clean; every timed run starts cold so that
    # the payload's repetition across runs does not flatter us.
    setups = {"ours": ours.scrubber.clear_caches, "peer": lambda: None}
    for name, fn in (("ours", run_ours), ("peer", run_peer)):
        ms = _median_ms(lambda fn=fn: fn(payload), opts.repeat, setups[name])
        out, _ = fn(payload)
        text = json.dumps(out)
        missed = [kind for kind, core in planted if core in text]
        _, fp = fn(clean)
        results[name] = (ms, len(planted) - len(missed), fp, missed)

    (o_ms, o_caught, o_fp, o_missed), (p_ms, p_caught, p_fp, p_missed) = (
        results["ours"],
        results["peer"],
    )
    n = len(planted)
    print(f"scrub 100KB args: ours {o_ms:.2f} ms, peer {p_ms:.2f} ms, ratio {o_ms / p_ms:.2f}")
    print(
        f"planted caught: ours {o_caught}/{n}, peer {p_caught}/{n}, ratio {o_caught / max(p_caught, 1):.2f}"
    )
    print(f"false positives: ours {o_fp}, peer {p_fp}, ratio {o_fp / max(p_fp, 1):.2f}")

    # One small call as a span hook sees it (args, intent, outcome, output, error), warm.
    args = {"query": "OAuth handling in the callback router", "path": "src/auth/cb.py", "k": 20}
    call = {
        "args": args,
        "intent": "Searching for OAuth handling",
        "outcome": "Found 12 results",
        "output": {"hits": 12, "files": ["a.py", "b.py"]},
        "error": None,
    }
    n_calls = 2000

    def ours_calls() -> None:
        for _ in range(n_calls):
            ours.redact_call(tool_name="search_code", agent_id="coder", **call)

    def peer_calls() -> None:
        for _ in range(n_calls):
            peer.scrub_value(("attributes",), call)

    o_call = _median_ms(ours_calls, 5, lambda: None) * 1000 / n_calls
    p_call = _median_ms(peer_calls, 5, lambda: None) * 1000 / n_calls
    print(
        f"one small call: ours {o_call:.1f} us, peer {p_call:.1f} us, ratio {o_call / p_call:.2f}"
    )
    if o_missed:
        print("ours missed kinds:", sorted(set(o_missed)))
    if p_missed:
        print("peer missed kinds:", sorted(set(p_missed)))


if __name__ == "__main__":
    main()
