"""An experiment of issue 29, measured and not adopted: a Python document's outline above the
first window at a new place, the lines that open the scopes around the prompt's start and bind
names in them.

The first request at a new place reads about 128 tokens above the cursor on a two-core machine
(``lsp_server.request_plan.first_window``), and the names an empty line needs are often bound
further up: the local a long literal was assigned to, the function defined at the top of the
enclosing one, the attributes ``__init__`` set.  Walking up from the prompt's start, the
outline keeps each logical line that opens an enclosing scope (a ``def``, a ``class``, an ``if``
the start lies under, with the ``if`` of an ``else``) and, at each scope's level, the lines that
bind names (definitions, imports, assignments, ``for`` and ``with`` targets; one line per name,
the nearest), nearest first within ``OUTLINE_CHARS``.  Each is its first physical line, as
written; Python's own tokenizer finds the logical lines, so a string's lines are never taken
for code.  It depends only on the text above the start, so a server could keep it while the
user types below it.

``benchmarks/prompt_windows.py`` runs it as a ``+o`` window (the outline as a file of the
document's own path before the prompt).  On fixed prompts it moved 14 of 96 empty lines closer
and 7 further, level on average (docs/usefulness.md, "The document's outline above the first
window"); in the server, the paired run at its commit was lower on three of four cells and
slower, so the server does not send it.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Callable
from dataclasses import dataclass

from fim.templates import ContextFile

#: Characters of outline a prompt gets (about 70 tokens of code).
OUTLINE_CHARS = 300
#: Characters above the start scanned: a scope further up than this is not found (the scan
#: may start inside a string; what the tokenizer read before it failed is kept).
SCAN_CHARS = 200_000

#: A logical line that binds a name in its scope.
_BINDS = re.compile(
    r"(?:async\s+)?(?:def|class|for|with)\b|import\b|from\b|global\b|nonlocal\b"
    r"|[\w.\[\]'\", ()*]+(?:\s*:[^=]+)?\s*(?:=|\+=|-=|\|=)(?!=)")
#: What a binding line binds, near enough: its text before ``=``, ``(`` or ``:``.
_NAME = re.compile(r"[^=(:]*")
#: The indentation of the first line with text.
_INDENT = re.compile(r"[ \t]*(?=\S)")
#: Clauses of a compound statement whose opener belongs with them.
_CLAUSES = re.compile(r"(?:else|elif|except|finally)\b")
_OPENERS = re.compile(r"(?:async\s+)?(?:if|try|for|while|with)\b")
#: Most prompt tokens an outline, its header and the document's header may take.
OUTLINE_ROOM = 128
_SKIPPED = {tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENCODING}


def logical_lines(text: str) -> list[tuple[int, int]]:
    """``(row, column)`` of each logical line's first token in ``text`` (rows from 0), as far
    as the tokenizer reads it."""
    out: list[tuple[int, int]] = []
    open_line = False
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in _SKIPPED:
                continue
            if tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
                open_line = False
            elif not open_line:
                open_line = True
                out.append((tok.start[0] - 1, tok.start[1]))
    except (tokenize.TokenError, SyntaxError):
        pass  # the text ends inside a string or a bracket, or dedents oddly: keep what was read
    return out


def scope_outline(text: str, start: int, limit: int = OUTLINE_CHARS) -> str:
    """The outline of ``text`` above ``start`` (a line start) for the scopes around the line
    there, in file order, ``""`` when there is nothing above it."""
    if start <= 0:
        return ""
    begin = max(0, start - SCAN_CHARS)
    if begin:
        begin = text.find("\n", begin, start) + 1 or start
    above = text[begin:start]
    lines = above.split("\n")
    following = _INDENT.search(text, start)
    level = len(following.group(0).expandtabs()) if following else 0
    headers: list[int] = []
    binders: list[int] = []
    opener_at: int | None = None
    seen: set[tuple[int, str]] = set()
    for row, _ in reversed(logical_lines(above)):
        line = lines[row]
        stripped = line.lstrip()
        col = len(line[:len(line) - len(stripped)].expandtabs())
        if col < level or (col == opener_at and _OPENERS.match(stripped)):
            headers.append(row)
            level = col
            opener_at = col if _CLAUSES.match(stripped) else None
        elif col == level and _BINDS.match(stripped):
            # One line per name at a level, the nearest: ``total = total + x`` ten times
            # over says no more than once.
            name = (level, _NAME.match(stripped).group(0).strip())
            if name not in seen:
                seen.add(name)
                binders.append(row)
    shown = {row: lines[row].rstrip()[:limit] for row in headers + binders}
    kept = set(headers)  # a header longer than the limit is cut to it
    used = sum(len(shown[r]) + 1 for r in kept)
    for row in binders:  # nearest first
        if used + len(shown[row]) + 1 <= limit:
            kept.add(row)
            used += len(shown[row]) + 1
    return "\n".join(shown[r] for r in sorted(kept))


@dataclass(frozen=True)
class Outline:
    """A document's outline as the prompt carries it: a file of the document's own path just
    before the document (``fim.templates.project_context``), and the context budget it
    needs alone (with its header and the document's)."""

    file: ContextFile
    budget: int


def outline_for(left: str, start: int, path: str,
                count: Callable[[str], int]) -> Outline | None:
    """The outline of the text ``left`` of a cursor above a prompt starting at ``start``, or
    ``None`` when it has none; ``path`` names the document as the prompt does (no repository
    line), and ``count`` counts the model's tokens."""
    text = scope_outline(left, start)
    if not text:
        return None
    budget = count(text + "\n") + 2 * count(path + "\n") + 4
    return Outline(ContextFile(path, text + "\n"), min(budget, OUTLINE_ROOM))
