"""One streamed answer read as positions: the token the server chose at each position of the
middle and the top-N alternatives it saw there.

The answer is read on a thread into a queue so that the decoding loop can wait for the next
position while polling its cancel and deadline, and can hang up at once (the server then stops
generating: llama-server and vLLM both abort a streamed request whose client went away).
Routes (``fim.servers.llama_server``, ``fim.servers.openai_route``) parse their own event
shape into :class:`Position` and :class:`End` records.
"""

from __future__ import annotations

import http.client
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from fim.servers.errors import ServerError, from_transport
from fim.vllm.http import (
    Http,
    StreamTooLong,
    VllmError,
    event_lines,
    hang_up,
    json_or_error,
    printable,
    read_bounded,
)


@dataclass(frozen=True)
class Position:
    """One position of the middle: the id the server chose and the top-N ``(id, logprob)``
    there, likeliest first (ids in the route's id space, see ``fim.servers.seen_vocab``)."""

    chosen: int
    top: tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class End:
    """The server ended the answer: ``eos`` (a stop token), ``limit`` (the token budget),
    ``word`` (a stop string) or ``unknown``; with the prompt tokens it took from its cache
    when it says so."""

    reason: str
    cached_tokens: int | None = None


#: What a route's parser yields per event.
Event = Position | End


class PositionStream:
    """Reads one streamed answer on a thread (see the module docstring)."""

    POLL_S = 0.02

    def __init__(self, send: Callable[[Callable[[http.client.HTTPConnection], None]],
                                      http.client.HTTPResponse],
                 parse: Callable[[http.client.HTTPResponse], Iterator[Event]],
                 name: str) -> None:
        self.events: queue.Queue = queue.Queue()
        self.conn: http.client.HTTPConnection | None = None
        self.resp: http.client.HTTPResponse | None = None
        self.closed = False
        self.name = name
        self.ended = False  # an End or an error was taken
        self._thread = threading.Thread(target=self._read, args=(send, parse), daemon=True,
                                        name="seam-server-stream")
        self._thread.start()

    def next(self, interrupt: Callable[[], bool] | None) -> Event | None:
        """The next position or the end; ``None`` when ``interrupt`` said stop first.  A
        failure of the server or the connection raises :class:`ServerError`."""
        while True:
            if interrupt is not None and interrupt():
                return None
            try:
                kind, value = self.events.get(timeout=self.POLL_S)
            except queue.Empty:
                continue
            if kind == "error":
                self.ended = True
                raise value
            if isinstance(value, End):
                self.ended = True
            return value

    def _opened(self, conn: http.client.HTTPConnection) -> None:
        self.conn = conn

    def _read(self, send, parse) -> None:
        try:
            self.resp = send(self._opened)
            if self.closed:
                return
            ended = False
            for event in parse(self.resp):
                self.events.put(("event", event))
                if isinstance(event, End):
                    ended = True
                    break
            if not ended and not self.closed:
                raise ServerError(f"the {self.name} ended the answer without finishing it "
                                  "(the stream was cut)")
        except ServerError as err:
            if not self.closed:
                self.events.put(("error", err))
        except Exception as err:  # noqa: BLE001 - the thread's boundary: all goes to next()
            if not self.closed:  # (a hang-up makes http.client raise whatever it meets)
                self.events.put(("error", ServerError(f"the {self.name} broke off: {err}")))

    def close(self) -> None:
        """Hang up (the server stops generating this answer); safe to call twice."""
        if self.closed:
            return
        self.closed = True
        conn = self.conn
        if conn is None:
            return
        hang_up(conn, self.resp)

    def join(self, timeout: float = 1.0) -> None:
        """Wait a little for the reader thread (tests; it ends on its own after a hang-up)."""
        self._thread.join(timeout)


def sse_data(resp: http.client.HTTPResponse, name: str) -> Iterator[str]:
    """The ``data:`` payloads of a server-sent event stream (``[DONE]`` included), read within
    the transport's byte limits (``fim.vllm.http.event_lines``)."""
    try:
        for line in event_lines(resp):
            if line.startswith("data:"):
                yield line[5:].strip()
            elif line.startswith("error:"):
                raise ServerError(f"the {name} failed: {printable(line[6:].strip(), 200)}")
    except StreamTooLong as err:
        raise ServerError(f"the {name} {err}") from None


def post_stream(http_: Http, path: str, body: dict, name: str,
                opened: Callable[[http.client.HTTPConnection], None]
                ) -> http.client.HTTPResponse:
    """Send a streamed request to ``path``; the response once the server answered 200, else
    :class:`ServerError` with what it said (its error body read within the transport's
    limit)."""
    try:
        _, resp = http_.send("POST", path, body, timeout=read_timeout(http_), opened=opened)
        if resp.status != 200:
            data = read_bounded(resp, Http.MAX_BODY_BYTES) or b""
            json_or_error(http_.url, resp.status, data)
    except VllmError as err:
        raise from_transport(err, name) from None
    return resp


#: Seconds one socket read of a stream may wait (a busy server may take this long to prefill
#: a long prompt).  The decoding loop does not wait on it: it polls its cancel and deadline
#: and hangs up (:meth:`PositionStream.close`); this only bounds a reader thread whose server
#: went silent.
STREAM_READ_S = 120.0


def read_timeout(http_: Http) -> float:
    """The socket timeout of a streamed request: never below the transport's own."""
    return max(http_.timeout, STREAM_READ_S)
