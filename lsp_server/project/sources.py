"""Project context for a completion: what the rest of the project says, under a token budget.

Four sources, each of which a setting turns off (``lsp_server.settings``):

* **definitions** of the names the document imports and uses, from the workspace's files
  (``python_definitions``): what the code at the cursor calls;
* **open files**: the other open documents of a completed language, each as the lines around
  where the user last was in it, or, if they never were, its outline (the signatures of its
  top-level definitions);
* **recent edits**: the ring of recently edited chunks (``recent_edits``), except those of the
  current document at or below the prompt's start (the prompt shows them already, and the
  chunk being typed in changes with every keystroke);
* **similar code**: windows of the project's code that read like the lines above the cursor
  (``similar_code``), chosen once per place in the document.

The model's cache keeps a prompt's beginning, so the context must not change while the user
works in one place.  The sources go in that order, the steadiest first (definitions change
when the imports or the files on disk do; open files when the user visits another document;
edits with edits elsewhere; similar code when the user starts work at another place), and
nothing depends on the cursor but the exclusion of the current document's chunks, which
depends on the prompt's start (``context_plan`` keeps it fixed per document), and the similar
code, which depends on the place and not on the keystroke.  Each source has a share of the
budget (``SHARES``): a source may use room the sources *before* it left, never room reserved
for those after it, so a change in a later source never moves an earlier one.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from fim.lru import LRU
from fim.templates import ContextFile
from lsp_server.project.python_definitions import DefinitionIndex, signatures_of
from lsp_server.project.recent_edits import EditRing
from lsp_server.project.similar_code import SimilarCode
from lsp_server.project.workspace import Workspace, path_of_uri

#: Shares of the budget when every source is on (a source that is off gives its share to the
#: others in proportion).
SHARES = {"definitions": 0.35, "open_files": 0.2, "recent_edits": 0.15, "similar_code": 0.3}
SOURCES = tuple(SHARES)
#: Lines shown around the last place the user was in another open document.
OPEN_FILE_LINES = 40
#: A cut excerpt shorter than this is left out.
MIN_EXCERPT_TOKENS = 32
#: Token counts remembered (by text): the same texts come back with every request.
_COUNT_CACHE = 2048


@dataclass(frozen=True)
class ContextSources:
    """Which sources are on and the project context's budget in tokens (0: none)."""

    definitions: bool = True
    open_files: bool = True
    recent_edits: bool = True
    similar_code: bool = True
    budget: int = 0

    def enabled(self) -> tuple[str, ...]:
        return tuple(s for s in SOURCES if getattr(self, s))

    @property
    def active(self) -> bool:
        return self.budget > 0 and bool(self.enabled())

    def only(self, source: str | None) -> ContextSources:
        """The same budget with one source on (``None``: none)."""
        return ContextSources(**{s: s == source for s in SOURCES}, budget=self.budget)


@dataclass(frozen=True)
class OpenDocument:
    """A document the editor has open: its URI, text and language."""

    uri: str
    text: str
    language: str = "python"


@dataclass(frozen=True)
class ProjectContext:
    """What goes before the file in the prompt (see ``fim.templates.project_context``)."""

    files: tuple[ContextFile, ...] = ()
    repo: str = ""
    path: str | None = None
    budget: int = 0
    #: tokens each source used (as counted here; the prompt's own count may differ slightly)
    tokens: tuple[tuple[str, int], ...] = ()


class TokenCounter:
    """Token counts of texts, remembered (the same files come back with every request)."""

    def __init__(self, count: Callable[[str], int]) -> None:
        self._count = count
        self._cache: LRU[str, int] = LRU(_COUNT_CACHE)

    def __call__(self, text: str) -> int:
        n = self._cache.get(text)
        if n is None:
            n = self._count(text)
            self._cache.put(text, n)
        return n


def _head_within(text: str, room: int, count: Callable[[str], int]) -> str:
    """The longest run of ``text``'s first lines that fits ``room`` tokens ("" if none)."""
    lines = text.split("\n")
    lo, hi, best = 1, len(lines), 0
    while lo <= hi:  # fewer lines never have more tokens: binary search
        mid = (lo + hi) // 2
        if count("\n".join(lines[:mid])) <= room:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return "\n".join(lines[:best])


