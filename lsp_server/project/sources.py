"""Project context for a completion: what the rest of the project says, under a token budget.

Four sources, each of which a setting turns off (``lsp_server.settings``):

* **definitions** of the names the document imports and uses, from the workspace's files
  (``python_definitions``): what the code at the cursor calls (Python documents only);
* **open files**: the other open documents of the document's language, each as the lines around
  where the user last was in it, or, if they never were, its outline (the signatures of its
  top-level definitions);
* **recent edits**: the ring of recently edited chunks (``recent_edits``), except those of the
  current document at or below the prompt's start (the prompt shows them already, and the
  chunk being typed in changes with every keystroke);
* **similar code**: windows of the project's code that read like the lines above the cursor
  (``similar_code``), chosen once per place in the document: the open documents and the
  files next to it of its language (``fim.languages``), and a Python document's imports.

The model's cache keeps a prompt's beginning, so the context must not change while the user
works in one place.  The sources go in that order, the steadiest first (definitions change
when the imports or the files on disk do; open files when the user visits another document;
edits with edits elsewhere; similar code when the user starts work at another place), and
nothing depends on the cursor but the exclusion of the current document's chunks, which
depends on the prompt's start (``context_plan`` keeps it fixed per document), and the similar
code, which depends on the place and not on the keystroke.  Each source has a share of the
budget (``SHARES``): a source may use room the sources *before* it left, never room reserved
for those after it, so a change in a later source never moves an earlier one.

Each source implements one interface (``context_source.ContextSource``); the collector only
iterates them.  Text enters with ``\n`` line breaks: the document's here, the open documents'
in the server, the files' in ``Workspace.read``.  When a workspace folder leaves, every
source drops what it cached from a place now out of scope before the request is answered, and
the open documents and edits that lie in a removed folder are left out (``Workspace.in_scope``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fim.languages import PYTHON
from fim.templates import ContextFile
from lsp_server.project.context_source import (
    ContextQuery,
    ContextSource,
    DocumentLabel,
    OpenDocument,
    Picked,
    head_within,
    label_of,
)
from lsp_server.project.open_files import MIN_EXCERPT_TOKENS, OpenFiles
from lsp_server.project.python_definitions import DefinitionIndex
from lsp_server.project.recent_edits import EditRing
from lsp_server.project.similar_code import SimilarCode
from lsp_server.project.workspace import Workspace, path_of_uri
from lsp_server.text import for_model

__all__ = ["SHARES", "SOURCES", "ContextCollector", "ContextSources", "OpenDocument",
           "ProjectContext", "line_of"]

#: Shares of the budget when every source is on (a source that is off gives its share to the
#: others in proportion), in the order the sources go into the prompt.
SHARES = {"definitions": 0.35, "open_files": 0.2, "recent_edits": 0.15, "similar_code": 0.3}
SOURCES = tuple(SHARES)


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
class ProjectContext:
    """What goes before the file in the prompt (see ``fim.templates.project_context``)."""

    files: tuple[ContextFile, ...] = ()
    repo: str = ""
    path: str | None = None
    budget: int = 0
    #: tokens each source used (as counted here; the prompt's own count may differ slightly)
    tokens: tuple[tuple[str, int], ...] = ()


# ----- the sources but open files (``open_files``) -------------------------------------------

class Definitions:
    """The definitions of the names the document imports and uses, in import order; those of
    one file share one header."""

    name = "definitions"

    def __init__(self, workspace: Workspace, index: DefinitionIndex) -> None:
        self.workspace = workspace
        self.index = index

    def forget(self, uri: str) -> None:
        pass  # answers are per text and expire by themselves

    def rescope(self) -> None:
        self.index.rescope()

    def pick(self, query: ContextQuery, cap: int) -> Picked:
        if query.language != PYTHON.id:
            return Picked()  # the index resolves Python's imports only
        groups: dict[str, list[str]] = {}
        spent = 0
        for d in self.index.definitions(path_of_uri(query.uri), query.text):
            located = self.workspace.locate_path(d.path)
            if located is None:
                continue
            path = located.path
            extra = (query.count(d.text + "\n\n") if path in groups
                     else query.cost(path, d.text))
            if spent + extra > cap:
                continue
            groups.setdefault(path, []).append(d.text)
            spent += extra
        return Picked(tuple(ContextFile(p, "\n\n".join(b)) for p, b in groups.items()), spent)


class RecentEdits:
    """The ring of recent edits but the current document's chunks at or below the prompt's
    start; the newest last (nearest the cursor's file), the oldest dropped first."""

    name = "recent_edits"

    def __init__(self, workspace: Workspace, ring: EditRing) -> None:
        self.workspace = workspace
        self.ring = ring

    def forget(self, uri: str) -> None:
        pass  # a closed document's edits stay: the user made them a moment ago

    def rescope(self) -> None:
        for uri in {c.uri for c in self.ring.chunks()}:
            if not self.workspace.in_scope(uri):
                self.ring.forget(uri)

    def pick(self, query: ContextQuery, cap: int) -> Picked:
        picked: list[ContextFile] = []
        spent = 0
        for chunk in reversed(self.ring.chunks()):
            if chunk.uri == query.uri and chunk.end > query.anchor_line:
                continue  # in (or below) the prompt's own window
            if not self.workspace.in_scope(chunk.uri):
                continue
            path = label_of(self.workspace, chunk.uri).path
            extra = query.cost(path, chunk.text)
            if spent + extra > cap:
                break
            picked.append(ContextFile(path, chunk.text))
            spent += extra
        return Picked(tuple(picked[::-1]), spent)


class Similar:
    """Windows of the project's code like the lines above the cursor, chosen once per place;
    the best last (nearest the file)."""

    name = "similar_code"

    def __init__(self, workspace: Workspace, similar: SimilarCode) -> None:
        self.workspace = workspace
        self.similar = similar

    def forget(self, uri: str) -> None:
        self.similar.forget(uri)

    def rescope(self) -> None:
        self.similar.rescope()

    def pick(self, query: ContextQuery, cap: int) -> Picked:
        if query.cursor is None:
            return Picked()
        others = [(d.uri, d.text) for d in query.same_language()]
        found = self.similar.snippets(query.uri, query.text, query.cursor, query.anchor_line,
                                      others, query.widest_line, query.language)
        kept: list[ContextFile] = []
        spent = 0
        for snippet in reversed(found):  # the best first
            path, body = label_of(self.workspace, snippet.uri).path, snippet.text
            extra = query.cost(path, body)
            if spent + extra > cap:  # its first lines, where the match is, if they are enough
                body = head_within(body, cap - spent - query.cost(path, ""), query.count)
                if query.count(body) < MIN_EXCERPT_TOKENS:
                    continue
                extra = query.cost(path, body)
            kept.append(ContextFile(path, body))
            spent += extra
        return Picked(tuple(reversed(kept)), spent)


# ----- putting it together ------------------------------------------------------------------

def _for_model(text: str, cursor: int | None) -> tuple[str, int | None]:
    """``text`` as the model reads it and the cursor's offset in that text."""
    if "\r" not in text:
        return for_model(text), cursor  # nothing moves: surrogates stay one code point
    if cursor is not None:
        cursor = len(for_model(text[:cursor]))
    return for_model(text), cursor


class ContextCollector:
    """Collects a request's project context from the workspace, the open documents and the
    edit ring (see the module docstring).  One per server session."""

    def __init__(self, workspace: Workspace, ring: EditRing | None = None) -> None:
        self.workspace = workspace
        self.definitions = DefinitionIndex(workspace)
        self.similar = SimilarCode(workspace, self.definitions)
        self.open_files = OpenFiles(workspace)
        self._edits = RecentEdits(workspace, ring or EditRing())
        #: in the order they go into the prompt, the steadiest first (``SHARES``)
        self.sources: tuple[ContextSource, ...] = (
            Definitions(workspace, self.definitions), self.open_files, self._edits,
            Similar(workspace, self.similar))
        self._removals = workspace.removals
        workspace.subscribe(self.rescope)
        #: how often each document's visits changed (the open-files source of other
        #: documents' requests): with the ring's ``changes``, what a kept plan depends on
        self.changes: Counter[str] = Counter()

    @property
    def ring(self) -> EditRing:
        """The ring of recent edits (the server records edits in it)."""
        return self._edits.ring

    @ring.setter
    def ring(self, ring: EditRing) -> None:
        self._edits.ring = ring

    def visit(self, uri: str, line: int) -> None:
        """The user was at ``line`` of ``uri`` (a request, a cursor rest or an edit)."""
        self.open_files.visit(uri, line)
        self.changes[uri] += 1

    def forget(self, uri: str) -> None:
        """``uri`` was closed: its visits, outline and place go (its edits stay in the ring)."""
        for source in self.sources:
            source.forget(uri)

    def rescope(self) -> None:
        """Drop, in every source, what came from a place the workspace no longer holds: done
        as a folder leaves, and checked again before a request."""
        self._removals = self.workspace.removals
        for source in self.sources:
            source.rescope()

    def label(self, uri: str) -> DocumentLabel:
        """How the prompt names the document ``uri`` (see ``context_source.DocumentLabel``)."""
        return label_of(self.workspace, uri)

    def collect(self, uri: str, text: str, anchor_line: int, sources: ContextSources,
                documents: Sequence[OpenDocument], count: Callable[[str], int],
                cursor: int | None = None,
                widest_line: Callable[[], int] | None = None,
                language: str = "python") -> ProjectContext:
        """The project context of a request in ``uri`` (whose text is ``text`` and whose
        prompt starts at line ``anchor_line``), within ``sources.budget`` tokens counted by
        ``count``.  ``documents`` are the open documents, in the order they were opened;
        ``cursor`` is the cursor's offset in ``text``, which the similar code needs (without
        it that source gives nothing), ``widest_line`` the line the widest prompt there
        would start at (see ``SimilarCode.snippets``), and ``language`` the document's (a
        ``fim.languages`` id: the sources keep to files of that language)."""
        label = self.label(uri)
        if not sources.active:
            return ProjectContext(repo=label.repo, path=label.path)
        if self._removals != self.workspace.removals:
            self.rescope()
        text, cursor = _for_model(text, cursor)
        shown = tuple(d if "\r" not in d.text else OpenDocument(d.uri, for_model(d.text),
                                                                 d.language)
                      for d in documents if d.uri == uri or self.workspace.in_scope(d.uri))
        query = ContextQuery(uri, text, anchor_line, shown, count, cursor, widest_line,
                             language)
        on = [s for s in self.sources if getattr(sources, s.name)]
        total_share = sum(SHARES[s.name] for s in on)
        # The repository line and the current file's header come out of the budget first.
        room = sources.budget - count(f"{label.repo}\n") - count(f"{label.path}\n") - 4
        files: list[ContextFile] = []
        used: list[tuple[str, int]] = []
        spent = 0
        for i, source in enumerate(on):
            later = sum(SHARES[s.name] for s in on[i + 1:]) / total_share
            cap = int(room * (1 - later)) - spent  # room before the later sources' shares
            picked = source.pick(query, cap) if cap > 0 else Picked()
            files += picked.files
            spent += picked.tokens
            used.append((source.name, picked.tokens))
        return ProjectContext(tuple(files), label.repo, label.path, sources.budget,
                              tuple(used))


def line_of(text: str, offset: int) -> int:
    """The 0-based line of ``offset`` in ``text``."""
    return text.count("\n", 0, offset)
