"""Following the outline of JSON text as it streams in, without building it.

The framing layer needs two facts about a message body before (or instead of) parsing it: where
its top-level object or array ends, and the value of its top-level ``"id"`` member. The first
lets the reader notice a ``Content-Length`` that claims more bytes than the message has (the
message is complete, what follows is the next header); the second lets it answer a request it
cannot read (too large, truncated, not JSON) with an error under the request's own id, so the
client is not left waiting. Neither may cost memory proportional to the body: an oversized body
is scanned while it is being discarded. Only bracket depth, string state and a few captured
bytes are kept; strings are skipped with one regular-expression search per chunk.
"""

from __future__ import annotations

import json
import re

_WS = b" \t\r\n"
_LBRACE, _RBRACE, _LBRACKET, _RBRACKET = 0x7B, 0x7D, 0x5B, 0x5D
_QUOTE, _BACKSLASH, _COLON, _COMMA = 0x22, 0x5C, 0x3A, 0x2C

_STRING_STOP = re.compile(rb'["\\]')
_OUTSIDE_STOP = re.compile(rb'["{}\[\]:,]')
_INTEGER = re.compile(rb"-?(0|[1-9][0-9]{0,30})")
# Below the top level only the bracket depth matters, so one match (in C) runs over whole
# strings, other bytes and whole values nested up to _NEST_LEVELS deep (which leave the depth as
# it was), stopping only at a closing bracket, an opener whose value does not end in this chunk
# or nests deeper, or a string cut by the chunk's end. Every quantifier is
# possessive and each alternative starts with its own byte, so the match never backtracks; a
# value cut by the chunk's end is read again at most once per nesting level. Without
# it a large message (a "Replace All" didChange: 40,000 changes, 4.6 MB) took a Python step per
# string and bracket: half a second of the event loop.
_STRING_RE = rb'"(?:[^"\\]++|\\.)*+"'
_NEST_LEVELS = 4


def _deep_run() -> re.Pattern[bytes]:
    inside = rb'(?:[^"{}\[\]]++|' + _STRING_RE + rb')*+'
    for _ in range(_NEST_LEVELS):
        value = rb'\{' + inside + rb'\}|\[' + inside + rb'\]'
        inside = rb'(?:[^"{}\[\]]++|' + _STRING_RE + rb'|' + value + rb')*+'
    return re.compile(inside, re.DOTALL)


_DEEP_RUN = _deep_run()
# The rest of a string nothing is captured from, escapes and all, in one match: a document's
# text cut by a chunk's end holds an escape on every line.
_STRING_RUN = re.compile(rb'(?:[^"\\]++|\\.)*+', re.DOTALL)

#: Longest id value captured (a longer string id is not recorded: ids are short in practice).
MAX_ID_BYTES = 1024


