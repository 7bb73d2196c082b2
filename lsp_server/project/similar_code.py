"""Code elsewhere in the project that reads like the code at the cursor: a context source.

Code repeats itself.  The method being written resembles the one above it or one in the
module next door, a test the test before it, a parser branch the branch after it; a model that
sees such a place can take from it what came next there.  Repository-level completion tools
retrieve such snippets by lexical similarity (RepoCoder's sliding windows, Tabby's snippets);
this module does the same with the standard library alone:

* **where it looks**: the document itself as the editor has it (outside the prompt's window),
  the other open documents (as the editor has them, unsaved edits included), the Python files
  in the document's directory and the workspace files of the modules it imports, at most
  ``MAX_FILES``, read through :class:`~lsp_server.project.workspace.Workspace` (never outside its
  folders), each cut once per ``(mtime, size)``;
* **what it compares**: every ``STRIDE_LINES`` lines a window of ``WINDOW_LINES`` lines,
  compared by the identifiers of its first ``MATCH_LINES`` lines (the part that plays the
  cursor's left text; the lines after it are what the model may copy) with the identifiers
  of the ``QUERY_LINES`` non-blank lines above the cursor (keywords, ``self`` and ``cls`` left
  out), by Jaccard similarity;
* **what it returns**: the best windows scoring at least ``MIN_SIMILARITY``, no two
  overlapping, at most ``MAX_SNIPPETS``.

The model's cache keeps a prompt's beginning, so what this source says must not change while
the user types in one place: every change would re-run the prompt after it.  The snippets are
therefore chosen once per *place* and come back unchanged (as they read when chosen) while the
document's prompt start stays, or while the cursor stays within ``PLACE_LINES`` of where they
were chosen (the server widening the prompt while the cursor rests); a new prompt start away
from there, where the whole window runs again anyway, chooses again.  In the document itself
the windows overlapping the prompt's window are left out, the prompt shows them already: from
where the widest prompt at the cursor would start (the server widens to it while the cursor
rests) to ``BELOW_LINES`` below the cursor.
"""

from __future__ import annotations

import keyword
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from fim.languages import PYTHON, extensions_of
from fim.lru import LRU
from lsp_server.project.python_definitions import DefinitionIndex
from lsp_server.project.workspace import MAX_FILE_BYTES, Workspace, path_of_uri

#: Lines of a window, lines compared of it, and lines between window starts.
WINDOW_LINES = 12
MATCH_LINES = 8
STRIDE_LINES = 4
#: Non-blank lines above the cursor that make the query.
QUERY_LINES = 8
#: Jaccard similarity a window needs to be shown (below it, the match is mostly chance).
MIN_SIMILARITY = 0.15
MAX_SNIPPETS = 4
#: Files compared per place (the document and open documents first).
MAX_FILES = 48
#: How far the cursor may move from where the snippets were chosen before a new prompt start
#: chooses again.
PLACE_LINES = 12
#: Lines below the cursor the prompt's right text may show.
BELOW_LINES = 24
#: Cut files remembered (by path), and how long a file's check on disk holds (the checks,
#: one ``stat`` with every link resolved per file, cost more than the comparing on slow disks).
_MAX_CUT_FILES = 256
REFRESH_S = 10.0

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_IGNORED = frozenset(keyword.kwlist) | {"self", "cls"}


def identifiers(text: str) -> frozenset[str]:
    """The identifiers of ``text`` that say something about it (not keywords, self, cls)."""
    return frozenset(w for w in _IDENTIFIER.findall(text) if w not in _IGNORED)


def similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard similarity of two identifier sets (0 when both are empty)."""
    shared = len(a & b)  # the union is counted, not built: this runs for every window
    return shared / (len(a) + len(b) - shared) if shared else 0.0


@dataclass(frozen=True)
class Window:
    """Lines ``start..start + WINDOW_LINES`` of a file and the identifiers of its first
    ``MATCH_LINES`` lines."""

    start: int
    keys: frozenset[str]


@dataclass(frozen=True)
class Snippet:
    """A window chosen for the prompt: its document's URI, first line, text and score."""

    uri: str
    start: int
    text: str
    score: float


