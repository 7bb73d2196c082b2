"""The ``openai`` route: any OpenAI-compatible ``/v1/completions`` that streams ``logprobs``
(vLLM without Seam's processor, llama-server's OpenAI API, LM Studio, Ollama).

Such a server names tokens by their text only, and has no common way to count tokens, so:

* the prompt is built by the estimate of ``fim.vllm.tokens.EstimatedTokenizer`` (three
  characters a token, cautious for code) with the FIM template's sentinels by name, and sent
  as text; token healing is off (it needs the model's own tokens), which the status says;
* each distinct token text gets an id of its own (``SeenVocabulary.learn_text``), and the
  template's first stop token's id stands for "a stop token" (a template stop by name, or a
  token with no text, which is how servers show control tokens);
* a repair sends the prompt text plus the middle so far as text; the server re-tokenizes it
  and its prefix cache serves the common beginning.

Both answer shapes are read: the legacy completions ``logprobs`` (``tokens``,
``top_logprobs`` as ``{text: logprob}``) and the newer one with ``content`` entries.
"""

from __future__ import annotations

import http.client
from collections.abc import Iterator, Sequence

from fim.servers.errors import ServerError
from fim.servers.positions import (
    End,
    Event,
    Position,
    PositionStream,
    post_stream,
    sse_data,
)
from fim.servers.seen_vocab import SeenVocabulary
from fim.templates import TEMPLATES, FimTemplate
from fim.vllm.http import Http, MalformedEvent, event_object
from fim.vllm.tokens import EstimatedTokenizer

NAME = "OpenAI-compatible server"
#: Model-name fragments that tell the FIM template (the ``template`` setting overrides).
_FAMILIES = (("qwen", "qwen2.5-coder"), ("starcoder", "starcoder"),
             ("santacoder", "santacoder"), ("deepseek", "deepseek-coder"),
             ("codellama", "codellama"), ("code-llama", "codellama"))

NO_LOGPROBS = ("returns no log-probabilities: Seam cannot constrain this server "
               "(constrained: false runs it unconstrained)")


def template_for(model: str, override: str | None) -> FimTemplate:
    """The FIM template of a served model, from ``override`` or its name."""
    if override:
        try:
            return TEMPLATES[override]
        except KeyError:
            raise ServerError(f"unknown FIM template {override!r}; known: "
                              f"{', '.join(TEMPLATES)}") from None
    low = model.lower()
    for fragment, name in _FAMILIES:
        if fragment in low:
            return TEMPLATES[name]
    raise ServerError(f"the model {model!r} has no known fill-in-the-middle template; set "
                      f"\"template\" to one of {', '.join(TEMPLATES)} if it has FIM tokens")


class SentinelTokenizer:
    """The estimate (``EstimatedTokenizer``) with the template's special tokens as ids of
    their own at the top of the id space, so they never meet the route's token ids."""

    bos_token_id = None
    eos_token_id = None

    def __init__(self, template: FimTemplate, top: int) -> None:
        names = [template.prefix, template.suffix, template.middle, template.repo_name,
                 template.file_sep, *template.stops]
        self._ids = {n: top - 1 - k for k, n in enumerate(dict.fromkeys(n for n in names if n))}
        self._names = {v: k for k, v in self._ids.items()}
        self._text = EstimatedTokenizer()

    def encode(self, text: str) -> list[int]:
        return self._text.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        parts, run = [], []
        for tid in ids:
            name = self._names.get(tid)
            if name is None:
                run.append(tid)
                continue
            parts.append(self._text.decode(run))
            parts.append(name)
            run = []
        parts.append(self._text.decode(run))
        return "".join(parts)

    def token_id(self, piece: str) -> int | None:
        return self._ids.get(piece)


