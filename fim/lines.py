"""One definition of a line and a column, shared by the ``seam`` command line and the server.

The command line (``seam complete FILE:LINE:COL``) and the language server once counted lines
differently: the server, as LSP prescribes, broke lines at ``\\n``, ``\\r\\n`` and a lone ``\\r``,
while the command line split at ``\\n`` only, so a classic-Mac file had one line there and
three in the editor, and a UTF-8 byte order mark was a column. Both now use this module, the
definition editors use:

* a line ends at ``\\n``, ``\\r\\n`` or a lone ``\\r`` (nothing else: not form feeds, ``\\x1c`` or
  ``\\u2028``, which ``str.splitlines`` would also break at);
* a byte order mark at the start of a file is not text: editors drop it when they open the
  file (:func:`strip_bom`), so it is neither a column nor part of the prompt;
* the command line's column is 1-based and counts code points (Python characters);
  ``len(line) + 1`` is the end of the line. The server converts LSP's 0-based positions in the
  negotiated encoding (UTF-16 by default) itself, on top of the same line starts.

It lives in ``fim``, the lowest package both can import (``lsp_server`` imports ``fim``, never
the other way round).
"""

from __future__ import annotations

import re

#: A line break, as LSP defines it.
BREAK = re.compile(r"\r\n|\r|\n")
BOM = "\ufeff"
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")
_CR_BREAK = re.compile(r"\r\n?")


class LineColumnError(ValueError):
    """A 1-based line or column that names no place in the text."""


def strip_bom(text: str) -> str:
    """``text`` without a leading byte order mark (as editors open a file)."""
    return text[1:] if text.startswith(BOM) else text


def line_starts(text: str) -> list[int]:
    """The offset at which each line starts; the first is always 0."""
    return [0] + [m.end() for m in BREAK.finditer(text)]


def line_end(text: str, starts: list[int], line: int) -> int:
    """Offset of the break ending 0-based ``line`` (or of the end of the text)."""
    if line + 1 >= len(starts):
        return len(text)
    nxt = starts[line + 1]
    return nxt - 2 if text.startswith("\r\n", nxt - 2) else nxt - 1


def offset_of(text: str, line: int, column: int) -> int:
    """The string offset of 1-based ``line`` and code-point ``column``; raises
    :class:`LineColumnError` (saying the valid range) outside the text."""
    starts = line_starts(text)
    if not 1 <= line <= len(starts):
        raise LineColumnError(f"line {line} is outside the file (1..{len(starts)})")
    start = starts[line - 1]
    width = line_end(text, starts, line - 1) - start
    if not 1 <= column <= width + 1:
        raise LineColumnError(
            f"line {line}: column {column} is outside the line (1..{width + 1})")
    return start + column - 1


def for_model(text: str) -> str:
    """``text`` as a model may see it: lone surrogates replaced by U+FFFD (one code point and
    one UTF-16 unit, so no offset moves) and every line break a ``\\n`` (what models were
    trained on)."""
    if not text.isascii():
        text = _LONE_SURROGATE.sub("\ufffd", text)
    if "\r" in text:
        text = _CR_BREAK.sub("\n", text)
    return text


def line_break_of(text: str) -> str:
    """The text's line break: that of its first line, ``\\n`` when it has none."""
    i = text.find("\n")
    j = text.find("\r")
    if j < 0:
        return "\n"
    if i < 0 or j < i:
        return "\r\n" if text.startswith("\r\n", j) else "\r"
    return "\n"


def for_document(middle: str, line_break: str) -> str:
    """A middle written with ``\\n`` breaks, in the document's line break."""
    return middle if line_break == "\n" else middle.replace("\n", line_break)
