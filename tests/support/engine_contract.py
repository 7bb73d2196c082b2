"""The engine contract (``fim.engine_interface.CompletionEngine``), written once and run against
every engine: the in-process engines over the tiny models (``tests/fim/test_engine_contract.py``),
the vLLM client against the local peer there, and against a real vLLM server in
``tests/team/test_vllm_server.py``.

Each check takes a *fresh* engine (nothing asked of it yet: the cache checks start from an
empty cache) and a constrained request whose file parses with some middle the engine can
write.  What each one would catch is said in its docstring.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect

from fim.engine_interface import CompletionEngine, EngineFeatures, Runtime
from fim.engines.model_specs import EngineKind
from fim.options import Mode, StopReason
from fim.request import CompletionRequest
from fim.templates import FimTemplate

#: The methods the service calls, compared by signature with the protocol's.
METHODS = ("prompt_for", "uncached", "warm", "complete")
#: What a prompt handed back to the engine carries (``fim.engine_interface.EnginePrompt``).
PROMPT_FIELDS = ("ids", "healed", "project_tokens", "left_chars_dropped",
                 "right_chars_dropped")


def _shape(function) -> list[tuple[str, object, object]]:
    """A signature without its annotations (names, kinds, defaults): the annotations are
    strings under postponed evaluation, and an engine may name its own prompt type."""
    params = inspect.signature(function).parameters.values()
    return [(p.name, p.kind, p.default) for p in params if p.name != "self"]


def check_conforms(engine: CompletionEngine, _req: CompletionRequest) -> None:
    """The engine is a ``CompletionEngine`` in its signatures, not only by name: a method
    with a renamed, missing or reordered parameter, or another default, passes a runtime
    ``isinstance`` (which looks at names only) and fails here."""
    assert isinstance(engine, CompletionEngine)
    for name in METHODS:
        assert _shape(getattr(type(engine), name)) == _shape(getattr(CompletionEngine, name)), \
            f"{type(engine).__name__}.{name} differs from the protocol's"
    assert isinstance(engine.features, EngineFeatures)
    assert all(isinstance(v, bool) for v in dataclasses.astuple(engine.features))
    assert isinstance(engine.window, int) and engine.window > 0
    assert isinstance(engine.template, FimTemplate)
    assert isinstance(engine.cached_tokens, int) and engine.cached_tokens >= 0
    ids = engine.tokenizer.encode("x = 1\n")
    assert ids and all(isinstance(i, int) for i in ids)


def check_runtime(engine: CompletionEngine, _req: CompletionRequest) -> None:
    """The status line's record is filled: what runs the model, where, in words."""
    runtime = engine.runtime
    assert isinstance(runtime, Runtime)
    assert isinstance(runtime.engine, EngineKind) and runtime.engine is not EngineKind.AUTO
    assert runtime.device and runtime.description.strip()


def check_prompt_is_taken_back(engine: CompletionEngine, req: CompletionRequest) -> None:
    """``prompt_for``'s prompt goes back into ``uncached``, ``warm`` and ``complete`` without
    being built again (an engine that rebuilds it calls ``prompt_for``, which fails here), and
    the result describes that prompt."""
    prompt = engine.prompt_for(req)
    for name in PROMPT_FIELDS:
        assert hasattr(prompt, name), name
    assert prompt.ids and all(isinstance(i, int) for i in prompt.ids)
    assert len(prompt.ids) + req.max_tokens <= engine.window

    def rebuilt(_req: CompletionRequest) -> None:
        raise AssertionError("the prompt was built again")

    engine.prompt_for = rebuilt  # type: ignore[method-assign]  # an instance attribute
    try:
        assert engine.uncached(req, prompt) <= len(prompt.ids)
        engine.warm(req, prompt=prompt)
        res = engine.complete(req, prompt=prompt)
    finally:
        del engine.prompt_for
    assert res.error is None, res.error
    assert (res.healed, res.project_tokens, res.left_chars_dropped, res.right_chars_dropped) \
        == (prompt.healed, prompt.project_tokens, prompt.left_chars_dropped,
            prompt.right_chars_dropped)


