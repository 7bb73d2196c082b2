"""Open text documents: incremental sync and LSP position <-> string offset conversion.

pygls keeps its own workspace, but it re-splits the whole text with ``str.splitlines`` on every
position lookup, which both costs O(file) per call and treats form feeds, ``\\x1c`` or
``\\u2028`` as line breaks, whereas LSP counts only ``\\n``, ``\\r\\n`` and ``\\r``. This module
keeps each document as one string plus the sorted list of line-start offsets, and patches that
list around each edit instead of rebuilding it.

Positions arrive in the negotiated encoding (UTF-16 by default, or UTF-8 / UTF-32). A position
whose line lies beyond the document or whose column splits a character raises
:class:`PositionError`; a column past the end of its line is clamped to the line's end, as the
LSP specification prescribes. An *edit* whose column splits a character (inside a UTF-16
surrogate pair, say) is not refused, which would leave the server without the document until
the editor reopened it: its column moves back to the start of that character, as VS Code
validates such a position, and a warning says so once per document. Lines are ``fim.lines``'s
(the command line counts them the same way).
"""

from __future__ import annotations

import bisect
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass

from lsprotocol import types

from fim.languages import Language, by_lsp_id, by_path
from fim.lines import BREAK as _BREAK
from fim.lines import line_end, line_starts

log = logging.getLogger(__name__)


class PositionError(ValueError):
    """A client position that names no place in the document."""


@dataclass(frozen=True)
class Cursor:
    """A resolved position: string offset, its line, and where that line starts and ends."""

    offset: int
    line: int
    line_start: int
    line_end: int  # offset of the line's break (or of the end of the text)


def _units(ch: str, encoding: str) -> int:
    if encoding == types.PositionEncodingKind.Utf32:
        return 1
    cp = ord(ch)
    if encoding == types.PositionEncodingKind.Utf8:
        return 1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4
    return 2 if cp > 0xFFFF else 1


#: The ``languages`` setting's entry that serves every file type.
ALL_LANGUAGES = "*"


def served(languages: Sequence[str], language_id: str) -> bool:
    """Whether the ``languages`` setting serves an editor's ``languageId``: ``"*"`` serves
    every file; else the id itself or its language's (``fim.languages``: ``"shell"`` serves
    ``"shellscript"``) must be listed."""
    return (ALL_LANGUAGES in languages or language_id in languages
            or by_lsp_id(language_id).id in languages)


