"""The ``vllm`` engine: completions from a shared vLLM server that runs Seam's constraint.

A team runs one vLLM server (``seam team-server``, or ``vllm serve`` in an environment with Seam
installed: vLLM finds the processor in its plugin group) and every editor's Seam talks to
it over vLLM's OpenAI-compatible ``/v1/completions``.  This module is that client: it builds the
fill-in-the-middle prompt with the in-process engines' prompt builder (``fim.templates``: the
same layout, project context first, the same cut to the window), sends Seam's arguments in
``vllm_xargs`` so the server's processor constrains the middle, streams the answer so a
cancelled request closes the connection (vLLM then aborts the request; only the windows of the
file the constraint reads travel, ``fim.vllm.context``), and checks the middle
the way the in-process engine does (``fim.vllm.answers``): a middle that ends at a stop token
and parses is kept; a constrained one the budget or the clock cut off ends at the token
boundary the in-process decoder ranks best (``answers.best_stop``: each step's top
``STOP_LOGPROBS`` log-probabilities give a stop's there), anything else is cut back to its
longest prefix with which the file parses.  A greedy constrained request asks for the
right-context stop (``seam_right_stop``), and the same log-probabilities tell it: when the row
ended on a stop token that was not the model's raw likeliest one, and that one would re-write
the right context, the middle is cut where the in-process decoder cuts it and the stop is
``right_context`` (``answers.right_context_end``, ``fim.stopping``).  The stream is read by
``fim.vllm.stream.Stream`` over ``fim.vllm.http.Http``; a socket read waits until the
request's deadline plus ``Stream.READ_MARGIN_S``, or ``Stream.UNBUDGETED_READ_S`` without a
time budget.

Tokens (``fim.vllm.tokens``): with the served model's tokenizer at hand the prompt is counted,
cut and sent as token ids, exactly as a local engine with that tokenizer builds it, and a
constrained request is token-healed (the prompt's last token is backed off and ``seam_heal``
tells the processor which characters the middle must start by re-typing; they are taken off
the answer here).  Without it the counts are an estimate (three characters per token), the
prompt goes as text and healing is off.

``seam serve`` uses the same engine (``engine: "vllm"``): it is a
``fim.engine_interface.CompletionEngine`` like the in-process ``fim.api.Engine``, held to the
same contract (``tests/support/engine_contract.py``).  What a request will find cached is the
client's estimate (``tokens.PrefixRecord``: the prompts it ran lately, in whole blocks); what it
found (``cached_tokens``, ``seam/status``'s ``cached_tokens``) is the server's own count when
vLLM reports it (``--enable-prompt-tokens-details``, which ``seam team-server`` passes), else
that estimate.  A warm-up is a one-token request with the prompt, which leaves the prompt in
vLLM's automatic prefix cache for the request that follows; marked as a warm-up
(``seam_warm``), it also starts the server building that request's constraint language and is
itself left unconstrained.

A server that is down or answers garbage raises :class:`VllmError` with a message for the
user, never a hang; :meth:`VllmEngine.check` asks a one-token question with a deadline, which
tells a slow server from a long prompt (``lsp_server.model_host``).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fim.api import CompletionRequest, CompletionResult
from fim.engine_interface import EngineFeatures, Runtime
from fim.engines.model_specs import EngineKind
from fim.languages import PYTHON
from fim.options import Mode, StopReason
from fim.templates import TEMPLATES, ContextIds, FimTemplate, build_prompt
from fim.vllm.answers import after_heal, asks_right_stop, finish
from fim.vllm.context import constraint_texts
from fim.vllm.http import Http, VllmError
from fim.vllm.rows import WARM_KEY, SeamArgs
from fim.vllm.stream import Stream
from fim.vllm.tokens import (
    AGREEMENT_PROBE,
    EstimatedTokenizer,
    LocalTokenizer,
    PrefixRecord,
    load_tokenizers,
    tokenizer_candidates,
)
from quotient.constraint import LanguageMode

__all__ = ["STOP_LOGPROBS", "RemotePrompt", "ServerInfo", "VllmEngine", "VllmError"]

log = logging.getLogger(__name__)

#: Tokens kept free for the estimate being off, when the prompt is cut by the estimate.
PROMPT_SLACK = 16
#: The one-token question :meth:`VllmEngine.check` asks (a few tokens of prompt).
CHECK_PROMPT = "x = 1\n"
#: Top ids per step a constrained request asks logprobs for (vLLM's default
#: ``--max-logprobs`` is 20; a server started with less refuses the request, and says so).
STOP_LOGPROBS = 20


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
    is set: then the text is sent), how the left and right text were cut, and token
    healing."""

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


