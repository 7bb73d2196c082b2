"""A small HTTP server on 127.0.0.1 that speaks the part of vLLM's OpenAI-compatible API the
``vllm`` engine uses (``GET /v1/models``, ``POST /tokenize``, streamed ``POST
/v1/completions``), in vLLM's JSON shapes, and can turn into the peers the engine must
survive: one that answers garbage, one that never answers, one that is gone.

It exists so that the editor-side server (``seam serve`` with ``engine: "vllm"``) is tested
through real sockets in the main environment, where vLLM itself is not installed (the
``tests/team`` tests run the real vLLM).  Its completion is a scripted middle: what the
tests check is the client's handling of the peer, not a model.

Given a tokenizer (``VllmPeer(tokenizer=...)``, a ``transformers`` fast tokenizer saved in a
directory that is also the model's id, as ``vllm serve DIR`` names it), ``/tokenize`` answers
with its ids, as vLLM does with the served model's; and a constrained request with
``seam_heal`` streams the healed characters before the middle, as the processor makes the
model do.
"""

from __future__ import annotations

import enum
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "seam-tiny-qwen"
WINDOW = 2048
#: One token each on this peer: the santacoder template's sentinels and stop token.
SPECIAL = {"<fim-prefix>": 49152, "<fim-suffix>": 49153, "<fim-middle>": 49154,
           "<|endoftext|>": 0}


class Behaviour(enum.Enum):
    """How the peer answers."""

    VLLM = "vllm"  # as vLLM does
    GARBAGE = "garbage"  # 200 with an HTML page, on every endpoint
    SILENT = "silent"  # completions are accepted and never answered
    DOWN_HTML = "down-html"  # a proxy in front of a vLLM that is gone: HTTP 502 with HTML


@dataclass
class PeerLog:
    """What the peer was asked: the completion request bodies, in order."""

    completions: list[dict[str, Any]] = field(default_factory=list)
    #: the Authorization header of each completion request (``None``: none sent)
    auth: list[str | None] = field(default_factory=list)


class _Server(ThreadingHTTPServer):
    allow_reuse_address = True  # the same port again after a stop (the server came back)
    daemon_threads = True


