"""The packages' layering, read from the source with `ast` (no code is imported or run).

    lsp_server -> fim -> python_language -> {quotient (the engine), lexer}

The engine knows no language and no lexer, the lexer knows no grammar engine, nothing imports
upward, and no module imports another that (directly or not) imports it back. Every import is
counted, also those inside functions and under ``if TYPE_CHECKING``: a lazy import hides a
dependency, it does not remove it.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Which of the project's packages each package may import (besides itself).
ALLOWED: dict[str, frozenset[str]] = {
    "quotient": frozenset(),
    "lexer": frozenset(),
    "python_language": frozenset({"quotient", "lexer"}),
    "fim": frozenset({"python_language", "quotient", "lexer"}),
    "lsp_server": frozenset({"fim", "python_language", "quotient", "lexer"}),
}


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the layered packages."""
    out = {}
    for pkg in ALLOWED:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    """The project module `name` refers to (a module, or the package that holds it)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules `module` imports, anywhere in its source."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            # `from pkg import mod` imports the submodule when there is one, else pkg.
            targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source
                       for a in node.names]
        else:
            continue
        for target in targets:
            owner = _owner(target, modules)
            if owner is not None and owner != module:
                found.add(owner)
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    modules = project_modules(root)
    return {m: imports_of(m, p, modules) for m, p in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path ``[a, b, ..., a]``, or None when the graph is acyclic."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(u: str) -> list[str] | None:
        state[u] = 1
        path.append(u)
        for v in sorted(graph.get(u, ())):
            if state.get(v) == 1:
                return path[path.index(v):] + [v]
            if v not in state:
                got = visit(v)
                if got:
                    return got
        path.pop()
        state[u] = 2
        return None

    for u in sorted(graph):
        if u not in state:
            got = visit(u)
            if got:
                return got
    return None


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def test_the_scanner_sees_every_kind_of_import(graph) -> None:
    """Guards the other tests against a scanner that finds nothing."""
    assert "quotient.nfa_charts" in graph["quotient.quotients"]  # relative, module level
    assert "quotient" in graph["python_language.scopes"]  # absolute, from a package
    assert "python_language" in graph["fim.api"]  # inside a function
    assert "quotient.grammar" in graph["quotient.fast"]  # under `if TYPE_CHECKING`


def test_every_installed_package_has_a_layer() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    top = {name.split(".")[0] for name in config["tool"]["setuptools"]["packages"]}
    assert top == set(ALLOWED)


def test_the_engine_knows_no_language_and_no_lexer(graph) -> None:
    outside = {(m, d) for m, deps in graph.items() if m.split(".")[0] == "quotient"
               for d in deps if d.split(".")[0] != "quotient"}
    assert not outside


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_no_package_imports_upward(graph, package: str) -> None:
    wrong = {(m, d) for m, deps in graph.items() if m.split(".")[0] == package
             for d in deps if d.split(".")[0] not in ALLOWED[package] | {package}}
    assert not wrong


def test_no_import_cycles(graph) -> None:
    assert find_cycle(graph) is None


def test_find_cycle_finds_cycles() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"a"}}) == ["a", "a"]


def test_a_lazy_upward_import_is_caught(tmp_path: Path) -> None:
    """A circle closed by an import inside a function (as `Grammar`'s convenience methods
    once did) and an upward import are both reported."""
    for pkg in ALLOWED:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "quotient" / "grammar.py").write_text(
        "def right_quotient():\n    from .quotients import right_quotient\n")
    (tmp_path / "quotient" / "quotients.py").write_text("from .grammar import right_quotient\n")
    (tmp_path / "lexer" / "tokenizer.py").write_text("import python_language.grammar\n")
    (tmp_path / "python_language" / "grammar.py").write_text("")
    g = import_graph(tmp_path)
    assert find_cycle(g) in (["quotient.grammar", "quotient.quotients", "quotient.grammar"],
                             ["quotient.quotients", "quotient.grammar", "quotient.quotients"])
    assert g["lexer.tokenizer"] == {"python_language.grammar"}
