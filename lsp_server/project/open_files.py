"""The open-files source of project context: the other documents the editor has open.

Only documents of the request's language are shown (a YAML file's prompt holds no Python).
Each is shown as the ``OPEN_FILE_LINES`` lines around where the user last was in it, or, if
they never were, as its outline (a Python file's signatures of its top-level definitions;
another language's first lines).  The most
recently visited documents are chosen first, the first that does not fit cut to its first
lines; they go into the prompt in the order they were opened.

People keep many tabs open, so a keystroke must not cost work per open document beyond a look
at it: a document's outline is parsed once per text and remembered per document (however many
are open, until it is closed), and only the documents the budget reaches are cut into lines
or parsed at all.
"""

from __future__ import annotations

import ast
import warnings

from fim.languages import PYTHON
from fim.lru import LRU
from fim.templates import ContextFile
from lsp_server.project.context_source import (
    ContextQuery,
    OpenDocument,
    Picked,
    head_within,
    label_of,
)
from lsp_server.project.python_definitions import signatures_of
from lsp_server.project.workspace import Workspace

#: Lines shown around the last place the user was in another open document.
OPEN_FILE_LINES = 40
#: A cut excerpt shorter than this is left out.
MIN_EXCERPT_TOKENS = 32
#: Places remembered (documents the user was in), and outlines (one per open document: more
#: only when the editor keeps this many open, then the least recent go).
MAX_VISITS = 256
MAX_OUTLINES = 4096
#: A document longer than this is not parsed for its outline (its first lines stand in), and
#: what is shown of any document is cut to ``MAX_SHOWN_CHARS`` at a line end: this runs on the
#: editor's event loop, where a 5 MB line once took half a minute (issue 28).
MAX_OUTLINE_CHARS = 1_000_000
MAX_SHOWN_CHARS = 16_000


class OpenFiles:
    """The open-files source (see the module docstring)."""

    name = "open_files"

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self._visits: LRU[str, int] = LRU(MAX_VISITS)  # uri -> line, least recent first
        self._outlines: LRU[str, tuple[str, str]] = LRU(MAX_OUTLINES)  # uri -> (text, it)
        #: outlines parsed (what a keystroke must not do again for documents not edited)
        self.parses = 0

    def visit(self, uri: str, line: int) -> None:
        """The user was at ``line`` of ``uri``."""
        self._visits.put(uri, line)

    def forget(self, uri: str) -> None:
        self._visits.pop(uri, None)
        self._outlines.pop(uri, None)

    def rescope(self) -> None:
        for uri in [u for u in self._visits if not self.workspace.in_scope(u)]:
            self._visits.pop(uri)
        for uri in [u for u in self._outlines if not self.workspace.in_scope(u)]:
            self._outlines.pop(uri)

    def _outline_of(self, doc: OpenDocument) -> str:
        hit = self._outlines.get(doc.uri)
        if hit is not None and (hit[0] is doc.text or hit[0] == doc.text):
            return hit[1]
        if len(doc.text) > MAX_OUTLINE_CHARS or doc.language != PYTHON.id:
            # (Outlines are Python's signatures; another language's file shows its head.)
            found = _bounded("\n".join(doc.text[:MAX_SHOWN_CHARS].split("\n")[:OPEN_FILE_LINES]))
            self._outlines.put(doc.uri, (doc.text, found))
            return found
        self.parses += 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                found = signatures_of(doc.text)
            except (SyntaxError, ValueError, RecursionError, MemoryError, ast.error):
                found = None
        if found is None:  # not parsable now: its first lines
            found = "\n".join(doc.text.split("\n", OPEN_FILE_LINES)[:OPEN_FILE_LINES])
        found = _bounded(found)
        self._outlines.put(doc.uri, (doc.text, found))
        return found

    def _shown(self, doc: OpenDocument) -> str:
        """What the prompt shows of ``doc``: the lines where the user was, else its outline."""
        line = self._visits.peek(doc.uri)
        if line is None:
            return self._outline_of(doc)
        lines = doc.text.split("\n")
        lo = max(0, min(line - OPEN_FILE_LINES // 2, len(lines) - OPEN_FILE_LINES))
        return _bounded("\n".join(lines[lo:lo + OPEN_FILE_LINES]))

    def pick(self, query: ContextQuery, cap: int) -> Picked:
        recency = {u: i for i, u in enumerate(self._visits)}
        others = [(k, d) for k, d in enumerate(query.documents)
                  if d.uri != query.uri and d.language == query.language
                  and d.text and not d.text.isspace()]
        # The most recent first (the never visited after, in the order opened); only those
        # the budget reaches are looked into.
        others.sort(key=lambda kd: -recency.get(kd[1].uri, -1))
        chosen: dict[int, ContextFile] = {}
        spent = 0
        for k, doc in others:
            body = self._shown(doc)
            if not body.strip():
                continue
            path = label_of(self.workspace, doc.uri).path
            extra = query.cost(path, body)
            if spent + extra > cap:
                body = head_within(body, cap - spent - query.cost(path, ""), query.count)
                if query.count(body) < MIN_EXCERPT_TOKENS:
                    break
                extra = query.cost(path, body)
            chosen[k] = ContextFile(path, body)
            spent += extra
        return Picked(tuple(chosen[k] for k in sorted(chosen)), spent)


def _bounded(text: str) -> str:
    """``text`` cut to ``MAX_SHOWN_CHARS`` at its last line end within them (or at the limit
    when its first line is longer)."""
    if len(text) <= MAX_SHOWN_CHARS:
        return text
    end = text.rfind("\n", 0, MAX_SHOWN_CHARS)
    return text[:end if end > 0 else MAX_SHOWN_CHARS]