class Document:
    """One open document: its text, version, language and line index."""

    def __init__(self, uri: str, text: str, version: int | None, language_id: str,
                 encoding: str = types.PositionEncodingKind.Utf16) -> None:
        self.uri = uri
        self.version = version
        self.language_id = language_id
        self.encoding = encoding
        self._text = text
        self._starts = line_starts(text)
        self._warned_split = False

    @property
    def text(self) -> str:
        return self._text

    @property
    def language(self) -> Language:
        """The file's language (``fim.languages``): by its ``languageId``, else (a client
        that sent none) by its name."""
        return by_lsp_id(self.language_id) if self.language_id else by_path(self.uri)

    @property
    def line_count(self) -> int:
        return len(self._starts)

    def _line_bounds(self, line: int) -> tuple[int, int]:
        return self._starts[line], line_end(self._text, self._starts, line)

    def cursor(self, position: types.Position, *, clamp_line: bool = False,
               snap: bool = False) -> Cursor:
        """Resolve a client position; raise :class:`PositionError` when it names no place.
        ``clamp_line`` moves a line past the end to the end of the text; ``snap`` moves a
        column inside a character to that character's start instead of refusing it."""
        line, col = position.line, position.character
        if line < 0 or col < 0:
            raise PositionError(f"negative position {line}:{col}")
        if line >= len(self._starts):
            if not clamp_line:
                raise PositionError(
                    f"line {line} is beyond the end of the document ({len(self._starts)} lines)")
            line = len(self._starts) - 1
            col = 1 << 62
        start, end = self._line_bounds(line)
        return Cursor(start + self._column(self._text[start:end], line, col, snap), line,
                      start, end)

    def _column(self, segment: str, line: int, col: int, snap: bool) -> int:
        """Where column ``col`` (in the document's encoding) falls in the line ``segment``
        (its text without the break): clamped to its end; a column inside a character is
        refused, or with ``snap`` moved to the character's start."""
        if self.encoding == types.PositionEncodingKind.Utf32 or segment.isascii():
            return min(col, len(segment))
        units = 0
        for i, ch in enumerate(segment):
            if units == col:
                return i
            units += _units(ch, self.encoding)
            if units > col:
                if snap:
                    self._warn_split(line, col)
                    return i
                raise PositionError(
                    f"character {col} on line {line} falls inside a character "
                    f"({self.encoding} code units)")
        return len(segment)

    def _warn_split(self, line: int, col: int) -> None:
        if self._warned_split:
            return
        self._warned_split = True
        log.warning("an edit to %s names character %d on line %d, inside a character (%s "
                    "code units); it was applied at that character's start, as editors do. "
                    "If the text looks wrong, close and reopen the file.",
                    self.uri, col, line, getattr(self.encoding, "value", self.encoding))

    def offset_at(self, position: types.Position) -> int:
        return self.cursor(position).offset

    def position_at(self, offset: int) -> types.Position:
        """The client position of a string offset (clamped into the text)."""
        offset = max(0, min(offset, len(self._text)))
        line = bisect.bisect_right(self._starts, offset) - 1
        start = self._starts[line]
        segment = self._text[start:offset]
        if self.encoding == types.PositionEncodingKind.Utf32 or segment.isascii():
            return types.Position(line=line, character=len(segment))
        return types.Position(line=line,
                              character=sum(_units(c, self.encoding) for c in segment))

    def apply_change(self, change: types.TextDocumentContentChangeEvent) -> None:
        """Apply one content change (a ranged edit, or a whole new text)."""
        if isinstance(change, types.TextDocumentContentChangePartial):
            a = self.cursor(change.range.start, clamp_line=True, snap=True).offset
            b = self.cursor(change.range.end, clamp_line=True, snap=True).offset
            if b < a:
                a, b = b, a
            self._splice(a, b, change.text)
        else:
            self._text = change.text
            self._starts = line_starts(change.text)

    def apply_changes(self, changes: Sequence[types.TextDocumentContentChangeEvent]) -> None:
        """Apply one ``didChange``'s changes, in order, in time linear in the edit: a single
        change is spliced in place; several ranged changes ("Replace All" sends one per
        match) are applied to the document's lines (:class:`_Lines`), and the text and its
        line starts rebuilt once at the end, not once per change."""
        if len(changes) < 2:
            for change in changes:
                self.apply_change(change)
            return
        lines: _Lines | None = None
        for change in changes:
            if not isinstance(change, types.TextDocumentContentChangePartial):
                lines = None  # a whole new text: what came before it does not matter
                self.apply_change(change)
                continue
            if lines is None:
                lines = _Lines(self)
            lines.replace(change.range, change.text)
        if lines is not None:
            self._text = "".join(lines.lines)
            self._starts = line_starts(self._text)

    def _splice(self, a: int, b: int, new: str) -> None:
        # Line starts strictly before the edited line's predecessor cannot change, nor can starts
        # at or after b + 1 (old offsets) except for a shift: whether offset s starts a line
        # depends only on the characters at s - 1 and s. Everything between is rescanned.
        old = self._text
        text = old[:a] + new + old[b:]
        delta = len(new) - (b - a)
        starts = self._starts
        i = bisect.bisect_right(starts, a) - 1
        i0 = max(0, i - 1)
        p0 = starts[i0]
        j = bisect.bisect_left(starts, b + 1)
        if j < len(starts):
            q = starts[j] + delta
            middle = [m.end() for m in _BREAK.finditer(text, p0, q) if m.end() < q]
        else:
            q = len(text)
            middle = [m.end() for m in _BREAK.finditer(text, p0, q)]
        self._text = text
        self._starts = starts[: i0 + 1] + middle + [s + delta for s in starts[j:]]


