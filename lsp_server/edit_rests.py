"""A plain client's edits and opens taken as the cursor's resting place.

Seam's editor clients send ``seam/cursor`` when the cursor rests, and the service warms the
prompt there (``background.Background.at_cursor``) so that the request which follows only
decodes. A plain LSP client sends nothing of the kind, yet its edits say where the user is:
after a ranged change the cursor is, nearly always, at the end of the text the change put
in. So when a document has had no edit for ``EDIT_REST_S`` (the editors' own cursor
debounce) and no request came in that time, the service is told the cursor rests at the end
of the last change, as if the client had said so.

An open says where the user is too: a document just opened is what the user looks at, and an
editor shows it from its start unless it restores a place. So when the latest opened document
goes ``EDIT_REST_S`` without an edit or a request anywhere, the cursor is taken to rest at its
start; the warm-up there widens into the document's window from its start, held in the model's
cache (``background.Widen``), so that the first request anywhere in that window runs only its
right text (the issue asked that the visible file be warmed when it is opened, not when the
cursor first rests: ``docs/latency.md``, "A file opened and read"). Only the latest open counts
(a session that reopens ten files warms the last one), and any edit or request, in any
document, cancels it: the user has shown where they are.

How soon: a keystroke's rest waits ``EDIT_REST_S``, because the next keystroke usually comes
sooner and typing must not plan a rest per key. An edit no single key makes (a cut or a deleted
selection, a paste, an undo, an accepted suggestion: :func:`is_keystroke` says which) is not
followed by typing's rhythm, and the user is looking at the place it left: its rest comes after
``AT_ONCE_S``, only long enough for a request the client sends with the edit to take its place.
Half a second after a cut, a rest taken at once has read 130 ms more of the prompt than one
taken after the debounce (``docs/latency.md``, "The first request after an edit").

What is not taken for a rest: a whole-document change (it names no place), an edit followed
within the debounce by a request (the request runs the prompt itself) or by another edit (the
later one counts), and every edit once the client has sent one ``seam/cursor``: its own
cursor says where the user is better than a guess from edits (an edit made by a refactoring
or a formatter is somewhere the cursor is not). A wrong guess costs idle time only: the
warm-up gives way to any request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from lsprotocol import types

from lsp_server.documents import Document, PositionError
from lsp_server.messages import CursorMessage

log = logging.getLogger(__name__)

#: How long a document must go without an edit before its last edit counts as a rest (s);
#: the editor clients wait as long before they send ``seam/cursor``.
EDIT_REST_S = 0.15
#: The same after an edit no single key makes (a cut, a paste): time for a request sent with
#: the edit to arrive and run the prompt itself, no more.
AT_ONCE_S = 0.02
#: Pairs an editor closes as one keystroke types their opening half.
_AUTO_PAIRS = frozenset({"()", "[]", "{}", '""', "''", "``"})


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


def _one_key(change: types.TextDocumentContentChangeEvent) -> bool:
    """Whether one key press could have made ``change`` (see :func:`is_keystroke`)."""
    if not isinstance(change, types.TextDocumentContentChangePartial):
        return False
    start, end = sorted((change.range.start, change.range.end),
                        key=lambda p: (p.line, p.character))
    text = change.text
    if start.line == end.line:
        width = end.character - start.character
    elif end.line == start.line + 1 and end.character == 0 and start.character > 0:
        width = 1  # a line joined to the next (backspace at a line start, delete at its end)
    else:
        return False  # several lines removed, or a whole line ("dd")
    if width > 2:  # more than one character taken out (a surrogate pair is two units)
        return False
    return len(text) <= 1 or not text.strip() or text in _AUTO_PAIRS


def is_keystroke(changes: Sequence[types.TextDocumentContentChangeEvent]) -> bool:
    """Whether ``changes`` are what typing sends: each change puts in at most one character
    (an auto-closed pair, a line break with its indentation, a tab's spaces: whitespace only)
    and takes out at most one (a line joined to the next counts as one). A cut, a deleted
    selection, a paste, an undo or an accepted suggestion are not; several cursors typing at
    once are. What was taken out is judged by its range (two columns at most: one UTF-16
    character), not by the text it held, so an editor's backspace that removes a whole
    indentation step, or one character counted in more UTF-8 columns, passes for a cut: its
    rest comes early, at the cost of a warm-up the next keystroke stops."""
    return bool(changes) and all(_one_key(c) for c in changes)


class EditRests:
    """Tells ``rest`` where the cursor rests after a plain client's edits (module docstring).

    Must be used on the event loop (``later`` defaults to its ``call_later``)."""

    def __init__(self, rest: Callable[[CursorMessage], None], later: Later | None = None,
                 delay: float = EDIT_REST_S) -> None:
        self._rest = rest
        self._later = later
        self._delay = delay
        self._timers: dict[str, Timer] = {}
        #: the latest opened document and its rest, until it fires or the user acts
        self._open: tuple[str, Timer] | None = None
        self.client_sends_cursor = False

    def opened(self, doc: Document) -> None:
        """``doc`` was just opened: unless the user acts first, the cursor rests at its start
        (an earlier open's rest that has not fired is replaced)."""
        self._stop_open()
        if self.client_sends_cursor:
            return
        message = CursorMessage(doc.uri, 0, 0)
        self._open = (doc.uri, self._start(lambda: self._fire_open(message)))

    def edited(self, doc: Document,
               changes: Sequence[types.TextDocumentContentChangeEvent]) -> None:
        """``doc`` was just changed by ``changes``: its rest starts again from now (and an
        opened document's rest is off: the user works here)."""
        self._stop(doc.uri)
        self._stop_open()
        if self.client_sends_cursor:
            return
        end = edit_end(doc, changes)
        if end is None:
            return
        message = CursorMessage(doc.uri, end.line, end.character)
        delay = self._delay if is_keystroke(changes) else min(self._delay, AT_ONCE_S)
        self._timers[doc.uri] = self._start(lambda: self._fire(message), delay)

    def cursor_sent(self) -> None:
        """The client sent ``seam/cursor``: from now on its cursor, not its edits, says where
        the user rests."""
        self.client_sends_cursor = True
        for uri in list(self._timers):
            self._stop(uri)
        self._stop_open()

    def asked(self, uri: str) -> None:
        """A request came for ``uri``: it runs the prompt itself, and says where the user is
        (an opened document's rest is off too)."""
        self._stop(uri)
        self._stop_open()

    def closed(self, uri: str) -> None:
        self._stop(uri)
        if self._open is not None and self._open[0] == uri:
            self._stop_open()

    def pending(self) -> int:
        """Documents whose last edit or open has not yet become a rest."""
        return len(self._timers) + (self._open is not None)

    def _start(self, fire: Callable[[], None], delay: float | None = None) -> Timer:
        later = self._later or asyncio.get_running_loop().call_later
        return later(self._delay if delay is None else delay, fire)

    def _stop(self, uri: str) -> None:
        timer = self._timers.pop(uri, None)
        if timer is not None:
            timer.cancel()

    def _stop_open(self) -> None:
        if self._open is not None:
            self._open[1].cancel()
            self._open = None

    def _fire_open(self, message: CursorMessage) -> None:
        self._open = None
        log.debug("opened %s: taken to rest at its start", message.uri)
        self._rest(message)

    def _fire(self, message: CursorMessage) -> None:
        self._timers.pop(message.uri, None)
        log.debug("edited %s: taken to rest at %d:%d", message.uri, message.line + 1,
                  message.character + 1)
        self._rest(message)


__all__ = ["AT_ONCE_S", "EDIT_REST_S", "EditRests", "edit_end", "is_keystroke"]
