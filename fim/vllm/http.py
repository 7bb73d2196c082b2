"""JSON over HTTP to a model server: the connection, the headers, the errors, and the bounds
on what a peer may do to the client.

Split out of ``fim.vllm.client`` so that the transport (what a misbehaving peer can do to the
client: how much it may send, how long it may take) lives in one place, apart from what the
engine asks of the server.  Every caller goes through :meth:`Http.send`, which puts a watchdog
on the connection: at the call's total deadline the socket is shut down, whatever the peer is
doing (a socket timeout alone bounds one read, and a peer that trickles a byte every few
seconds never trips it).  :meth:`Http.call` reads at most :attr:`Http.MAX_BODY_BYTES` of an
answer.  Text a peer sent (a status line, an error message) reaches the user's message only
through :func:`printable`: short, with control characters escaped.
"""

from __future__ import annotations

import heapq
import http.client
import itertools
import json
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator


class VllmError(ConnectionError):
    """The server could not be reached or answered something that is not a completion (a
    ``ConnectionError``: callers that report I/O failures report this one too)."""


#: Characters of a peer's own text quoted in a message.
QUOTE_CHARS = 120


def printable(text: object, limit: int = QUOTE_CHARS) -> str:
    """A peer's text made safe to show: bytes decoded leniently, control characters (a NUL, a
    CR or LF, an escape sequence) written as escapes, cut to ``limit`` characters."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", "replace")
    text = str(text)
    out = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text[:limit])
    return out + ("…" if len(text) > limit else "")


class Watchdog:
    """Shuts a connection's socket down at a deadline (see the module docstring); ``fired``
    says whether it did.  :meth:`cancel` it once the exchange is over (one left running only
    shuts down a socket that is closed by then).  All watchdogs share one thread."""

    _lock = threading.Condition()
    _heap: list[tuple[float, int, Watchdog]] = []
    _thread: threading.Thread | None = None
    _ids = itertools.count()

    def __init__(self, seconds: float) -> None:
        self.fired = False
        self.cancelled = False
        self.sock: socket.socket | None = None
        with Watchdog._lock:
            heapq.heappush(Watchdog._heap, (time.monotonic() + max(0.0, seconds),
                                            next(Watchdog._ids), self))
            if Watchdog._thread is None:
                Watchdog._thread = threading.Thread(target=Watchdog._run, daemon=True,
                                                    name="seam-http-watchdog")
                Watchdog._thread.start()
            Watchdog._lock.notify()

    def watch(self, sock: socket.socket | None) -> None:
        """The socket to shut down (once connected); at once when the deadline has passed."""
        self.sock = sock
        if self.fired:
            self._shut()

    def cancel(self) -> None:
        self.cancelled = True
        self.sock = None

    def _shut(self) -> None:
        sock = self.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # closed already

    @staticmethod
    def _run() -> None:
        heap = Watchdog._heap
        while True:
            with Watchdog._lock:
                while not heap or heap[0][0] > time.monotonic():
                    Watchdog._lock.wait(None if not heap else heap[0][0] - time.monotonic())
                _, _, dog = heapq.heappop(heap)
            if not dog.cancelled:
                dog.fired = True
                dog._shut()


class Http:
    """Small JSON-over-HTTP calls with total deadlines, byte limits and clear errors."""

    #: Bytes a whole JSON answer (a model list, a tokenization, an error) may hold: far above
    #: any real one, far below what would hurt the editor's process.
    MAX_BODY_BYTES = 4 << 20

    def __init__(self, url: str, api_key: str | None, timeout: float) -> None:
        parts = urllib.parse.urlsplit(url)
        try:
            parts.port  # noqa: B018 - a port out of range raises here, not at the first call
        except ValueError as err:
            raise VllmError(f"server must be an http(s) URL such as http://host:8000, "
                            f"not {url!r} ({err})") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise VllmError(f"server must be an http(s) URL such as http://host:8000, "
                            f"not {url!r}")
        self.url, self.parts, self.api_key, self.timeout = url.rstrip("/"), parts, api_key, timeout
        self.base = parts.path.rstrip("/")
        if self.base.endswith("/v1"):
            self.base = self.base[:-3]

    def connection(self, timeout: float | None = None) -> http.client.HTTPConnection:
        cls = (http.client.HTTPSConnection if self.parts.scheme == "https"
               else http.client.HTTPConnection)
        return cls(self.parts.hostname, self.parts.port, timeout=timeout or self.timeout)

    def headers(self) -> dict[str, str]:
        out = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            out["Authorization"] = f"Bearer {self.api_key}"
        return out

    def send(self, method: str, path: str, body: dict | None = None,
             timeout: float | None = None,
             opened: Callable[[http.client.HTTPConnection], None] | None = None,
             total: float | None = None,
             ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send a request; ``opened`` hears of the connection before anything is sent (so
        another thread can hang up while the server has not answered yet).

        ``timeout`` bounds one socket read; ``total`` (by default ``timeout``) the whole
        exchange, the answer's reading included: a :class:`Watchdog` shuts the socket down
        then (``conn.watchdog``, which the caller cancels when done with the answer)."""
        timeout = timeout or self.timeout
        conn = self.connection(timeout)
        dog = Watchdog(total if total is not None else timeout)
        conn.watchdog = dog  # type: ignore[attr-defined]
        if opened is not None:
            opened(conn)
        sent = False
        try:
            conn.connect()
            dog.watch(conn.sock)
            conn.request(method, self.base + path,
                         json.dumps(body).encode() if body is not None else None,
                         self.headers())
            sent = True
            return conn, conn.getresponse()
        except (OSError, http.client.HTTPException) as err:
            dog.cancel()
            conn.close()
            raise VllmError(self.failure(err, sent, dog.fired, total or timeout)) from err

    def failure(self, err: BaseException, sent: bool, timed_out: bool, seconds: float) -> str:
        """A true sentence for what went wrong with one exchange: nothing there, no answer in
        time, an answer that is not HTTP, or a connection closed without one."""
        where = f"the vLLM server at {self.url}"
        if timed_out or isinstance(err, TimeoutError):
            return (f"{where} did not answer within {seconds:g} s" if not sent else
                    f"{where} did not finish its answer within {seconds:g} s")
        if not sent:
            return f"{where} cannot be reached: {printable(err)}"
        if isinstance(err, http.client.BadStatusLine) and not isinstance(
                err, http.client.RemoteDisconnected):
            return (f"{where} answered something that is not HTTP (is it a vLLM server?): "
                    f"{printable(err.line)}")
        if isinstance(err, http.client.LineTooLong):
            return f"{where} answered with an HTTP header line too long to read"
        if isinstance(err, http.client.HTTPException) and not isinstance(err, OSError):
            return f"{where} answered malformed HTTP: {printable(err)}"
        return f"{where} closed the connection without a complete answer: {printable(err)}"

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        """One JSON request and its JSON answer, within ``timeout`` in total and
        :attr:`MAX_BODY_BYTES`."""
        conn, resp = self.send(method, path, body)
        dog: Watchdog = conn.watchdog  # type: ignore[attr-defined]
        try:
            data = read_bounded(resp, self.MAX_BODY_BYTES)
        except (OSError, http.client.HTTPException) as err:
            raise VllmError(self.failure(err, True, dog.fired, self.timeout)) from err
        finally:
            dog.cancel()
            conn.close()
        if data is None:
            raise VllmError(f"the vLLM server at {self.url} sent an answer longer than "
                            f"{self.MAX_BODY_BYTES >> 20} MiB to {method} {path}")
        if dog.fired:
            raise VllmError(self.failure(TimeoutError(), True, True, self.timeout))
        return json_or_error(self.url, resp.status, data)


