"""The house rules of docs/architecture.md, checked on the code itself.

* the layers point one way, nothing imports OpenTelemetry where it must not, and no modules of
  a package import each other in a cycle (the import-linter contracts in pyproject.toml);
* an import done inside a function keeps an optional extra (or a heavy import) lazy and says so
  in a comment; our own modules are imported at the top;
* every third-party package the code imports is declared in pyproject.toml (core or the extra
  that needs it), and every declared core dependency is used;
* every third-party package the tests and benchmarks import is declared too (the ``dev``
  dependency group, PEP 735, or what the code declares).
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tracing", "redaction", "viewer")
OURS = frozenset(PACKAGES)
# Our own modules that may be imported inside a function: the analytics engine loads DuckDB and
# pyarrow (the optional ``analytics`` extra), which commands and pages that never analyse skip.
LAZY_OURS = frozenset({"tracing.analytics"})
COMPAT = "tests/frameworks_compat"
COMPAT_REQUIREMENTS = ROOT / COMPAT / "requirements.txt"


def _sources(packages: tuple[str, ...] = PACKAGES) -> list[Path]:
    return sorted(p for pkg in packages for p in (ROOT / pkg).rglob("*.py"))


def _imports(tree: ast.AST) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import with whether it sits inside a function (``TYPE_CHECKING`` blocks skipped)."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.append((child, in_function))
            visit(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))

    visit(tree, False)
    return found


def _module_names(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""] if node.level == 0 else []
    return [alias.name for alias in node.names]


def test_import_contracts_hold() -> None:
    """lint-imports over the contracts in pyproject.toml: layers, no OpenTelemetry below the
    SDK layer, no cycles between sibling modules."""
    run = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout[run.stdout.find("Broken contracts") :] or run.stderr
    assert re.search(r"Contracts: (\d+) kept, 0 broken", run.stdout), run.stdout


def test_imports_inside_functions_keep_an_extra_lazy_and_say_so() -> None:
    problems: list[str] = []
    for path in _sources():
        lines = path.read_text().splitlines()
        for node, in_function in _imports(ast.parse("\n".join(lines))):
            if not in_function:
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            for name in _module_names(node):
                top = name.split(".")[0]
                if top in OURS and not any(
                    name == m or name.startswith(m + ".") for m in LAZY_OURS
                ):
                    problems.append(f"{where}: our own {name} imported inside a function")
            # the reason: a comment on the import, on the line above it, or above the ``try:``
            # that guards it (an import right after another lazy one shares its comment)
            first = node.lineno - 1
            above = first - 1
            while above >= 0 and (
                lines[above].strip() == "try:" or re.match(r"\s*(from \S+ )?import ", lines[above])
            ):
                above -= 1
            context = [*lines[first : node.end_lineno], lines[above] if above >= 0 else ""]
            if not any("#" in line for line in context):
                problems.append(f"{where}: a lazy import without a comment saying why")
    assert problems == [], "\n".join(problems)


def _names(requirements: list[str]) -> set[str]:
    out: set[str] = set()
    for req in requirements:
        m = re.match(r"[A-Za-z0-9_.\-]+", req)
        assert m is not None, req
        if not m.group().startswith("intentrace"):
            out.add(re.sub(r"[-_.]+", "-", m.group()).lower())
    return out


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _declared() -> tuple[set[str], dict[str, set[str]]]:
    project = _pyproject()["project"]
    extras = {k: _names(v) for k, v in project.get("optional-dependencies", {}).items()}
    assert "dev" not in extras, "the test tools are the `dev` dependency group, not an extra"
    return _names(project["dependencies"]), extras


def _group(name: str) -> set[str]:
    """The requirements of a PEP 735 dependency group, its ``include-group`` entries followed."""
    groups: dict[str, list[str | dict[str, str]]] = _pyproject()["dependency-groups"]
    out: set[str] = set()
    for item in groups[name]:
        out |= _group(item["include-group"]) if isinstance(item, dict) else _names([item])
    return out


@functools.cache
def _packages_distributions() -> dict[str, list[str]]:
    return dict(importlib.metadata.packages_distributions())


def _requires(distribution: str) -> set[str]:
    try:
        requires = importlib.metadata.requires(distribution) or []
    except importlib.metadata.PackageNotFoundError:
        return set()
    return _names([r for r in requires if "extra ==" not in r])


def _distributions_of(module: str) -> set[str]:
    dists = _packages_distributions().get(module, [])
    return {re.sub(r"[-_.]+", "-", d).lower() for d in dists}


def test_declared_dependencies_match_the_imports() -> None:
    core, extras = _declared()
    every_extra = set().union(*extras.values())
    missing: list[str] = []
    used: set[str] = set()
    for module, files in sorted(_third_party_imports(PACKAGES).items()):
        dists = _distributions(module)
        declared = dists & (core | every_extra)
        used |= declared
        if not declared:
            missing.append(f"{module} ({', '.join(sorted(files)[:3])}): from {sorted(dists)}")
    assert missing == [], "imported but not declared in pyproject.toml:\n" + "\n".join(missing)
    # every core dependency is imported somewhere (the API comes with the SDK)
    assert core - used - {"opentelemetry-api"} == set()


def test_tests_and_benchmarks_import_only_what_the_dev_group_declares() -> None:
    """``pip install -e '.[all,taps]' --group dev`` (scripts/test.sh) brings every package the
    tests and benchmarks import."""
    core, extras = _declared()
    declared = core | set().union(*extras.values()) | _group("dev")
    # what a declared distribution requires comes with it (``logfire`` is ``logfire-sdk``'s)
    declared |= {r for d in declared for r in _requires(d)}
    ours = OURS | {"tests", "bench"}
    # tests/frameworks_compat runs in .venv-compat: what only it imports is declared in its
    # requirements.txt (those frameworks are not installed here, so they are matched by name)
    compat = _names(
        [line for line in COMPAT_REQUIREMENTS.read_text().splitlines() if line[:1].isalnum()]
    )
    missing = [
        f"{module} ({', '.join(sorted(files)[:3])}): from {sorted(dists)}"
        for module, files in sorted(_third_party_imports(("tests", "bench"), ours).items())
        if not (dists := _distributions(module)) & declared
        and not (
            all(f.startswith(f"{COMPAT}/") for f in files)
            and re.sub(r"[-_.]+", "-", module.split(".")[0]).lower() in compat
        )
    ]
    assert missing == [], "imported but not declared in pyproject.toml:\n" + "\n".join(missing)


def _third_party_imports(
    packages: tuple[str, ...], ours: frozenset[str] = OURS
) -> dict[str, set[str]]:
    """Each third-party module the files below ``packages`` import, with the files."""
    imported: dict[str, set[str]] = {}
    for path in _sources(packages):
        for node, _ in _imports(ast.parse(path.read_text())):
            for name in _module_names(node):
                top = name.split(".")[0]
                if not top or top in ours or top in sys.stdlib_module_names:
                    continue
                # ``opentelemetry``/``google`` are namespace packages: resolve the submodule
                key = ".".join(name.split(".")[:2]) if top in ("opentelemetry", "google") else top
                imported.setdefault(key, set()).add(str(path.relative_to(ROOT)))
    return imported


def _distributions(module: str) -> set[str]:
    """The distributions that may provide ``module``."""
    if module.startswith("opentelemetry.proto"):
        return {"opentelemetry-proto"}
    if module.startswith("google.protobuf"):
        return {"protobuf"}
    if module.startswith("google.rpc"):
        return {"googleapis-common-protos"}
    top = module.split(".", maxsplit=1)[0]
    dists = _distributions_of(top)
    if top == "opentelemetry":
        # the API, SDK and exporter distributions all provide ``opentelemetry``
        dists &= {
            "opentelemetry-api",
            "opentelemetry-sdk",
            "opentelemetry-exporter-otlp-proto-http",
            "opentelemetry-semantic-conventions",
        }
    return dists


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_has_a_short_public_surface(package: str) -> None:
    """``__all__`` in every public module names only what it defines or re-exports."""
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if any(p.startswith("_") and p != "__init__" for p in parts):
            continue
        module = ".".join(p for p in parts if p != "__init__")
        tree = ast.parse(path.read_text())
        exported = next(
            (
                ast.literal_eval(n.value)
                for n in tree.body
                if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets)
            ),
            None,
        )
        if exported is None:
            continue
        mod = importlib.import_module(module)
        assert [name for name in exported if not hasattr(mod, name)] == [], module
