"""Clean top-level boundaries: where a Python file can be cut without changing what parses.

A physical line at column 0 that starts a new top-level statement splits a valid module into
two valid modules, and a prefix/suffix pair around the cursor into a smaller pair with the
same completions:

*Soundness.* Python's tokenizer emits, before a content token at column 0 that is outside
brackets and strings, `NEWLINE` (ending the previous logical line) and enough `DEDENT`s to
close every open block; the module grammar is `(NEWLINE | stmt)*`, so the statements before
and after that point are parsed independently. A middle `M` therefore makes
`L + M + R` valid iff `L_before` is valid, `L_window + M + R_window` is valid and `R_after`
is valid — provided the cut really is outside brackets and strings, and the statement it
starts is not the continuation of a compound statement (`else`, `elif`, `except`,
`finally`) nor a decorated definition whose decorator lies before the cut.

*Finding cuts without parsing.* Whether a line lies inside a string or brackets is only known
after lexing everything before it, which would make the cost grow with the file. Instead, as
error-recovering parsers do, we resynchronise on lines that can only start a statement: a
keyword that begins a statement (`def`, `class`, `import`, `if`, ...), a decorator, or a
plain assignment. A line like that inside a triple-quoted string is possible; the caller
detects it because lexing the window then fails or leaves a string open, and falls back to
the next candidate or to no window (`FimLanguage.mode` says which).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import regex

from lexer.tokenizer import Lexed, Tokenizer

_STATEMENT_START = regex.compile(
    r"(?:(?:async|class|def|for|from|global|if|import|nonlocal|try|while|with|assert|del|"
    r"raise|return|pass|break|continue|type|match)\b|@"
    r"|[A-Za-z_][A-Za-z0-9_.]*[ \t]*(?:=[^=]|:[^=\n]|\+=|-=))"
)
_CONTINUATION = regex.compile(r"(?:else|elif|except|finally|case)\b")


def _is_boundary_line(text: str, start: int) -> bool:
    if start >= len(text) or text[start] in " \t\f\r\n#":
        return False
    if _CONTINUATION.match(text, start):
        return False
    if not _STATEMENT_START.match(text, start):
        return False
    prev = _previous_content_line(text, start)
    if prev is None:
        return True
    line = text[prev:start].rstrip("\r\n")
    if line.endswith("\\"):
        return False
    return not line.lstrip().startswith("@")


def _previous_content_line(text: str, start: int) -> int | None:
    """Start of the nearest earlier line that is neither blank nor a comment."""
    end = start
    while end > 0:
        begin = text.rfind("\n", 0, end - 1) + 1
        line = text[begin:end].strip()
        if line and not line.startswith("#"):
            return begin
        end = begin
    return None


def left_boundaries(text: str, limit: int = 8) -> list[int]:
    """Up to `limit` clean boundaries before the end of `text`, nearest first (0 last)."""
    out: list[int] = []
    end = len(text)
    while end > 0 and len(out) < limit:
        begin = text.rfind("\n", 0, end - 1) + 1 if end > 1 else 0
        if begin == 0:
            break
        if _is_boundary_line(text, begin):
            out.append(begin)
        end = begin
    out.append(0)
    return out


def comment_resync_starts(text: str) -> list[int]:
    """Where to resynchronise when no clean boundary gives a valid window: the starts of the
    column-0 comment lines in the run of comment and blank lines that holds the end of
    `text` (the cursor), nearest first.

    After a broken statement (``def broken(:``) every clean boundary before it includes the
    breakage; a comment at column 0 after it is where an error-recovering reader picks up
    again.  Only a last resort: the window found there is exact about its own text, and the
    language says (mode ``window``) that the text before it does not parse.
    """
    out: list[int] = []
    end = len(text)
    begin = text.rfind("\n", 0, end) + 1  # the cursor's own line
    while True:
        line = text[begin:end]
        if line.startswith("#"):
            out.append(begin)
        elif line.strip():
            if begin != text.rfind("\n", 0, len(text)) + 1:  # code above the run: stop
                break
            if out:
                break
        if begin == 0:
            break
        end = begin - 1
        begin = text.rfind("\n", 0, end) + 1
    return out


_DEFINITION = regex.compile(r"(?:@|def\b|class\b|async\b)")


def right_boundaries(text: str, limit: int = 8, ambiguous: list[int] | None = None
                    ) -> list[int]:
    """Up to `limit` clean boundaries after the first line of `text`, nearest first.

    A decorator or definition line is not a clean boundary until a column-0 line before it
    has been seen: the statement before it may be a decorator list begun in the middle. Such
    lines are appended to `ambiguous` instead (a last resort when the larger windows fail).
    """
    out: list[int] = []
    pos = text.find("\n")
    seen_top = False
    while pos >= 0 and len(out) < limit:
        start = pos + 1
        if _is_boundary_line(text, start):
            if seen_top or not _DEFINITION.match(text, start):
                out.append(start)
            elif ambiguous is not None:
                ambiguous.append(start)
        if start < len(text) and text[start] not in " \t\f\r\n#":
            seen_top = True
        pos = text.find("\n", start)
    out.append(len(text))
    return out


# -- windows inside a large top-level block ------------------------------------------------


class InnerCut(NamedTuple):
    """A window cut again inside a large top-level block (see `inner_cut`)."""

    offset: int  # where the kept text begins in the window
    header: str  # the synthetic one-line header put before it
    column: int  # the indentation of the block's body


class _Words(NamedTuple):
    """Terminal names `inner_cut` reasons about, read from the tokenizer's configuration."""

    layout: frozenset[str]
    indent: str
    dedent: str
    clauses: frozenset[str]  # else, elif, except, finally, case
    at: str
    if_like: frozenset[str]  # headers that accept elif/else: if, elif
    loops: frozenset[str]  # headers that accept else: for, while
    match: str


@functools.lru_cache(maxsize=4)
def _words(tokenizer: Tokenizer) -> _Words:
    lit = tokenizer.table.literals
    lt = tokenizer.layout_terminals
    return _Words(
        layout=frozenset(lt), indent=lt.indent, dedent=lt.dedent,
        clauses=frozenset(lit[w] for w in ("else", "elif", "except", "finally", "case")),
        at=lit["@"], if_like=frozenset((lit["if"], lit["elif"])),
        loops=frozenset((lit["for"], lit["while"])), match=lit["match"],
    )


def inner_cut(text: str, lexed: Lexed, tokenizer: Tokenizer, cursor_col: int | None = None
              ) -> InnerCut | None:
    """Cut a top-level window again at the last statement of the block's own body.

    `lexed` is the window `text` (which begins at a clean top-level boundary) lexed by
    `tokenizer`; `cursor_col` is the indentation of the cursor's line when the cursor is still
    in its leading white space. Returns the cut, or None when the cursor is not inside the
    block's body.

    The header is one line that opens a block at column 0, so that the kept text (statements
    at the body's indentation) lexes and parses as it did under the real header. The real
    header is replaced because the clauses that would complete it (the `except` of a `try`)
    lie beyond the right window. The synthetic header is chosen by the kind of the real one,
    so that the clauses a middle may add at column 0 are as far as possible the same:
    `if 1:` for if/elif (accepts elif/else), `while 1:` for for/while (accepts else), and
    `class _:` (accepts none) otherwise. `match` blocks are not cut.

    Soundness: the kept statements, the middle and the right window lie inside the body at
    nesting level 1; the cut removes complete statements of that body and the header, which
    the parser needs only to open the block. The approximation is in the clauses a middle
    adds at column 0 (see above); the decoder's final check with CPython's parser covers it.
    """
    w = _words(tokenizer)
    levels = 1
    at_line_start = True
    last_top: str | None = None
    prev_first: str | None = None
    best: int | None = None
    best_header: str | None = None
    best_col = 0
    for tok, pos in zip(lexed.terminals, lexed.starts, strict=True):
        if tok in w.layout:
            if tok == w.indent:
                levels += 1
            elif tok == w.dedent:
                levels -= 1
            else:
                at_line_start = True
            continue
        if not at_line_start:
            continue
        at_line_start = False
        if levels == 1:
            last_top = tok
        elif levels == 2 and tok not in w.clauses and prev_first != w.at \
                and last_top is not None:
            line_start = text.rfind("\n", 0, pos) + 1
            ws = text[line_start:pos]
            if ws and ws.strip(" ") == "":
                best, best_header, best_col = line_start, _header_for(last_top, w), len(ws)
        prev_first = tok
    if best is None or best_header is None or levels < 2:
        return None
    if cursor_col is not None and cursor_col < best_col:
        return None  # the cursor's line has left the body
    return InnerCut(best, best_header, best_col)


def _header_for(first: str, w: _Words) -> str | None:
    if first in w.if_like:
        return "if 1:\n"
    if first in w.loops:
        return "while 1:\n"
    if first == w.match:
        return None
    return "class _:\n"


def right_inner_end(text: str, column: int, siblings: bool) -> int:
    """End of the right window for a left window cut at a body statement at `column`.

    The first later line indented less than `column` (R leaves the body), or with
    `siblings`, also the first that starts a statement at `column` (not a clause, not
    decorated, not continued); the whole text if none.

    Cutting at a sibling statement is sound only if the middle stays inside the body: a
    middle that dedents out of it would make R's remaining lines belong to the middle's new
    statement, and the sibling cut away would then follow them. The caller passes
    `siblings=True` only for scopes that forbid such a dedent (line, statement, block).
    """
    pos = text.find("\n")
    while pos >= 0:
        start = pos + 1
        line_end = text.find("\n", start)
        line = text[start: line_end if line_end >= 0 else len(text)]
        body = line.lstrip(" \t\f")
        if body and not body.startswith("#"):
            indent = len(line) - len(body)
            if "\t" in line[:indent] or "\f" in line[:indent]:
                return len(text)
            if indent < column:
                return start
            if siblings and indent == column and _is_boundary_line(text, start + indent):
                return start
        pos = line_end
    return len(text)
