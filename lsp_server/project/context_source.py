"""The one interface every project-context source implements, and what they share.

``sources.ContextCollector`` asks each source in turn (the steadiest first) for what it has to
say about one request, within the tokens left to it; it never looks inside a source.  A source
is anything with a ``name`` (its switch in ``ContextSources`` and its key in ``SHARES``) and
three methods:

* ``pick(query, cap)``: its items for the request ``query`` that fit ``cap`` tokens, as
  context files, with the tokens they cost;
* ``forget(uri)``: the document was closed, whatever the source keeps of it goes;
* ``rescope()``: a workspace folder left; whatever the source cached from a place now
  out of scope (``Workspace.in_scope``, ``Workspace.folder_of``) goes *now*, before the next
  request, so a folder the user took out never reaches another prompt.

The request's text comes here with ``\\n`` line breaks (``lsp_server.text.for_model``) and so do
the open documents and the files read from disk: a source passes text on as it finds it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Protocol, runtime_checkable

from fim.templates import ContextFile
from lsp_server.project.workspace import Workspace, path_of_uri


@dataclass(frozen=True)
class OpenDocument:
    """A document the editor has open: its URI, text and language (a ``fim.languages`` id;
    the sources show a request only documents of its own language)."""

    uri: str
    text: str
    language: str = "python"


@dataclass(frozen=True)
class DocumentLabel:
    """How the prompt names a document: its workspace folder's name (``""`` outside every
    folder) and its path relative to the folder (outside them, the file's name only)."""

    repo: str
    path: str


def label_of(workspace: Workspace, uri: str) -> DocumentLabel:
    """The label of the document ``uri`` (see :class:`DocumentLabel`)."""
    located = workspace.locate(uri)
    if located is not None:
        return DocumentLabel(located.folder.name, located.path)
    path = path_of_uri(uri)
    name = path.name if path is not None else PurePosixPath(uri).name
    return DocumentLabel("", name or "untitled.py")


@dataclass(frozen=True)
class ContextQuery:
    """One request's question to the sources: the document ``uri`` with text ``text`` (line
    breaks ``\\n``) whose prompt starts at line ``anchor_line``; the open documents in the
    order they were opened (those out of scope already left out); the token counter; the
    cursor's offset in ``text`` (``None``: unknown), the line the widest prompt there would
    start at (asked only when needed), and the document's language."""

    uri: str
    text: str
    anchor_line: int
    documents: Sequence[OpenDocument]
    count: Callable[[str], int]
    cursor: int | None = None
    widest_line: Callable[[], int] | None = None
    #: the document's language (a ``fim.languages`` id)
    language: str = "python"

    def same_language(self) -> list[OpenDocument]:
        """The other open documents of the document's language (a JavaScript file's prompt
        shows JavaScript, not the Python beside it)."""
        return [d for d in self.documents if d.uri != self.uri and d.language == self.language]

    def cost(self, path: str, body: str) -> int:
        """Tokens a context file costs in the prompt, its separator included."""
        return self.count(f"{path}\n{body}\n") + 1


@dataclass(frozen=True)
class Picked:
    """What one source gave a request: its context files, in prompt order, and their
    tokens (as counted by the query's counter)."""

    files: tuple[ContextFile, ...] = ()
    tokens: int = 0


@runtime_checkable
class ContextSource(Protocol):
    """A source of project context (see the module docstring)."""

    name: str

    def pick(self, query: ContextQuery, cap: int) -> Picked: ...

    def forget(self, uri: str) -> None: ...

    def rescope(self) -> None: ...


def head_within(text: str, room: int, count: Callable[[str], int]) -> str:
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