class _Lines:
    """A document as a list of its lines, each with its break (the last one without), for a
    batch of ranged edits: an edit costs its own length and that of the lines it touches (and
    a pointer shift when it adds or removes lines), never the whole text."""

    def __init__(self, doc: Document) -> None:
        self.doc = doc
        self.lines = _KEEP_BREAKS.split(doc._text)

    def _place(self, position: types.Position) -> tuple[int, int]:
        """(line, index in that line) of a client position, as ``Document.cursor`` resolves
        an edit's (a line past the end means the end of the text)."""
        line, col = position.line, position.character
        if line < 0 or col < 0:
            raise PositionError(f"negative position {line}:{col}")
        if line >= len(self.lines):
            line, col = len(self.lines) - 1, 1 << 62
        text = self.lines[line]
        content = text[:len(text) - len(_break_of(text))]
        return line, self.doc._column(content, line, col, snap=True)

    def replace(self, rng: types.Range, new: str) -> None:
        a, b = self._place(rng.start), self._place(rng.end)
        if b < a:
            a, b = b, a
        first, last = a[0], b[0]
        lines = self.lines
        if first == last and "\n" not in new and "\r" not in new:
            line = lines[first]  # within one line, no break made or lost: the common case
            lines[first] = line[:a[1]] + new + line[b[1]:]
            return
        piece = lines[first][:a[1]] + new + lines[last][b[1]:]
        # A break may join with its neighbour ("\r" then "\n" is one break): re-split the
        # lines on either side too when that can happen.
        if first > 0 and lines[first - 1].endswith("\r"):
            first -= 1
            piece = lines[first] + piece
        if last + 1 < len(lines) and piece.endswith("\r"):
            last += 1
            piece += lines[last]
        ends = [m.end() for m in _BREAK.finditer(piece)]
        out = [piece[s:e] for s, e in zip([0, *ends], ends, strict=False)]
        if last == len(lines) - 1 or not ends or ends[-1] != len(piece):
            out.append(piece[ends[-1] if ends else 0:])
        lines[first:last + 1] = out


#: Splits a text after each LSP line break, keeping it (the last piece has none, and is "" when
#: the text ends with a break), as ``fim.lines.line_starts`` counts lines.
_KEEP_BREAKS = re.compile(r"(?<=\n)|(?<=\r)(?!\n)")


def _break_of(line: str) -> str:
    """The break that ends ``line`` ("" for the last line)."""
    if line.endswith("\r\n"):
        return "\r\n"
    return line[-1:] if line.endswith(("\n", "\r")) else ""


class DocumentStore:
    """The open documents, by URI."""

    def __init__(self) -> None:
        self._docs: dict[str, Document] = {}
        self.encoding: str = types.PositionEncodingKind.Utf16

    def open(self, item: types.TextDocumentItem) -> Document:
        doc = Document(item.uri, item.text, item.version, item.language_id, self.encoding)
        self._docs[item.uri] = doc
        return doc

    def change(self, params: types.DidChangeTextDocumentParams) -> Document | None:
        doc = self._docs.get(params.text_document.uri)
        if doc is None:
            return None
        doc.apply_changes(params.content_changes)
        doc.version = params.text_document.version
        return doc

    def close(self, uri: str) -> None:
        self._docs.pop(uri, None)

    def get(self, uri: str) -> Document | None:
        return self._docs.get(uri)

    def all(self) -> list[Document]:
        """The open documents, in the order they were opened."""
        return list(self._docs.values())

    def __len__(self) -> int:
        return len(self._docs)
