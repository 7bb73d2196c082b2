"""Moving bytes between a client and the server: stdio, and TCP with a token and one client.

This replaces pygls's read loops (``pygls.io_``) and keeps its protocol: bytes go through
:class:`~lsp_server.wire.framing.FrameDecoder`, each message through
:meth:`~lsp_server.wire.protocol.SeamProtocol.receive`, and framing damage is answered with the
JSON-RPC error it deserves (``ParseError`` -32700, or ``InvalidRequest`` -32600 for a message
over the size limit) under the request's own id when it could be read.

The transport drives a :class:`Session` (the server is one) through the few calls that
protocol names, and imports nothing else of the package outside ``wire``: the wire can be
read, tested and changed without the completion service behind it.

TCP (``seam serve --tcp``) listens on loopback by default, but any local user can reach
loopback, and pygls's TCP server let a second connection take over the first one's responses
and end the whole server when it left. Here:

* every connection must present the per-start secret token in its ``initialize`` request
  (``initializationOptions.seamToken``); until then it can only be told it is not initialized,
  may send at most :data:`PREAUTH_MAX_BYTES` per message, and must authenticate within
  :data:`AUTH_TIMEOUT_S`; of more than :data:`MAX_PENDING_CONNECTIONS` such connections the
  oldest is closed, so idle connections cannot lock the editor out;
* one authenticated client is served at a time: another is refused with an error naming the
  reason, and its departure touches nothing;
* when the client's session ends (``exit``, or it disconnects) the server keeps listening and
  the next client gets a fresh session. The model stays loaded between sessions.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import socket
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol

from lsp_server.wire.framing import (
    DEFAULT_MAX_CONTENT_BYTES,
    Frame,
    FrameDecoder,
    FrameError,
    FrameErrorKind,
)
from lsp_server.wire.jsonrpc import (
    ErrorCode,
    Invalid,
    MsgId,
    Notification,
    Request,
    classify,
    error_payload,
)

log = logging.getLogger(__name__)

READ_CHUNK = 65536
PREAUTH_MAX_BYTES = 1024 * 1024
AUTH_TIMEOUT_S = 10.0
MAX_PENDING_CONNECTIONS = 16
HANDOVER_S = 2.0
TOKEN_KEY = "seamToken"

_ERROR_CODES = {
    FrameErrorKind.TOO_LARGE: ErrorCode.INVALID_REQUEST,
}


class ChunkSource(Protocol):
    async def read(self) -> bytes:
        """The next bytes available, ``b""`` at the end of the stream."""
        ...


class StdinSource:
    """Reads a binary stream in a thread of its own (pipes have no portable async reads)."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="seam-stdin")
        read1 = getattr(stream, "read1", None)
        self._read = (lambda: read1(READ_CHUNK)) if read1 else (lambda: stream.read(READ_CHUNK))

    async def read(self) -> bytes:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, self._read) or b""
        except (OSError, ValueError):  # closed under us
            return b""

    def close(self) -> None:
        self._executor.shutdown(wait=False)


class StreamSource:
    """An ``asyncio.StreamReader`` as a :class:`ChunkSource`."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    async def read(self) -> bytes:
        try:
            return await self._reader.read(READ_CHUNK)
        except (ConnectionError, OSError):
            return b""


class SafeWriter:
    """pygls's writer interface over a stream whose reader may vanish at any moment.

    A write to a client that went away must end the session, not raise from whatever callback
    happened to answer a request (pygls re-raises ``BrokenPipeError`` from every send).
    """

    def __init__(self, write: Callable[[bytes], Any], close: Callable[[], Any]) -> None:
        self._write = write
        self._close = close
        self.broken = False

    def write(self, data: bytes) -> None:
        if self.broken:
            return
        try:
            self._write(data)
        except (OSError, ValueError):
            self.broken = True

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._close()


def stdout_writer(stream: BinaryIO) -> SafeWriter:
    def write(data: bytes) -> None:
        stream.write(data)
        stream.flush()

    return SafeWriter(write, stream.close)


def stream_writer(writer: asyncio.StreamWriter) -> SafeWriter:
    def write(data: bytes) -> None:
        if writer.is_closing():
            raise ConnectionResetError("the connection is closed")
        writer.write(data)

    return SafeWriter(write, writer.close)


def frame_bytes(payload: dict) -> bytes:
    body = json.dumps(payload).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


# ----- what the transport needs of a session ---------------------------------------------------

class SessionProtocol(Protocol):
    """The message side of a session (``wire.protocol.SeamProtocol``): it takes one checked
    JSON value at a time, answers errors, and says when the client has ended the session."""

    exited: bool  # ``exit`` was received
    exit_code: int | None  # 0 after ``shutdown`` + ``exit``, 1 for ``exit`` alone

    @property
    def shut_down(self) -> bool: ...

    def set_writer(self, writer: Any) -> None: ...

    def receive(self, payload: Any) -> None: ...

    def send_error(self, msg_id: MsgId | None, code: ErrorCode, message: str) -> None: ...


class Session(Protocol):
    """One client's session as the transport drives it (``lsp_server.server.SeamServer``):
    the wire knows these calls, and nothing else of the server."""

    @property
    def protocol(self) -> SessionProtocol: ...

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """The event loop the session's messages are sent from."""
        ...

    def on_framing_error(self, error: FrameError, code: ErrorCode) -> None:
        """Damage in the byte stream, with the JSON-RPC error code it deserves."""
        ...

    def end_session(self) -> None:
        """The client is gone (``exit``, end of stream, or a broken connection)."""
        ...


