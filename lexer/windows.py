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

import regex

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


def right_boundaries(text: str, limit: int = 8) -> list[int]:
    """Up to `limit` clean boundaries after the first line of `text`, nearest first."""
    out: list[int] = []
    pos = text.find("\n")
    while pos >= 0 and len(out) < limit:
        start = pos + 1
        if _is_boundary_line(text, start):
            out.append(start)
        pos = text.find("\n", start)
    out.append(len(text))
    return out