@dataclass(frozen=True)
class _Cut:
    lines: tuple[str, ...]
    windows: tuple[Window, ...]


@dataclass(frozen=True)
class _Place:
    anchor_line: int
    line: int
    snippets: tuple[Snippet, ...]


def cut(text: str) -> _Cut:
    """A text's lines and windows (windows of blank lines only are left out)."""
    lines = tuple(text.split("\n"))
    # Windows overlap: each line's identifiers are found once (and remembered across calls,
    # since the document is cut again at every new place with most of its lines unchanged).
    keys_of = [_line_identifiers(line) for line in lines]
    windows = []
    for start in range(0, max(1, len(lines) - MATCH_LINES + 1), STRIDE_LINES):
        keys = frozenset().union(*keys_of[start:start + MATCH_LINES])
        if keys:
            windows.append(Window(start, keys))
    return _Cut(lines, tuple(windows))


_MAX_LINE_KEYS = 1 << 16
_LINE_KEYS: LRU[str, frozenset[str]] = LRU(_MAX_LINE_KEYS)


def _line_identifiers(line: str) -> frozenset[str]:
    found = _LINE_KEYS.get(line)
    if found is None:
        found = identifiers(line)
        _LINE_KEYS.put(line, found)
    return found


def query_of(before: str) -> frozenset[str]:
    """The identifiers of the cursor line up to the cursor and of the ``QUERY_LINES``
    non-blank lines above it (``before`` is the text up to the cursor)."""
    kept: list[str] = []
    for line in reversed(before.split("\n")):
        if line.strip():
            kept.append(line)
            if len(kept) > QUERY_LINES:
                break
    return identifiers("\n".join(kept))