# ----- one session ----------------------------------------------------------------------------

def deliver(server: Session, event: Any) -> None:
    """Hand one decoder event to the session."""
    protocol = server.protocol
    if isinstance(event, Frame):
        try:
            protocol.receive(event.payload)
        except Exception:  # a bug in Seam: keep serving, and say so in the log
            log.exception("internal error while handling a message")
            msg_id = event.payload.get("id") if isinstance(event.payload, dict) else None
            if isinstance(msg_id, (int, str)) and not isinstance(msg_id, bool):
                protocol.send_error(msg_id, ErrorCode.INTERNAL_ERROR,
                                    "internal error in Seam (see the server log)")
    elif isinstance(event, FrameError):
        server.on_framing_error(event, _ERROR_CODES.get(event.kind, ErrorCode.PARSE_ERROR))
    else:
        log.warning("framing: %s", event.detail)


async def pump(source: ChunkSource, decoder: FrameDecoder, server: Session,
               writer: SafeWriter) -> None:
    """Feed the session until ``exit``, the end of the stream, or a client that went away."""
    protocol = server.protocol
    while not protocol.exited and not writer.broken:
        chunk = await source.read()
        events = decoder.feed(chunk) if chunk else decoder.finish()
        for event in events:
            deliver(server, event)
            if protocol.exited:
                break
        if not chunk:
            break


def session_exit_code(server: Session) -> int:
    """0 after ``shutdown`` + ``exit``; 1 for ``exit`` without ``shutdown`` or a lost client."""
    protocol = server.protocol
    if protocol.exit_code is not None:
        return protocol.exit_code
    return 0 if protocol.shut_down else 1


def serve_stdio(server: Session, stdin: BinaryIO, stdout: BinaryIO,
                max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES) -> int:
    """Serve one client on a pair of streams; return the process exit code."""
    writer = stdout_writer(stdout)
    server.protocol.set_writer(writer)
    source = StdinSource(stdin)

    async def main() -> None:
        server.bind_loop(asyncio.get_running_loop())
        await pump(source, FrameDecoder(max_content_bytes), server, writer)

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
    finally:
        server.end_session()
        source.close()
    return session_exit_code(server)


# ----- TCP ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Hello:
    """A connection's ``initialize`` request, and what arrived after it in the same reads."""

    payload: dict
    rest: list


