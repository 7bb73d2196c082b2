"""A Python document's imports and the names it uses, read without parsing the document.

The definitions source (``python_definitions``) and the similar-code source need a document's
imports at every keystroke, while the document is being edited and often does not parse.  So
the imports are found with a line scan plus ``ast`` per statement, and a keystroke costs a
regular-expression pass, not a parse of the file:

* each statement's parse is remembered (the same statements come back with every keystroke);
* a statement never reaches past the next line that starts an import (no statement can hold
  one), so a half-typed ``from a import (`` ends there instead of swallowing the lines below
  and every line is looked at once;
* only the first ``MAX_IMPORT_STATEMENTS`` statements are read, and the document beyond them is
  looked at in pieces remembered by their text; while the user types below them, the
  statements read are not read again (:class:`ImportScanner`): a generated file of 50,000
  imports costs a keystroke little more than a normal file does.
"""

from __future__ import annotations

import ast
import functools
import re
import warnings
from dataclasses import dataclass

#: Import statements read from a document, the first ones: the definitions budget is spent
#: long before, and a generated file of thousands of imports must not cost a keystroke more.
MAX_IMPORT_STATEMENTS = 512

_IMPORT_LINE = re.compile(r"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+import\b|import[ \t]+\w)", re.M)
_WHOLE_IMPORT_LINE = re.compile(_IMPORT_LINE.pattern + r"[^\n]*", re.M)
_ATTRIBUTE = re.compile(r"\b([A-Za-z_]\w*)\s*\.\s*([A-Za-z_]\w*)")
#: Characters per piece of a document beyond its import statements read (``used_names``).
_PIECE_CHARS = 32768
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Import:
    """One imported name: ``from <level dots><module> import <name> as <alias>``, or
    ``import <module> as <alias>`` (``name`` is ``None``)."""

    module: str
    level: int
    name: str | None
    alias: str


# ----- a document's imports --------------------------------------------------------------------

def _statement_end(text: str, start: int, limit: int) -> int:
    """Where the import statement starting at ``start`` ends, continuation lines included
    (parenthesised names, backslashes), never past ``limit``: the start of the next line that
    begins an import, which no statement can hold (so a half-typed ``from a import (`` ends
    there instead of swallowing the lines below, and every line is looked at once)."""
    end = text.find("\n", start, limit)
    end = limit if end < 0 else end
    depth = text.count("(", start, end) - text.count(")", start, end)
    line_start, lines = start, 1
    while (depth > 0 or text[line_start:end].rstrip().endswith("\\")) and end < limit:
        line_start = end + 1
        nxt = text.find("\n", line_start, limit)
        nxt = limit if nxt < 0 else nxt
        depth += text.count("(", line_start, nxt) - text.count(")", line_start, nxt)
        end, lines = nxt, lines + 1
        if lines > 200:  # an unclosed parenthesis: not an import after all
            break
    return end


def import_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of the document's first ``MAX_IMPORT_STATEMENTS`` import statements
    (bounded: a generated file of 50,000 imports costs what 512 do)."""
    starts: list[int] = []
    for m in _IMPORT_LINE.finditer(text):
        starts.append(m.start())
        if len(starts) > MAX_IMPORT_STATEMENTS:
            break
    spans = []
    for i, start in enumerate(starts[:MAX_IMPORT_STATEMENTS]):
        limit = starts[i + 1] if i + 1 < len(starts) else len(text)
        spans.append((start, _statement_end(text, start, limit)))
    return spans


@functools.lru_cache(maxsize=4096)
def _parse_import(statement: str) -> tuple[Import, ...]:
    """The names one import statement imports (none when it does not parse).  Remembered:
    the same statements come back with every keystroke, and a file repeats them."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(statement)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()  # prose that starts with "from" in a docstring, or half-typed
    out: list[Import] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                # ``import a.b`` binds ``a``; ``import a.b as c`` binds ``c`` to ``a.b``.
                if a.asname:
                    out.append(Import(a.name, 0, None, a.asname))
                else:
                    out.append(Import(a.name.split(".")[0], 0, None, a.name.split(".")[0]))
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                if a.name != "*":
                    out.append(Import(node.module or "", node.level, a.name,
                                      a.asname or a.name))
    return tuple(out)


def imports_of(text: str, spans: list[tuple[int, int]] | None = None) -> tuple[Import, ...]:
    """The imports of a document, in order, whether or not the whole document parses
    (``spans``: its ``import_spans``, when known already)."""
    out: list[Import] = []
    for start, end in import_spans(text) if spans is None else spans:
        out += _parse_import(text[start:end].strip())
    return tuple(dict.fromkeys(out))


