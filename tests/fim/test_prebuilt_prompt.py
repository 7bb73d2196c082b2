"""A prompt built once: ``Engine.complete``, ``warm`` and ``uncached`` take the prompt a caller
built already (``prompt_for(req)``, the language server does to decide on the project context)
and run it as they would their own, without building it again."""

from __future__ import annotations

from conftest import ReferenceLanguage

from fim.api import CompletionRequest, Engine
from fim.engines.transformers_engine import backend_from_loaded


def counted_engine(random_loaded) -> tuple[Engine, list]:
    engine = Engine(backend_from_loaded(random_loaded),
                    language_factory=ReferenceLanguage.for_python)
    built = []
    build = engine.prompt_for

    def counted(req):
        built.append(req)
        return build(req)

    engine.prompt_for = counted  # the real method, counted
    return engine, built


def test_a_prebuilt_prompt_gives_the_same_answer_without_a_second_build(random_loaded):
    req = CompletionRequest("def f(x):\n    return ", "\n", max_tokens=4, scope="free")
    own, _ = counted_engine(random_loaded)
    expected = own.complete(req)
    engine, built = counted_engine(random_loaded)
    prompt = engine.prompt_for(req)
    assert engine.uncached(req, prompt) == len(prompt.ids)  # nothing cached yet
    assert engine.warm(req, prompt=prompt) is True
    assert engine.uncached(req, prompt) == 0
    res = engine.complete(req, prompt=prompt)
    assert len(built) == 1  # prompt_for above, and never again
    assert (res.middle, res.tokens, res.prompt_tokens) == (expected.middle, expected.tokens,
                                                           expected.prompt_tokens)
    engine.complete(req)
    assert len(built) == 2  # without one, the engine builds its own as before
