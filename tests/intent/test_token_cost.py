"""The token cost docs/intent.md states is the one OpenAI's tokenizer gives (bench/tokens.py
measures it; this test fails when the description changes and the page does not)."""

from __future__ import annotations

from pathlib import Path

from bench.tokens import ENCODINGS, SHAPES, compact, load_encodings, with_property
from tracing.intent import INTENT_DESCRIPTION


def test_docs_state_the_measured_token_cost() -> None:
    doc = " ".join((Path(__file__).parents[2] / "docs" / "intent.md").read_text().split())
    encodings = load_encodings()
    assert set(encodings) == set(ENCODINGS)
    prop = compact({"intent": {"type": "string", "description": INTENT_DESCRIPTION}})
    for enc in encodings.values():
        assert f"**{len(enc.encode(INTENT_DESCRIPTION))} tokens** with OpenAI's" in doc
        assert f"**{len(enc.encode(prop))} tokens**" in doc
    o200k = encodings["o200k_base"]
    for shape, tool in SHAPES.items():
        plain = len(o200k.encode(compact(tool)))
        ours = len(o200k.encode(compact(with_property(shape, tool, strict=False))))
        assert f"| {plain} (" in doc and f"| {ours} (" in doc, shape
