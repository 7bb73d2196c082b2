"""LSP base-protocol framing read from an untrusted byte stream.

pygls's own reader (``pygls.io_.run_async``) accepts only the exact header line
``Content-Length: N\\r\\n``, believes any N (a huge one ends in ``MemoryError``), and once a
frame is off by a byte it never finds its way back: the server stays up but deaf. This decoder
reads the header part as the LSP specification and HTTP describe it and mainstream clients
write it: header names in any case, optional blanks around the colon and the value, any
header order, unknown headers ignored, a bare ``\\n`` accepted where ``\\r\\n`` is due.

What it guarantees on bad input:

* Content longer than the limit is never held: it is scanned while being discarded, only to
  find the request's id and where the message ends.
* A ``Content-Length`` that is too small leaves a body that is not JSON: an error, then the
  reader resynchronises on the next ``Content-Length`` header. One that is too large is noticed
  as soon as the JSON value is complete (a JSON object cannot continue after its closing
  brace), so the message is still handled even if the client now waits for the answer.
* Every damaged stretch of the stream is reported once (a :class:`FrameError`); an error about
  a request whose id could still be read carries that id, so the client gets its answer.

It is a pure state machine, bytes in and events out, so it is tested without any I/O.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import Enum
from typing import Any

from lsp_server.wire.jsonscan import JsonScan, scan_id

#: Default limit on one message's content: a 5 MB Python file is ~6 MB of JSON.
DEFAULT_MAX_CONTENT_BYTES = 64 * 1024 * 1024
#: A header part (all header lines) longer than this is not a header.
MAX_HEADER_BYTES = 8192

_WS = b" \t\r\n"
_TOKEN = rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
# The start of a header line: a field name, optional blanks, then a colon (or the end of what
# has arrived so far, when the line is still incomplete).
_HEADER_START = re.compile(_TOKEN + rb"[ \t]*(?::|\Z)")
_HEADER_LINE = re.compile(rb"(" + _TOKEN + rb")[ \t]*:[ \t]*(.*?)[ \t]*")
_HEADER_END = re.compile(rb"\r?\n\r?\n")
_LINE_END = re.compile(rb"\r?\n")
_RESYNC = re.compile(rb"content-length[ \t]*:", re.IGNORECASE)
_RESYNC_KEEP = len(b"content-length") + 1
_DIGITS = re.compile(rb"[0-9]{1,20}")
_CHARSET = re.compile(rb"""charset\s*=\s*"?([^";\s]+)""", re.IGNORECASE)


class FrameErrorKind(Enum):
    """What went wrong with a stretch of the stream."""

    GARBAGE = "garbage"  # bytes where a header was due
    BAD_HEADER = "bad-header"  # a header part without a usable Content-Length or charset
    TOO_LARGE = "too-large"  # content over the size limit
    NOT_JSON = "not-json"  # content that is not UTF-8 JSON text
    TRUNCATED = "truncated"  # the stream ended inside a message


@dataclass(frozen=True)
class Frame:
    """One message's content, parsed as JSON (any JSON value: shape checks come later)."""

    payload: Any


@dataclass(frozen=True)
class FrameError:
    """A damaged stretch of the stream; ``request_id`` is the top-level id when it was read."""

    kind: FrameErrorKind
    detail: str
    request_id: int | str | None = None


@dataclass(frozen=True)
class FrameNote:
    """Something worth a log line that lost nothing (a Content-Length that was too large)."""

    detail: str


Event = Frame | FrameError | FrameNote


class _State(Enum):
    HEADER = "header"
    BODY = "body"
    TRAILER = "trailer"  # blanks still owed by a frame whose value ended early
    SKIP = "skip"  # discarding content that will not be parsed
    GARBAGE = "garbage"  # looking for the next Content-Length header


