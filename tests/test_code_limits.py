"""The size limits of the project's own Python, kept by a test so they cannot regrow unseen.

Read from the source with ``ast`` (nothing is imported or run), over every non-test module of
the repository (the packages, the benchmarks, the examples, the scripts):

* no module over ``MODULE_LINES`` lines: a module that grows past it holds more than one thing
  and is split by what it holds;
* no function over ``FUNCTION_LINES`` lines (its ``def`` line to its last), but the named
  exceptions in ``LONG_FUNCTIONS``, each with its reason;
* one percentile in the repository, ``benchmarks.stats.percentile``: no other function named
  for a percentile or quantile, and no direct call of numpy's or ``statistics``' (two rules for
  "p90" once gave two pages different figures for the same runs);
* ``SeamServer`` (``lsp_server/server.py``), the editor session's handler table, at most
  ``SERVER_METHODS`` methods: its handlers delegate, the work lives in the rooms beside it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

MODULE_LINES = 500
FUNCTION_LINES = 80
SERVER_METHODS = 30

#: ``(module path, qualified name)`` -> why it stays one long function.  At most two.
#: (``JsonScan.feed``, the wire's per-byte scan, was the second until it was split.)
LONG_FUNCTIONS: dict[tuple[str, str], str] = {
    ("lexer/tokenizer.py", "Tokenizer._scan"):
        "the lexer's per-character loop: every step split into a method adds a call per "
        "character of every file Seam lexes",
}

#: The one percentile and its module.
PERCENTILE = ("benchmarks/stats.py", "percentile")
#: Calls that compute a percentile on their own (a second rule beside the shared one).
PERCENTILE_CALLS = frozenset({"percentile", "nanpercentile", "quantile", "nanquantile",
                              "quantiles"})


@dataclass(frozen=True)
class Violation:
    path: str
    what: str

    def __str__(self) -> str:
        return f"{self.path}: {self.what}"


def source_files(root: Path = ROOT) -> list[Path]:
    """Every non-test Python file of the repository (hidden folders, virtual environments
    and ``tests/`` left out)."""
    out = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if parts[0] == "tests" or any(p.startswith(".") or p in ("node_modules", "build")
                                      for p in parts):
            continue
        out.append(path)
    return out


def _functions(tree: ast.AST) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function and method with its qualified name (``Class.method``, ``outer.inner``)."""
    out = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((prefix + child.name, child))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def _is_percentile_name(name: str) -> bool:
    bare = name.strip("_").lower()
    return "percentile" in bare or "quantile" in bare or bare in ("pct", "p90", "p95", "p99")


def violations(root: Path = ROOT, long_functions: dict[tuple[str, str], str] = LONG_FUNCTIONS
               ) -> list[Violation]:
    """Every breach of the limits under ``root``."""
    found = []
    for path in source_files(root):
        rel = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > MODULE_LINES:
            found.append(Violation(rel, f"{lines} lines (limit {MODULE_LINES})"))
        tree = ast.parse(text, filename=rel)
        for name, node in _functions(tree):
            length = node.end_lineno - node.lineno + 1
            if length > FUNCTION_LINES and (rel, name) not in long_functions:
                found.append(Violation(rel, f"{name} is {length} lines "
                                            f"(limit {FUNCTION_LINES})"))
            if _is_percentile_name(node.name) and (rel, node.name) != PERCENTILE:
                found.append(Violation(rel, f"{name}: a percentile helper besides "
                                            f"{PERCENTILE[0]}'s {PERCENTILE[1]}"))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in PERCENTILE_CALLS and rel != PERCENTILE[0]):
                found.append(Violation(rel, f"line {node.lineno} calls .{node.func.attr}(): "
                                            f"use {PERCENTILE[0]}'s {PERCENTILE[1]}"))
            if isinstance(node, ast.ClassDef) and node.name == "SeamServer":
                methods = sum(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                              for n in node.body)
                if methods > SERVER_METHODS:
                    found.append(Violation(rel, f"SeamServer has {methods} methods "
                                                f"(limit {SERVER_METHODS})"))
    return found


def test_the_repository_keeps_its_limits() -> None:
    found = violations()
    assert not found, "limits broken:\n" + "\n".join(map(str, found))


def test_at_most_two_named_long_functions_each_with_its_reason_and_still_there() -> None:
    assert len(LONG_FUNCTIONS) <= 2
    names = {}
    for path, name in LONG_FUNCTIONS:
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        names[path, name] = dict(_functions(tree)).get(name)
    # An exception whose function was shortened or renamed is dropped, not kept as a
    # standing licence for a new long function.
    for key, reason in LONG_FUNCTIONS.items():
        assert reason.strip(), key
        node = names[key]
        assert node is not None, f"{key} no longer exists: drop its exception"
        assert node.end_lineno - node.lineno + 1 > FUNCTION_LINES, \
            f"{key} is within the limit now: drop its exception"


def test_the_one_percentile_is_where_the_test_looks_for_it() -> None:
    tree = ast.parse((ROOT / PERCENTILE[0]).read_text(encoding="utf-8"))
    assert PERCENTILE[1] in dict(_functions(tree))


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize("rel, text, expected", [
    ("pkg/big.py", "x = 1\n" * (MODULE_LINES + 1), f"{MODULE_LINES + 1} lines"),
    ("pkg/long.py", "class A:\n    def f(self):\n" + "        x = 1\n" * FUNCTION_LINES,
     f"A.f is {FUNCTION_LINES + 1} lines"),
    ("benchmarks/other.py", "def _pct(xs):\n    return xs\n", "_pct: a percentile helper"),
    ("pkg/np.py", "import numpy as np\ny = np.percentile([1], 90)\n", "calls .percentile()"),
    ("pkg/st.py", "import statistics\ny = statistics.quantiles([1, 2])\n",
     "calls .quantiles()"),
    ("lsp_server/server.py", "class SeamServer:\n" + "".join(
        f"    def m{i}(self):\n        pass\n" for i in range(SERVER_METHODS + 1)),
     f"SeamServer has {SERVER_METHODS + 1} methods"),
])
def test_each_limit_is_caught(tmp_path: Path, rel: str, text: str, expected: str) -> None:
    _write(tmp_path, rel, text)
    _write(tmp_path, "tests/test_big.py", "x = 1\n" * (MODULE_LINES + 1))  # tests are free
    _write(tmp_path, PERCENTILE[0], "def percentile(xs, q):\n    return xs\n")
    found = violations(tmp_path, long_functions={})
    assert [v.path for v in found] == [rel], found
    assert expected in found[0].what


def test_within_the_limits_nothing_is_reported(tmp_path: Path) -> None:
    _write(tmp_path, "pkg/ok.py", "def f():\n" + "    x = 1\n" * (FUNCTION_LINES - 1))
    _write(tmp_path, "lsp_server/server.py", "class SeamServer:\n" + "".join(
        f"    def m{i}(self):\n        pass\n" for i in range(SERVER_METHODS)))
    assert violations(tmp_path, long_functions={}) == []
