"""The ``vllm`` engine: completions from a shared vLLM server that runs Seam's constraint.

A team runs one vLLM server (``seam team-server``, or ``vllm serve`` with
``--logits-processors fim.vllm.processor:SeamLogitsProcessor``) and every editor's Seam talks to
it over vLLM's OpenAI-compatible ``/v1/completions``.  This module is that client: it builds the
fill-in-the-middle prompt with the in-process engines' prompt builder (``fim.templates``: the
same layout, project context first, the same cut to the window), sends Seam's arguments in
``vllm_xargs`` so the server's processor constrains the middle, streams the answer so a
cancelled request closes the connection (vLLM then aborts the request), and checks the middle
the way the in-process engine does: a middle that ends at a stop token and parses is kept; a
constrained one the budget or the clock cut off ends at the token boundary the in-process
decoder ranks best (``_best_stop``: each step's top ``STOP_LOGPROBS`` log-probabilities give
a stop's there), anything else is cut back to its longest prefix with which the file parses.
A greedy constrained request asks for the right-context stop (``seam_right_stop``), and the
same log-probabilities tell it: when the row ended on a stop token that was not the model's
raw likeliest one, and that
one would re-write the right context, the middle is cut where the in-process decoder cuts it
and the stop is ``right_context`` (``_right_context_end``, ``fim.stopping``).  A stream's
socket read waits until the request's deadline plus ``_Stream.READ_MARGIN_S``, or
``_Stream.UNBUDGETED_READ_S`` without a time budget.

Tokens (``fim.vllm.tokens``): with the served model's tokenizer at hand the prompt is counted,
cut and sent as token ids, exactly as a local engine with that tokenizer builds it, and a
constrained request is token-healed (the prompt's last token is backed off and ``seam_heal``
tells the processor which characters the middle must start by re-typing; they are taken off
the answer here).  Without it the counts are an estimate (three characters per token), the
prompt goes as text and healing is off.

``seam serve`` uses the same engine (``engine: "vllm"``): the editor-side service asks it
for what it asks of the in-process ``fim.api.Engine`` (``prompt_for``, ``uncached``,
``warm``, ``tokenizer``, ``window``, ``step_model.reused``, ``backend``).  What a request will
find cached is the client's estimate (``tokens.PrefixRecord``: the prompts it ran lately, in
whole blocks); what it found (``step_model.reused``, ``seam/status``'s ``cached_tokens``) is
the server's own count when vLLM reports it (``--enable-prompt-tokens-details``, which ``seam
team-server`` passes), else that estimate.  A warm-up is a one-token unconstrained request
with the prompt, which leaves the prompt in vLLM's automatic prefix cache for the request that
follows.

A server that is down or answers garbage raises :class:`VllmError` with a message for the
user, never a hang; :meth:`VllmEngine.check` asks a one-token question with a deadline, which
tells a slow server from a long prompt (``lsp_server.model_host``).
"""

from __future__ import annotations

import http.client
import json
import logging
import math
import queue
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fim import decoding
from fim.api import CompletionRequest, CompletionResult
from fim.engines.model_specs import EngineKind
from fim.options import Mode, StopReason
from fim.stopping import RIGHT_PROBE_CHARS, right_rewrite_cut, wrapped_right
from fim.templates import TEMPLATES, ContextIds, FimTemplate, build_prompt
from fim.vllm.rows import SeamArgs
from fim.vllm.tokens import (
    AGREEMENT_PROBE,
    EstimatedTokenizer,
    LocalTokenizer,
    PrefixRecord,
    load_tokenizers,
    tokenizer_candidates,
)
from quotient.constraint import LanguageMode

log = logging.getLogger(__name__)

#: Tokens kept free for the estimate being off, when the prompt is cut by the estimate.
PROMPT_SLACK = 16
#: The one-token question :meth:`VllmEngine.check` asks (a few tokens of prompt).
CHECK_PROMPT = "x = 1\n"
#: Top ids per step a constrained request asks logprobs for (vLLM's default
#: ``--max-logprobs`` is 20; a server started with less refuses the request, and says so).
STOP_LOGPROBS = 20


class VllmError(ConnectionError):
    """The server could not be reached or answered something that is not a completion (a
    ``ConnectionError``: callers that report I/O failures report this one too)."""


