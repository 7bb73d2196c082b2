"""The places people ask for a suggestion, cut from real files: five kinds of cursor, in code
and in prose, each with the author's own text as the truth (issue 18).

* ``inside_line``: a hole inside a line with text after it on the same line: an argument or
  element (``foo(|, b)``, ``x = [|]``) in code; the rest of a string's text before its closing
  quote in prose (``raise ValueError("Event cannot |be None")``).
* ``rest_of_line``: the line cut at a column, nothing after the cursor on the line: a one-line
  statement in code; a comment or a docstring line in prose.
* ``empty_line``: a line's text removed, its indentation kept (the user pressed Enter): a
  one-line statement in code; a comment line or a docstring's inner line in prose.  The
  truth is the line.
* ``after_header``: the first line of a block right after its ``def``/``if``/``for``/...
  header removed: a one-line statement in code, a one-line docstring in prose.  The truth is
  the line.
* ``block_start``: a whole small compound statement (``if``, ``for``, ``while``, ``with``,
  ``try``; 2 to 6 lines) removed where it starts, its first line's indentation kept.  The
  truth is the block.  Code only.

Code cursors sit inside function bodies; prose cursors anywhere in the module.  A cursor is
a :class:`Spot` in the original file: the hole is ``text[start:end]``, removed.
"""

from __future__ import annotations

import ast
import enum
import io
import random
import tokenize
from dataclasses import dataclass


class Kind(enum.StrEnum):
    INSIDE_LINE = "inside_line"
    REST_OF_LINE = "rest_of_line"
    EMPTY_LINE = "empty_line"
    AFTER_HEADER = "after_header"
    BLOCK_START = "block_start"


class Place(enum.StrEnum):
    """What the cursor sits before on its line, the finer kinds of issue 29: a place's
    right context decides how a middle must end."""

    INSIDE_WORD = "inside_word"  # the text after the cursor continues a word the hole ends in
    BEFORE_PUNCTUATION = "before_punctuation"
    BEFORE_SPACE = "before_space"
    BEFORE_NOTHING = "before_nothing"  # nothing but the line end after the cursor
    EMPTY_LINE = "empty_line"  # the line held only its indentation


#: The places whose line has text before the cursor (issue 29's "mid-line").
MID_LINE_PLACES = (Place.INSIDE_WORD, Place.BEFORE_PUNCTUATION, Place.BEFORE_SPACE,
                   Place.BEFORE_NOTHING)


def _word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def place_of(line_before: str, truth: str, line_after: str) -> Place:
    """The place of a cursor whose line reads ``line_before`` + hole + ``line_after`` and
    whose hole held ``truth``.  *Inside a word*: the line after the hole begins with a word
    character and the text just before it in the author's line (the truth's last character,
    or the line's before the cursor when the hole is empty) is one too, so the middle must
    stop inside a word."""
    if not line_before.strip() and not line_after.strip():
        return Place.EMPTY_LINE
    if not line_after.strip():
        return Place.BEFORE_NOTHING
    written = line_before + truth
    if _word(line_after[0]) and written and _word(written[-1]):
        return Place.INSIDE_WORD
    if line_after[0].isspace():
        return Place.BEFORE_SPACE
    return Place.BEFORE_PUNCTUATION


class Text(enum.StrEnum):
    CODE = "code"
    PROSE = "prose"


#: Kinds whose truth is one line and whose suggestion is the server's early answer (the first
#: line end where the file parses), judged on its first line.
FIRST_LINE_KINDS = frozenset({Kind.EMPTY_LINE, Kind.AFTER_HEADER})
#: Kinds the server answers with its mid-line policy (the middle ends with its line).
MID_LINE_KINDS = frozenset({Kind.INSIDE_LINE, Kind.REST_OF_LINE})
CELLS = tuple((k, t) for k in Kind for t in Text if not (k == Kind.BLOCK_START
                                                         and t == Text.PROSE))

_SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return, ast.Raise,
           ast.Assert, ast.Delete, ast.Import, ast.ImportFrom)
_HEADERS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.If, ast.For, ast.AsyncFor, ast.While,
            ast.With, ast.AsyncWith, ast.Try)
_BLOCKS = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class Spot:
    """A cursor in a file: the hole ``[start, end)`` of the original text, what kind of place
    it is, and its 0-based line."""

    kind: Kind
    text: Text
    start: int
    end: int
    line: int

    def hole(self, source: str) -> str:
        return source[:self.start] + source[self.end:]

    def truth(self, source: str) -> str:
        return source[self.start:self.end]


