"""Whether the text outside the constraint's windows parses, without a request waiting for a
parse of the whole file.

The language's mode (``exact`` or ``window``, see ``language.FimLanguage.mode``) depends on
whether the text outside the windows parses on its own.  On a 200,000-line file one
``ast.parse`` of it takes seconds, and the first suggestion in such a file waited for it.  So
a large outside text is judged on a background thread, in *chunks*: it is cut before lines
that start at column 0 with code, and the chunks are parsed one at a time (each a few
milliseconds of the interpreter, and a rest twice as long after each, so the editor's event
loop and the decoder keep running).  Every
answer is remembered by content (the chunk's, and the whole text's), so an edit re-parses only
the chunk it touched, and a request whose outside text was judged before pays a lookup.

If every chunk parses, the whole text does: each chunk ends with a complete statement outside
any bracket or string (else it would not parse alone) and the next one starts a statement at
column 0, and CPython's parser keeps no state across such a boundary.  A chunk that does not
parse may still be part of a text that does (the cut fell inside a string, say), so the chunks
after it are joined to it, doubling its length, until it parses; it does not parse when it
fails at the end of the text or at ``MAX_PARSE_CHARS``.  A statement longer than that (a 5 MB
literal) is not parsed at all: the answer stays unknown, and the mode exact within the
windows (a documented fallback: the text far from the cursor is not checked).

:func:`outside_state` answers ``True`` or ``False`` when it knows, and ``None`` while a large
text is still being judged; ``FimLanguage.mode`` then says ``exact`` (the windows are
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

#: An outside text this short is parsed whole, at once (some 20 ms).
NEAR_CHARS = 64_000
#: Characters per chunk, at least (a chunk ends at the next line start after this many).
CHUNK_CHARS = 32_000
#: The longest text parsed at once (a statement longer than this, a 5 MB literal say, is not
#: parsed: that would hold the interpreter for seconds and take gigabytes).
MAX_PARSE_CHARS = 1_000_000
#: Chunk answers remembered (by content): 40 MB of source in all.
CHUNK_MEMORY = 1_250
#: Lines a chunk may start at: column 0, and code (not a blank line, a comment, an indented
#: or closing line, or a decorator's target which belongs with its decorator).
_STATEMENT_START = re.compile(r"(?m)^(?=[^\s#)\]}@])")
PENDING_REASON = ("the text far from the cursor is still being checked (a large file), or "
                  "holds a statement too long to check; the mode is exact within the windows")


class _Answers:
    """Chunk and whole-text answers by content (an LRU), shared by all threads."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._known: collections.OrderedDict[str, int] = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str) -> int | None:
        with self._lock:
            found = self._known.get(text)
            if found is not None:
                self._known.move_to_end(text)
            return found

    def put(self, text: str, value: int) -> None:
        with self._lock:
            self._known[text] = value
            self._known.move_to_end(text)
            while len(self._known) > self.size:
                self._known.popitem(last=False)


_chunks = _Answers(CHUNK_MEMORY)
_wholes = _Answers(8)  # 1 parses, 0 does not, -1 too large to tell


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
        found = int(file_parses(chunk))
        _chunks.put(chunk, found)
    return bool(found)


def _judge(text: str, pace: float = 0.0) -> bool | None:
    """The whole answer, chunk by chunk (see the module), kept by content; ``None`` when a
    statement too long to parse (``MAX_PARSE_CHARS``) stands in the way.  ``pace``: after each
    parse, rest that many times as long as it took (a parse holds the interpreter: the
    background gives the request threads most of it)."""
    known = _wholes.get(text)
    if known is not None:
        return _VERDICTS[known]
    pieces = chunks(text)
    verdict = True
    i = 0
    while i < len(pieces):
        piece, i, ok = pieces[i], i + 1, False
        while True:
            if len(piece) > MAX_PARSE_CHARS:
                verdict = None
                break
            t0 = time.perf_counter()
            ok = _chunk_parses(piece)
            if pace:
                time.sleep((time.perf_counter() - t0) * pace)
            if ok or i >= len(pieces):
                break
            # The cut may have fallen inside a string or a bracket: join the following
            # chunks, doubling the piece, until it parses or is too long to try.
            size = len(piece)
            while i < len(pieces) and len(piece) < 2 * size:
                piece, i = piece + pieces[i], i + 1
        if verdict is None or not ok:
            verdict = None if verdict is None else False
            break
    _wholes.put(text, {True: 1, False: 0, None: -1}[verdict])
    return verdict


_VERDICTS: dict[int, bool | None] = {1: True, 0: False, -1: None}


class _Checker:
    """The background thread that judges far chunks (newest request first; one text at a
    time, so a burst of edits does not queue work for texts long gone)."""

    #: rest after each chunk, as a multiple of its parse time (see ``_judge``)
    PACE = 2.0

    def __init__(self) -> None:
        self._jobs: queue.LifoQueue[str] = queue.LifoQueue(maxsize=4)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pending: set[int] = set()

    def submit(self, text: str) -> None:
        key = hash(text)
        with self._lock:
            if key in self._pending:
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="seam-outside-check")
                self._thread.start()
            try:
                self._jobs.put_nowait(text)
            except queue.Full:
                return  # newer texts wait already; this one is asked for again if needed
            self._pending.add(key)

    def _run(self) -> None:
        while True:
            text = self._jobs.get()
            try:
                _judge(text, pace=self.PACE)
            finally:
                with self._lock:
                    self._pending.discard(hash(text))

    def idle(self) -> bool:
        """Whether nothing is queued or being judged (for tests)."""
        with self._lock:
            return not self._pending


checker = _Checker()


def outside_state(text: str, wait: bool = False) -> bool | None:
    """Whether ``text`` (one side of the outside) parses: ``None`` while it is being judged in
    the background (a text longer than ``NEAR_CHARS`` seen for the first time).  ``wait``
    judges it now."""
    if len(text) <= NEAR_CHARS or wait:
        return outside_parses(text)
    known = _wholes.get(text)
    if known is not None:
        return _VERDICTS[known]
    checker.submit(text)
    return None