def _without_imports(text: str, spans: list[tuple[int, int]] | None = None) -> str:
    """``text`` with its import statements left out (so imported names count as used only
    where the code uses them), up to the end of the last statement read when more may follow
    it (``MAX_IMPORT_STATEMENTS``; see :func:`used_names` for the rest)."""
    pieces, last = [], 0
    spans = import_spans(text) if spans is None else spans
    for start, end in spans:
        pieces.append(text[last:start])
        last = end
    if len(spans) < MAX_IMPORT_STATEMENTS:
        pieces.append(text[last:])
    return "".join(pieces)


def _names_in(code: str) -> tuple[frozenset[str], dict[str, frozenset[str]]]:
    names = frozenset(_IDENTIFIER.findall(code))
    attrs: dict[str, set[str]] = {}
    for m in _ATTRIBUTE.finditer(code):
        attrs.setdefault(m.group(1), set()).add(m.group(2))
    return names, {k: frozenset(v) for k, v in attrs.items()}


@functools.lru_cache(maxsize=256)
def _names_in_piece(piece: str) -> tuple[frozenset[str], dict[str, frozenset[str]]]:
    """:func:`_names_in` a run of lines beyond the import statements read, its import lines
    left out in one pass (their continuation lines, if any, count as code: at worst a name
    is thought used).  Remembered: while the user types, all pieces but one are unchanged."""
    return _names_in(_WHOLE_IMPORT_LINE.sub("", piece))


def _pieces(rest: str) -> list[tuple[frozenset[str], dict[str, frozenset[str]]]]:
    """:func:`_names_in_piece` of ``rest`` cut after the first line break past every
    ``_PIECE_CHARS`` characters: an edit changes its own piece (and moves those after it)."""
    out, start = [], 0
    while start < len(rest):
        cut = rest.find("\n", start + _PIECE_CHARS)
        end = len(rest) if cut < 0 else cut + 1
        out.append(_names_in_piece(rest[start:end]))
        start = end
    return out


def _merged(parts: list[tuple[frozenset[str], dict[str, frozenset[str]]]]
            ) -> tuple[frozenset[str], dict[str, frozenset[str]]]:
    if len(parts) == 1:
        return parts[0]
    attrs: dict[str, set[str]] = {}
    for _, found in parts:
        for k, v in found.items():
            attrs.setdefault(k, set()).update(v)
    return (frozenset().union(*(n for n, _ in parts)),
            {k: frozenset(v) for k, v in attrs.items()})


def used_names(text: str, spans: list[tuple[int, int]] | None = None
               ) -> tuple[frozenset[str], dict[str, frozenset[str]]]:
    """The identifiers the document uses outside its imports, and per identifier the
    attributes read from it (``m.name``)."""
    spans = import_spans(text) if spans is None else spans
    head = _names_in(_without_imports(text, spans))
    if len(spans) < MAX_IMPORT_STATEMENTS:
        return head
    # More imports may follow those read (a generated file): the rest in pieces.
    return _merged([head, *_pieces(text[spans[-1][1]:])])


@dataclass(frozen=True)
class DocumentImports:
    """A document's imports (:func:`imports_of`) and the names it uses (:func:`used_names`)."""

    imports: tuple[Import, ...]
    names: frozenset[str]
    attrs: dict[str, frozenset[str]]


@dataclass(frozen=True)
class _Head:
    """A document whose import statements were read up to the bound: its text up to the
    next import line (what later texts must start with to share the statements read), where
    its rest starts, and what the statements and the code between them say."""

    text: str
    rest_from: int
    imports: tuple[Import, ...]
    names: frozenset[str]
    attrs: dict[str, frozenset[str]]


class ImportScanner:
    """:class:`DocumentImports` of texts.  A generated file with more import statements than
    are read is typed in below them: while a text starts as the last such one did, its
    statements are not read again, only the rest (in remembered pieces)."""

    def __init__(self) -> None:
        self._head: _Head | None = None

    def scan(self, text: str) -> DocumentImports:
        head = self._head
        # The same text up to the next import line, and still an import line there (else the
        # last statement read might now reach further).
        if head is not None and text.startswith(head.text) and \
                _IMPORT_LINE.match(text, len(head.text)) is not None:
            names, attrs = _merged([(head.names, head.attrs),
                                    *_pieces(text[head.rest_from:])])
            return DocumentImports(head.imports, names, attrs)
        spans = import_spans(text)
        imports = imports_of(text, spans)
        names, attrs = _names_in(_without_imports(text, spans))
        if len(spans) < MAX_IMPORT_STATEMENTS:
            return DocumentImports(imports, names, attrs)
        rest_from = spans[-1][1]
        following = _IMPORT_LINE.search(text, rest_from)
        if following is not None:  # the statements read end where the next one starts
            self._head = _Head(text[:following.start()], rest_from, imports, names, attrs)
        names, attrs = _merged([(names, attrs), *_pieces(text[rest_from:])])
        return DocumentImports(imports, names, attrs)