@dataclass(frozen=True)
class ServerInfo:
    """What the client learned from the server once: model id, window, template, stop ids,
    and how prompts are counted (``tokens``: the tokenizer file used, or ``None``: the
    estimate)."""

    url: str
    model: str
    max_model_len: int
    template: FimTemplate
    stop_ids: tuple[int, ...]
    tokens: Path | None = None


@dataclass(frozen=True)
class RemotePrompt:
    """What a request sends: the prompt's ids (the model's, or the estimate's when ``text``
    is set: then the text is sent), how the contexts were cut, and token healing."""

    ids: list[int]
    text: str | None
    left_chars_dropped: int
    right_chars_dropped: int
    healed: str = ""
    project_tokens: int = 0

    @property
    def payload(self) -> str | list[int]:
        """The ``prompt`` field of the request."""
        return self.text if self.text is not None else self.ids


@dataclass(frozen=True)
class RemoteBackend:
    """What ``seam/status`` reports of the runtime (as ``fim.api.Engine.backend`` does)."""

    engine: EngineKind
    device: str
    description: str


@dataclass
class RemoteCache:
    """The in-process engine's ``step_model`` as far as the service reads it: how many
    prompt tokens the last request took from vLLM's prefix cache: the server's own count
    when it reports one (``prompt_tokens_details.cached_tokens``, which vLLM sends when
    started with ``--enable-prompt-tokens-details``, as ``seam team-server`` starts it;
    ``from_server``), else the client's estimate (``tokens.PrefixRecord``)."""

    reused: int = 0
    from_server: bool = False


class _Http:
    """Small JSON-over-HTTP calls with timeouts and clear errors."""

    def __init__(self, url: str, api_key: str | None, timeout: float) -> None:
        parts = urllib.parse.urlsplit(url)
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
             opened: Callable[[http.client.HTTPConnection], None] | None = None
             ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send a request; ``opened`` hears of the connection before anything is sent (so
        another thread can hang up while the server has not answered yet)."""
        conn = self.connection(timeout)
        if opened is not None:
            opened(conn)
        try:
            conn.request(method, self.base + path,
                         json.dumps(body).encode() if body is not None else None,
                         self.headers())
            return conn, conn.getresponse()
        except (OSError, http.client.HTTPException) as err:
            conn.close()
            raise VllmError(f"the vLLM server at {self.url} does not answer: {err}") from err

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        conn, resp = self.send(method, path, body)
        try:
            data = resp.read()
        except (OSError, http.client.HTTPException) as err:
            raise VllmError(f"the vLLM server at {self.url} broke off: {err}") from err
        finally:
            conn.close()
        return _json_or_error(self.url, resp.status, data)


def _json_or_error(url: str, status: int, data: bytes) -> dict:
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
                        + (f": {detail}" if detail else " with no JSON"))
    return out


class _RemoteIds:
    """``token_id`` over the server's ``/tokenize`` (what ``detect_template`` asks)."""

    eos_token_id = None
    bos_token_id = None

    def __init__(self, http_: _Http, model: str) -> None:
        self.http, self.model = http_, model

    def token_id(self, piece: str) -> int | None:
        out = self.http.call("POST", "/tokenize", {"model": self.model, "prompt": piece,
                                                  "add_special_tokens": False})
        tokens = out.get("tokens")
        return int(tokens[0]) if isinstance(tokens, list) and len(tokens) == 1 else None


