"""The vagueness measure on the labelled multilingual set: precision and recall per language.

    .venv/bin/python -m bench.vagueness

Writes the set of ``tests/analytics/vagueness_set.py`` (English, German, French, Spanish,
Japanese, Chinese; 336 intents of five tools, templated ones that name a file among them) into a real SQLite ledger, runs
``vague_intents`` (``by = "intent"``, default parameters) and prints, per language,
``name: ours X, peer Y, ratio Z`` lines for precision and recall, the peer being the rule this
measure replaced (fewer than 3 words, only English generic words, or naming the tool).
Quality figures, not timings: the defaults were chosen on this set, so they are optimistic.
"""

from __future__ import annotations

import tempfile

from tests.analytics.vagueness_set import LANGUAGES, classify, labelled, scores
from tracing.analytics._definitions import names_tool, normalize_intent, word_count

ENGLISH_GENERIC = frozenset(
    [
        "a",
        "again",
        "all",
        "am",
        "an",
        "and",
        "call",
        "calling",
        "check",
        "checking",
        "continue",
        "continuing",
        "data",
        "do",
        "doing",
        "done",
        "function",
        "get",
        "getting",
        "go",
        "handle",
        "handling",
        "i",
        "info",
        "information",
        "is",
        "it",
        "let",
        "lets",
        "me",
        "more",
        "next",
        "now",
        "on",
        "please",
        "process",
        "processing",
        "request",
        "run",
        "running",
        "some",
        "something",
        "step",
        "stuff",
        "task",
        "that",
        "the",
        "thing",
        "things",
        "this",
        "to",
        "tool",
        "try",
        "trying",
        "use",
        "using",
        "will",
        "work",
        "working",
    ]
)
"""The generic-word list of the replaced rule."""


def english_rule(tool: str, intent: str) -> str | None:
    """The replaced rule: fewer than 3 words, names its tool, or only English generic words."""
    norm = normalize_intent(intent)
    if norm is None:
        return "missing"
    if word_count(norm) < 3:
        return "short"
    if names_tool(norm, tool):
        return "names_tool"
    if set(norm.split(" ")) <= ENGLISH_GENERIC:
        return "generic"
    return None


def _ratio(ours: float, peer: float) -> str:
    return f"{ours / peer:.2f}" if peer else "inf"


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        ours = scores(classify(f"sqlite:///{folder}/vagueness.db"))
    peer = scores([english_rule(i.tool, i.intent) for i in labelled()])
    print(f"labelled set: {len(labelled())} intents, {len(LANGUAGES)} languages")
    totals = {"ours": [0, 0, 0], "peer": [0, 0, 0]}
    for language in LANGUAGES:
        (p, r, *counts), (pp, pr, *peer_counts) = ours[language], peer[language]
        for key, values in (("ours", counts), ("peer", peer_counts)):
            totals[key] = [a + b for a, b in zip(totals[key], values, strict=True)]
        print(f"vagueness {language} precision: ours {p:.2f}, peer {pp:.2f}, ratio {_ratio(p, pp)}")
        print(f"vagueness {language} recall: ours {r:.2f}, peer {pr:.2f}, ratio {_ratio(r, pr)}")
    (tp, fp, fn), (qtp, qfp, qfn) = totals["ours"], totals["peer"]
    p, r, pp, pr = tp / (tp + fp), tp / (tp + fn), qtp / (qtp + qfp), qtp / (qtp + qfn)
    print(f"vagueness all precision: ours {p:.2f}, peer {pp:.2f}, ratio {_ratio(p, pp)}")
    print(f"vagueness all recall: ours {r:.2f}, peer {pr:.2f}, ratio {_ratio(r, pr)}")


if __name__ == "__main__":
    main()