class TcpServer:
    """Serves authenticated clients one at a time on a listening socket."""

    def __init__(self, sock: socket.socket, new_session: Callable[[], Session], token: str,
                 max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES) -> None:
        self._sock = sock
        self._new_session = new_session
        self._token = token
        self._max_content_bytes = max_content_bytes
        self._active: Session | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._pending: list[asyncio.StreamWriter] = []
        self.sessions_served = 0

    def run(self) -> None:
        """Serve until interrupted."""
        async def main() -> None:
            server = await asyncio.start_server(self._connection, sock=self._sock)
            async with server:
                await server.serve_forever()

        with contextlib.suppress(KeyboardInterrupt, asyncio.CancelledError):
            asyncio.run(main())

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        try:
            if len(self._pending) >= MAX_PENDING_CONNECTIONS:
                # Idle connections must not lock the editor out: the oldest one makes room
                # (a real client sends initialize as soon as it has connected).
                oldest = self._pending.pop(0)
                log.warning("closed an unauthenticated connection: too many at once")
                oldest.close()
            self._pending.append(writer)
            decoder = FrameDecoder(PREAUTH_MAX_BYTES)
            try:
                hello = await asyncio.wait_for(self._hello(reader, writer, decoder),
                                               AUTH_TIMEOUT_S)
            except TimeoutError:
                log.warning("closed a connection from %s: no initialize within %ds", peer,
                            AUTH_TIMEOUT_S)
                hello = None
            finally:
                if writer in self._pending:
                    self._pending.remove(writer)
            if hello is None:
                return
            refusal = self._refusal(hello.payload)
            if refusal is None and self._active is not None:
                # An editor restarting its client connects again at once; give the old
                # session a moment to notice that its client is gone.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._idle.wait(), HANDOVER_S)
                if self._active is not None:
                    refusal = ("seam serve is already serving another client on this port; "
                               "it serves one client at a time")
            if refusal is not None:
                log.warning("refused a client at %s: %s", peer, refusal)
                writer.write(frame_bytes(error_payload(hello.payload.get("id"),
                                                       ErrorCode.INVALID_REQUEST, refusal)))
                await writer.drain()
                return
            await self._serve(reader, writer, decoder, hello, peer)
        except (ConnectionError, OSError) as exc:
            log.info("connection from %s ended: %s", peer, exc)
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    async def _hello(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     decoder: FrameDecoder) -> _Hello | None:
        """Read until the client's ``initialize``; answer what comes before it."""
        source = StreamSource(reader)
        while True:
            chunk = await source.read()
            events = decoder.feed(chunk) if chunk else decoder.finish()
            for i, event in enumerate(events):
                reply = None
                if isinstance(event, FrameError):
                    reply = error_payload(event.request_id,
                                          _ERROR_CODES.get(event.kind, ErrorCode.PARSE_ERROR),
                                          event.detail)
                elif isinstance(event, Frame):
                    message = classify(event.payload)
                    if isinstance(message, Request) and message.method == "initialize":
                        return _Hello(event.payload, events[i + 1:])
                    if isinstance(message, Notification) and message.method == "exit":
                        return None
                    if isinstance(message, Request):
                        reply = error_payload(message.id, ErrorCode.SERVER_NOT_INITIALIZED,
                                              f"{message.method} before initialize")
                    elif isinstance(message, Invalid):
                        reply = error_payload(message.id, ErrorCode.INVALID_REQUEST,
                                              f"invalid JSON-RPC message: {message.reason}")
                if reply is not None:
                    writer.write(frame_bytes(reply))
            if not chunk:
                return None
            await writer.drain()

    def _refusal(self, payload: dict) -> str | None:
        """Why this ``initialize`` may not start a session, or ``None``."""
        params = payload.get("params")
        options = params.get("initializationOptions") if isinstance(params, dict) else None
        given = options.get(TOKEN_KEY) if isinstance(options, dict) else None
        if not isinstance(given, str) or not hmac.compare_digest(
                given.encode("utf-8", "surrogatepass"), self._token.encode("utf-8")):
            return ("this seam serve --tcp needs the token it printed at start, sent as "
                    f"initializationOptions.{TOKEN_KEY}")
        return None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     decoder: FrameDecoder, hello: _Hello, peer: Any) -> None:
        # The token is not a setting: no part of the session needs to see it.
        hello.payload["params"]["initializationOptions"].pop(TOKEN_KEY, None)
        session = self._new_session()
        self._active = session
        self._idle.clear()
        self.sessions_served += 1
        log.info("serving the client at %s (session %d)", peer, self.sessions_served)
        safe = stream_writer(writer)
        try:
            session.protocol.set_writer(safe)
            session.bind_loop(asyncio.get_running_loop())
            decoder.max_content_bytes = self._max_content_bytes
            deliver(session, Frame(hello.payload))
            for event in hello.rest:
                deliver(session, event)
            await pump(StreamSource(reader), decoder, session, safe)
            await writer.drain()
        finally:
            session.end_session()
            self._active = None
            self._idle.set()
            log.info("session %d ended (exit code %d); listening again", self.sessions_served,
                     session_exit_code(session))