class VllmEngine:
    """Completes :class:`~fim.api.CompletionRequest` through a vLLM server (see the module)."""

    #: One middle per request: ``CompletionRequest.alternatives`` is not ranked here.
    ranks_alternatives = False

    def __init__(self, server: str, api_key: str | None = None, *, timeout: float = 10.0,
                 template: str | None = None, left_share: float = 0.75,
                 tokenizer: str | None = None) -> None:
        self.http = _Http(server, api_key, timeout)
        self.left_share = left_share
        self._template_name = template
        self._tokenizer_name = tokenizer
        self._info: ServerInfo | None = None
        #: Replaced by the model's tokenizer (or the estimate with the server's specials)
        #: once the server is known.
        self.tokenizer: LocalTokenizer | EstimatedTokenizer = EstimatedTokenizer()
        self.step_model = RemoteCache()
        self.prefixes = PrefixRecord()
        self._contexts = ContextIds()

    @classmethod
    def connect(cls, server: str | None, api_key: str | None = None, **options) -> VllmEngine:
        """An engine for ``server``, asked for its model now, so a wrong URL or a server that
        is down is reported before any request."""
        if not server:
            raise VllmError("the vllm engine needs the server's URL (--server URL, or the "
                            "setting \"vllmServer\" with engine \"vllm\")")
        engine = cls(server, api_key, **options)
        engine.info  # noqa: B018 - the probe
        return engine

    @property
    def info(self) -> ServerInfo:
        """The server's model, window and template (asked once, again after a failure)."""
        if self._info is None:
            self._info = self._probe()
        return self._info

    def _probe(self) -> ServerInfo:
        models = self.http.call("GET", "/v1/models").get("data")
        if not isinstance(models, list) or not models or not isinstance(models[0], dict):
            raise VllmError(f"the server at {self.http.url} lists no model")
        model = str(models[0].get("id"))
        window = models[0].get("max_model_len")
        ids = _RemoteIds(self.http, model)
        if self._template_name is not None:
            template = TEMPLATES.get(self._template_name)
            if template is None:
                raise VllmError(f"unknown FIM template {self._template_name!r}")
        else:
            template = next((t for t in TEMPLATES.values()
                             if all(ids.token_id(s) is not None
                                    for s in (t.prefix, t.suffix, t.middle))), None)
            if template is None:
                raise VllmError(f"the model {model} on {self.http.url} has no known "
                                "fill-in-the-middle tokens")
        specials = {s: ids.token_id(s) for s in (template.prefix, template.suffix,
                                                  template.middle, template.repo_name,
                                                  template.file_sep, *template.stops) if s}
        specials = {s: i for s, i in specials.items() if i is not None}
        stops = tuple(sorted({specials[s] for s in template.stops if s in specials}))
        local = self._local_tokenizer(model, specials)
        self.tokenizer = local if local is not None else EstimatedTokenizer(specials)
        self._contexts.clear()
        return ServerInfo(self.http.url, model, int(window) if isinstance(window, int)
                          else 2048, template, stops,
                          local.path if local is not None else None)

    def _local_tokenizer(self, model: str, specials: dict[str, int]) -> LocalTokenizer | None:
        """The served model's tokenizer when the client finds one that agrees with the server
        on the special tokens and on :data:`~fim.vllm.tokens.AGREEMENT_PROBE` (see
        ``fim.vllm.tokens``), else ``None`` (the estimate; logged)."""
        remote: list[int] | None = None
        for path in tokenizer_candidates(model, self._tokenizer_name):
            for local in load_tokenizers(path):
                if any(local.token_id(s) != i for s, i in specials.items()):
                    log.warning("the tokenizer %s is not the one of %s on %s (special "
                                "tokens differ)", path, model, self.http.url)
                    continue
                if remote is None:
                    out = self.http.call("POST", "/tokenize", {
                        "model": model, "prompt": AGREEMENT_PROBE,
                        "add_special_tokens": False})
                    remote = [int(t) for t in out.get("tokens") or ()]
                if local.encode(AGREEMENT_PROBE) != remote:
                    log.warning("the tokenizer %s is not the one of %s on %s (a probe line "
                                "tokenizes differently)", path, model, self.http.url)
                    continue
                log.info("counting %s's tokens with %s", model, path)
                return local
        log.info("no local tokenizer for %s on %s: token counts are estimated and token "
                 "healing is off", model, self.http.url)
        return None

    @property
    def window(self) -> int:
        """The server's context window in tokens."""
        return self.info.max_model_len

    @property
    def template(self) -> FimTemplate:
        """The server's FIM template (what ``seam eval`` writes in its report, as for the
        in-process engines)."""
        return self.info.template

    @property
    def exact_tokens(self) -> bool:
        """Whether prompts are counted in the model's own tokens (else estimated)."""
        return self.info.tokens is not None

    @property
    def backend(self) -> RemoteBackend:
        """The runtime as ``seam/status`` shows it; the device is ``remote``: the server
        decides where the model runs."""
        info = self.info
        counted = (f"tokens counted with {info.tokens}" if info.tokens is not None
                   else "tokens estimated, no token healing: no local tokenizer")
        return RemoteBackend(EngineKind.VLLM, "remote",
                             f"vLLM at {info.url} ({info.model}; {counted})")

    # ----- the editor service's calls ---------------------------------------------------

    def prompt_for(self, req: CompletionRequest) -> RemotePrompt:
        """The prompt ``complete(req)`` sends (no server work once the server is known): the
        in-process engines' prompt for the same tokenizer (``fim.templates.build_prompt``),
        healed only when the request is constrained (only the server's processor makes the
        middle re-type the healed characters)."""
        req.validate()
        info = self.info
        exact = info.tokens is not None
        window = min(info.max_model_len, req.context_tokens or info.max_model_len)
        built = build_prompt(
            self.tokenizer, info.template, req.left, req.right,
            window=window if exact else max(1, window - PROMPT_SLACK), reserve=req.max_tokens,
            left_share=self.left_share, heal=exact and req.mode == Mode.CONSTRAINED,
            right_budget=req.right_tokens, order=req.order, left_start=req.left_start,
            context=self._context_ids(req))
        return RemotePrompt(built.ids, None if exact else self.tokenizer.decode(built.ids),
                            built.left_chars_dropped, built.right_chars_dropped,
                            built.healed, built.project_tokens)

    def _context_ids(self, req: CompletionRequest) -> list[int]:
        """The project context's ids (``fim.templates.ContextIds``, as ``fim.api.Engine``)."""
        return self._contexts.get(self.tokenizer, self.info.template, req.context_files,
                                  req.context_budget, req.repo, req.path)

    def uncached(self, req: CompletionRequest, prompt: RemotePrompt | None = None) -> int:
        """Prompt tokens probably not in vLLM's prefix cache: all but the longest beginning
        shared with a prompt the server ran lately (``tokens.PrefixRecord``)."""
        prompt = prompt if prompt is not None else self.prompt_for(req)
        return len(prompt.ids) - self.prefixes.cached(prompt.ids)

    def warm(self, req: CompletionRequest, cancel: Callable[[], bool] | None = None,
             keep_cached: bool = False, prompt: RemotePrompt | None = None) -> bool:
        """Run the prompt into vLLM's prefix cache: a one-token request without Seam's
        arguments (no constraint work on the server); whether it finished.  A server that
        fails is not probed here: ``False``, and the caller (``lsp_server``'s completion
        service, on its worker) has the model host check the server in the background.
        ``keep_cached`` has no meaning remotely (vLLM evicts by its own rule)."""
        try:
            prompt = prompt if prompt is not None else self.prompt_for(req)
            body = dict(self.body(req, prompt), max_tokens=1)
            body.pop("vllm_xargs", None)
            body.pop("logprobs", None)  # a constrained request's, which nothing here reads
            ids = prompt.ids
            # Cancelled once sent, it still runs to its one token (the editor stops waiting):
            # the prompt is in vLLM's cache for the request that interrupted it.
            got = _Stream(self.http, body, cancel, None,
                          finish_anyway=lambda: self.prefixes.ran(ids)).run()
        except VllmError:
            # The server's facts stay: asking again would put a probe (seconds when the
            # server is slow) on the editor's event loop, which plans with window and backend;
            # the host's check (``ModelHost.report_slow``) runs on a thread of its own.
            return False
        if got.stop is None:
            self.prefixes.ran(prompt.ids)
        return got.stop is None

    def check(self, timeout: float) -> float:
        """Ask the server a one-token question with a few tokens of prompt and return the
        seconds it took; :class:`VllmError` when it fails or takes longer than ``timeout``
        (then the server is slow or stuck, whatever the length of the editor's prompts)."""
        body = {"model": self.info.model, "prompt": CHECK_PROMPT, "max_tokens": 1,
                "temperature": 0.0, "stream": True}
        t0 = time.monotonic()
        got = _Stream(self.http, body, None, t0 + timeout).run()
        if got.stop is StopReason.TIME:
            raise VllmError(f"the vLLM server at {self.http.url} did not answer a one-token "
                            f"request within {timeout:g} s (busy or stuck)")
        return time.monotonic() - t0

    # ----- one completion ---------------------------------------------------------------

    def body(self, req: CompletionRequest, prompt: RemotePrompt) -> dict:
        """The ``/v1/completions`` request for ``req`` with ``prompt``."""
        body = {"model": self.info.model, "prompt": prompt.payload,
                "max_tokens": req.max_tokens, "temperature": req.temperature,
                "seed": req.seed, "stream": True, "stream_options": {"include_usage": True},
                "stop_token_ids": list(self.info.stop_ids), "skip_special_tokens": True}
        if req.mode == Mode.CONSTRAINED:
            # The right-context stop is a greedy row's (see ``fim.vllm.processor``); the
            # model's raw top token at the step the row ended tells this client it happened
            # (``_right_context_end``): vLLM's default logprobs are the raw model's.
            body["vllm_xargs"] = SeamArgs(req.left, req.right, req.scope, prompt.healed,
                                          _asks_right_stop(req),
                                          req.right_wraps).to_extra_args()
            # The raw model's likeliest ids at each step: the top one tells the right-context
            # stop (``_wanted``), the stop tokens' among them rank the places a middle cut
            # by the budget may end (``_best_stop``), as the in-process decoder ranks them.
            body["logprobs"] = STOP_LOGPROBS
        return body

    def complete(self, req: CompletionRequest, cancel: Callable[[], bool] | None = None,
                 on_partial: Callable[[str], None] | None = None,
                 progress: Callable[[str, int, int], None] | None = None,
                 prompt: RemotePrompt | None = None) -> CompletionResult:
        """Complete ``req`` on the server (``on_partial`` and ``progress`` are not used;
        ``prompt``: its ``prompt_for(req)``, when built already)."""
        req.validate()
        start = time.perf_counter()
        try:
            built = prompt if prompt is not None else self.prompt_for(req)
        except VllmError:
            self._info = None
            raise
        setup_ms = (time.perf_counter() - start) * 1e3
        deadline = (time.monotonic() + req.time_budget_ms / 1e3
                    if req.time_budget_ms is not None else None)
        cached = self.prefixes.cached(built.ids)
        t0 = time.perf_counter()
        streamed = _Stream(self.http, self.body(req, built), cancel, deadline,
                           stops=self.info.template.stops).run()
        model_ms = (time.perf_counter() - t0) * 1e3
        if streamed.answered:
            self.prefixes.ran(built.ids)  # the server prefilled it (a first token came)
        self.step_model.from_server = streamed.cached_tokens is not None
        self.step_model.reused = (streamed.cached_tokens if streamed.cached_tokens is not None
                                  else cached)
        middle, stop, parses = _finish(req, streamed, built.healed)
        return CompletionResult(
            middle=middle, stop=stop, tokens=streamed.tokens, setup_ms=setup_ms,
            model_ms=model_ms, constraint_ms=0.0,
            mode=LanguageMode.EXACT if req.mode == Mode.CONSTRAINED else LanguageMode.NONE,
            decoding=Mode(req.mode), raw=_after_heal(streamed.text, built.healed) or "",
            parses=parses, prompt_tokens=streamed.prompt_tokens or len(built.ids),
            project_tokens=built.project_tokens,
            left_chars_dropped=built.left_chars_dropped,
            right_chars_dropped=built.right_chars_dropped, healed=built.healed)


