"""A small HTTP server on 127.0.0.1 that speaks the part of llama.cpp's ``llama-server`` API
the ``llama-server`` engine uses (``/props``, ``/v1/models``, ``/tokenize``, ``/detokenize``,
streamed ``/completion`` with ``n_probs``) and its OpenAI-compatible ``/v1/completions`` with
``logprobs``, in their JSON shapes, over a scripted model; and that can turn into the peers
the engines must survive (down, slow, HTTP errors, no log-probabilities, a stream cut inside a
token, a wrong API key, a model without FIM tokens).

The scripted model writes characters, one token each (id ``1000 + code point``), with the
santacoder template's sentinels as control tokens.  At each position its beliefs are
``LlamaPeer.beliefs(middle_so_far)``: by default it wants the text before the cursor to read
``left + middle`` (so it re-types what token healing backed off) and then to stop;
``overrides`` maps a middle so far to the top list there, which is how a test makes the
model's favourite token one the constraint refuses.  It exists so that every error path of the
engines is tested through real sockets; the real llama-server tests are in
``tests/fim/test_llama_server_real.py``.
"""

from __future__ import annotations

import enum
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "seam-scripted-qwen"
WINDOW = 2048
STOP = "<|endoftext|>"
SPECIAL = {"<fim-prefix>": 10, "<fim-suffix>": 11, "<fim-middle>": 12, STOP: 0}
NAMES = {v: k for k, v in SPECIAL.items()}


def token_id(piece: str) -> int:
    return SPECIAL.get(piece, 0) if piece in SPECIAL else 1000 + ord(piece)


def piece_of(tid: int) -> str:
    return NAMES[tid] if tid in NAMES else chr(tid - 1000)


class Behaviour(enum.Enum):
    LLAMA = "llama"  # as llama-server does
    DOWN_HTML = "down-html"  # a proxy before a server that is gone: HTTP 502 with HTML
    HTTP_500 = "http-500"  # completions fail with a JSON error
    NO_PROBS = "no-probs"  # completions stream text without probabilities
    CUT = "cut"  # the completion stream is cut in the middle of an event
    SLOW = "slow"  # completions wait ``delay_s`` before anything
    NO_FIM = "no-fim"  # the model has no FIM tokens (sentinels tokenize as text)


@dataclass
class PeerLog:
    completions: list[dict[str, Any]] = field(default_factory=list)
    auth: list[str | None] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)


class _Server(ThreadingHTTPServer):
    allow_reuse_address = True
    daemon_threads = True