class _Lines:
    """Offsets of a text's lines, and UTF-8 columns (``ast``'s) turned into characters."""

    def __init__(self, text: str) -> None:
        self.lines = text.split("\n")
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line) + 1)

    def at(self, lineno: int, byte_col: int) -> int:
        line = self.lines[lineno - 1]
        return self.starts[lineno - 1] + len(line.encode("utf-8")[:byte_col].decode(
            "utf-8", "ignore"))

    def indent(self, n: int) -> int:
        line = self.lines[n]
        return len(line) - len(line.lstrip())

    def whole_line(self, n: int) -> tuple[int, int]:
        """The line's text after its indentation, as ``[start, end)``."""
        return self.starts[n] + self.indent(n), self.starts[n] + len(self.lines[n])


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, *_FUNCTIONS)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and \
                    isinstance(first.value.value, str):
                out.add(id(first.value))
    return out


def _one_line_statement(node: ast.stmt, ln: _Lines) -> bool:
    """A simple statement alone on its line, long enough to be worth completing."""
    if not isinstance(node, _SIMPLE) or node.lineno != node.end_lineno:
        return False
    line = ln.lines[node.lineno - 1]
    content = line.strip()
    return len(content) >= 8 and ";" not in line and not content.startswith("#") and \
        ln.at(node.lineno, node.col_offset) - ln.starts[node.lineno - 1] == ln.indent(
            node.lineno - 1)


def _rest_cut(ln: _Lines, n: int, lo: int, rng: random.Random) -> int | None:
    """A column on line ``n`` at least two characters after ``lo``, two before the end."""
    line = ln.lines[n]
    end = len(line.rstrip())
    if end - lo < 5:
        return None
    return ln.starts[n] + rng.randrange(lo + 2, end - 2)


def _code_spots(tree: ast.AST, ln: _Lines, rng: random.Random, docs: set[int]) -> list[Spot]:
    out = []
    for fn in [n for n in ast.walk(tree) if isinstance(n, _FUNCTIONS)]:
        for node in ast.walk(fn):
            if isinstance(node, ast.stmt) and node is not fn and _one_line_statement(node, ln):
                n = node.lineno - 1
                if isinstance(node, ast.Expr) and id(node.value) in docs:
                    continue
                cut = _rest_cut(ln, n, ln.indent(n), rng)
                if cut is not None:
                    out.append(Spot(Kind.REST_OF_LINE, Text.CODE, cut, ln.starts[n]
                                    + len(ln.lines[n]), n))
                out.append(Spot(Kind.EMPTY_LINE, Text.CODE, *ln.whole_line(n), n))
            out.extend(_inside_spots(node, ln))
            out.extend(_header_spots(node, ln, docs))
            if isinstance(node, _BLOCKS) and 2 <= node.end_lineno - node.lineno + 1 <= 6:
                start = ln.at(node.lineno, node.col_offset)
                end = ln.starts[node.end_lineno - 1] + len(ln.lines[node.end_lineno - 1])
                if end - start <= 300 and not ln.lines[node.end_lineno - 1].rstrip().endswith(
                        "\\"):
                    out.append(Spot(Kind.BLOCK_START, Text.CODE, start, end, node.lineno - 1))
    return out


def _inside_spots(node: ast.AST, ln: _Lines) -> list[Spot]:
    """Arguments and elements with text after them on their line."""
    parts: list[ast.expr] = []
    if isinstance(node, ast.Call):
        parts = [*node.args, *(k.value for k in node.keywords)]
    elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        parts = list(node.elts)
    elif isinstance(node, ast.Subscript):
        parts = [node.slice]
    out = []
    for part in parts:
        if part.lineno != part.end_lineno or isinstance(part, ast.Starred):
            continue
        start, end = ln.at(part.lineno, part.col_offset), ln.at(part.lineno,
                                                                 part.end_col_offset)
        n = part.lineno - 1
        after = ln.lines[n][end - ln.starts[n]:]
        if 1 <= end - start <= 40 and after.strip() and not after.lstrip().startswith("#"):
            out.append(Spot(Kind.INSIDE_LINE, Text.CODE, start, end, n))
    return out


def _header_spots(node: ast.AST, ln: _Lines, docs: set[int]) -> list[Spot]:
    """The first line after a one-line header, when it is a one-line statement."""
    if not isinstance(node, (*_HEADERS, ast.ClassDef)) or not node.body:
        return []
    first = node.body[0]
    header_end = first.lineno - 1  # the header is the line before the body's first line
    if ln.lines[header_end - 1].rstrip()[-1:] != ":" or node.lineno != header_end:
        return []
    n = first.lineno - 1
    doc = isinstance(first, ast.Expr) and id(getattr(first, "value", None)) in docs
    if doc and first.lineno == first.end_lineno:
        return [Spot(Kind.AFTER_HEADER, Text.PROSE, *ln.whole_line(n), n)]
    if not doc and not isinstance(node, ast.ClassDef) and _one_line_statement(first, ln):
        return [Spot(Kind.AFTER_HEADER, Text.CODE, *ln.whole_line(n), n)]
    return []