@dataclass
class _Streamed:
    text: str = ""
    finish: str | None = None  # "stop", "length", or None when cut off by the client
    stop: StopReason | None = None  # CANCELLED or TIME when the client ended it
    tokens: int = 0
    prompt_tokens: int = 0
    cached_tokens: int | None = None  # the server's count, when it reports one
    answered: bool = False  # a chunk came (the prompt was prefilled)
    last_piece: str = ""  # the last chunk with text (the last token's, one per step)
    #: the model's likeliest token at the step that ended the answer, when it was not the
    #: token generated there (raw logprobs: the row was made to stop)
    wanted: str | None = None
    #: per step: where its token starts in ``text`` and the log-probability the raw model
    #: gave a stop token there (``None``: no stop among the step's top ids)
    stop_logps: list[tuple[int, float | None]] = field(default_factory=list)


class _Stream:
    """Reads one streamed completion on a thread, so cancel and the deadline are polled."""

    POLL_S = 0.05
    #: Seconds a socket read may wait beyond the request's deadline (the run loop ends the
    #: request at the deadline itself; the read only has to outlast it).
    READ_MARGIN_S = 10.0
    #: The read timeout of a request without a time budget (a queued request on a busy
    #: server may wait this long for its first token): never shorter than the HTTP timeout.
    UNBUDGETED_READ_S = 60.0

    def __init__(self, http_: _Http, body: dict, cancel: Callable[[], bool] | None,
                 deadline: float | None,
                 finish_anyway: Callable[[], None] | None = None,
                 stops: tuple[str, ...] = ()) -> None:
        self.http, self.body, self.cancel, self.deadline = http_, body, cancel, deadline
        self.stops = stops  # the stop tokens' texts, as logprobs name them
        self.events: queue.Queue = queue.Queue()
        self.conn: http.client.HTTPConnection | None = None
        self.resp: http.client.HTTPResponse | None = None
        self.hung_up = False
        #: with ``finish_anyway``, a request cancelled after it was sent is left to finish
        #: (read on by the reader thread, whose socket has a timeout), and this is called
        #: when it did
        self.finish_anyway = finish_anyway
        self.detached = False

    def run(self) -> _Streamed:
        thread = threading.Thread(target=self._read, daemon=True, name="seam-vllm-stream")
        thread.start()
        out = _Streamed()
        try:
            while True:
                if self.cancel is not None and self.cancel():
                    out.stop = StopReason.CANCELLED
                    self.detached = self.finish_anyway is not None and self.conn is not None
                    return out
                if self.deadline is not None and time.monotonic() > self.deadline:
                    out.stop = StopReason.TIME
                    return out
                try:
                    kind, value = self.events.get(timeout=self.POLL_S)
                except queue.Empty:
                    continue
                if kind == "error":
                    raise value
                if kind == "done":
                    return out
                self._take(out, value)
        finally:
            if not self.detached:
                self._hang_up()

    def _opened(self, conn: http.client.HTTPConnection) -> None:
        self.conn = conn
        if self.hung_up:
            conn.connect = _refuse  # hung up before connecting: never send the request

    def _hang_up(self) -> None:
        """Close the connection under the reader thread (``close`` alone leaves the socket
        open while the response still reads from it): vLLM sees the client go and aborts a
        request still running."""
        self.hung_up = True
        conn = self.conn
        if conn is None:
            return
        conn.connect = _refuse  # a request not sent yet never will be
        sock = conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by the peer
        # The descriptor closes only when the response's file is closed too; until then the
        # server's writes still succeed (after a shutdown Linux drops them silently) and
        # vLLM, seeing no error, would run the request to its end.
        resp = self.resp
        if resp is not None:
            try:
                resp.close()
            except Exception:  # noqa: BLE001 - the reader thread may be inside it
                pass
        conn.close()

    def _take(self, out: _Streamed, chunk: dict) -> None:
        for choice in chunk.get("choices") or ():
            out.answered = True
            piece = choice.get("text") or ""
            out.stop_logps += _stop_logps(choice.get("logprobs"), len(out.text), self.stops)
            out.text += piece
            out.last_piece = piece or out.last_piece
            out.tokens += 1
            if choice.get("finish_reason"):
                out.finish = choice["finish_reason"]
                out.wanted = _wanted(choice.get("logprobs"))
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            out.tokens = int(usage.get("completion_tokens") or out.tokens)
            out.prompt_tokens = int(usage.get("prompt_tokens") or 0)
            details = usage.get("prompt_tokens_details")  # --enable-prompt-tokens-details
            if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
                out.cached_tokens = details["cached_tokens"]

    def read_timeout(self) -> float:
        """How long one socket read may wait: until the request's deadline plus
        ``READ_MARGIN_S`` (a budget longer than a minute is honoured, not cut at a fixed
        minute), or ``UNBUDGETED_READ_S`` without a deadline; never below the HTTP timeout."""
        if self.deadline is None:
            return max(self.http.timeout, self.UNBUDGETED_READ_S)
        left = max(0.0, self.deadline - time.monotonic())
        return max(self.http.timeout, left + self.READ_MARGIN_S)

    def _read(self) -> None:
        try:
            _, resp = self.http.send("POST", "/v1/completions", self.body,
                                     timeout=self.read_timeout(), opened=self._opened)
            self.resp = resp
            if self.hung_up:
                resp.close()
                return
            if resp.status != 200:
                _json_or_error(self.http.url, resp.status, resp.read())
            done = False
            for raw in resp:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    done = True
                    break
                try:
                    chunk = json.loads(data)
                except ValueError:
                    raise VllmError(f"the vLLM server at {self.http.url} sent a "
                                    f"malformed event: {data[:80]!r}") from None
                if "error" in chunk:
                    raise VllmError(f"the vLLM server at {self.http.url} failed: "
                                    f"{chunk['error']}")
                self.events.put(("chunk", chunk))
            if not done and not self.hung_up:  # vLLM always ends with [DONE]: not a stream
                raise VllmError(f"the vLLM server at {self.http.url} ended the answer "
                                "without finishing it (is it a vLLM server?)")
            self.events.put(("done", None))
            if self.detached and self.finish_anyway is not None:
                self.finish_anyway()
        except VllmError as err:
            self.events.put(("error", err))
        except Exception as err:  # noqa: BLE001 - the thread's boundary: all goes to run()
            # (Reading a response whose connection this client hung up raises whatever
            # http.client meets: ValueError, AttributeError, OSError.)
            self.events.put(("error", VllmError(
                f"the vLLM server at {self.http.url} broke off: {err}")))