class LlamaPeer:
    """Start with :meth:`start`, stop with :meth:`stop` (see the module docstring)."""

    def __init__(self, middle: str = "1 + 2", *, left: str = "x = ",
                 api_key: str | None = None, port: int = 0) -> None:
        self.middle, self.left, self.api_key, self.port = middle, left, api_key, port
        self.overrides: dict[str, list[tuple[str, float]]] = {}
        #: the stop token never among the top-N (a model that does not want to stop yet)
        self.hide_stop = False
        self.behaviour = Behaviour.LLAMA
        self.delay_s = 0.0
        self.log = PeerLog()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def beliefs(self, before: str) -> list[tuple[str, float]]:
        """The top list (piece, logprob) when the text before the cursor reads ``before``
        (the prompt's left context and what was generated), likeliest first."""
        top = self._beliefs(before)
        return [p for p in top if p[0] != STOP] if self.hide_stop else top

    def _beliefs(self, before: str) -> list[tuple[str, float]]:
        so_far = before[len(self.left):] if before.startswith(self.left) else None
        if so_far in self.overrides:
            return self.overrides[so_far]
        target = self.left + self.middle
        if target.startswith(before) and len(before) < len(target):
            return [(target[len(before)], -0.1), (STOP, -3.0), ("#", -4.0)]
        return [(STOP, -0.05), ("\n", -3.5), ("#", -4.0)]

    def start(self) -> LlamaPeer:
        peer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _authorised(self) -> bool:
                if peer.api_key is None:
                    return True
                if self.headers.get("Authorization") == f"Bearer {peer.api_key}":
                    return True
                self._json(401, {"error": {"code": 401, "message": "Invalid API Key",
                                           "type": "authentication_error"}})
                return False

            def do_GET(self) -> None:  # noqa: N802 - the http.server protocol
                peer.log.paths.append(self.path)
                if peer.behaviour is Behaviour.DOWN_HTML:
                    return self._html(502)
                if not self._authorised():
                    return None
                if self.path == "/props":
                    return self._json(200, {"default_generation_settings": {"n_ctx": WINDOW},
                                            "model_path": "/models/" + MODEL + ".gguf",
                                            "eos_token": STOP, "bos_token": ""})
                if self.path == "/v1/models":
                    return self._json(200, {"object": "list", "data": [{
                        "id": MODEL, "object": "model", "owned_by": "llamacpp",
                        "meta": {"n_vocab": 70000, "n_ctx_train": 32768}}]})
                return self._json(404, {"error": {"code": 404, "message": "File Not Found"}})

            def do_POST(self) -> None:  # noqa: N802
                peer.log.paths.append(self.path)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if peer.behaviour is Behaviour.DOWN_HTML:
                    return self._html(502)
                if not self._authorised():
                    return None
                if self.path == "/tokenize":
                    text = body["content"]
                    if body.get("parse_special") and text in SPECIAL \
                            and peer.behaviour is not Behaviour.NO_FIM:
                        return self._json(200, {"tokens": [SPECIAL[text]]})
                    return self._json(200, {"tokens": [1000 + ord(c) for c in text]})
                if self.path == "/detokenize":
                    return self._json(200, {"content": "".join(
                        piece_of(t) for t in body["tokens"])})
                if self.path not in ("/completion", "/v1/completions"):
                    return self._json(404, {"error": {"code": 404, "message": "Not Found"}})
                peer.log.completions.append(body)
                peer.log.auth.append(self.headers.get("Authorization"))
                if peer.behaviour is Behaviour.HTTP_500:
                    return self._json(500, {"error": {"code": 500, "message":
                                                      "slot unavailable"}})
                if peer.behaviour is Behaviour.SLOW:
                    time.sleep(peer.delay_s)
                if self.path == "/completion":
                    return self._native(body)
                return self._openai(body)

            def _so_far(self, prompt: Any) -> str:
                """The text before the cursor: the prompt's left context, generated text."""
                text = (prompt if isinstance(prompt, str)
                        else "".join(piece_of(t) for t in prompt))
                left = text.split("<fim-prefix>", 1)[-1].split("<fim-suffix>", 1)[0]
                return left + text.rsplit("<fim-middle>", 1)[-1]

            def _run(self, so_far: str, n: int, ignore_eos: bool):
                """Positions: (chosen piece, top list)."""
                for _ in range(n):
                    top = peer.beliefs(so_far)
                    chosen = next((p for p, _ in top if not (ignore_eos and p == STOP)), STOP)
                    yield chosen, top
                    if chosen == STOP:
                        return
                    so_far += chosen

            def _start_stream(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()

            def _native(self, body: dict) -> None:
                self._start_stream()
                so_far = self._so_far(body["prompt"])
                n = body.get("n_predict", 16)
                stop_type = "limit"
                for chosen, top in self._run(so_far, n, bool(body.get("ignore_eos"))):
                    if chosen == STOP:
                        stop_type = "eos"
                        break
                    entry = {"id": token_id(chosen), "token": chosen,
                             "bytes": list(chosen.encode()), "logprob": top[0][1],
                             "top_logprobs": [{"id": token_id(p), "token": "" if p == STOP
                                               else p, "bytes": [] if p == STOP
                                               else list(p.encode()), "logprob": lp}
                                              for p, lp in top[:body.get("n_probs", 0)]]}
                    chunk = {"content": chosen, "stop": False, "index": 0}
                    if peer.behaviour is not Behaviour.NO_PROBS and body.get("n_probs"):
                        chunk["completion_probabilities"] = [entry]
                    raw = b"data: " + json.dumps(chunk).encode() + b"\n\n"
                    if peer.behaviour is Behaviour.CUT and len(so_far) > len(peer.left):
                        self.wfile.write(raw[:len(raw) // 2])
                        self.wfile.flush()
                        self.connection.shutdown(2)
                        return
                    so_far += chosen
                    if not self._write(raw):
                        return
                self._write(b"data: " + json.dumps({
                    "content": "", "stop": True, "stop_type": stop_type,
                    "timings": {"cache_n": 0}}).encode() + b"\n\n")

            def _openai(self, body: dict) -> None:
                self._start_stream()
                so_far = self._so_far(body["prompt"])
                n = body.get("max_tokens", 16)
                k = body.get("logprobs")
                finish = "length"
                for chosen, top in self._run(so_far, n, bool(body.get("ignore_eos"))):
                    if chosen == STOP:
                        finish = "stop"
                        break
                    lp = None
                    if k and peer.behaviour is not Behaviour.NO_PROBS:
                        lp = {"tokens": [chosen], "token_logprobs": [top[0][1]],
                              "top_logprobs": [{p: v for p, v in top[:k]}],
                              "text_offset": [0]}
                    raw = b"data: " + json.dumps({"choices": [{
                        "index": 0, "text": chosen, "logprobs": lp,
                        "finish_reason": None}]}).encode() + b"\n\n"
                    if peer.behaviour is Behaviour.CUT and len(so_far) > len(peer.left):
                        self.wfile.write(raw[:len(raw) // 2])
                        self.wfile.flush()
                        self.connection.shutdown(2)
                        return
                    if not self._write(raw):
                        return
                    so_far += chosen
                self._write(b"data: " + json.dumps({"choices": [{
                    "index": 0, "text": "", "logprobs": None,
                    "finish_reason": finish}]}).encode() + b"\n\ndata: [DONE]\n\n")

            def _write(self, raw: bytes) -> bool:
                try:
                    self.wfile.write(raw)
                    self.wfile.flush()
                    return True
                except OSError:  # the client hung up
                    return False

            def _json(self, status: int, data: dict) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _html(self, status: int) -> None:
                raw = b"<html><body>502 Bad Gateway</body></html>"
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
                         name="llama-peer").start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> LlamaPeer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
