"""A plain client's edits taken as the cursor's resting place.

Seam's editor clients send ``seam/cursor`` when the cursor rests, and the service warms the
prompt there (``background.Background.at_cursor``) so that the request which follows only
decodes. A plain LSP client sends nothing of the kind, yet its edits say where the user is:
after a ranged change the cursor is, nearly always, at the end of the text the change put
in. So when a document has had no edit for ``EDIT_REST_S`` (the editors' own cursor
debounce) and no request came in that time, the service is told the cursor rests at the end
of the last change, as if the client had said so.

What is not taken for a rest: a whole-document change (it names no place), an edit followed
within the debounce by a request (the request runs the prompt itself) or by another edit (the
later one counts), and every edit once the client has sent one ``seam/cursor``: its own
cursor says where the user is better than a guess from edits (an edit made by a refactoring
or a formatter is somewhere the cursor is not). A wrong guess costs idle time only: the
warm-up gives way to any request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Protocol

from lsprotocol import types

from lsp_server.documents import Document, PositionError
from lsp_server.messages import CursorMessage

#: How long a document must go without an edit before its last edit counts as a rest (s);
#: the editor clients wait as long before they send ``seam/cursor``.
EDIT_REST_S = 0.15


class Timer(Protocol):
    def cancel(self) -> None: ...


#: Run a function after some seconds (``asyncio``'s ``call_later`` by default).
Later = Callable[[float, Callable[[], None]], Timer]


def edit_end(doc: Document, changes: Sequence[types.TextDocumentContentChangeEvent]
             ) -> types.Position | None:
    """Where the cursor is after ``changes`` made ``doc``: the end of the text the last change
    put in (the changes apply in order, so the text before the last one's start is the same
    in ``doc``); ``None`` when the last change replaced the whole document."""
    if not changes:
        return None
    last = changes[-1]
    if not isinstance(last, types.TextDocumentContentChangePartial):
        return None
    # A client may send the range backwards; the document applied it from its earlier end.
    first = min(last.range.start, last.range.end, key=lambda p: (p.line, p.character))
    try:
        start = doc.cursor(first, clamp_line=True, snap=True).offset
    except PositionError:
        return None
    return doc.position_at(min(len(doc.text), start + len(last.text)))


class EditRests:
    """Tells ``rest`` where the cursor rests after a plain client's edits (module docstring).

    Must be used on the event loop (``later`` defaults to its ``call_later``)."""

    def __init__(self, rest: Callable[[CursorMessage], None], later: Later | None = None,
                 delay: float = EDIT_REST_S) -> None:
        self._rest = rest
        self._later = later
        self._delay = delay
        self._timers: dict[str, Timer] = {}
        self.client_sends_cursor = False

    def edited(self, doc: Document,
               changes: Sequence[types.TextDocumentContentChangeEvent]) -> None:
        """``doc`` was just changed by ``changes``: its rest starts again from now."""
        self._stop(doc.uri)
        if self.client_sends_cursor:
            return
        end = edit_end(doc, changes)
        if end is None:
            return
        message = CursorMessage(doc.uri, end.line, end.character)
        later = self._later or asyncio.get_running_loop().call_later
        self._timers[doc.uri] = later(self._delay, lambda: self._fire(message))

    def cursor_sent(self) -> None:
        """The client sent ``seam/cursor``: from now on its cursor, not its edits, says where
        the user rests."""
        self.client_sends_cursor = True
        for uri in list(self._timers):
            self._stop(uri)

    def asked(self, uri: str) -> None:
        """A request came for ``uri``: it runs the prompt itself."""
        self._stop(uri)

    def closed(self, uri: str) -> None:
        self._stop(uri)

    def pending(self) -> int:
        """Documents whose last edit has not yet become a rest."""
        return len(self._timers)

    def _stop(self, uri: str) -> None:
        timer = self._timers.pop(uri, None)
        if timer is not None:
            timer.cancel()

    def _fire(self, message: CursorMessage) -> None:
        self._timers.pop(message.uri, None)
        self._rest(message)


__all__ = ["EDIT_REST_S", "EditRests", "edit_end"]