def _refuse() -> None:
    raise ConnectionAbortedError("the request was cancelled before it was sent")


def _after_heal(text: str, healed: str) -> str | None:
    """The generated text after the characters token healing backed off (the processor
    makes the first tokens re-type them); ``None`` when the answer ended before it had."""
    return text[len(healed):] if text.startswith(healed) else None


def _wanted(logprobs: object) -> str | None:
    """From a final chunk's ``logprobs`` (the completions API's shape): the likeliest token
    at the last step when the token generated there was another one; else ``None``."""
    if not isinstance(logprobs, dict):
        return None
    tokens, tops = logprobs.get("tokens"), logprobs.get("top_logprobs")
    if not (isinstance(tokens, list) and isinstance(tops, list) and tokens and tops
            and isinstance(tops[-1], dict) and tops[-1]):
        return None
    top = tops[-1]
    best = max(top, key=lambda k: top[k] if isinstance(top[k], (int, float)) else -math.inf)
    return best if best != tokens[-1] and isinstance(best, str) else None


def _stop_logps(logprobs: object, at: int, stops: tuple[str, ...]
                ) -> list[tuple[int, float | None]]:
    """From one streamed chunk's ``logprobs`` (the completions API's shape), per step: where
    its token starts (``at`` is where the chunk's text starts in the answer) and the likeliest
    stop token's log-probability among the step's top ids, or ``None`` when none is there."""
    if not isinstance(logprobs, dict) or not stops:
        return []
    tops, offsets = logprobs.get("top_logprobs"), logprobs.get("text_offset")
    if not isinstance(tops, list):
        return []
    if not (isinstance(offsets, list) and len(offsets) == len(tops)
            and all(isinstance(o, int) for o in offsets)):
        offsets = [0] * len(tops) if len(tops) == 1 else None
    if offsets is None:
        return []
    out: list[tuple[int, float | None]] = []
    for top, offset in zip(tops, offsets, strict=True):
        found = [v for k, v in top.items() if k in stops and isinstance(v, (int, float))] \
            if isinstance(top, dict) else []
        out.append((at + offset - offsets[0], max(found) if found else None))
    return out


