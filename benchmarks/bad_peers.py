"""Model servers that misbehave, on 127.0.0.1, written from raw sockets (issue 28, findings 1,
2 and 8): the ``vllm`` engine's client must survive each with bounded memory and time and say
what went wrong.  ``benchmarks/bench_file_size.py`` measures ``seam serve``'s memory against
them and ``tests/fim/test_vllm_misbehaving_peers.py`` checks the client (tests may import
benchmarks; benchmarks never import tests).

A :class:`BadPeer` answers ``GET /v1/models`` and ``POST /tokenize`` as vLLM does (the
santacoder sentinels, as ``tests.support.vllm_peer``), unless its :class:`Misbehaviour` names
that endpoint; then it sends, without end (until the client hangs up or ``limit`` bytes went
out, so that a client without bounds still ends its test): a body that never ends, one event
line that never ends, a byte every ``interval`` seconds, a stream that ignores ``max_tokens``,
or something that is not HTTP at all.
"""

from __future__ import annotations

import enum
import json
import socket
import socketserver
import threading
import time

MODEL = "seam-bad-peer"
SPECIAL = {"<fim-prefix>": 49152, "<fim-suffix>": 49153, "<fim-middle>": 49154,
           "<|endoftext|>": 0}


class Misbehaviour(enum.Enum):
    ENDLESS_MODELS = "endless-models"  # GET /v1/models: a body that never ends
    TRICKLE_MODELS = "trickle-models"  # GET /v1/models: one byte every ``interval`` s
    ENDLESS_LINE = "endless-line"  # completions: one event line that never ends
    TRICKLE_STREAM = "trickle-stream"  # completions: one byte every ``interval`` s
    OVER_BUDGET = "over-budget"  # completions: steps past ``max_tokens``, without end
    NOT_HTTP = "not-http"  # every connection: an SSH banner with a NUL and CRLF


class BadPeer:
    """Start with :meth:`start`, stop with :meth:`stop`; ``sent`` counts bytes sent."""

    def __init__(self, how: Misbehaviour, *, limit: int = 64 << 20,
                 interval: float = 0.3) -> None:
        self.how, self.limit, self.interval = how, limit, interval
        self.sent = 0
        self._server: socketserver.ThreadingTCPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> BadPeer:
        peer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                try:
                    peer._serve(self.request)
                except OSError:
                    pass  # the client hung up: what a bounded client does

        server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler,
                                                 bind_and_activate=False)
        server.daemon_threads = True
        server.allow_reuse_address = True
        server.server_bind()
        server.server_activate()
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True, name="bad-peer").start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # ----- one connection --------------------------------------------------------------

    def _serve(self, sock: socket.socket) -> None:
        if self.how is Misbehaviour.NOT_HTTP:
            sock.sendall(b"SSH-2.0-OpenSSH_9.6\x00\x1b[31m\r\nProtocol mismatch.\r\n")
            return
        data = b""
        while b"\r\n\r\n" not in data:
            piece = sock.recv(65536)
            if not piece:
                return
            data += piece
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        length = next((int(v) for k, _, v in (h.partition(":") for h in lines[1:])
                       if k.strip().lower() == "content-length"), 0)
        while len(rest) < length:
            rest += sock.recv(65536)
        body = json.loads(rest) if length else {}
        if method == "GET" and path.endswith("/v1/models"):
            if self.how is Misbehaviour.ENDLESS_MODELS:
                return self._endless(sock, b'{"data": [' + b" " * 0, b" " * 65536)
            if self.how is Misbehaviour.TRICKLE_MODELS:
                return self._trickle(sock, b'{"data": []}')
            return self._json(sock, {"object": "list", "data": [
                {"id": MODEL, "object": "model", "max_model_len": 2048}]})
        if path.endswith("/tokenize"):
            prompt = body["prompt"]
            tokens = [SPECIAL[prompt]] if prompt in SPECIAL else [
                300 + ord(c) % 1000 for c in prompt]
            return self._json(sock, {"count": len(tokens), "tokens": tokens})
        if self.how is Misbehaviour.ENDLESS_LINE:
            return self._endless(sock, b"data: {\"choices\": [{\"text\": \"", b"x" * 65536)
        if self.how is Misbehaviour.TRICKLE_STREAM:
            return self._trickle(sock, b"data: [DONE]\n\n")
        if self.how is Misbehaviour.OVER_BUDGET:
            chunk = json.dumps({"choices": [{"index": 0, "text": "x = 1\n",
                                             "finish_reason": None}]}).encode()
            return self._endless(sock, b"", b"data: " + chunk + b"\n\n")
        return self._json(sock, {"error": {"message": "not served"}}, 404)

    def _head(self, sock: socket.socket, status: int = 200,
              kind: str = "text/event-stream", length: int | None = None) -> None:
        head = f"HTTP/1.1 {status} OK\r\nContent-Type: {kind}\r\nConnection: close\r\n"
        if length is not None:
            head += f"Content-Length: {length}\r\n"
        sock.sendall((head + "\r\n").encode())

    def _json(self, sock: socket.socket, data: dict, status: int = 200) -> None:
        raw = json.dumps(data).encode()
        self._head(sock, status, "application/json", len(raw))
        sock.sendall(raw)

    def _endless(self, sock: socket.socket, first: bytes, again: bytes) -> None:
        self._head(sock)
        sock.sendall(first)
        while self.sent < self.limit:
            sock.sendall(again)
            self.sent += len(again)

    def _trickle(self, sock: socket.socket, body: bytes) -> None:
        self._head(sock, length=len(body) * 1000)  # (never all of it)
        end = time.monotonic() + 120
        while time.monotonic() < end:
            sock.sendall(body[:1] or b" ")
            self.sent += 1
            time.sleep(self.interval)
