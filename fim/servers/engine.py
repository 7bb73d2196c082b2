"""The ``llama-server`` and ``openai`` engines: Seam's in-process engine (``fim.api.Engine``)
over a model server's streamed top-N instead of a local model.

Everything but the model is the in-process engine's own: the prompt builder, project context
and template (``fim.templates``), the constraint and its cached languages, the decoding loop
with its stopping rules and the final parse check.  What runs the model is a
:class:`~fim.servers.verify.VerifyStepModel` over one of two routes (``fim.servers.llama_native``,
``fim.servers.openai_route``), and the vocabulary is the one the server's answers name
(``fim.servers.seen_vocab``).  :func:`connect` asks the server what it serves before the first
request, so a wrong URL, a server that is down or a model without FIM tokens is said at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from fim.api import Engine
from fim.decoding import DecodeSetup
from fim.engine_interface import EngineFeatures
from fim.engines.backend import Backend
from fim.engines.model_specs import EngineKind
from fim.options import Mode, StopReason
from fim.request import CompletionRequest, CompletionResult
from fim.servers import llama_native, openai_route
from fim.servers.errors import ServerError, from_transport, redact
from fim.servers.seen_vocab import DEFAULT_CAPACITY, SeenHealIndex, SeenVocabulary
from fim.servers.verify import RunStats, VerifyStepModel
from fim.templates import detect_template
from fim.vllm.http import Http, VllmError

log = logging.getLogger(__name__)

#: Alternatives per position the server is asked for (``n_probs`` / ``logprobs``); vLLM
#: refuses more than 20 unless started with a larger ``--max-logprobs``.
DEFAULT_TOP_N = 10
#: Seconds a connection or a call may take before the server counts as down.
DEFAULT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ServerOptions:
    """How to reach a server and what to ask of it."""

    url: str
    api_key: str | None = None
    #: the served model's name (the openai route sends it; default: the first listed)
    model: str | None = None
    #: the FIM template by name (default: from the server's tokens or the model's name)
    template: str | None = None
    top_n: int = DEFAULT_TOP_N
    timeout: float = DEFAULT_TIMEOUT_S


class ServerEngine(Engine):
    """The in-process engine over a server's top-N (see the module docstring)."""

    features = EngineFeatures(ranks_alternatives=False, reports_progress=True,
                              exact_tokens=True)

    def __init__(self, backend: Backend, route, *, heal: bool, exact_tokens: bool,
                 **options) -> None:
        super().__init__(backend, heal=heal, **options)
        self.route = route
        step = backend.step_model
        assert isinstance(step, VerifyStepModel)
        self.verifier = step
        vocab = step.vocab
        vocab.set_stops(self._setup.stop_ids)
        # Healing picks among the ids the server has named (the table fills as it answers).
        self._setup = DecodeSetup(step_model=self._setup.step_model, vocab=self._setup.vocab,
                                  stop_ids=self._setup.stop_ids,
                                  disallowed=self._setup.disallowed,
                                  heal_index=SeenHealIndex(vocab) if heal else None)
        self.features = EngineFeatures(ranks_alternatives=False, reports_progress=True,
                                       exact_tokens=exact_tokens)
        #: what the last request cost on the server
        self.last_stats = RunStats()

    def _complete(self, req: CompletionRequest, cancel, on_partial=None, progress=None,
                  prompt=None) -> CompletionResult:
        self.verifier.begin(req.max_tokens)
        if isinstance(self.route, openai_route.OpenAIRoute):
            self.route.require_logprobs = req.mode == Mode.CONSTRAINED
        try:
            return super()._complete(req, cancel, on_partial, progress, prompt)
        finally:
            self.verifier.finish()
            self.last_stats = self.verifier.stats

    def warm(self, req: CompletionRequest, cancel: Callable[[], bool] | None = None,
             keep_cached: bool = False, prompt=None, hold: bool = False) -> bool:
        """Run the prompt into the server's cache (one position, then hang up); whether it
        finished.  A failing server is ``False`` here (the request that follows says why).
        ``hold`` has no meaning remotely (the server keeps what its own rule keeps)."""
        self.verifier.begin(0)
        try:
            return super().warm(req, cancel, keep_cached, prompt)
        except ServerError as err:
            log.info("warm-up failed: %s", err)
            return False
        finally:
            self.verifier.finish()

    def check(self, timeout: float) -> float:
        """Seconds a one-token request takes; :class:`ServerError` when it fails or takes
        longer than ``timeout`` (what ``lsp_server.model_host`` asks of a server engine)."""
        import time

        req = CompletionRequest("x = 1\n", "", mode=Mode.UNCONSTRAINED, max_tokens=1,
                                time_budget_ms=timeout * 1e3)
        t0 = time.monotonic()
        res = self.complete(req)
        if res.stop is StopReason.TIME:
            raise ServerError(f"the {self.route.name} did not answer a one-token request "
                              f"within {timeout:g} s (busy or stuck)")
        return time.monotonic() - t0


