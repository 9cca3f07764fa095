"""docs/tracing.md documents exactly the attribute keys tracing/attributes.py defines."""

from __future__ import annotations

import re
from pathlib import Path

from tracing import attributes as A

DOC = Path(__file__).resolve().parents[2] / "docs" / "tracing.md"
ROW = re.compile(r"^\| `([A-Z_]+)` \| `(intentrace\.[a-z_.]+)` \|", re.MULTILINE)


def test_documented_attribute_table_matches_the_module() -> None:
    documented = ROW.findall(DOC.read_text(encoding="utf-8"))
    assert documented, "the attribute table is missing from docs/tracing.md"
    in_code = [(name, getattr(A, name)) for name in dir(A) if name.isupper()]
    ours = {(name, value) for name, value in in_code if str(value).startswith("intentrace.")}
    assert set(documented) == ours
    assert [key for _, key in documented] == list(A.OURS)  # same order, no duplicates


def test_module_docstring_table_lists_the_same_keys() -> None:
    doc = A.__doc__ or ""
    listed = re.findall(r"``(intentrace\.[a-z_.]+)``", doc)
    assert listed == list(A.OURS)
