"""The docs name public things only, and their examples still run.

* every ``python`` block of README.md and docs/*.md compiles, and its imports import;
* a block right after an ``<!-- doctest -->`` line runs whole, in a scratch directory;
* every dotted name in inline code (``tracing.status.frame_label``) resolves, and none names an
  internal (underscore) module.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(<!-- doctest -->\n)?```python\n(.*?)```", re.DOTALL)
DOTTED = re.compile(r"(?<![\w.`/])`((?:tracing|redaction|viewer)(?:\.[A-Za-z_]\w*)+)")


def _blocks() -> list[tuple[str, int, bool, str]]:
    found: list[tuple[str, int, bool, str]] = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in BLOCK.finditer(text):
            line = text.count("\n", 0, m.start(2)) + 1
            found.append((page.name, line, bool(m.group(1)), m.group(2)))
    return found


BLOCKS = _blocks()


@pytest.mark.parametrize(
    ("page", "line", "run", "code"), BLOCKS, ids=[f"{b[0]}:{b[1]}" for b in BLOCKS]
)
def test_python_examples_compile_and_import(
    page: str, line: int, run: bool, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = ast.parse(code, filename=f"{page}:{line}")
    imports: list[ast.stmt] = [
        n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)
    ]
    namespace: dict[str, object] = {}
    exec(compile(ast.Module(body=imports, type_ignores=[]), page, "exec"), namespace)
    if run:
        monkeypatch.chdir(tmp_path)
        exec(compile(tree, f"{page}:{line}", "exec"), {"__name__": "__doctest__"})


def _names() -> list[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for page in PAGES:
        for m in DOTTED.finditer(page.read_text(encoding="utf-8")):
            out.add((page.name, m.group(1)))
    return sorted(out)


NAMES = _names()


@pytest.mark.parametrize(("page", "name"), NAMES, ids=[f"{p}:{n}" for p, n in NAMES])
def test_dotted_names_in_the_docs_are_public_and_resolve(page: str, name: str) -> None:
    parts = name.split(".")
    assert not any(p.startswith("_") and not p.startswith("__") for p in parts), (
        f"{page} names an internal module or name: {name}"
    )
    # the longest importable prefix, then attributes
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return
    pytest.fail(f"{page}: {name} does not resolve")