def _string_spots(tree: ast.AST, ln: _Lines, rng: random.Random, docs: set[int]
                  ) -> list[Spot]:
    """Prose in strings: the rest of a one-line string's text before its closing quote;
    docstring inner lines cut (rest of line) or removed (empty line)."""
    out = []
    inside_fstring = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr)
                      for v in n.values}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or \
                id(node) in inside_fstring:
            continue
        if id(node) in docs:
            for n in range(node.lineno, node.end_lineno - 1):  # inner lines only
                line = ln.lines[n]
                if len(line.strip()) < 12 or '"""' in line or "'''" in line:
                    continue
                cut = _rest_cut(ln, n, ln.indent(n), rng)
                if cut is not None:
                    out.append(Spot(Kind.REST_OF_LINE, Text.PROSE, cut,
                                    ln.starts[n] + len(line), n))
                out.append(Spot(Kind.EMPTY_LINE, Text.PROSE, *ln.whole_line(n), n))
            continue
        if node.lineno != node.end_lineno:
            continue
        start, end = ln.at(node.lineno, node.col_offset), ln.at(node.lineno,
                                                                node.end_col_offset)
        n = node.lineno - 1
        literal = ln.lines[n][start - ln.starts[n]:end - ln.starts[n]]
        quote = literal[-1:]
        if quote not in ("'", '"') or literal.startswith(("r", "b", "f", "R", "B", "F")) or \
                literal[:1] != quote or literal.endswith(quote * 3):
            continue
        body = literal[1:-1]
        after = ln.lines[n][end - ln.starts[n]:]
        if len(body) < 10 or " " not in body or "\\" in body or not after.strip():
            continue
        cut = start + 1 + rng.randrange(2, len(body) - 3)
        out.append(Spot(Kind.INSIDE_LINE, Text.PROSE, cut, end - 1, n))
    return out


def _comment_spots(text: str, ln: _Lines, rng: random.Random) -> list[Spot]:
    out = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return out
    for tok in tokens:
        if tok.type != tokenize.COMMENT or len(tok.string) < 15 or tok.string.startswith(
                "#!") or "type:" in tok.string or "noqa" in tok.string:
            continue
        n = tok.start[0] - 1
        col = tok.start[1]
        cut = _rest_cut(ln, n, col + 2, rng)
        if cut is not None:
            out.append(Spot(Kind.REST_OF_LINE, Text.PROSE, cut, ln.starts[n] + len(ln.lines[n]),
                            n))
        if not ln.lines[n][:col].strip():  # a comment alone on its line
            out.append(Spot(Kind.EMPTY_LINE, Text.PROSE, *ln.whole_line(n), n))
    return out


def spots(text: str, rng: random.Random) -> list[Spot]:
    """Every cursor of every kind in ``text`` (a module that parses), in file order; random
    columns come from ``rng``."""
    tree = ast.parse(text)
    ln = _Lines(text)
    docs = _docstrings(tree)
    found = (_code_spots(tree, ln, rng, docs) + _string_spots(tree, ln, rng, docs)
             + _comment_spots(text, ln, rng))
    # Every field in the key: spots that tie on a part of it would keep the order of the
    # set, which follows string hashes and so differs between processes (PYTHONHASHSEED),
    # and the seeded shuffle in ``pick`` would then draw different cursors.
    return sorted(set(found), key=lambda s: (s.start, s.end, s.kind, s.text, s.line))


def pick(text: str, seed: str, wanted: dict[tuple[Kind, Text], int], per_file: int = 1
         ) -> list[Spot]:
    """At most ``per_file`` cursors of each still-wanted cell in this file, seeded, no two on
    the same line; ``wanted`` is lowered by what was picked."""
    rng = random.Random(seed)
    by_cell: dict[tuple[Kind, Text], list[Spot]] = {}
    for s in spots(text, rng):
        by_cell.setdefault((s.kind, s.text), []).append(s)
    out: list[Spot] = []
    used: set[int] = set()
    for cell in CELLS:
        options = [s for s in by_cell.get(cell, []) if s.line not in used]
        rng.shuffle(options)
        for s in options[:min(per_file, wanted.get(cell, 0))]:
            out.append(s)
            used.add(s.line)
            wanted[cell] -= 1
    return sorted(out, key=lambda s: s.start)
