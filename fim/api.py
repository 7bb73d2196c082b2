"""The public entry point of ``fim``: load a model once, then complete requests.

```python
engine = Engine.load("bundled:qwen2.5-coder-1.5b")
res = engine.complete(CompletionRequest(left, right, mode="constrained"), cancel=None)
res.middle, res.stop, res.tokens, res.setup_ms, res.model_ms, res.constraint_ms, res.mode
```

``complete`` is serialised by a lock (one model, one request at a time) and may be called from
any thread.  ``cancel`` is polled before every model step.

The engine keeps the last few constraint languages (``fim.language_cache``, the cache the vLLM
server's processor keeps too): a request whose left text extends a cached one's by typed text
(same right text and scope) reuses that language, its state ``feed(typed)`` from the cached
initial one instead of a rebuild, which is what keeps as-you-type completion in the editor
cheap.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable

from fim import decoding
from fim.alternatives import Alternative, search
from fim.decode_options import DecodeHooks
from fim.decoding import DecodeSetup, HealIndex
from fim.engine_interface import EngineFeatures, Runtime
from fim.engines.backend import Backend
from fim.engines.loading import load_backend
from fim.engines.model_specs import EngineKind
from fim.engines.step_model import StepModel
from fim.language_cache import CachedLanguage, LanguageCache, LanguageFactory
from fim.options import Dtype, Mode, StopReason
from fim.request import CompletionRequest, CompletionResult
from fim.templates import (
    ContextIds,
    FimTemplate,
    Prompt,
    PromptTooLong,
    build_prompt,
    detect_template,
    stop_ids,
)
from fim.tokenizer import TextTokenizer
from quotient.constraint import ConstraintState, LanguageMode

log = logging.getLogger(__name__)

# Language modes in which the constraint is weaker than "the file parses" near the cursor.
DEGRADED_MODES = (LanguageMode.PREFIX, LanguageMode.NONE)

class Engine:
    """A loaded model with its FIM template, ready to complete requests."""

    features = EngineFeatures(ranks_alternatives=True, reports_progress=True, exact_tokens=True)

    def __init__(
        self,
        backend: Backend,
        *,
        template: FimTemplate | str | None = None,
        left_share: float = 0.75,
        heal: bool = True,
        language_factory: LanguageFactory | None = None,
        language_cache_size: int = 4,
        window: int | None = None,
    ) -> None:
        self.backend = backend
        tok = backend.tokenizer
        self.template = (
            template if isinstance(template, FimTemplate) else detect_template(tok, template)
        )
        self.left_share = left_share
        self.heal = heal
        full = backend.window
        self.window = min(window, full) if window else full
        vocab = backend.vocab
        stops = frozenset(i for i in stop_ids(tok, self.template) if i < vocab.size)
        self._setup = DecodeSetup(
            step_model=backend.step_model,
            vocab=vocab,
            stop_ids=stops,
            disallowed=vocab.disallowed_mask(set(stops)),
            heal_index=HealIndex(vocab, backend.heal_order) if heal else None,
        )
        # The left context slides in the cache where the engine can move cached cells.
        step = backend.step_model
        suffix = tok.token_id(self.template.suffix)
        if step.can_shift and suffix is not None:
            step.slide_stop = suffix
            self.features = dataclasses.replace(self.features, slides_window=True)
        # A held prompt needs another slot for the prompts that fork it.
        if isinstance(step, StepModel) and len(step.slots) > 1:
            self.features = dataclasses.replace(self.features, holds_prompts=True)
        self.languages = LanguageCache(language_cache_size, language_factory)
        self._project_ids = ContextIds()
        self._lock = threading.Lock()

    @classmethod
    def load(
        cls,
        model_spec: str,
        device: str = "auto",
        dtype: Dtype | str = Dtype.AUTO,
        trust_remote_code: bool = False,
        progress: Callable[[float, str], None] | None = None,
        engine: EngineKind | str = EngineKind.AUTO,
        slots: int = 4,
        **options,
    ) -> Engine:
        """Load ``model_spec`` (see ``fim.engines.model_specs``) with ``engine`` (an ``EngineKind``,
        or its name or alias as ``EngineKind.parse`` reads it); ``options`` go to
        ``Engine(...)``."""
        backend = load_backend(model_spec, engine, device, dtype, trust_remote_code, progress,
                               slots=slots, window=options.get("window"))
        return cls(backend, **options)

    @property
    def tokenizer(self) -> TextTokenizer:
        return self.backend.tokenizer

    @property
    def step_model(self) -> StepModel:
        return self.backend.step_model

    @property
    def runtime(self) -> Runtime:
        return Runtime(self.backend.engine, self.backend.device, self.backend.description,
                       self.step_model.speed)

    @property
    def cached_tokens(self) -> int:
        """Prompt tokens the last request took from the model's cache (a cached beginning,
        and the cached lines a slid window moved: ``StepModel.slide_stop``)."""
        return self.step_model.reused + self.step_model.slid

    def complete(
        self, req: CompletionRequest, cancel: Callable[[], bool] | None = None,
        on_partial: Callable[[str], None] | None = None,
        progress: Callable[[str, int, int], None] | None = None,
        prompt: Prompt | None = None,
    ) -> CompletionResult:
        """Complete one request; see ``CompletionResult`` for the fields.

        ``on_partial`` (called on the decoding thread) is told each middle that ends at a line
        end where the whole file parses, while decoding goes on: an editor can show the
        first line of a longer suggestion early.  ``progress(phase, done, total)`` hears of
        the prompt (``prefill``) and the middle (``decode``) as they run.  ``prompt``: the
        request's ``prompt_for(req)`` when the caller built it already (an editor that asked
        ``uncached`` first), so that it is not built again.
        """
        req.validate()
        window = self.window_for(req)
        if req.max_tokens + 4 > window:  # fail before building any language
            raise PromptTooLong(
                f"the model window ({window} tokens) cannot hold the prompt sentinels and "
                f"{req.max_tokens} generated tokens; lower --max-tokens"
            )
        with self._lock:
            return self._complete(req, cancel, on_partial, progress, prompt)

    def _prepare(self, req: CompletionRequest, prompt: Prompt | None = None) -> tuple[
            CachedLanguage | None, ConstraintState | None, LanguageMode, Prompt]:
        """The constraint language (cached by the text at the cursor), its state after the left
        text, its mode, and the prompt (``prompt`` when the caller built it)."""
        state = entry = None
        lang_mode = LanguageMode.NONE
        if req.mode == Mode.CONSTRAINED:
            hit = self.languages.get(req.left, req.right, req.scope, req.file_language)
            entry, state = hit.language, hit.state
            lang_mode = LanguageMode(entry.language.mode)
        elif not req.file_language.checked:
            lang_mode = LanguageMode.UNCHECKED  # nothing checks it in any mode
        return entry, state, lang_mode, prompt if prompt is not None else self.prompt_for(req)

    def prompt_for(self, req: CompletionRequest) -> Prompt:
        """The prompt ``complete(req)`` would run (no model work)."""
        req.validate()
        return build_prompt(
            self.tokenizer, self.template, req.left, req.right,
            window=self.window_for(req), reserve=req.max_tokens, left_share=self.left_share,
            heal=self.heal, right_budget=req.right_tokens, order=req.order,
            left_start=req.left_start, context=self._context_ids(req),
        )

    def _context_ids(self, req: CompletionRequest) -> list[int]:
        """The project context's ids (``fim.templates.ContextIds``)."""
        return self._project_ids.get(self.tokenizer, self.template, req.context_files,
                                  req.context_budget, req.repo, req.path)

    def uncached(self, req: CompletionRequest, prompt: Prompt | None = None) -> int:
        """How many of ``req``'s prompt tokens the model's cache does not hold: what its
        prefill would run now (``prompt``: its ``prompt_for(req)``, when built already).
        Safe to call while another request decodes (the answer may then be stale by that
        request's tokens)."""
        ids = (prompt if prompt is not None else self.prompt_for(req)).ids
        return len(ids) - self.step_model.cached_prefix(ids)

    def warm(self, req: CompletionRequest, cancel: Callable[[], bool] | None = None,
             keep_cached: bool = False, prompt: Prompt | None = None,
             hold: bool = False) -> bool:
        """Do everything ``complete(req)`` would do before its first token (build the
        constraint language, run the prompt into the cache) and stop; whether it finished.

        An editor calls this while the user rests the cursor or reads a suggestion, so that
        the request that follows only decodes.  ``cancel`` is polled as in ``complete``.
        ``keep_cached``: the cached prompt this one departs from stays cached too (see
        ``StepModel.prefill``): a prompt warmed for later must not evict the one requests
        use now. ``prompt``: as for ``complete``. ``hold``: this prompt stays cached whole
        while others run (``StepModel.prefill``); an unconstrained ``req`` builds no
        constraint language (a prompt warmed only to be shared, never decoded at its end).
        """
        req.validate()
        with self._lock:
            _, _, _, prompt = self._prepare(req, prompt)
            if cancel is not None and cancel():
                return False
            return self._setup.step_model.prefill(prompt.ids, cancel, keep_cached=keep_cached,
                                                  hold=hold) is not None

    @staticmethod
    def _texts_to_check(req: CompletionRequest, entry: CachedLanguage | None
                        ) -> tuple[str, str] | None:
        """The parts of the left and right text that decide whether a middle makes the file
        parse: the constraint's check region where it has one (a 5 MB file is not re-read per
        middle), else all of them; ``None`` in mode ``window``, where the text outside the
        windows is broken, so the file cannot parse whatever the middle (the constraint is
        exact within the windows)."""
        if not req.file_language.checked:
            return None  # nothing to check with: every middle passes
        if entry is None:
            return req.left, req.right
        if entry.language.mode == LanguageMode.WINDOW:
            return None
        region = entry.language.check_region()
        if region is None:
            return req.left, req.right
        return req.left[region[0]:], req.right[:region[1]]

    def _partial_sink(self, req: CompletionRequest, entry: CachedLanguage | None,
                      on_partial: Callable[[str], None]) -> Callable[[str], None]:
        """Pass on only partial middles with which the file parses (the same final check
        every returned middle gets); every one in a language nothing checks."""
        texts = self._texts_to_check(req, entry)

        parser = req.file_language.parses

        def sink(middle: str) -> None:
            if middle and (texts is None
                           or parser(texts[0] + middle + texts[1]) is not False):
                on_partial(middle)
        return sink

    def window_for(self, req: CompletionRequest) -> int:
        """The token budget of ``req``'s prompt and middle."""
        return min(self.window, req.context_tokens) if req.context_tokens else self.window

    def _complete(self, req: CompletionRequest, cancel, on_partial=None,
                  progress=None, prompt: Prompt | None = None) -> CompletionResult:
        start = time.perf_counter()
        deadline = None
        if req.time_budget_ms is not None:
            deadline = time.monotonic() + req.time_budget_ms / 1e3
        entry, state, lang_mode, prompt = self._prepare(req, prompt)
        setup_ms = (time.perf_counter() - start) * 1e3
        hooks = DecodeHooks(
            cancel=cancel, progress=progress,
            on_line=self._partial_sink(req, entry, on_partial) if on_partial else None)
        out = decoding.decode(self._setup, prompt.ids, prompt.healed,
                              req.decode_options(deadline), state,
                              entry.cache if entry else None, hooks)
        texts = self._texts_to_check(req, entry)
        t0 = time.perf_counter()
        middle, stop, parses, error = self._check(req, lang_mode, texts, out.middle, out.stop)
        constraint_ms = out.constraint_ms + (time.perf_counter() - t0) * 1e3
        tokens, model_ms, alternatives = out.tokens, out.model_ms, ()
        if req.ranked and middle is not None and stop != StopReason.CANCELLED:
            alternatives, tokens, model_ms, constraint_ms = self._alternatives(
                req, prompt, state, entry, lang_mode, texts, deadline, cancel, out)
            if alternatives:
                middle, stop = alternatives[0].middle, alternatives[0].stop
        return CompletionResult(
            middle=middle, stop=stop, tokens=tokens, setup_ms=setup_ms,
            model_ms=model_ms, constraint_ms=constraint_ms, mode=lang_mode,
            decoding=req.mode, raw=out.raw, parses=parses, prompt_tokens=len(prompt.ids),
            project_tokens=prompt.project_tokens,
            left_chars_dropped=prompt.left_chars_dropped,
            right_chars_dropped=prompt.right_chars_dropped, healed=prompt.healed, error=error,
            alternatives=tuple(alternatives),
        )

    @staticmethod
    def _check(req: CompletionRequest, lang_mode: LanguageMode,
               texts: tuple[str, str] | None, middle: str | None, stop: StopReason
               ) -> tuple[str | None, StopReason, bool | None, str | None]:
        """The final check every middle gets: ``(middle, stop, parses, error)``; none for a
        language without a grammar (``parses`` ``None``: nothing can tell)."""
        language = req.file_language
        if language.parser is None:
            return middle, stop, None, None
        parser = language.parser
        parses = None
        error = None
        # Checked mode always takes the longest prefix that parses; constrained mode falls back
        # to it when the whole file does not parse with its middle.
        cut = (req.mode == Mode.CHECKED and middle is not None
               and stop != StopReason.CANCELLED)
        if req.mode != Mode.CHECKED and middle is not None:
            parses = texts is not None and parser(texts[0] + middle + texts[1])
            if req.mode == Mode.CONSTRAINED and not parses:
                if lang_mode == LanguageMode.EXACT:
                    # The constraint accepted a middle that Python rejects: a bug to surface
                    # in ``error``, but the user still gets only a middle that parses.
                    error = (
                        f"constrained middle does not parse (language mode "
                        f"{lang_mode.value!r}); "
                        "please report this case"
                    )
                    log.warning("%s (%d characters of middle)", error, len(middle))
                    # Document text only at DEBUG: the log must not hold the user's code.
                    log.debug("unparsable middle: left=%r middle=%r", req.left[-80:], middle)
                # Degraded modes said they could not be exact here (documented in DESIGN.md).
                # "window": text outside the windows is broken, so the whole file cannot
                # parse whatever the middle; ``parses`` reports that as it is.
                cut = lang_mode == LanguageMode.EXACT or lang_mode in DEGRADED_MODES
        if cut:
            check_left, check_right = texts or (req.left, req.right)
            middle, stop = decoding.checked_cut(check_left, middle, check_right, stop, parser)
            parses = middle is not None
        return middle, stop, parses, error

    def _alternatives(self, req: CompletionRequest, prompt: Prompt,
                      state: ConstraintState | None, entry: CachedLanguage | None,
                      lang_mode: LanguageMode, texts: tuple[str, str] | None,
                      deadline: float | None, cancel: Callable[[], bool] | None,
                      first: decoding.Decoded
                      ) -> tuple[list[Alternative], int, float, float]:
        """The ranked alternatives after the traced greedy decode ``first``; with the tokens,
        model and constraint milliseconds of all runs."""
        spent = [first.model_ms, first.constraint_ms]
        base = req.decode_options(deadline)

        def run(forced: tuple[int, ...]) -> decoding.Decoded:
            options = dataclasses.replace(base, forced=forced)
            out = decoding.decode(self._setup, prompt.ids, prompt.healed, options, state,
                                  entry.cache if entry else None, DecodeHooks(cancel=cancel))
            spent[0] += out.model_ms
            spent[1] += out.constraint_ms
            return out

        def check(middle: str, stop: StopReason) -> tuple[str, StopReason] | None:
            checked, stop, parses, _ = self._check(req, lang_mode, texts, middle, stop)
            # Only what the user could be shown: a middle the final check keeps as it is.
            return (checked, stop) if checked is not None and (
                parses or texts is None) else None

        found, tokens = search(run, first, req.alternatives, check, req.ranking, deadline,
                               cancel)
        return found, tokens, spent[0], spent[1]