class JsonScan:
    """Incremental outline of one JSON value: feed chunks, learn where it ends and its id.

    Only an object or an array is followed; for any other first byte :attr:`container` is
    ``False`` and the scan stops. Malformed text never raises: the outline is then only a
    best guess, and the caller's real parser has the last word.
    """

    def __init__(self) -> None:
        self.container: bool | None = None  # None until the first non-blank byte
        self.ended = False
        self._object = False
        self._depth = 0
        self._in_string = False
        self._escape = False
        self._expect_key = False
        # Capturing a depth-1 key (to see whether it is "id") or the value of "id".
        self._capture: bytearray | None = None
        self._capturing: str | None = None  # "key" | "id-await" | "id-string" | "id-scalar"
        self._last_key_is_id = False
        self._id_done = False
        self.request_id: int | str | None = None

    # ----- captured id ---------------------------------------------------------------------

    def _cap(self, data: bytes) -> None:
        if self._capture is not None:
            room = MAX_ID_BYTES + 1 - len(self._capture)
            if room > 0:
                self._capture += data[:room]

    def _finish_capture(self) -> None:
        kind, raw = self._capturing, self._capture
        self._capturing = self._capture = None
        if raw is None:
            return
        if kind == "key":
            self._last_key_is_id = bytes(raw) == b"id"
            return
        self._id_done = True  # only the first top-level "id" counts
        if len(raw) > MAX_ID_BYTES:
            return
        if kind == "id-string":
            try:
                value = json.loads(b'"' + bytes(raw) + b'"')
            except ValueError:
                return
            self.request_id = value if isinstance(value, str) else None
        elif kind == "id-scalar":
            text = bytes(raw).strip(_WS)
            if _INTEGER.fullmatch(text):
                self.request_id = int(text)

    # ----- scanning ------------------------------------------------------------------------

    def feed(self, data: bytes | bytearray | memoryview) -> int | None:
        """Scan the next chunk; return the index in it just past the value's end, if it ends.

        The loop steps from one structural byte to the next (a regex finds it), so a call per
        step costs little: the value's opening, the inside of a string and an ``id`` being
        captured are their own methods, each returning where the loop goes on (``None``: at
        the chunk's end)."""
        if self.ended or self.container is False:
            return None
        data = bytes(data)
        i: int | None = 0
        n = len(data)
        while i is not None and i < n:
            if self.container is None:
                i = self._open(data, i)
                continue
            if self._escape:
                self._escape = False
                self._cap(data[i:i + 1])
                i += 1
                continue
            if self._in_string:
                i = self._string(data, i)
                continue
            if self._depth > 1 and self._capturing is None:
                i = self._deep(data, i)
                continue
            m = _OUTSIDE_STOP.search(data, i)
            if m is None:
                if self._capturing in ("id-await", "id-scalar"):
                    self._capturing = "id-scalar"
                    self._cap(data[i:])
                return None
            j = m.start()
            c = data[j]
            if self._capturing in ("id-await", "id-scalar") and self._id_stop(data, i, j, c):
                i = j + 1
                continue
            if self._structural(c):
                return j + 1
            i = j + 1
        return None

    def _open(self, data: bytes, i: int) -> int | None:
        """Before the value: skip white space to its first byte, which must open an object
        or an array (else nothing is scanned)."""
        n = len(data)
        while i < n and data[i] in _WS:
            i += 1
        if i == n:
            return None
        if data[i] not in (_LBRACE, _LBRACKET):
            self.container = False
            return None
        self.container = True
        self._object = data[i] == _LBRACE
        self._depth = 1
        self._expect_key = self._object
        return i + 1

    def _deep(self, data: bytes, i: int) -> int | None:
        """Below the top level, outside strings: on to where the depth changes (see
        ``_DEEP_RUN``), and on from there while the value stays below the top level."""
        n = len(data)
        while self._depth > 1:
            j = _DEEP_RUN.match(data, i).end()  # type: ignore[union-attr]  # never fails
            if j >= n:
                return None
            c = data[j]
            if c == _QUOTE:
                self._in_string = True
                return j + 1
            if c in (_LBRACE, _LBRACKET):
                self._depth += 1
            elif c in (_RBRACE, _RBRACKET):
                self._depth -= 1
            i = j + 1
        return i

    def _string(self, data: bytes, i: int) -> int | None:
        """Inside a string: on to its closing quote (or a backslash, while capturing)."""
        if self._capturing is None:
            j = _STRING_RUN.match(data, i).end()  # type: ignore[union-attr]  # never fails
            if j >= len(data):
                return None
            if data[j] == _BACKSLASH:  # the chunk ends right after it
                self._escape = True
            else:
                self._in_string = False
            return j + 1
        m = _STRING_STOP.search(data, i)
        if m is None:
            self._cap(data[i:])
            return None
        j = m.start()
        self._cap(data[i:j])
        if data[j] == _BACKSLASH:
            self._cap(b"\\")
            self._escape = True
        else:
            self._in_string = False
            if self._capturing in ("key", "id-string"):
                self._finish_capture()
        return j + 1

    def _id_stop(self, data: bytes, i: int, j: int, c: int) -> bool:
        """The top-level ``id``'s value reaches the structural byte ``c`` at ``j``: capture up
        to it; ``True`` when ``c`` opens the id's string (the loop goes on inside it)."""
        self._cap(data[i:j])
        if c == _QUOTE and not bytes(self._capture or b"").strip(_WS):
            self._capturing = "id-string"
            self._capture = bytearray()
            self._in_string = True
            return True
        if c in (_LBRACE, _LBRACKET):  # an object or array is no id
            self._capturing = self._capture = None
            self._id_done = True
        else:
            self._capturing = "id-scalar"
            self._finish_capture()
        return False

    def _structural(self, c: int) -> bool:
        """A structural byte outside strings; ``True`` when it closes the value."""
        at_top = self._depth == 1 and self._object
        if c == _QUOTE:
            self._in_string = True
            if at_top and self._expect_key:
                self._capturing, self._capture = "key", bytearray()
        elif c in (_LBRACE, _LBRACKET):
            self._depth += 1
        elif c in (_RBRACE, _RBRACKET):
            self._depth -= 1
            if self._depth == 0:
                self.ended = True
                return True
        elif c == _COLON:
            if at_top:
                self._expect_key = False
                if self._last_key_is_id and not self._id_done:
                    self._capturing, self._capture = "id-await", bytearray()
                self._last_key_is_id = False
        elif c == _COMMA and at_top:
            self._expect_key = True
        return False


def scan_id(data: bytes | bytearray) -> int | str | None:
    """The top-level ``"id"`` of a (possibly broken) JSON object, or ``None``."""
    scan = JsonScan()
    scan.feed(data)
    return scan.request_id