def _best_stop(req: CompletionRequest, text: str, stop_logps: list[tuple[int, float | None]],
               healed: int) -> str | None:
    """The middle a constrained answer cut off before its stop (by the budget or the clock)
    ends with, ranked as the in-process decoder ranks its complete points
    (``fim.stopping.best_stopping_point``): a token boundary scores the log-probability of a
    stop there plus ``log(1 + length)``, the end of the answer borrows the last step's, and
    the best boundary with which the file parses wins.  The server's log-probabilities are the
    raw model's, not renormalised over the viable ids as the in-process decoder's are, and a
    step whose top ids hold no stop token is not a candidate (its stop is less likely than
    all of them); ``None`` when no candidate parses (the caller then keeps the longest
    parsing prefix)."""
    if not stop_logps:
        return None
    points = [(at - healed, lp) for at, lp in stop_logps if at >= healed]
    points.append((len(text), stop_logps[-1][1]))
    ranked = sorted(((lp + math.log1p(at), at) for at, lp in points
                     if lp is not None and at <= len(text)), reverse=True)
    for _, at in ranked:
        if decoding.parses(req.left + text[:at] + req.right):
            return text[:at]
    return None


def _asks_right_stop(req: CompletionRequest) -> bool:
    """Whether the server's row ends at the right-context stop (``seam_right_stop``): a greedy
    constrained request that asked for it (see ``fim.vllm.processor``)."""
    return req.mode == Mode.CONSTRAINED and req.stop_at_right and req.temperature <= 0


