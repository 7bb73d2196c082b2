"""Whether the text outside the constraint's windows parses, without a request waiting for a
parse of the whole file.

The language's mode (``exact`` or ``window``, see ``language.FimLanguage.mode``) depends on
whether the text outside the windows parses on its own.  On a 200,000-line file one
``ast.parse`` of it takes seconds, and the first suggestion in such a file waited for it.  So
a large outside text is judged in *chunks*: it is cut before lines that start at column 0
with code, the few chunks next to the window are parsed at once, and the rest are parsed on a
background thread, one chunk at a time (each a few milliseconds of the interpreter, and a rest
twice as long after each, so the editor's event loop and the decoder keep running).  Every
answer is remembered by the chunk's content, so an edit re-parses only the chunk it touched.

If every chunk parses, the whole text does: each chunk ends with a complete statement outside
any bracket or string (else it would not parse alone) and the next one starts a statement at
column 0, and CPython's parser keeps no state across such a boundary.  A chunk that does not
parse may still be part of a text that does (the cut fell inside a string, say), so then the
whole text is parsed, on the background thread too.

:func:`outside_state` answers ``True`` or ``False`` when it knows, and ``None`` while the far
chunks are still being checked; ``FimLanguage.mode`` then says ``exact`` (the windows are
exact; only the far text is unconfirmed) and its ``reason`` says so, and the next request after
the check has the true answer.
"""

from __future__ import annotations

import collections
import queue
import re
import threading
import time

from .fallback import file_parses, outside_parses

#: An outside text this short is parsed whole, at once (a few milliseconds).
NEAR_CHARS = 64_000
#: Characters per chunk, at least (a chunk ends at the next line start after this many).
CHUNK_CHARS = 32_000
#: Chunk answers remembered (by content): 40 MB of source in all.
CHUNK_MEMORY = 1_250
#: Lines a chunk may start at: column 0, and code (not a blank line, a comment, an indented
#: or closing line, or a decorator's target which belongs with its decorator).
_STATEMENT_START = re.compile(r"(?m)^(?=[^\s#)\]}@])")
PENDING_REASON = ("the text far from the cursor is still being checked (a large file); the "
                  "mode is exact within the windows")


class _Answers:
    """Chunk and whole-text answers by content (an LRU), shared by all threads."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._known: collections.OrderedDict[str, bool] = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str) -> bool | None:
        with self._lock:
            found = self._known.get(text)
            if found is not None:
                self._known.move_to_end(text)
            return found

    def put(self, text: str, value: bool) -> None:
        with self._lock:
            self._known[text] = value
            self._known.move_to_end(text)
            while len(self._known) > self.size:
                self._known.popitem(last=False)


_chunks = _Answers(CHUNK_MEMORY)
_wholes = _Answers(8)


def chunks(text: str) -> list[str]:
    """``text`` cut before statement-like lines at column 0, in pieces of at least
    ``CHUNK_CHARS`` characters (the last may be shorter)."""
    out: list[str] = []
    start = 0
    while len(text) - start > CHUNK_CHARS:
        m = _STATEMENT_START.search(text, start + CHUNK_CHARS)
        if m is None:
            break
        out.append(text[start:m.start()])
        start = m.start()
    out.append(text[start:])
    return out


def _chunk_parses(chunk: str) -> bool:
    found = _chunks.get(chunk)
    if found is None:
        found = file_parses(chunk)
        _chunks.put(chunk, found)
    return found


def _judge(pieces: list[str], text: str, pace: float = 0.0) -> bool:
    """The whole answer, chunk by chunk (see the module); the whole text when one fails.
    ``pace``: after each chunk parsed, rest that many times as long as the parse took (a parse
    holds the interpreter: the background gives the request threads most of it)."""
    for piece in pieces:
        t0 = time.perf_counter()
        if not _chunk_parses(piece):
            break
        if pace:
            time.sleep((time.perf_counter() - t0) * pace)
    else:
        return True
    whole = _wholes.get(text)
    if whole is None:
        whole = file_parses(text)
        _wholes.put(text, whole)
    return whole


class _Checker:
    """The background thread that judges far chunks (newest request first; one text at a
    time, so a burst of edits does not queue work for texts long gone)."""

    #: rest after each chunk, as a multiple of its parse time (see ``_judge``)
    PACE = 2.0

    def __init__(self) -> None:
        self._jobs: queue.LifoQueue[tuple[list[str], str]] = queue.LifoQueue(maxsize=4)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pending: set[int] = set()

    def submit(self, pieces: list[str], text: str) -> None:
        key = hash(text)
        with self._lock:
            if key in self._pending:
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="seam-outside-check")
                self._thread.start()
            try:
                self._jobs.put_nowait((pieces, text))
            except queue.Full:
                return  # newer texts wait already; this one is asked for again if needed
            self._pending.add(key)

    def _run(self) -> None:
        while True:
            pieces, text = self._jobs.get()
            try:
                _judge(pieces, text, pace=self.PACE)
            finally:
                with self._lock:
                    self._pending.discard(hash(text))

    def idle(self) -> bool:
        """Whether nothing is queued or being judged (for tests)."""
        with self._lock:
            return not self._pending


checker = _Checker()


def outside_state(text: str, near_end: bool, wait: bool = False) -> bool | None:
    """Whether ``text`` (one side of the outside) parses: ``None`` while its far chunks are
    being checked in the background.  ``near_end``: the window lies after the text (the left
    side), so its end is near; else its start.  ``wait`` judges all of it now."""
    if len(text) <= NEAR_CHARS or wait:
        return outside_parses(text)
    whole = _wholes.get(text)
    if whole is not None:
        return whole
    pieces = chunks(text)
    known = [_chunks.get(p) for p in pieces]
    if all(known):
        return True
    # The chunks next to the window first: an error near the cursor is the likely one.
    near = range(len(pieces) - 1, -1, -1) if near_end else range(len(pieces))
    budget = NEAR_CHARS
    for i in near:
        if budget <= 0:
            break
        if known[i] is None:
            known[i] = _chunk_parses(pieces[i])
        budget -= len(pieces[i])
    if all(known):
        return True
    checker.submit(pieces, text)
    return None