class _RemoteIds:
    """``token_id`` over the server's ``/tokenize`` (what ``detect_template`` asks)."""

    eos_token_id = None
    bos_token_id = None

    def __init__(self, http_: Http, model: str) -> None:
        self.http, self.model = http_, model

    def token_id(self, piece: str) -> int | None:
        out = self.http.call("POST", "/tokenize", {"model": self.model, "prompt": piece,
                                                  "add_special_tokens": False})
        tokens = out.get("tokens")
        return int(tokens[0]) if isinstance(tokens, list) and len(tokens) == 1 else None


def _constrained(req: CompletionRequest) -> bool:
    """Whether the server's processor constrains the row: a constrained request in a language
    with a grammar (the processor knows Python's; any other file's row runs unconstrained,
    its middle unchecked)."""
    return req.mode == Mode.CONSTRAINED and req.file_language == PYTHON


class VllmEngine:
    """Completes :class:`~fim.api.CompletionRequest` through a vLLM server (see the module)."""

    @property
    def features(self) -> EngineFeatures:
        """One middle per request (``CompletionRequest.alternatives`` is not ranked here), no
        partial lines; exact token counts when the served model's tokenizer is at hand."""
        return EngineFeatures(ranks_alternatives=False, reports_progress=False,
                              exact_tokens=self.exact_tokens)

    @property
    def runtime(self) -> Runtime:
        backend = self.backend
        return Runtime(backend.engine, backend.device, backend.description)

    @property
    def cached_tokens(self) -> int:
        """Prompt tokens the last request took from vLLM's prefix cache (``RemoteCache``)."""
        return self.step_model.reused

    def __init__(self, server: str, api_key: str | None = None, *, timeout: float = 10.0,
                 template: str | None = None, left_share: float = 0.75,
                 tokenizer: str | None = None) -> None:
        self.http = Http(server, api_key, timeout)
        self.left_share = left_share
        self._template_name = template
        self._tokenizer_name = tokenizer
        self._info: ServerInfo | None = None
        #: Replaced by the model's tokenizer (or the estimate with the server's specials)
        #: once the server is known.
        self.tokenizer: LocalTokenizer | EstimatedTokenizer = EstimatedTokenizer()
        self.step_model = RemoteCache()
        self.prefixes = PrefixRecord()
        self._project_ids = ContextIds()

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
        self._project_ids.clear()
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
        """The server's window in tokens (its ``max_model_len``)."""
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
            left_share=self.left_share, heal=exact and _constrained(req),
            right_budget=req.right_tokens, order=req.order, left_start=req.left_start,
            context=self._context_ids(req))
        return RemotePrompt(built.ids, None if exact else self.tokenizer.decode(built.ids),
                            built.left_chars_dropped, built.right_chars_dropped,
                            built.healed, built.project_tokens)

    def _context_ids(self, req: CompletionRequest) -> list[int]:
        """The project context's ids (``fim.templates.ContextIds``, as ``fim.api.Engine``)."""
        return self._project_ids.get(self.tokenizer, self.info.template, req.context_files,
                                  req.context_budget, req.repo, req.path)

    def uncached(self, req: CompletionRequest, prompt: RemotePrompt | None = None) -> int:
        """Prompt tokens probably not in vLLM's prefix cache: all but the longest beginning
        shared with a prompt the server ran lately (``tokens.PrefixRecord``)."""
        prompt = prompt if prompt is not None else self.prompt_for(req)
        return len(prompt.ids) - self.prefixes.cached(prompt.ids)

    def warm(self, req: CompletionRequest, cancel: Callable[[], bool] | None = None,
             keep_cached: bool = False, prompt: RemotePrompt | None = None,
             hold: bool = False) -> bool:
        """Run the prompt into vLLM's prefix cache: a one-token request whose Seam arguments
        say it is a warm-up (``seam_warm``: the server's processor starts building the
        constraint's language on its workers, for the request that follows, and leaves this
        one unconstrained); whether it finished.  A server that
        fails is not probed here: ``False``, and the caller (``lsp_server``'s completion
        service, on its worker) has the model host check the server in the background.
        ``keep_cached`` and ``hold`` have no meaning remotely (vLLM evicts by its own
        rule)."""
        try:
            prompt = prompt if prompt is not None else self.prompt_for(req)
            body = dict(self.body(req, prompt), max_tokens=1)
            xargs = body.get("vllm_xargs")
            if xargs is not None:  # the processor starts building the request's language
                body["vllm_xargs"] = dict(xargs, **{WARM_KEY: 1})
            body.pop("logprobs", None)  # a constrained request's, which nothing here reads
            ids = prompt.ids
            # Cancelled once sent, it still runs to its one token (the editor stops waiting):
            # the prompt is in vLLM's cache for the request that interrupted it.
            got = Stream(self.http, body, cancel, None,
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
        got = Stream(self.http, body, None, t0 + timeout).run()
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
        if _constrained(req):
            # The right-context stop is a greedy row's (see ``fim.vllm.processor``); the
            # model's raw top token at the step the row ended tells this client it happened
            # (``right_context_end``): vLLM's default logprobs are the raw model's.
            # Only the windows the constraint reads (``fim.vllm.context``), not the file; each
            # middle is still checked against the whole file here (``answers.finish``).
            sent = constraint_texts(req.left, req.right)
            left = sent.left if sent.left.endswith(prompt.healed) else req.left
            body["vllm_xargs"] = SeamArgs(left, sent.right, req.scope, prompt.healed,
                                          asks_right_stop(req),
                                          req.right_wraps).to_extra_args()
            # The raw model's likeliest ids at each step: the top one tells the right-context
            # stop (``wanted_token``), the stop tokens' among them rank the places a middle cut
            # by the budget may end (``best_stop``), as the in-process decoder ranks them.
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
        streamed = Stream(self.http, self.body(req, built), cancel, deadline,
                           stops=self.info.template.stops).run()
        model_ms = (time.perf_counter() - t0) * 1e3
        if streamed.answered:
            self.prefixes.ran(built.ids)  # the server prefilled it (a first token came)
        self.step_model.from_server = streamed.cached_tokens is not None
        self.step_model.reused = (streamed.cached_tokens if streamed.cached_tokens is not None
                                  else cached)
        checked = req.file_language == PYTHON  # the only grammar the processor has
        if checked:
            middle, stop, parses = finish(req, streamed, built.healed)
        else:  # no grammar: the row ran unconstrained, and nothing parses the middle
            middle, stop, _ = finish(dataclasses.replace(req, mode=Mode.UNCONSTRAINED),
                                     streamed, built.healed)
            parses = None
        mode = (LanguageMode.UNCHECKED if not checked
                else LanguageMode.EXACT if req.mode == Mode.CONSTRAINED else LanguageMode.NONE)
        return CompletionResult(
            middle=middle, stop=stop, tokens=streamed.tokens, setup_ms=setup_ms,
            model_ms=model_ms, constraint_ms=0.0, mode=mode,
            decoding=Mode(req.mode), raw=after_heal(streamed.text, built.healed) or "",
            parses=parses, prompt_tokens=streamed.prompt_tokens or len(built.ids),
            project_tokens=built.project_tokens,
            left_chars_dropped=built.left_chars_dropped,
            right_chars_dropped=built.right_chars_dropped, healed=built.healed)