def check_warm_lowers_uncached(engine: CompletionEngine, req: CompletionRequest) -> None:
    """A warmed prompt is (mostly) in the cache: ``uncached`` falls after ``warm``, and the
    request that follows finds tokens cached (an engine whose ``warm`` does nothing, or whose
    ``uncached`` does not look at the cache, fails).  How many is the model's own count: a
    server's cache may keep larger blocks than a client's estimate of it."""
    prompt = engine.prompt_for(req)
    before = engine.uncached(req, prompt)
    assert before == engine.uncached(req) > 0  # with or without the prompt built
    assert engine.warm(req, prompt=prompt) is True
    after = engine.uncached(req, prompt)
    assert 0 <= after < before
    engine.complete(req, prompt=prompt)
    assert engine.cached_tokens > 0


def check_constrained_middle_parses(engine: CompletionEngine, req: CompletionRequest) -> None:
    """A constrained request's middle makes the file parse, and the result says so."""
    assert req.mode == Mode.CONSTRAINED
    res = engine.complete(req)
    assert res.error is None, res.error
    assert res.middle is not None, res
    assert res.parses is True and res.decoding == Mode.CONSTRAINED
    ast.parse(req.left + res.middle + req.right)
    assert res.stop is not StopReason.CANCELLED and res.prompt_tokens > 0


def check_cancel_is_honoured(engine: CompletionEngine, req: CompletionRequest) -> None:
    """A request cancelled from the start ends cancelled with no middle (an engine that
    ignores ``cancel`` decodes one); a warm-up cancelled from the start does not finish."""
    res = engine.complete(req, cancel=lambda: True)
    assert (res.middle, res.stop) == (None, StopReason.CANCELLED)
    assert engine.warm(req, cancel=lambda: True) is False
    later = engine.complete(req)  # the engine is not left stuck by it
    assert later.stop is not StopReason.CANCELLED


def check_features_are_true(engine: CompletionEngine, req: CompletionRequest) -> None:
    """What ``features`` says is what the engine does: ranked alternatives only and always
    when it says it ranks them; progress and partial lines only and always when it says it
    reports them; the model's own count of the prompt when it says its tokens are exact."""
    features = engine.features
    ranked = engine.complete(dataclasses.replace(req, alternatives=3))
    if features.ranks_alternatives:
        assert ranked.alternatives and ranked.middle == ranked.alternatives[0].middle
        assert len({a.middle for a in ranked.alternatives}) == len(ranked.alternatives)
    else:
        assert ranked.alternatives == () and ranked.middle is not None
    heard: list[tuple[str, int, int]] = []
    res = engine.complete(req, progress=lambda phase, done, total: heard.append(
        (phase, done, total)))
    if features.reports_progress:
        assert {phase for phase, _, _ in heard} <= {"prefill", "decode"} and heard
    else:
        assert heard == []
    if features.exact_tokens:
        assert res.prompt_tokens == len(engine.prompt_for(req).ids)


def check_cached_tokens_count_the_hit(engine: CompletionEngine, req: CompletionRequest) -> None:
    """``cached_tokens`` is 0 on a fresh engine's first request and counts the prompt tokens
    the repeated request took from the cache (an engine reporting a constant fails)."""
    first = engine.complete(req)
    assert engine.cached_tokens == 0
    again = engine.complete(req)
    assert 0 < engine.cached_tokens <= again.prompt_tokens == first.prompt_tokens


#: Every check, for parametrised tests.
CHECKS = (check_conforms, check_runtime, check_prompt_is_taken_back,
          check_warm_lowers_uncached, check_constrained_middle_parses,
          check_cancel_is_honoured, check_features_are_true,
          check_cached_tokens_count_the_hit)
