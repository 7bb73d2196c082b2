"""The ``llama-server`` route: llama.cpp's native API (``/completion`` with a raw prompt of
token ids, ``n_probs``, ``cache_prompt``; ``/tokenize`` and ``/detokenize``; ``/props``).

Prompts go as the model's own token ids, counted and cut with the server's tokenizer
(:class:`ServerTokenizer`, over ``/tokenize``), so the prompt is the one the in-process engine
builds for the same GGUF, token healing included, and a repair continues with exactly the ids
the loop took.  Each streamed position names its ids and their bytes, which is all the
decoding loop needs (``fim.servers.seen_vocab``).
"""

from __future__ import annotations

import http.client
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from fim.servers.errors import ServerError, from_transport
from fim.servers.positions import (
    End,
    Event,
    Position,
    PositionStream,
    post_stream,
    sse_data,
)
from fim.servers.seen_vocab import SeenVocabulary
from fim.vllm.http import Http, MalformedEvent, VllmError, event_object

NAME = "llama-server"


def call(http_: Http, method: str, path: str, body: dict | None = None,
         name: str = NAME) -> dict:
    """One JSON call through the shared transport, its errors named for this server."""
    try:
        return http_.call(method, path, body)
    except VllmError as err:
        raise from_transport(err, name) from None


@dataclass(frozen=True)
class NativeInfo:
    """What ``llama-server`` says of itself once."""

    model: str
    window: int
    vocab_size: int
    eos_piece: str


def probe(http_: Http) -> NativeInfo:
    """The served model's name, context per slot and vocabulary size."""
    props = call(http_, "GET", "/props")
    settings = props.get("default_generation_settings")
    window = settings.get("n_ctx") if isinstance(settings, dict) else None
    model, vocab = str(props.get("model_path") or "model"), 0
    try:
        models = call(http_, "GET", "/v1/models").get("data")
    except ServerError:
        models = None
    if isinstance(models, list) and models and isinstance(models[0], dict):
        model = str(models[0].get("id") or model)
        meta = models[0].get("meta")
        if isinstance(meta, dict) and isinstance(meta.get("n_vocab"), int):
            vocab = meta["n_vocab"]
            if not isinstance(window, int):
                window = meta.get("n_ctx_train")
    if not isinstance(window, int) or window < 16:
        raise ServerError(f"the {NAME} at {http_.url} does not say its context size "
                          "(is it llama.cpp's llama-server?)")
    return NativeInfo(model, window, vocab, str(props.get("eos_token") or ""))


class ServerTokenizer:
    """``fim.tokenizer.TextTokenizer`` over the server's ``/tokenize`` and ``/detokenize``,
    remembering recent answers (the prompt builder asks the same texts again as the user
    types)."""

    MEMORY = 256

    def __init__(self, http_: Http, name: str = NAME) -> None:
        self.http, self.name = http_, name
        self.bos_token_id: int | None = None
        self.eos_token_id: int | None = None
        self._encoded: OrderedDict[str, list[int]] = OrderedDict()
        self._lock = threading.Lock()

    def _tokenize(self, text: str, special: bool) -> list[int]:
        out = call(self.http, "POST", "/tokenize",
                   {"content": text, "add_special": False, "parse_special": special},
                   self.name).get("tokens")
        if not isinstance(out, list) or not all(isinstance(t, int) for t in out):
            raise ServerError(f"the {self.name} at {self.http.url} answered /tokenize "
                              "without token ids")
        return out

    def encode(self, text: str) -> list[int]:
        with self._lock:
            hit = self._encoded.get(text)
            if hit is not None:
                self._encoded.move_to_end(text)
                return list(hit)
        ids = self._tokenize(text, special=False)
        with self._lock:
            self._encoded[text] = ids
            while len(self._encoded) > self.MEMORY:
                self._encoded.popitem(last=False)
        return list(ids)

    def decode(self, ids: Sequence[int]) -> str:
        if not ids:
            return ""
        out = call(self.http, "POST", "/detokenize", {"tokens": list(ids)},
                   self.name).get("content")
        if not isinstance(out, str):
            raise ServerError(f"the {self.name} at {self.http.url} answered /detokenize "
                              "without text")
        return out

    def token_id(self, piece: str) -> int | None:
        if not piece:
            return None
        ids = self._tokenize(piece, special=True)
        return ids[0] if len(ids) == 1 else None