class ContextCollector:
    """Collects a request's project context from the workspace, the open documents and the
    edit ring (see the module docstring).  One per server session."""

    def __init__(self, workspace: Workspace, ring: EditRing | None = None) -> None:
        self.workspace = workspace
        self.ring = ring or EditRing()
        self.definitions = DefinitionIndex(workspace)
        self.similar = SimilarCode(workspace, self.definitions)
        self._visits: LRU[str, int] = LRU(256)  # uri -> line, least recent first
        self._outlines: LRU[tuple[str, int], str | None] = LRU(64)

    # ----- what the user did ------------------------------------------------------------------

    def visit(self, uri: str, line: int) -> None:
        """The user was at ``line`` of ``uri`` (a request, a cursor rest or an edit)."""
        self._visits.put(uri, line)

    def forget(self, uri: str) -> None:
        """``uri`` was closed: its visits and place go (its edits stay in the ring)."""
        self._visits.pop(uri, None)
        self.similar.forget(uri)

    # ----- where things are -------------------------------------------------------------------

    def label(self, uri: str) -> tuple[str, str]:
        """``(repo, path)`` of a document: its workspace folder's name and its path relative
        to the folder; outside every folder, no repo and the file's name only."""
        located = self.workspace.locate(uri)
        if located is not None:
            return located.folder.name, located.path
        path = path_of_uri(uri)
        name = path.name if path is not None else PurePosixPath(uri).name
        return "", name or "untitled.py"

    # ----- the sources ------------------------------------------------------------------------

    def _definition_items(self, uri: str, text: str) -> list[tuple[str, str]]:
        path = path_of_uri(uri)
        found = self.definitions.definitions(path, text)
        # One item per definition, labelled with its file; grouped by file afterwards.
        out = []
        for d in found:
            located = self.workspace.locate_path(d.path)
            if located is not None:
                out.append((located.path, d.text))
        return out

    def _outline_of(self, doc: OpenDocument) -> str:
        key = (doc.uri, hash(doc.text))
        if key in self._outlines:
            found = self._outlines.get(key)
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    found = signatures_of(doc.text)
                except (SyntaxError, ValueError, RecursionError, MemoryError, ast.error):
                    found = None
            self._outlines.put(key, found)
        if found is None:  # not parsable now: its first lines
            return "\n".join(doc.text.split("\n")[:OPEN_FILE_LINES])
        return found

    def _open_file_items(self, uri: str, documents: Sequence[OpenDocument]
                         ) -> list[tuple[str, str, int]]:
        """``(path, text, recency)`` of the other open documents, in the order opened."""
        recency = {u: i for i, u in enumerate(self._visits)}
        out = []
        for doc in documents:
            if doc.uri == uri or not doc.text.strip():
                continue
            line = self._visits.peek(doc.uri)
            if line is None:
                text = self._outline_of(doc)
            else:
                lines = doc.text.split("\n")
                lo = max(0, min(line - OPEN_FILE_LINES // 2, len(lines) - OPEN_FILE_LINES))
                text = "\n".join(lines[lo:lo + OPEN_FILE_LINES])
            if text.strip():
                out.append((self.label(doc.uri)[1], text, recency.get(doc.uri, -1)))
        return out

    def _edit_items(self, uri: str, anchor_line: int) -> list[tuple[str, str]]:
        out = []
        for chunk in self.ring.chunks():
            if chunk.uri == uri and chunk.end > anchor_line:
                continue  # in (or below) the prompt's own window
            out.append((self.label(chunk.uri)[1], chunk.text))
        return out

    # ----- putting it together ----------------------------------------------------------------

    def collect(self, uri: str, text: str, anchor_line: int, sources: ContextSources,
                documents: Sequence[OpenDocument], count: Callable[[str], int],
                cursor: int | None = None,
                widest_line: Callable[[], int] | None = None) -> ProjectContext:
        """The project context of a request in ``uri`` (whose text is ``text`` and whose
        prompt starts at line ``anchor_line``), within ``sources.budget`` tokens counted by
        ``count``.  ``documents`` are the open documents, in the order they were opened;
        ``cursor`` is the cursor's offset in ``text``, which the similar code needs (without
        it that source gives nothing), and ``widest_line`` the line the widest prompt there
        would start at (see ``SimilarCode.snippets``)."""
        repo, path = self.label(uri)
        if not sources.active:
            return ProjectContext(repo=repo, path=path)
        on = sources.enabled()
        total_share = sum(SHARES[s] for s in on)
        budget = sources.budget
        # The repository line and the current file's header come out of the budget first.
        room = budget - count(f"{repo}\n") - count(f"{path}\n") - 4
        files: list[ContextFile] = []
        used: list[tuple[str, int]] = []
        spent = 0
        for i, source in enumerate(on):
            later = sum(SHARES[s] for s in on[i + 1:]) / total_share
            cap = int(room * (1 - later)) - spent  # room before the later sources' shares
            picked, tokens = self._pick(source, uri, text, anchor_line, documents, cap, count,
                                        cursor, widest_line)
            files += picked
            spent += tokens
            used.append((source, tokens))
        return ProjectContext(tuple(files), repo, path, budget, tuple(used))

    def _pick(self, source: str, uri: str, text: str, anchor_line: int,
              documents: Sequence[OpenDocument], cap: int, count: Callable[[str], int],
              cursor: int | None = None, widest_line: Callable[[], int] | None = None
              ) -> tuple[list[ContextFile], int]:
        """Items of one source that fit ``cap`` tokens, as context files."""
        if cap <= 0:
            return [], 0

        def cost(path: str, body: str) -> int:
            return count(f"{path}\n{body}\n") + 1  # the file separator

        if source == "definitions":
            # Definitions fill in import order; those of one file then share one header.
            groups: dict[str, list[str]] = {}
            spent = 0
            for path, body in self._definition_items(uri, text):
                extra = count(body + "\n\n") if path in groups else cost(path, body)
                if spent + extra > cap:
                    continue
                groups.setdefault(path, []).append(body)
                spent += extra
            return [ContextFile(p, "\n\n".join(b)) for p, b in groups.items()], spent
        if source == "open_files":
            items = self._open_file_items(uri, documents)
            # The most recently visited documents are chosen first, the first that does not
            # fit cut to its first lines; they go in the order they were opened.
            chosen: dict[int, str] = {}
            spent = 0
            for k in sorted(range(len(items)), key=lambda k: -items[k][2]):
                path, body, _ = items[k]
                extra = cost(path, body)
                if spent + extra > cap:
                    body = _head_within(body, cap - spent - cost(path, ""), count)
                    if count(body) < MIN_EXCERPT_TOKENS:
                        break
                    extra = cost(path, body)
                chosen[k] = body
                spent += extra
            return [ContextFile(items[k][0], chosen[k]) for k in sorted(chosen)], spent
        if source == "similar_code":
            return self._pick_similar(uri, text, anchor_line, documents, cap, cost, count,
                                      cursor, widest_line)
        # recent edits: the newest last (nearest the cursor's file); the oldest dropped first
        picked: list[ContextFile] = []
        spent = 0
        for path, body in reversed(self._edit_items(uri, anchor_line)):
            extra = cost(path, body)
            if spent + extra > cap:
                break
            picked.append(ContextFile(path, body))
            spent += extra
        return picked[::-1], spent

    def _pick_similar(self, uri: str, text: str, anchor_line: int,
                      documents: Sequence[OpenDocument], cap: int,
                      cost: Callable[[str, str], int], count: Callable[[str], int],
                      cursor: int | None, widest_line: Callable[[], int] | None
                      ) -> tuple[list[ContextFile], int]:
        """The best snippets that fit ``cap`` tokens, the best last (nearest the file)."""
        if cursor is None:
            return [], 0
        others = [(d.uri, d.text) for d in documents if d.uri != uri]
        found = self.similar.snippets(uri, text, cursor, anchor_line, others, widest_line)
        kept: list[tuple[str, str]] = []
        spent = 0
        for snippet in reversed(found):  # the best first
            path, body = self.label(snippet.uri)[1], snippet.text
            extra = cost(path, body)
            if spent + extra > cap:  # its first lines, where the match is, if they are enough
                body = _head_within(body, cap - spent - cost(path, ""), count)
                if count(body) < MIN_EXCERPT_TOKENS:
                    continue
                extra = cost(path, body)
            kept.append((path, body))
            spent += extra
        return [ContextFile(p, b) for p, b in reversed(kept)], spent


def line_of(text: str, offset: int) -> int:
    """The 0-based line of ``offset`` in ``text``."""
    return text.count("\n", 0, offset)
