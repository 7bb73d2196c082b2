"""Terminal streams of Seam's Python grammar from Python's own `tokenize` module.

Seam's lexer produces the grammar's terminals in production; the grammar tests
(``tests/python_language/grammar``) and ``benchmarks/grammar_coverage.py`` need streams that do
not depend on it, so this adapter turns CPython 3.11's tokenizer output into the same contract:
keywords, soft keywords and operators become the names of the grammar's string terminals,
numbers and strings are classified into the grammar's number and string terminals, and NL,
COMMENT, ENCODING and ENDMARKER are dropped (NEWLINE/INDENT/DEDENT pass through).

3.11's tokenizer predates PEP 701, so an f-string that reuses its own quote inside a
replacement field cannot be tokenized here; callers skip such sources.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Mapping
from typing import NamedTuple

from benchmarks.py_terminals import number_terminal as _number_terminal

# Words the lexer always emits as their own terminal (hard keywords and the soft keywords
# "match", "case", "type", "_"). Any other identifier is a NAME.
_STRING_PREFIX = re.compile(r"[A-Za-z]*")


class Token(NamedTuple):
    """One terminal: the grammar's terminal name and the source text it covers."""

    type: str
    text: str


def _string_terminal(text: str) -> str:
    prefix = _STRING_PREFIX.match(text).group(0)
    if "f" in prefix.lower():
        return "FSTRING"
    body = text[len(prefix) :]
    kind = "BYTES" if "b" in prefix.lower() else "STRING"
    return "LONG_" + kind if body[:3] in ('"""', "'''") else kind


def tokenize_terminals(source: str, literal_names: Mapping[str, str]) -> list[Token]:
    """The terminal stream of `source` under the lexer contract.

    `literal_names` maps the text of each string terminal of the grammar ("def", "(", "match")
    to its terminal name. Raises `tokenize.TokenError` or `SyntaxError` when the tokenizer
    rejects the text, and `ValueError` for an operator the grammar has no terminal for.
    """
    out: list[Token] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        kind, text = tok.type, tok.string
        if kind == tokenize.NAME:
            out.append(Token(literal_names.get(text, "NAME"), text))
        elif kind == tokenize.OP:
            name = literal_names.get(text)
            if name is None:
                raise ValueError(f"operator {text!r} has no terminal in the grammar")
            out.append(Token(name, text))
        elif kind == tokenize.NUMBER:
            out.append(Token(_number_terminal(text), text))
        elif kind == tokenize.STRING:
            out.append(Token(_string_terminal(text), text))
        elif kind == tokenize.NEWLINE:
            out.append(Token("NEWLINE", text))
        elif kind == tokenize.INDENT:
            out.append(Token("INDENT", text))
        elif kind == tokenize.DEDENT:
            out.append(Token("DEDENT", text))
        elif kind == tokenize.ERRORTOKEN and not text.isspace():
            raise SyntaxError(f"tokenize error at {tok.start}: {text!r}")
    return out