def _entry_bytes(entry: dict) -> bytes:
    data = entry.get("bytes")
    if isinstance(data, list) and all(isinstance(b, int) and 0 <= b < 256 for b in data):
        return bytes(data)
    token = entry.get("token")
    return token.encode("utf-8") if isinstance(token, str) else b""


class NativeRoute:
    """Streams from ``/completion`` (see the module docstring)."""

    name = NAME

    def __init__(self, http_: Http, vocab: SeenVocabulary, top_n: int) -> None:
        self.http, self.vocab, self.top_n = http_, vocab, top_n

    def body(self, prompt: list[int], taken: list[int], n_predict: int) -> dict:
        return {"prompt": prompt + taken, "n_predict": n_predict, "n_probs": self.top_n,
                "temperature": 0.0, "top_k": 1, "stream": True, "cache_prompt": True,
                # The constraint decides where the middle ends, from the stop tokens' place
                # in each position's top-N: the server must not stop on its own.
                "ignore_eos": True, "post_sampling_probs": False,
                "repeat_penalty": 1.0, "samplers": ["top_k"]}

    def open(self, prompt: list[int], taken: list[int], n_predict: int) -> PositionStream:
        body = self.body(prompt, taken, n_predict)
        return PositionStream(lambda opened: self._send(body, opened), self._parse, self.name)

    def _send(self, body: dict, opened) -> http.client.HTTPResponse:
        return post_stream(self.http, "/completion", body, self.name, opened)

    def _parse(self, resp: http.client.HTTPResponse) -> Iterator[Event]:
        for data in sse_data(resp, self.name):
            try:
                chunk = event_object(data)
            except MalformedEvent as err:
                raise ServerError(f"the {self.name} at {self.http.url} {err}") from None
            if "error" in chunk:
                err = chunk["error"]
                msg = err.get("message", err) if isinstance(err, dict) else err
                raise ServerError(f"the {self.name} at {self.http.url} failed: {msg}")
            probs = chunk.get("completion_probabilities")
            if isinstance(probs, list):
                for entry in probs:
                    yield self._position(entry)
            elif chunk.get("content") and not chunk.get("stop"):
                raise ServerError(f"the {self.name} at {self.http.url} returns no "
                                  "log-probabilities: Seam cannot constrain this server "
                                  "(constrained: false runs it unconstrained)")
            if chunk.get("stop"):
                cached = chunk.get("tokens_cached")
                timings = chunk.get("timings")
                if isinstance(timings, dict) and isinstance(timings.get("cache_n"), int):
                    cached = timings["cache_n"]
                yield End(str(chunk.get("stop_type") or "unknown"),
                          cached if isinstance(cached, int) else None)
                return

    def _position(self, entry: object) -> Position:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), int):
            raise ServerError(f"the {self.name} at {self.http.url} sent probabilities "
                              "without token ids (a llama.cpp older than 2025?)")
        top = entry.get("top_logprobs")
        if not isinstance(top, list):
            raise ServerError(f"the {self.name} at {self.http.url} returns no "
                              "log-probabilities: Seam cannot constrain this server")
        pairs = []
        for alt in top:
            if isinstance(alt, dict) and isinstance(alt.get("id"), int) \
                    and isinstance(alt.get("logprob"), (int, float)):
                self.vocab.learn(alt["id"], _entry_bytes(alt))
                pairs.append((alt["id"], float(alt["logprob"])))
        self.vocab.learn(entry["id"], _entry_bytes(entry))
        pairs.sort(key=lambda p: -p[1])
        return Position(entry["id"], tuple(pairs))