class SimilarCode:
    """Snippets of the project like the code at the cursor (see the module docstring).
    One per server session."""

    def __init__(self, workspace: Workspace, definitions: DefinitionIndex) -> None:
        self.workspace = workspace
        self.definitions = definitions
        self._checked: dict[Path, float] = {}  # when each file's stamp was last read
        self._files: LRU[Path, tuple[tuple[int, int], _Cut | None]] = LRU(
            _MAX_CUT_FILES, on_evict=lambda gone, _: self._checked.pop(gone, None))
        self._places: dict[str, _Place] = {}

    def forget(self, uri: str) -> None:
        """``uri`` was closed: its place goes."""
        self._places.pop(uri, None)

    def rescope(self) -> None:
        """A folder left: the files cut from outside the folders now go, and so does every
        place whose snippets came from a document now out of scope (chosen again)."""
        for path in [p for p in self._files if self.workspace.folder_of(p) is None]:
            self._files.pop(path)
            self._checked.pop(path, None)
        for uri, place in list(self._places.items()):
            if not all(self.workspace.in_scope(s.uri) for s in place.snippets):
                del self._places[uri]

    def snippets(self, uri: str, text: str, cursor: int, anchor_line: int,
                 documents: Sequence[tuple[str, str]],
                 widest_line: Callable[[], int] | None = None,
                 language: str = "python") -> tuple[Snippet, ...]:
        """The snippets for a prompt of ``uri`` (text ``text``, the cursor at offset
        ``cursor``) that starts at line ``anchor_line``; ``documents`` are the other open
        documents as ``(uri, text)``; ``widest_line`` gives the line the widest prompt at
        this cursor would start at (the server widens to it while the cursor rests, and the
        snippets stay), asked only when the snippets are chosen; ``language``: the document's
        (``fim.languages`` id: the files next to it of that language are searched, and a
        Python document's imports).  The best last."""
        cursor_line = text.count("\n", 0, cursor)
        place = self._places.get(uri)
        if place is not None and (place.anchor_line == anchor_line
                                  or abs(cursor_line - place.line) <= PLACE_LINES):
            # Same place: the same snippets; the anchor is remembered so that typing on
            # below a widened prompt start keeps them too.
            self._places[uri] = _Place(anchor_line, place.line, place.snippets)
            return place.snippets
        top = anchor_line if widest_line is None else min(anchor_line, widest_line())
        found = self._choose(uri, text, cursor, cursor_line, top, documents, language)
        self._places[uri] = _Place(anchor_line, cursor_line, found)
        return found

    # ----- choosing -----------------------------------------------------------------------------

    def _choose(self, uri: str, text: str, cursor: int, cursor_line: int, top: int,
                documents: Sequence[tuple[str, str]], language: str = "python"
                ) -> tuple[Snippet, ...]:
        query = query_of(text[:cursor])
        if not query:
            return ()
        scored: list[tuple[float, str, int, _Cut]] = []
        for other_uri, piece in self._candidates(uri, text, documents, language):
            own = other_uri == uri
            for w in piece.windows:
                score = similarity(query, w.keys)
                if score < MIN_SIMILARITY:
                    continue
                if own and w.start < cursor_line + BELOW_LINES and w.start + WINDOW_LINES > top:
                    continue  # in the prompt's own window, or in the widened one
                scored.append((score, other_uri, w.start, piece))
        # Best first; ties by place, so the choice does not depend on dictionary order.
        scored.sort(key=lambda s: (-s[0], s[1], s[2]))
        chosen: list[Snippet] = []
        for score, other_uri, start, piece in scored:
            if len(chosen) == MAX_SNIPPETS:
                break
            if any(c.uri == other_uri and abs(c.start - start) < WINDOW_LINES for c in chosen):
                continue
            body = "\n".join(piece.lines[start:start + WINDOW_LINES]).rstrip()
            if body.strip():
                chosen.append(Snippet(other_uri, start, body, score))
        return tuple(reversed(chosen))

    def _candidates(self, uri: str, text: str, documents: Sequence[tuple[str, str]],
                    language: str = "python") -> list[tuple[str, _Cut]]:
        """``(uri, cut)`` of the document, the open documents, then the files next to the
        document and those of its imports; a file the editor has open is read from the
        editor, never from disk."""
        # Texts larger than the workspace reads are skipped as it skips such files (generated
        # tables, bundles): they say little and would cost their cutting at every new place.
        out: list[tuple[str, _Cut]] = [(uri, cut(text))] if len(text) <= MAX_FILE_BYTES else []
        seen: set[Path] = set()
        for u in [uri, *(d[0] for d in documents)]:
            p = path_of_uri(u)
            if p is not None:
                seen.add(_real(p))
        for u, t in documents:
            if u != uri and len(out) < MAX_FILES and len(t) <= MAX_FILE_BYTES:
                out.append((u, cut(t)))
        for path in self._nearby(uri, text, language):
            if len(out) >= MAX_FILES:
                break
            if path in seen:
                continue
            seen.add(path)
            piece = self._cut_file(path)
            if piece is not None:
                out.append((path.as_uri(), piece))
        return out

    def _nearby(self, uri: str, text: str, language: str = "python") -> list[Path]:
        """The files of the document's language in its directory, then (Python) the files
        of its imports."""
        document = path_of_uri(uri)
        out: list[Path] = []
        suffixes = extensions_of(language)
        if document is not None and suffixes:
            out += self.workspace.files_with(document.parent, suffixes, MAX_FILES)
        if language != PYTHON.id:
            return list(dict.fromkeys(out))  # import resolution is Python's alone
        for imp in self.definitions.imports(text):
            found = self.definitions.resolve(imp.module, imp.level, document)
            if found is not None:
                out.append(_real(found))
        return list(dict.fromkeys(out))

    def _cut_file(self, path: Path) -> _Cut | None:
        """A workspace file's windows, cut again only when its mtime or size moved (looked at
        once per ``REFRESH_S``)."""
        now = time.monotonic()
        hit = self._files.get(path)
        if hit is not None and now - self._checked.get(path, -REFRESH_S) < REFRESH_S:
            return hit[1]
        stamp = self.workspace.stat(path)
        self._checked[path] = now
        if stamp is None:
            self._files.pop(path, None)
            return None
        if hit is not None and hit[0] == stamp:
            return hit[1]
        body = self.workspace.read(path)
        piece = cut(body) if body is not None else None
        self._files.put(path, (stamp, piece))
        return piece


def _real(path: Path) -> Path:
    """``path`` with every link resolved (as the workspace lists and reads files); never
    raises (a link loop or a bad name leaves the path as it is)."""
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError):
        return path
