"""The packages' layering, read from the source with `ast` (no code is imported or run).

    lsp_server -> fim -> {python_language, go_language} -> {quotient (the engine), lexer}

The engine knows no language and no lexer, the lexer knows no grammar engine, nothing imports
upward, and no module imports another that (directly or not) imports it back. Every import is
counted, also those inside functions and under ``if TYPE_CHECKING``: a lazy import hides a
dependency, it does not remove it.

Inside the two upper packages, the rooms (``ROOMS``): ``lsp_server/wire/`` (framing, JSON-RPC,
transport) imports nothing else of ``lsp_server``; ``lsp_server/project/`` (the project
context) nothing of the wire nor of the server and its service; ``fim/engines/`` nothing of
fim's upper modules but the tokenizer protocol, the option names and the LRU; ``fim/eval/`` may
import all of fim, and only fim's command line imports it. Tests and benchmarks: the packages
import neither; tests may import benchmarks (the reference terminal streams), benchmarks never
import tests.
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
    "go_language": frozenset({"quotient", "lexer"}),
    "fim": frozenset({"python_language", "go_language", "quotient", "lexer"}),
    "lsp_server": frozenset({"fim", "python_language", "go_language", "quotient", "lexer"}),
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
    assert "python_language" in graph["fim.languages"]  # inside a function
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


# ----- rooms inside the upper packages ----------------------------------------------------------

#: The modules outside a room that the room may import from its own package (prefixes).
ROOMS: dict[str, tuple[str, ...]] = {
    # the wire speaks JSON-RPC over a stream; it knows no handler, no server, no project
    "lsp_server.wire": (),
    # the project context is read by the service; it knows neither the wire nor the service
    "lsp_server.project": ("lsp_server.text", "lsp_server.logs"),
    # engines run models; prompts, decoding, the API and the evaluation sit above them
    "fim.engines": ("fim.tokenizer", "fim.options", "fim.lru"),
    # the evaluation may use all of fim
    "fim.eval": ("fim",),
}
#: The modules of a package, outside a room, that may import the room (``None``: any).
ROOM_USERS: dict[str, tuple[str, ...] | None] = {
    "lsp_server.wire": None,
    "lsp_server.project": None,
    "fim.engines": None,
    "fim.eval": ("fim.cli", "fim.cli_eval"),
}
#: Known violations, each to be fixed by a change in flight (the test then passes and its
#: strict xfail fails, so the entry must go).
KNOWN = {
}


def _in(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def room_violations(graph: dict[str, set[str]], room: str) -> set[tuple[str, str]]:
    """Imports that leave ``room`` for a module of its package it may not use, and imports of
    ``room`` by modules not allowed to use it."""
    package = room.split(".")[0]
    wrong = set()
    for module, deps in graph.items():
        inside = _in(module, room)
        for dep in deps:
            if inside and _in(dep, package) and not _in(dep, room) and not any(
                    _in(dep, ok) for ok in ROOMS[room]):
                wrong.add((module, dep))
            users = ROOM_USERS[room]
            if (not inside and users is not None and _in(dep, room)
                    and not any(_in(module, ok) for ok in users)):
                wrong.add((module, dep))
    return wrong


def _room_params() -> list:
    graph = import_graph()
    out = []
    for room in ROOMS:
        found = room_violations(graph, room)
        known = sorted(found & set(KNOWN))
        marks = [pytest.mark.xfail(strict=True, reason="; ".join(KNOWN[k] for k in known))
                 ] if known else []
        out.append(pytest.param(room, marks=marks, id=room))
    return out


def test_every_room_is_a_folder() -> None:
    for room in ROOMS:
        assert (ROOT / room.replace(".", "/") / "__init__.py").is_file(), room


@pytest.mark.parametrize("room", _room_params())
def test_each_room_imports_only_what_it_may(graph, room: str) -> None:
    assert not room_violations(graph, room)


def test_known_room_violations_are_the_only_ones(graph) -> None:
    """The xfails above cover exactly the known imports: any new violation fails here too."""
    found = set().union(*(room_violations(graph, room) for room in ROOMS))
    assert found <= set(KNOWN)


def test_a_room_violation_is_caught(tmp_path: Path) -> None:
    for pkg in ALLOWED:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    for room in ("lsp_server/wire", "lsp_server/project", "fim/engines", "fim/eval"):
        (tmp_path / room).mkdir()
        (tmp_path / room / "__init__.py").write_text("")
    (tmp_path / "lsp_server" / "server.py").write_text("")
    (tmp_path / "lsp_server" / "wire" / "transport.py").write_text(
        "def f():\n    from lsp_server.documents import X\n")
    (tmp_path / "lsp_server" / "documents.py").write_text("")
    (tmp_path / "lsp_server" / "project" / "sources.py").write_text(
        "from lsp_server.wire import framing\n")
    (tmp_path / "fim" / "engines" / "backend.py").write_text("from fim import decoding\n")
    (tmp_path / "fim" / "decoding.py").write_text("from fim.eval import datasets\n")
    (tmp_path / "fim" / "eval" / "datasets.py").write_text("from fim import decoding\n")
    g = import_graph(tmp_path)
    assert room_violations(g, "lsp_server.wire") == {
        ("lsp_server.wire.transport", "lsp_server.documents")}
    assert room_violations(g, "lsp_server.project") == {
        ("lsp_server.project.sources", "lsp_server.wire")}
    assert room_violations(g, "fim.engines") == {("fim.engines.backend", "fim.decoding")}
    assert room_violations(g, "fim.eval") == {("fim.decoding", "fim.eval.datasets")}


# ----- tests and benchmarks ---------------------------------------------------------------------

def _top_imports(path: Path) -> set[str]:
    """The first name of every absolute import in ``path`` (inside functions too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_the_packages_import_neither_tests_nor_benchmarks() -> None:
    wrong = {(str(p.relative_to(ROOT)), name) for pkg in ALLOWED
             for p in (ROOT / pkg).rglob("*.py")
             for name in _top_imports(p) & {"tests", "benchmarks"}}
    assert not wrong


def test_benchmarks_never_import_tests() -> None:
    wrong = {str(p.relative_to(ROOT)) for p in (ROOT / "benchmarks").rglob("*.py")
             if "tests" in _top_imports(p)}
    assert not wrong