class VllmPeer:
    """Start with :meth:`start` (on ``port``, 0 for any), stop with :meth:`stop`; ``middle``
    is what a constrained or plain completion streams, one chunk per character group."""

    def __init__(self, port: int = 0, middle: str = "a + b", *, tokenizer: Any = None,
                 model: str = MODEL, window: int = WINDOW) -> None:
        self.port, self.middle = port, middle
        self.tokenizer, self.model, self.window = tokenizer, model, window
        self.behaviour = Behaviour.VLLM
        #: seconds a completion waits before it streams (a busy server)
        self.delay_s = 0.0
        #: a completion whose prompt text contains this turns the peer ``SILENT``, itself
        #: included (a server that became slow at that request, whichever part sent it)
        self.stall_on: str | None = None
        #: the raw likeliest token at the stop step (see the module docstring); ``None``: the
        #: stop token itself was the likeliest
        self.wanted: str | None = None
        #: the prompt tokens the answer's usage says the prefix cache served, as vLLM does
        #: with ``--enable-prompt-tokens-details``; ``None``: no ``prompt_tokens_details``
        self.cached_tokens: int | None = None
        self.log = PeerLog()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> VllmPeer:
        peer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - the http.server protocol
                if peer.behaviour is Behaviour.GARBAGE:
                    return self._html()
                if peer.behaviour is Behaviour.DOWN_HTML:
                    return self._html(502)
                if self.path != "/v1/models":
                    return self._json(404, {"detail": "Not Found"})
                self._json(200, {"object": "list", "data": [{
                    "id": peer.model, "object": "model", "created": int(time.time()),
                    "owned_by": "vllm", "root": peer.model, "parent": None,
                    "max_model_len": peer.window, "permission": []}]})

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if peer.behaviour is Behaviour.GARBAGE:
                    return self._html()
                if peer.behaviour is Behaviour.DOWN_HTML:
                    return self._html(502)
                if self.path == "/tokenize":
                    return self._tokenize(body)
                if self.path != "/v1/completions":
                    return self._json(404, {"detail": "Not Found"})
                peer.log.completions.append(body)
                peer.log.auth.append(self.headers.get("Authorization"))
                if peer.stall_on is not None and peer.stall_on in str(body.get("prompt")):
                    peer.behaviour = Behaviour.SILENT
                if peer.behaviour is Behaviour.SILENT:
                    time.sleep(30)  # the client gives up first; then the socket closes
                    return
                time.sleep(peer.delay_s)
                self._stream(body)

            def _tokenize(self, body: dict) -> None:
                prompt = body["prompt"]
                if peer.tokenizer is not None:  # special names in the text are matched
                    tokens = peer.tokenizer.encode(prompt, add_special_tokens=False)
                else:
                    tokens = [SPECIAL[prompt]] if prompt in SPECIAL else [
                        300 + ord(c) % 1000 for c in prompt]
                self._json(200, {"count": len(tokens), "max_model_len": peer.window,
                                 "tokens": tokens, "token_strs": None})

            def _stream(self, body: dict) -> None:
                text = peer.middle[:max(1, body["max_tokens"])]
                xargs = body.get("vllm_xargs") or {}
                # a warm-up's row is not constrained: nothing re-types the healed text
                heal = "" if xargs.get("seam_warm") else xargs.get("seam_heal", "")
                pieces = ([heal] if heal else []) + [text[i:i + 2]
                                                     for i in range(0, len(text), 2)]
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream; charset=utf-8")
                self.send_header("Connection", "close")
                self.end_headers()
                created = int(time.time())
                prompt = body["prompt"]
                prompt_tokens = len(prompt) if isinstance(prompt, list) else len(prompt) // 3
                stopped = len(text) == len(peer.middle)
                logprobs = body.get("logprobs") is not None
                offset = 0

                def choice(piece: str, finish: str | None, top: dict | None = None) -> dict:
                    nonlocal offset
                    lp = None
                    if logprobs:
                        token = piece or "<|endoftext|>"
                        lp = {"text_offset": [offset], "token_logprobs": [-0.1],
                              "tokens": [token], "top_logprobs": [top or {token: -0.1}]}
                        offset += len(piece)
                    return {"id": "cmpl-seam", "object": "text_completion",
                            "created": created, "model": peer.model, "choices": [{
                                "index": 0, "text": piece, "logprobs": lp,
                                "finish_reason": finish, "stop_reason": None}]}

                for k, piece in enumerate(pieces):
                    last = k == len(pieces) - 1 and not (logprobs and stopped)
                    finish = ("stop" if stopped else "length") if last else None
                    self._event(choice(piece, finish))
                if logprobs and stopped:  # the stop token's own chunk
                    top = ({peer.wanted: -0.2, "<|endoftext|>": -3.0} if peer.wanted
                           else None)
                    self._event(choice("", "stop", top))
                    pieces.append("")
                usage = {"prompt_tokens": prompt_tokens, "completion_tokens": len(pieces),
                         "total_tokens": prompt_tokens + len(pieces)}
                if peer.cached_tokens is not None:
                    usage["prompt_tokens_details"] = {"cached_tokens": peer.cached_tokens}
                self._event({"id": "cmpl-seam", "object": "text_completion",
                             "created": created, "model": peer.model, "choices": [],
                             "usage": usage})
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

            def _event(self, chunk: dict) -> None:
                self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")

            def _json(self, status: int, data: dict) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _html(self, status: int = 200) -> None:
                raw = b"<html><body>502 Bad Gateway (nginx)</body></html>"
                self.send_response(status)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = _Server(("127.0.0.1", self.port), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True,
                         name="vllm-peer").start()
        return self

    def stop(self) -> None:
        """Stop answering and close the port (the server is down)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