class OpenAIRoute:
    """Streams from ``/v1/completions`` (see the module docstring)."""

    name = NAME

    def __init__(self, http_: Http, vocab: SeenVocabulary, top_n: int, model: str,
                 tokenizer: SentinelTokenizer, template: FimTemplate) -> None:
        self.http, self.vocab, self.top_n, self.model = http_, vocab, top_n, model
        self.tokenizer, self.stops = tokenizer, frozenset(template.stops)
        stop_id = tokenizer.token_id(template.stops[0])
        assert stop_id is not None  # the tokenizer names every stop of its template
        self.stop_id = stop_id
        #: a constrained request needs the log-probabilities (the engine sets it per request)
        self.require_logprobs = True

    def prompt_text(self, prompt: list[int], taken: list[int]) -> str:
        middle = b"".join(self.vocab.token_bytes[t] or b"" for t in taken)
        return self.tokenizer.decode(prompt) + middle.decode("utf-8", "replace")

    def body(self, prompt: list[int], taken: list[int], n_predict: int) -> dict:
        return {"model": self.model, "prompt": self.prompt_text(prompt, taken),
                "max_tokens": n_predict, "temperature": 0.0, "stream": True,
                "logprobs": self.top_n, "ignore_eos": True, "echo": False}

    def open(self, prompt: list[int], taken: list[int], n_predict: int) -> PositionStream:
        body = self.body(prompt, taken, n_predict)
        return PositionStream(lambda opened: self._send(body, opened), self._parse, self.name)

    def _send(self, body: dict, opened) -> http.client.HTTPResponse:
        return post_stream(self.http, "/v1/completions", body, self.name, opened)

    def _id(self, text: str | None, data: bytes | None) -> int | None:
        """The route's id of a token named by ``text`` (and its ``data`` bytes, when the
        server gives them); ``None`` for one that cannot be used (half a character)."""
        if text in self.stops or (not text and not data):
            return self.stop_id
        if data is None:
            if text is None or "\ufffd" in text:
                return None
            data = text.encode("utf-8")
        return self.vocab.learn_text(data)

    def _parse(self, resp: http.client.HTTPResponse) -> Iterator[Event]:
        for data in sse_data(resp, self.name):
            if data == "[DONE]":
                yield End("unknown")
                return
            try:
                chunk = event_object(data)
            except MalformedEvent as err:
                raise ServerError(f"the {self.name} at {self.http.url} {err}") from None
            if "error" in chunk:
                err = chunk["error"]
                msg = err.get("message", err) if isinstance(err, dict) else err
                raise ServerError(f"the {self.name} at {self.http.url} failed: {msg}")
            for choice in chunk.get("choices") or ():
                if not isinstance(choice, dict):
                    continue
                yield from self._positions(choice)
                reason = choice.get("finish_reason")
                if reason:
                    yield End("eos" if reason == "stop" else "limit")
                    return

    def _positions(self, choice: dict) -> Iterator[Position]:
        logprobs = choice.get("logprobs")
        text = choice.get("text") or ""
        if isinstance(logprobs, dict) and isinstance(logprobs.get("content"), list):
            for entry in logprobs["content"]:
                yield self._content_position(entry)
            return
        if isinstance(logprobs, dict) and isinstance(logprobs.get("tokens"), list):
            tokens, tops = logprobs["tokens"], logprobs.get("top_logprobs")
            if not isinstance(tops, list) or len(tops) != len(tokens):
                raise ServerError(f"the {self.name} at {self.http.url} {NO_LOGPROBS}")
            for token, top in zip(tokens, tops, strict=True):
                chosen = self._id(token if isinstance(token, str) else None, None)
                pairs = []
                for alt, lp in (top.items() if isinstance(top, dict) else ()):
                    tid = self._id(alt, None)
                    if tid is not None and isinstance(lp, (int, float)):
                        pairs.append((tid, float(lp)))
                yield self._position(chosen, pairs)
            return
        if not text:
            return  # a chunk with no token (a role, or usage)
        if self.require_logprobs:
            raise ServerError(f"the {self.name} at {self.http.url} {NO_LOGPROBS}")
        tid = self._id(text, None)  # unconstrained: the server's text as one token
        if tid is not None:
            yield Position(tid, ((tid, 0.0),))

    def _content_position(self, entry: object) -> Position:
        if not isinstance(entry, dict):
            raise ServerError(f"the {self.name} at {self.http.url} {NO_LOGPROBS}")

        def ident(e: dict) -> int | None:
            raw = e.get("bytes")
            data = bytes(raw) if isinstance(raw, list) and all(
                isinstance(b, int) and 0 <= b < 256 for b in raw) else None
            return self._id(e.get("token") if isinstance(e.get("token"), str) else None, data)

        pairs = []
        for alt in entry.get("top_logprobs") or ():
            if isinstance(alt, dict) and isinstance(alt.get("logprob"), (int, float)):
                tid = ident(alt)
                if tid is not None:
                    pairs.append((tid, float(alt["logprob"])))
        return self._position(ident(entry), pairs)

    def _position(self, chosen: int | None, pairs: list[tuple[int, float]]) -> Position:
        if not pairs and self.require_logprobs:
            raise ServerError(f"the {self.name} at {self.http.url} {NO_LOGPROBS}")
        best: dict[int, float] = {}
        for tid, lp in pairs:  # several stop names share one id: keep the likeliest
            best[tid] = max(lp, best.get(tid, lp))
        ranked = tuple(sorted(best.items(), key=lambda p: -p[1]))
        if chosen is None:  # half a character: the loop can never take it as it is
            chosen = -1
        return Position(chosen, ranked)
