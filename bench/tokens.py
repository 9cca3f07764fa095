"""What the injected ``intent`` property costs, in tokens, measured with OpenAI's tokenizer.

For each of the five schema shapes ``inject_intent``/``with_intent`` handle (OpenAI Chat
Completions, OpenAI Responses, Anthropic, MCP, a bare JSON Schema), one realistic tool is
serialised as compact JSON with and without the property, in normal and strict mode (strict
adds ``"intent"`` to ``required``), and counted with ``tiktoken`` in ``o200k_base`` (GPT-4o,
GPT-4.1, o-series, GPT-5) and ``cl100k_base`` (GPT-4, GPT-3.5).

tiktoken downloads its encodings at first use, and this machine reaches package registries
only. The ``bpe-openai`` wheel ships the two encoding files (``bpe_openai/data/*.tiktoken.gz``);
they are unpacked into a private ``TIKTOKEN_CACHE_DIR`` under the name tiktoken gives its
download, and tiktoken itself checks them against the SHA-256 it expects for OpenAI's files:
the counts are tiktoken's own, on OpenAI's own data.

What a provider puts in the prompt is its own rendering of the tools (OpenAI turns functions
into a TypeScript-like namespace; Anthropic a system-prompt preamble), not this JSON, and
neither publishes it: the JSON text is what is measured, and the delta of one property is
what carries over. Anthropic's tokenizer is not published at all (no count here).

Run: ``python -m bench.tokens``. Prints ``name: ours X, peer Y, ratio Z`` lines (ours: tokens
with the property, peer: without, ratio: ours / peer) and one ``delta`` line per encoding.
"""

from __future__ import annotations

import copy
import gzip
import hashlib
import importlib.metadata
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Final

import tiktoken

from tracing import IntentRegistry, inject_intent, with_intent
from tracing.intent import INTENT_DESCRIPTION

ENCODINGS: Final = ("o200k_base", "cl100k_base")
_SOURCES: Final = {
    name: "https://openaipublic.blob.core.windows.net/encodings/" + name + ".tiktoken"
    for name in ENCODINGS
}

PARAMS: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "Text or regular expression to look for."},
        "path": {"type": "string", "description": "Directory to search, relative to the repo."},
        "max_results": {"type": "integer", "description": "Stop after this many matches."},
    },
    "required": ["query"],
}
DESCRIPTION: Final = "Search the repository's source code and return matching lines."
SHAPES: Final[dict[str, dict[str, Any]]] = {
    "chat": {
        "type": "function",
        "function": {"name": "search_code", "description": DESCRIPTION, "parameters": PARAMS},
    },
    "responses": {
        "type": "function",
        "name": "search_code",
        "description": DESCRIPTION,
        "parameters": PARAMS,
    },
    "anthropic": {"name": "search_code", "description": DESCRIPTION, "input_schema": PARAMS},
    "mcp": {"name": "search_code", "description": DESCRIPTION, "inputSchema": PARAMS},
    "schema": PARAMS,
}


def load_encodings() -> dict[str, tiktoken.Encoding]:
    """tiktoken's encodings, from the files the ``bpe-openai`` wheel ships (hash-checked by
    tiktoken against OpenAI's)."""
    cache = tempfile.mkdtemp(prefix="intentrace-tiktoken-")
    wheel = importlib.metadata.distribution("bpe-openai")  # (its files only: no import)
    for name, url in _SOURCES.items():
        packed = Path(str(wheel.locate_file(f"bpe_openai/data/{name}.tiktoken.gz")))
        raw = gzip.decompress(packed.read_bytes())
        key = hashlib.sha1(url.encode()).hexdigest()  # tiktoken's cache name for its download
        with open(os.path.join(cache, key), "wb") as out:
            out.write(raw)
    os.environ["TIKTOKEN_CACHE_DIR"] = cache  # (a file whose hash is wrong is fetched again)
    return {name: tiktoken.get_encoding(name) for name in ENCODINGS}


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def with_property(shape: str, tool: dict[str, Any], *, strict: bool) -> dict[str, Any]:
    if shape == "schema":
        return with_intent(tool, required=strict)
    (out,) = inject_intent([tool], registry=IntentRegistry(), required=strict)
    return out


def strict_form(shape: str, tool: dict[str, Any]) -> dict[str, Any]:
    """The tool as written for strict mode (closed schema, every property required)."""
    out = copy.deepcopy(tool)
    holder = out
    for key in {"chat": ("function", "parameters"), "responses": ("parameters",),
                "anthropic": ("input_schema",), "mcp": ("inputSchema",)}.get(shape, ()):  # fmt: skip
        holder = holder[key]
    holder["additionalProperties"] = False
    holder["required"] = list(holder["properties"])
    return out


def main() -> None:
    encodings = load_encodings()
    for enc_name, enc in encodings.items():
        prop = compact({"intent": {"type": "string", "description": INTENT_DESCRIPTION}})
        print(
            f"description alone ({enc_name}): "
            f"{len(enc.encode(INTENT_DESCRIPTION))} tokens; the property as JSON "
            f"{len(enc.encode(prop))} tokens"
        )
        deltas: list[int] = []
        for shape, tool in SHAPES.items():
            for strict in (False, True):
                base = strict_form(shape, tool) if strict else tool
                plain = len(enc.encode(compact(base)))
                ours = len(enc.encode(compact(with_property(shape, base, strict=strict))))
                deltas.append(ours - plain)
                mode = "strict" if strict else "normal"
                print(
                    f"{shape} {mode} tool tokens ({enc_name}): ours {ours}, peer {plain}, "
                    f"ratio {ours / plain:.2f}"
                )
        print(f"delta per tool ({enc_name}): {min(deltas)}-{max(deltas)} tokens")


if __name__ == "__main__":
    main()
