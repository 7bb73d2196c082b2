"""Shared machinery of the grammar tests: the loaded grammar, terminal streams, the oracle.

`accepts(source, lexer)` feeds a program's terminal stream to the recognizer of Seam's own
Python grammar (`quotient.recognizer(Grammar.from_lark(...))`) and says whether the whole
program is a sentence. Streams come from the `tokenize` adapter
(`benchmarks/cpython_terminals.py`) and from Seam's lexer (`python_language.lex_python`, whose
`LexError` is re-raised as `SyntaxError`).

The oracle is CPython's parser: `python3.12` in a subprocess when it is installed (the grammar
targets 3.12), else the running interpreter's `ast.parse` for sources whose verdict did not
change in 3.12.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path

from benchmarks.cpython_terminals import tokenize_terminals
from lexer.tokenizer import LexError
from python_language.grammar import lex_python
from quotient import Grammar, recognizer

GRAMMAR_PATH = Path(__file__).resolve().parents[3] / "python_language" / "python.lark"
PYENV_VERSIONS = Path("/root/.pyenv/versions")


@lru_cache(maxsize=1)
def python_grammar() -> Grammar:
    """Seam's Python grammar, loaded once per test session."""
    return Grammar.from_lark(GRAMMAR_PATH.read_text(encoding="utf-8"), start="file_input")


@lru_cache(maxsize=1)
def literal_names() -> dict[str, str]:
    """Text of each string terminal ("def", "(", "match") -> its terminal name."""
    g = python_grammar()
    return {d.pattern: d.name for d in g.terminal_defs.values() if d.kind == "str"}


def _tokenize_lexer(source: str) -> list[str]:
    return [t.type for t in tokenize_terminals(source, literal_names())]


def _seam_lexer(source: str) -> list[str]:
    try:
        return lex_python(source)
    except LexError as exc:
        raise SyntaxError(str(exc)) from exc


def lexers() -> dict[str, Callable[[str], list[str]]]:
    """The terminal-stream producers by name: CPython's "tokenize" (adapted) and "seam"."""
    return {"tokenize": _tokenize_lexer, "seam": _seam_lexer}


def recognizes(terminals: Iterable[str]) -> bool:
    """Whether the terminal sequence is a whole sentence of the grammar."""
    state = recognizer(python_grammar()).scan_many(list(terminals))
    return state is not None and state.is_complete()


def accepts(source: str, lex: Callable[[str], list[str]]) -> bool:
    """Whether the grammar accepts the whole program `source` lexed by `lex`."""
    return recognizes(lex(source))


def local_ast_accepts(source: str) -> bool:
    """The running interpreter's parser verdict on `source`."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(source)
    except SyntaxError:
        return False
    return True


_ORACLE_SCRIPT = """
import ast, json, sys, warnings
warnings.simplefilter("ignore")
out = []
for src in json.load(sys.stdin):
    try:
        ast.parse(src)
        out.append(True)
    except SyntaxError:
        out.append(False)
json.dump(out, sys.stdout)
"""


@lru_cache(maxsize=1)
def find_python312() -> str | None:
    """Path of a working Python 3.12 interpreter, or None."""
    if sys.version_info[:2] == (3, 12):
        return sys.executable
    # pyenv's shims exist even when no 3.12 is selected, so try real interpreters first and
    # keep only one that runs.
    candidates = [str(p) for p in sorted(PYENV_VERSIONS.glob("3.12*/bin/python3.12"))]
    which = shutil.which("python3.12")
    if which:
        candidates.append(which)
    for exe in candidates:
        try:
            proc = subprocess.run([exe, "-c", "import sys; print(sys.version_info[:2])"],
                                  capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if proc.returncode == 0 and proc.stdout.strip() == "(3, 12)":
            return exe
    return None


def python312_verdicts(sources: list[str]) -> dict[str, bool] | None:
    """CPython 3.12's `ast.parse` verdict for each source (one subprocess), or None."""
    exe = find_python312()
    if exe is None:
        return None
    proc = subprocess.run(
        [exe, "-c", _ORACLE_SCRIPT],
        input=json.dumps(sources),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return dict(zip(sources, json.loads(proc.stdout), strict=True))
