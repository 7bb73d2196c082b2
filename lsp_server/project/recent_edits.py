"""A small ring of the regions the user edited recently, for the prompt.

What the user changed a minute ago (a function's new signature in another file, the helper
written above) is what the code being written next is most likely to use, and no other source
knows it: it may not be saved, imported or open any more.  llama.vim keeps such a ring of
chunks; this one keeps, per edit, the changed lines plus ``CONTEXT_LINES`` around them as they
read after the edit, merged with an earlier chunk of the same document that overlaps it, at
most ``MAX_CHUNK_LINES`` lines, and ``capacity`` chunks, the oldest dropped first.

Edits move the lines below them; chunks below an edit in the same document are shifted so they
keep naming the lines they hold.  A chunk's text is a snapshot taken at its latest edit, with
``\n`` line breaks whatever the document's (it goes into the prompt).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from lsp_server.text import for_model

CONTEXT_LINES = 3
MAX_CHUNK_LINES = 24
DEFAULT_CAPACITY = 8


@dataclass(frozen=True)
class EditedChunk:
    """Lines ``start..end`` (0-based, end exclusive) of a document, as they read after its
    latest edit."""

    uri: str
    start: int
    end: int
    text: str


def changed_lines(old: str, new: str) -> tuple[int, int, int] | None:
    """The lines a whole-text replacement changed: ``(first, old_end, new_end)`` with
    ``old[first:old_end]`` replaced by ``new[first:new_end]`` (line indices), or ``None``."""
    if old == new:
        return None
    a, b = old.split("\n"), new.split("\n")
    first = 0
    while first < min(len(a), len(b)) and a[first] == b[first]:
        first += 1
    tail = 0
    while (tail < min(len(a), len(b)) - first and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]):
        tail += 1
    return first, len(a) - tail, len(b) - tail


class EditRing:
    """The recently edited chunks (see the module docstring), oldest first."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("the ring needs room for at least one chunk")
        self.capacity = capacity
        self._chunks: list[EditedChunk] = []
        #: how often each document's chunks changed (a plan made before is made again)
        self.changes: Counter[str] = Counter()

    def chunks(self) -> tuple[EditedChunk, ...]:
        return tuple(self._chunks)

    def forget(self, uri: str) -> None:
        self._chunks = [c for c in self._chunks if c.uri != uri]
        self.changes[uri] += 1

    def record(self, uri: str, text: str, first: int, old_end: int, new_end: int) -> None:
        """Lines ``first..old_end`` of ``uri`` became lines ``first..new_end`` of ``text``
        (the document after the edit; 0-based, ends exclusive)."""
        self.changes[uri] += 1
        delta = new_end - old_end
        lines = text.split("\n")
        lo = max(0, first - CONTEXT_LINES)
        hi = min(len(lines), max(new_end, first + 1) + CONTEXT_LINES)
        kept: list[EditedChunk] = []
        for c in self._chunks:
            if c.uri != uri:
                kept.append(c)
                continue
            start, end = c.start, c.end
            if start >= old_end:  # wholly below the edit: shift
                start, end = start + delta, end + delta
            elif end > first:  # overlaps the edit: merge into the new chunk
                lo, hi = min(lo, start), max(hi, min(len(lines), end + max(delta, 0)))
                continue
            kept.append(EditedChunk(uri, start, end, c.text))
        if hi - lo > MAX_CHUNK_LINES:
            # Keep the lines around this edit; the merged rest is older.
            centre = (first + max(new_end, first + 1)) // 2
            lo = max(0, min(centre - MAX_CHUNK_LINES // 2, len(lines) - MAX_CHUNK_LINES))
            hi = min(len(lines), lo + MAX_CHUNK_LINES)
        chunk = EditedChunk(uri, lo, hi, for_model("\n".join(lines[lo:hi])))
        if chunk.text.strip():
            kept.append(chunk)
        self._chunks = kept[-self.capacity:]

    def record_text_change(self, uri: str, old: str, new: str) -> None:
        """Record a change known only as the text before and after it."""
        found = changed_lines(old, new)
        if found is not None:
            self.record(uri, new, *found)
