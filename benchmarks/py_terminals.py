"""Map a Python file's `tokenize` stream to the terminal names of lark's ``python.lark``.

Benchmarks of the quotient engine need realistic terminal streams before Seam's own lexer
and Python grammar exist. lark ships a Python 3 grammar (start symbol ``file_input``); this
module turns the standard library's tokenizer output into that grammar's terminal names:
keywords and operators become the names lark gives the anonymous string terminals (``DEF``,
``LPAR``, ``__ANON_0`` for ``->``, ...), NEWLINE/INDENT/DEDENT become ``_NEWLINE``/
``_INDENT``/``_DEDENT``, and comments and blank lines are dropped (the grammar ignores them).

Known approximation: ``_`` is always mapped to ``NAME`` (lark's grammar also has an
``UNDERSCORE`` terminal for the wildcard pattern of ``match`` statements), so files with
``case _:`` do not parse. Run as a script to print the terminal count of a file.
"""

from __future__ import annotations

import io
import os
import sys
import tokenize
from functools import lru_cache

import lark
from lark.load_grammar import load_grammar

PYTHON_START = "file_input"


def python_lark_path() -> str:
    """Path of the ``python.lark`` grammar bundled with the installed lark."""
    return os.path.join(os.path.dirname(lark.__file__), "grammars", "python.lark")


def python_lark_text() -> str:
    """Text of lark's bundled Python grammar."""
    with open(python_lark_path(), encoding="utf-8") as f:
        return f.read()


@lru_cache(maxsize=1)
def _compiled_terminals() -> list:
    path = python_lark_path()
    grammar, _ = load_grammar(python_lark_text(), path, [], False)
    terminals, _rules, _ignore = grammar.compile([PYTHON_START], "*")
    return terminals


@lru_cache(maxsize=1)
def _string_terminals() -> dict[str, str]:
    """Literal text -> terminal name, for every string terminal of python.lark."""
    return {t.pattern.value: t.name for t in _compiled_terminals() if t.pattern.type == "str"}


@lru_cache(maxsize=1)
def _has_bytes_terminals() -> bool:
    """Whether python.lark tells bytes literals from strings (lark 1.3's grammar does not:
    its STRING and LONG_STRING take a `b` prefix too)."""
    return any(t.name == "BYTES" for t in _compiled_terminals())


def number_terminal(text: str) -> str:
    """The grammar's number terminal for a number's text (also used by the grammar tests)."""
    low = text.lower()
    if low.endswith("j"):
        return "IMAG_NUMBER"
    if low.startswith("0x"):
        return "HEX_NUMBER"
    if low.startswith("0o"):
        return "OCT_NUMBER"
    if low.startswith("0b"):
        return "BIN_NUMBER"
    if "." in low or "e" in low:
        return "FLOAT_NUMBER"
    return "DEC_NUMBER"


def _string_terminal(text: str) -> str:
    body = text.lstrip("rRbBuUfF")
    is_bytes = "b" in text[: len(text) - len(body)].lower()
    kind = "BYTES" if is_bytes and _has_bytes_terminals() else "STRING"
    return "LONG_" + kind if body[:3] in ('"""', "'''") else kind


def file_terminals(source: str) -> list[str]:
    """The python.lark terminal names of `source`, in order.

    Raises ``tokenize.TokenError``/``SyntaxError`` when the standard tokenizer rejects the text,
    and ``ValueError`` for an operator that lark's grammar does not know.
    """
    literals = _string_terminals()
    out: list[str] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        kind = tok.type
        if kind == tokenize.NAME:
            name = literals.get(tok.string)
            # Only alphabetic literals are keywords; "_" stays a NAME (see module docstring).
            out.append(name if name is not None and tok.string != "_" else "NAME")
        elif kind == tokenize.OP:
            name = literals.get(tok.string)
            if name is None:
                raise ValueError(f"operator {tok.string!r} is not in python.lark")
            out.append(name)
        elif kind == tokenize.NUMBER:
            out.append(number_terminal(tok.string))
        elif kind == tokenize.STRING:
            out.append(_string_terminal(tok.string))
        elif kind == tokenize.NEWLINE:
            out.append("_NEWLINE")
        elif kind == tokenize.INDENT:
            out.append("_INDENT")
        elif kind == tokenize.DEDENT:
            out.append("_DEDENT")
        # NL, COMMENT, ENCODING, ENDMARKER carry no terminal for the grammar.
    return out


def stdlib_file(name: str) -> str:
    """Path of a module file of the running Python's standard library, e.g. ``textwrap.py``."""
    import sysconfig

    return os.path.join(sysconfig.get_paths()["stdlib"], name)


def main(argv: list[str]) -> int:
    paths = argv or [stdlib_file("textwrap.py")]
    for path in paths:
        with open(path, encoding="utf-8") as f:
            terms = file_terminals(f.read())
        print(f"{path}: {len(terms)} terminals")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
