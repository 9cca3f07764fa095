"""A corpus of secrets of every built-in kind, each one unique, for sink tests.

``make_secret(kind, n)`` returns a secret of that kind that no other ``(kind, n)`` shares: the
``text`` to plant and the part of it that must vanish from every sink (``vanish``). The shapes
follow the catch examples of ``tests/redaction/examples.py``; ``tests/redaction/test_sink_matrix``
checks that the scrubber catches every one (a corpus that drifted from the rules fails there).
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from typing import Final

from redaction import BUILTIN_PATTERNS

KINDS: Final[tuple[str, ...]] = BUILTIN_PATTERNS
"""Every built-in value pattern (emails and phones need ``ScrubOptions(emails/phones=True)``)."""


@dataclass(frozen=True)
class Secret:
    kind: str
    text: str
    """What is planted."""
    vanish: str
    """The part that must appear in no sink (a unique string)."""


def _tag(kind: str, n: int, length: int = 40) -> str:
    out = ""
    seed = f"{kind}:{n}"
    while len(out) < length:
        seed = hashlib.sha256(seed.encode()).hexdigest()
        out += seed
    return out[:length]


def _luhn_complete(body: str) -> str:
    for check in "0123456789":
        digits = body + check
        total = 0
        for i, ch in enumerate(reversed(digits)):
            d = int(ch)
            if i % 2:
                d *= 2
                if d > 9:
                    d -= 9
            total += d
        if total % 10 == 0:
            return digits
    raise AssertionError("unreachable")


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def make_secret(kind: str, n: int) -> Secret:
    """The ``n``-th secret of ``kind``."""
    t = _tag(kind, n)
    mixed = "".join(c.upper() if i % 3 == 0 else c for i, c in enumerate(t))  # [A-Za-z0-9]
    if kind == "private_key":
        body = "MIIEpAIBAAKCAQEA" + mixed[:24]
        text = f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----"
        return Secret(kind, text, body)
    if kind == "jwt":
        payload = _b64url(json.dumps({"sub": t[:12]}).encode())
        token = f"eyJhbGciOiJIUzI1NiJ9.{payload}.{_b64url(bytes.fromhex(t))}"
        return Secret(kind, token, token)
    if kind == "bearer":
        token = "1" + mixed[:31]
        return Secret(kind, f"Bearer {token}", token)
    if kind == "basic_auth":
        token = base64.b64encode(f"user{n}:pw{t[:10]}".encode()).decode()
        return Secret(kind, f"Basic {token}", token.rstrip("="))
    if kind == "aws_access_key":
        key = "AKIA" + t[:16].upper()
        return Secret(kind, key, key)
    if kind == "github_token":
        key = "ghp_" + mixed[:36]
        return Secret(kind, key, key)
    if kind == "gitlab_token":
        key = "glpat-" + mixed[:20]
        return Secret(kind, key, key)
    if kind == "slack_token":
        key = f"xoxb-{int(t[:10], 16) % 10**12:012d}-{mixed[10:34]}"
        return Secret(kind, key, key)
    if kind == "stripe_key":
        key = "sk_live_" + mixed[:24]
        return Secret(kind, key, key)
    if kind == "anthropic_key":
        key = "sk-ant-api03-" + mixed[:40]
        return Secret(kind, key, key)
    if kind == "langfuse_key":
        key = f"sk-lf-{t[:8]}-{t[8:12]}-{t[12:16]}-{t[16:20]}-{t[20:32]}"
        return Secret(kind, key, key)
    if kind == "openai_key":
        key = "sk-proj-1" + mixed[:39]
        return Secret(kind, key, key)
    if kind == "google_api_key":
        key = "AIza" + mixed[:35]
        return Secret(kind, key, key)
    if kind == "huggingface_token":
        key = "hf_1" + mixed[:33]
        return Secret(kind, key, key)
    if kind == "sendgrid_key":
        key = f"SG.{mixed[:22]}.{mixed[22:40]}{t[:25]}"
        return Secret(kind, key, key)
    if kind == "pypi_token":
        key = "pypi-AgEIcHlwaS5vcmc" + mixed[:40] + t[:20]
        return Secret(kind, key, key)
    if kind == "npm_token":
        key = "npm_" + mixed[:36]
        return Secret(kind, key, key)
    if kind == "connection_string":
        password = "Pw" + t[:18]
        return Secret(kind, f"postgresql://app:{password}@db.internal:5432/app", password)
    if kind == "secret_assignment":
        password = "Hx" + t[:18]
        return Secret(kind, f"password={password}", password)
    if kind == "credit_card":
        number = _luhn_complete("4" + f"{int(t[:16], 16) % 10**14:014d}")
        return Secret(kind, number, number)
    if kind == "email":
        address = f"user.{t[:16]}@example.com"
        return Secret(kind, address, address)
    if kind == "phone":
        digits = f"{int(t[:8], 16) % 10**7:07d}"
        text = f"+1 415 {digits[:3]} {digits[3:]}"
        return Secret(kind, text, f"415 {digits[:3]} {digits[3:]}")
    raise ValueError(f"no generator for {kind!r}")