def refuse() -> None:
    """Put in place of a connection's ``connect``: a request not sent yet never will be."""
    raise ConnectionAbortedError("the request was cancelled before it was sent")


def hang_up(conn: http.client.HTTPConnection,
            resp: http.client.HTTPResponse | None) -> None:
    """Close a streamed request's connection under the thread that reads it (``close`` alone
    leaves the socket open while the response still reads from it): the server sees the
    client go and stops generating.  Safe while the reader is inside ``resp``."""
    conn.connect = refuse  # type: ignore[method-assign]
    sock = conn.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already closed by the peer
    # The descriptor closes only when the response's file is closed too; until then the
    # server's writes still succeed (after a shutdown Linux drops them silently) and the
    # server, seeing no error, would run the request to its end.
    if resp is not None:
        try:
            resp.close()
        except Exception:  # noqa: BLE001 - the reader thread may be inside it
            pass
    conn.close()


#: Bytes one line of a server-sent event stream may hold (a step's chunk with 20 top log-
#: probabilities is a few kilobytes).
MAX_EVENT_LINE_BYTES = 1 << 20
#: Bytes one whole event stream may hold.
MAX_EVENT_STREAM_BYTES = 8 << 20


class StreamTooLong(ValueError):
    """An event stream broke a byte limit; the message says which, for the caller to put
    after the server's name."""


def event_lines(resp: http.client.HTTPResponse, max_line: int = MAX_EVENT_LINE_BYTES,
                max_total: int = MAX_EVENT_STREAM_BYTES) -> Iterator[str]:
    """The lines of a server-sent event stream, stripped, each read no further than
    ``max_line`` bytes and all of them together at most ``max_total``
    (:class:`StreamTooLong` past either: a peer that never ends a line or an answer costs no
    more memory than that)."""
    size = 0
    while True:
        raw = resp.readline(max_line + 1)
        if not raw:
            return
        size += len(raw)
        if len(raw) > max_line:
            raise StreamTooLong(f"sent a line longer than {max_line >> 20} MiB")
        if size > max_total:
            raise StreamTooLong(f"sent more than {max_total >> 20} MiB for one answer")
        yield raw.decode("utf-8", "replace").strip()


class MalformedEvent(ValueError):
    """An event's data is not a JSON object; the message says how, for the caller to put
    after the server's name."""


def event_object(data: str) -> dict:
    """One event's ``data:`` payload as the JSON object it must be (:class:`MalformedEvent`
    otherwise, quoting the peer's text safely)."""
    try:
        chunk = json.loads(data)
    except ValueError:
        raise MalformedEvent(f"sent a malformed event: {printable(data, 80)}") from None
    if not isinstance(chunk, dict):
        raise MalformedEvent(f"sent an event that is not an object: {printable(data, 80)}")
    return chunk


def read_bounded(resp: http.client.HTTPResponse, limit: int) -> bytes | None:
    """The answer's body, or ``None`` when it holds more than ``limit`` bytes (the rest is not
    read)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        piece = resp.read(min(1 << 16, limit + 1 - size))
        if not piece:
            return b"".join(chunks)
        chunks.append(piece)
        size += len(piece)
        if size > limit:
            return None


def json_or_error(url: str, status: int, data: bytes) -> dict:
    try:
        out = json.loads(data)
    except ValueError:
        out = None
    if status != 200 or not isinstance(out, dict):
        detail = ""
        if isinstance(out, dict):
            err = out.get("error", out.get("message", out))
            detail = err.get("message", err) if isinstance(err, dict) else err
        raise VllmError(f"the vLLM server at {url} answered HTTP {status}"
                        + (f": {printable(detail)}" if detail else " with no JSON"))
    return out