def _right_context_end(req: CompletionRequest, text: str, last: str, wanted: str
                       ) -> str | None:
    """The middle when the server's row ended because the model's next token, ``wanted``,
    would re-write the right context (``None`` when it would not): the in-process decoder's
    rule (``fim.stopping.right_rewrite_cut``) over the last token (``last``, the end of
    ``text``) and ``wanted``, with a parse of the file as the complete point.  A cut inside
    the last token drops its end; one inside ``wanted`` keeps its first characters."""
    if not wanted or "\ufffd" in wanted:
        return None
    base = max(0, len(text) - len(last)) if text.endswith(last) else len(text)
    right = req.right[:RIGHT_PROBE_CHARS]
    piece = text[base:] + wanted

    def complete_at(c: int) -> bool:
        return decoding.parses(req.left + text[:base] + piece[:c] + req.right)

    c = right_rewrite_cut(piece, text[base - 1] if base else "", right,
                          wrapped_right(right, req.right_wraps), complete_at)
    return None if c is None else text[:base] + piece[:c]


def _finish(req: CompletionRequest, got: _Streamed, healed: str = ""
            ) -> tuple[str | None, StopReason, bool | None]:
    """The middle, the stop reason and whether the file parses with it, as ``Engine`` does:
    kept whole after a stop token when it parses, else cut back to the longest prefix with
    which the file parses (``best_complete``), or none."""
    if got.stop is StopReason.CANCELLED:
        return None, StopReason.CANCELLED, None
    stop = StopReason.EOS if got.finish == "stop" else (got.stop or StopReason.BUDGET)
    after = _after_heal(got.text, healed)
    if after is None:  # ended while still re-typing the healed characters: no middle
        return None, stop, None
    text = after.replace("\ufffd", "") if got.finish != "stop" else after
    if req.mode == Mode.UNCONSTRAINED:
        return text, stop, decoding.parses(req.left + text + req.right)
    end = None  # the right-context stop's middle (the row was ended there)
    # Only a request that asked for the stop: a sampled row's last top token differs from the
    # token drawn there as a matter of course, and it was no reason the row ended.
    if _asks_right_stop(req) and got.finish == "stop" and got.wanted is not None:
        end = _right_context_end(req, text, got.last_piece, got.wanted)
    if req.line_stop or req.mode == Mode.CONSTRAINED:
        for k, ch in enumerate(text[:len(end)] if end is not None else text):
            if ch == "\n" and req.line_stop and decoding.parses(req.left + text[:k] + req.right):
                return text[:k], StopReason.LINE_END, True  # a line end came first
        if end is not None:
            return end, StopReason.RIGHT_CONTEXT, True
        if stop == StopReason.EOS and decoding.parses(req.left + text + req.right):
            return text, stop, True
    if req.mode == Mode.CONSTRAINED and stop != StopReason.EOS and "\ufffd" not in after:
        # (An incomplete character was dropped from ``text``: the steps' places would not
        # match it.)
        best = _best_stop(req, text, got.stop_logps, len(healed))
        if best is not None:
            return best, (StopReason.TIME if stop is StopReason.TIME
                          else StopReason.BEST_COMPLETE), True
    middle, cut_stop = decoding.checked_cut(req.left, text, req.right, stop)
    if stop is StopReason.TIME:  # out of time, not out of answers: asking again may help
        cut_stop = StopReason.TIME
    return middle, cut_stop, middle is not None