def connect(engine: EngineKind | str, options: ServerOptions) -> ServerEngine:
    """A ready engine for the server at ``options.url``; :class:`ServerError` with one line
    for the user when it cannot be used (the API key never appears in it)."""
    kind = EngineKind.parse(engine)
    if not options.url:
        raise ServerError(f"the {kind} engine needs the server's URL (--server URL, or the "
                          "setting \"server\")")
    if not 1 <= options.top_n <= 100:
        raise ServerError("top-N must be between 1 and 100")
    try:
        http_ = Http(options.url, options.api_key, options.timeout)
        if kind is EngineKind.LLAMA_SERVER:
            return _llama_server(http_, options)
        if kind is EngineKind.OPENAI:
            return _openai(http_, options)
    except VllmError as err:
        raise ServerError(redact(str(from_transport(err, "server")), options.api_key)) from None
    except ServerError as err:
        raise ServerError(redact(str(err), options.api_key)) from None
    raise ServerError(f"the {kind} engine is not a server engine (use llama-server or openai)")


def _llama_server(http_: Http, options: ServerOptions) -> ServerEngine:
    info = llama_native.probe(http_)
    tokenizer = llama_native.ServerTokenizer(http_)
    tokenizer.eos_token_id = tokenizer.token_id(info.eos_piece) if info.eos_piece else None
    try:
        template = detect_template(tokenizer, options.template)
    except ValueError as err:
        raise ServerError(f"the model {info.model} on {http_.url}: {err}") from None
    vocab = SeenVocabulary(info.vocab_size or DEFAULT_CAPACITY)
    route = llama_native.NativeRoute(http_, vocab, options.top_n)
    backend = Backend(EngineKind.LLAMA_SERVER, http_.url, VerifyStepModel(route, vocab),
                      tokenizer, vocab, [], info.window, "remote",
                      f"llama-server at {http_.url} ({info.model}; top-{options.top_n}, "
                      "tokens counted by the server, token healing on)")
    return ServerEngine(backend, route, heal=True, exact_tokens=True, template=template)


def _openai(http_: Http, options: ServerOptions) -> ServerEngine:
    model = options.model
    window = None
    if not model:
        listed = llama_native.call(http_, "GET", "/v1/models", name=openai_route.NAME)
        data = listed.get("data")
        if not isinstance(data, list) or not data or not isinstance(data[0], dict):
            raise ServerError(f"the server at {http_.url} lists no model; set \"model\"")
        model = str(data[0].get("id"))
        for key in ("max_model_len", "context_length", "max_context_length"):
            if isinstance(data[0].get(key), int):  # vLLM, LM Studio
                window = data[0][key]
    if window is None:
        window = _llama_server_context(http_)
    template = openai_route.template_for(model, options.template)
    vocab = SeenVocabulary(DEFAULT_CAPACITY)
    tokenizer = openai_route.SentinelTokenizer(template, DEFAULT_CAPACITY)
    route = openai_route.OpenAIRoute(http_, vocab, options.top_n, model, tokenizer, template)
    # The window is counted by the estimate, which may be off: keep to a cautious 4096 when
    # the server does not say its own.
    backend = Backend(EngineKind.OPENAI, http_.url, VerifyStepModel(route, vocab), tokenizer,
                      vocab, [], min(window or 4096, 32768), "remote",
                      f"OpenAI-compatible server at {http_.url} ({model}; top-{options.top_n}, "
                      "tokens estimated, no token healing: the server names no token ids)")
    engine = ServerEngine(backend, route, heal=False, exact_tokens=False, template=template)
    return engine


def _llama_server_context(http_: Http) -> int | None:
    """The context per slot of a llama-server behind the OpenAI route (``/props``); ``None``
    from any other server (which answers 404 or something else)."""
    try:
        props = http_.call("GET", "/props")
    except VllmError:
        return None
    settings = props.get("default_generation_settings")
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
    return n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else None