class _NotJson(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise _NotJson(f"{name} is not JSON")


def parse_json(body: bytes | bytearray) -> Any:
    """Strict JSON from UTF-8 bytes: no NaN/Infinity, no other encoding; ``_NotJson`` else."""
    try:
        text = bytes(body).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _NotJson(f"content is not UTF-8 (invalid byte at offset {exc.start})") from None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise _NotJson("content nests too deeply") from None
    except ValueError as exc:  # JSONDecodeError, and ints longer than Python's digit limit
        raise _NotJson(f"content is not JSON ({str(exc).splitlines()[0]})") from None


class FrameDecoder:
    """Turns stream bytes into :class:`Frame`, :class:`FrameError` and :class:`FrameNote`."""

    def __init__(self, max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES,
                 max_header_bytes: int = MAX_HEADER_BYTES) -> None:
        if max_content_bytes < 1 or max_header_bytes < 64:
            raise ValueError("limits must be positive (header limit at least 64 bytes)")
        self.max_content_bytes = max_content_bytes
        self.max_header_bytes = max_header_bytes
        self._buf = bytearray()
        self._state = _State.HEADER
        self._reported = False  # the current damaged stretch has been reported
        self._length = 0  # BODY: declared length; SKIP/TRAILER: bytes still owed
        self._body = bytearray()
        self._scan = JsonScan()
        self._skip_error: FrameError | None = None
        self._events: list[Event] = []

    # ----- public --------------------------------------------------------------------------

    def feed(self, data: bytes) -> list[Event]:
        """Take the next bytes of the stream; return what they completed."""
        self._buf += data
        while self._step():
            pass
        events, self._events = self._events, []
        return events

    def finish(self) -> list[Event]:
        """The stream ended: report a message left incomplete."""
        while self._step():
            pass
        if self._state is _State.BODY and self._body:
            self._report(FrameErrorKind.TRUNCATED,
                         f"the stream ended {self._length - len(self._body)} bytes short of "
                         "the announced Content-Length", self._scan.request_id)
        elif self._state is _State.SKIP and self._skip_error is not None:
            self._emit_skip_error()
        elif self._state in (_State.HEADER, _State.GARBAGE) and self._buf.strip(_WS):
            self._report(FrameErrorKind.TRUNCATED, "the stream ended inside a header part")
        self._buf.clear()
        self._body = bytearray()
        events, self._events = self._events, []
        return events

    @property
    def pending_bytes(self) -> int:
        """Bytes held (for tests: stays bounded whatever arrives)."""
        return len(self._buf) + len(self._body)

    # ----- reporting -----------------------------------------------------------------------

    def _report(self, kind: FrameErrorKind, detail: str,
                request_id: int | str | None = None) -> None:
        # An error about a readable request is always sent (the client waits for it); other
        # damage is reported once per stretch, so a burst of garbage is one error, not many.
        if request_id is None and self._reported:
            return
        self._reported = True
        self._events.append(FrameError(kind, detail, request_id))

    # ----- the state machine ---------------------------------------------------------------

    def _step(self) -> bool:
        """Advance once; ``False`` when more input is needed."""
        state = self._state
        if state is _State.HEADER:
            return self._step_header()
        if state is _State.BODY:
            return self._step_body()
        if state is _State.TRAILER:
            return self._step_trailer()
        if state is _State.SKIP:
            return self._step_skip()
        return self._step_garbage()

    def _step_header(self) -> bool:
        buf = self._buf
        start = 0
        while start < len(buf) and buf[start] in _WS:
            start += 1
        if start:
            del buf[:start]
        if not buf:
            return False
        if not _HEADER_START.match(buf):
            self._report(FrameErrorKind.GARBAGE,
                         "expected a header such as 'Content-Length: N'", scan_id(buf[:65536]))
            self._state = _State.GARBAGE
            return True
        line = _LINE_END.search(buf)
        glued = _RESYNC.search(buf, 0, line.start() if line else len(buf))
        if glued is not None and glued.start() > 0:
            # Stray bytes that happen to be header characters, stuck to the next header
            # ("3Content-Length: ...", the tail of a frame that was cut short).
            self._report(FrameErrorKind.GARBAGE, "stray bytes before a header")
            del buf[:glued.start()]
            return True
        end = _HEADER_END.search(buf, 0, self.max_header_bytes + 4)
        if end is None:
            if len(buf) <= self.max_header_bytes:
                return False
            return self._bad_header(f"a header part longer than {self.max_header_bytes} bytes")
        block = bytes(buf[:end.start()])
        length: int | None = None
        bad_charset: str | None = None
        for line in _LINE_END.split(block):
            m = _HEADER_LINE.fullmatch(line.strip(b" \t"))
            if m is None:
                return self._bad_header("a header line that is not 'Name: value'")
            name, value = m.group(1).lower(), m.group(2)
            if name == b"content-length":
                if not _DIGITS.fullmatch(value):
                    return self._bad_header("Content-Length is not a number of bytes",
                                            end.end())
                n = int(value)
                if length is not None and n != length:
                    return self._bad_header("two different Content-Length headers",
                                            end.end())
                length = n
            elif name == b"content-type":
                charset = _CHARSET.search(value)
                if charset and charset.group(1).lower() not in (b"utf-8", b"utf8"):
                    bad_charset = charset.group(1).decode("ascii", "replace")
        if length is None:
            del buf[:end.end()]
            self._report(FrameErrorKind.BAD_HEADER, "a header part without Content-Length")
            self._state = _State.GARBAGE
            return True
        del buf[:end.end()]
        self._reported = False  # a good header ends any damaged stretch
        if bad_charset is not None:
            self._start_skip(length, FrameErrorKind.BAD_HEADER,
                             f"charset {bad_charset!r} is not supported (only utf-8)")
        elif length > self.max_content_bytes:
            self._start_skip(length, FrameErrorKind.TOO_LARGE,
                             f"a message of {length} bytes is over the limit of "
                             f"{self.max_content_bytes} bytes")
        else:
            self._state = _State.BODY
            self._length = length
            self._body = bytearray()
            self._scan = JsonScan()
        return True

    def _bad_header(self, detail: str, block_end: int | None = None) -> bool:
        """Report a header part that cannot be used and skip it: all of it when its lines
        are well-formed (``block_end``), else only its first line, since the next message's
        header may be among the later ones."""
        self._report(FrameErrorKind.BAD_HEADER, detail)
        if block_end is None:
            line = _LINE_END.search(self._buf)
            block_end = line.end() if line else max(1, len(self._buf) - _RESYNC_KEEP)
        del self._buf[:block_end]
        self._state = _State.GARBAGE
        return True

    def _step_body(self) -> bool:
        buf, body = self._buf, self._body
        if not buf:
            return False
        take = min(len(buf), self._length - len(body))
        start = len(body)
        body += buf[:take]
        del buf[:take]
        end = self._scan.feed(memoryview(body)[start:])
        if end is not None and start + end < self._length:
            # The value ended before the announced length: what follows must be blanks. If
            # anything else has come, the length was too large and it is the next header.
            done = start + end
            self._deliver(body[:done])
            tail = body[done:].lstrip(_WS)
            owed = self._length - len(body)
            self._body = bytearray()
            if tail:
                self._events.append(FrameNote(
                    f"Content-Length announced {self._length} bytes; the message had {done}"))
                self._buf[:0] = tail
                self._state = _State.HEADER
            else:
                self._length = owed
                self._state = _State.TRAILER if owed else _State.HEADER
            return True
        if len(body) < self._length:
            return False
        self._deliver(body)
        self._body = bytearray()
        self._state = _State.HEADER
        return True

    def _deliver(self, content: bytes | bytearray) -> None:
        try:
            payload = parse_json(content)
        except _NotJson as exc:
            self._report(FrameErrorKind.NOT_JSON, str(exc), self._scan.request_id)
            return
        self._events.append(Frame(payload))

    def _step_trailer(self) -> bool:
        buf = self._buf
        if not buf:
            return False
        n = 0
        limit = min(len(buf), self._length)
        while n < limit and buf[n] in _WS:
            n += 1
        del buf[:n]
        self._length -= n
        if self._length and buf:
            self._events.append(FrameNote(
                f"Content-Length announced {self._length} bytes more than the message had"))
            self._state = _State.HEADER
        elif not self._length:
            self._state = _State.HEADER
        return True

    def _start_skip(self, length: int, kind: FrameErrorKind, detail: str) -> None:
        self._state = _State.SKIP
        self._length = length
        self._scan = JsonScan()
        self._skip_error = FrameError(kind, detail)

    def _emit_skip_error(self) -> None:
        error = self._skip_error
        self._skip_error = None
        if error is not None:
            self._reported = False
            self._report(error.kind, error.detail, self._scan.request_id)

    def _step_skip(self) -> bool:
        buf = self._buf
        if not buf:
            return False
        take = min(len(buf), self._length)
        chunk = bytes(buf[:take])
        end = self._scan.feed(chunk)
        if self._scan.container is False:
            # Not even the start of a JSON object: no message is here, whatever the header
            # claimed (a client announcing a terabyte). Look for the next header instead.
            self._emit_skip_error()
            self._state = _State.GARBAGE
            return True
        if end is not None:
            del buf[:end]
            self._length -= end
            self._emit_skip_error()
            self._state = _State.TRAILER if self._length else _State.HEADER
            return True
        del buf[:take]
        self._length -= take
        if not self._length:
            self._emit_skip_error()
            self._state = _State.HEADER
        return True

    def _step_garbage(self) -> bool:
        buf = self._buf
        m = _RESYNC.search(buf)
        if m is None:
            if len(buf) > _RESYNC_KEEP:
                del buf[:len(buf) - _RESYNC_KEEP]
            return False
        del buf[:m.start()]
        self._state = _State.HEADER
        return True
