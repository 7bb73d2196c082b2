"""The one language cache (``fim.language_cache``) of the in-process engine and the vLLM rows:
reuse at the same place, reuse by typed text, rebuilds where reuse would be wrong, the order
of eviction, and that the engine's constrained requests go through it."""

from __future__ import annotations

import threading

import pytest

from fim.api import CompletionRequest, Engine
from fim.engines.transformers_engine import backend_from_loaded
from fim.language_cache import LanguageCache, python_language
from fim.options import Scope

LEFT, RIGHT = "def f(a, b):\n    total = a", "\n    return total\n"


def test_the_same_place_is_built_once_and_starts_at_the_initial_state() -> None:
    cache = LanguageCache()
    first = cache.get(LEFT, RIGHT, Scope.STATEMENT)
    again = cache.get(LEFT, RIGHT, "statement")  # a scope's name is the scope
    assert (first.reused, again.reused, cache.built) == (False, True, 1)
    assert again.language is first.language and again.state is first.language.initial


def test_typed_text_reuses_the_language_from_the_state_after_it() -> None:
    cache = LanguageCache()
    base = cache.get(LEFT, RIGHT, Scope.STATEMENT)
    typed = cache.get(LEFT + " + b", RIGHT, Scope.STATEMENT)
    assert typed.reused and typed.language is base.language and cache.built == 1
    assert typed.state is not base.language.initial
    # the state is the one after the typed text: complete there as the rebuilt one is
    rebuilt = python_language(LEFT + " + b", RIGHT, Scope.STATEMENT).initial()
    assert typed.state.is_complete() == rebuilt.is_complete() is True
    assert base.language.initial.is_complete() is True  # ``total = a`` parses too
    assert typed.state.feed(" +") is not None and not typed.state.feed(" +").is_complete()


def test_text_the_language_refuses_is_built_anew_not_fed() -> None:
    cache = LanguageCache()
    cache.get(LEFT, RIGHT, Scope.STATEMENT)
    odd = cache.get(LEFT + ")", RIGHT, Scope.STATEMENT)  # no ``(`` to close: refused
    assert not odd.reused and cache.built == 2


@pytest.mark.parametrize("right, scope", [(RIGHT + "x = 1\n", Scope.STATEMENT),
                                          (RIGHT, Scope.FREE)])
def test_another_right_text_or_scope_is_another_language(right: str, scope: Scope) -> None:
    cache = LanguageCache()
    cache.get(LEFT, RIGHT, Scope.STATEMENT)
    assert not cache.get(LEFT + " + b", right, scope).reused and cache.built == 2


def test_a_left_text_shorter_than_the_cached_one_is_not_served_by_it() -> None:
    cache = LanguageCache()
    cache.get(LEFT + " + b", RIGHT, Scope.STATEMENT)
    assert not cache.get(LEFT, RIGHT, Scope.STATEMENT).reused


def test_the_least_recently_used_language_goes_first() -> None:
    built: list[str] = []

    def factory(left: str, right: str, scope: Scope):
        built.append(left)
        return python_language(left, right, scope)

    cache = LanguageCache(size=2, factory=factory)
    for left in ("a = 1\n", "b = 2\n", "a = 1\n", "c = 3\n", "a = 1\n", "b = 2\n"):
        cache.get(left, "", Scope.STATEMENT)
    # ``a`` was used again before ``c`` came, so ``b`` went; then ``b`` is built again
    assert built == ["a = 1\n", "b = 2\n", "c = 3\n", "b = 2\n"] and len(cache) == 2


def test_a_cache_of_no_language_is_refused() -> None:
    with pytest.raises(ValueError):
        LanguageCache(size=0)


def test_the_engine_builds_one_language_for_a_request_typed_on(random_loaded) -> None:
    built: list[str] = []

    def factory(left: str, right: str, scope: Scope):
        built.append(left)
        return python_language(left, right, scope)

    engine = Engine(backend_from_loaded(random_loaded), window=256, language_factory=factory)
    assert isinstance(engine.languages, LanguageCache)
    for left in (LEFT, LEFT + " +", LEFT + " + b"):
        res = engine.complete(CompletionRequest(left, RIGHT, max_tokens=4))
        assert res.middle is None or res.parses
    assert built == [LEFT] and engine.languages.built == 1


def _gated_factory(gate: threading.Event, threads: list[int]):
    """A factory that builds only once ``gate`` is set, recording the thread it ran on (a
    build made on the caller's thread would wait for a gate nobody has set yet: it fails after
    the timeout instead of hanging)."""

    def factory(left: str, right: str, scope: Scope):
        threads.append(threading.get_ident())
        if not gate.wait(timeout=120):
            raise TimeoutError("the build ran on the caller's thread, before the gate opened")
        return python_language(left, right, scope)

    return factory


def test_a_worker_builds_while_the_caller_goes_on_and_a_typed_request_shares_it() -> None:
    gate, threads = threading.Event(), []
    cache = LanguageCache(factory=_gated_factory(gate, threads), workers=1)
    try:
        warm = cache.begin(LEFT, RIGHT, Scope.STATEMENT)  # returns with the build under way
        typed = cache.begin(LEFT + " + b", RIGHT, Scope.STATEMENT)  # the editor's next request
        assert not warm.done() and not typed.done() and cache.built == 1
        gate.set()
        first, second = warm.join(), typed.join()
    finally:
        gate.set()
        cache.close()
    assert threads and threading.get_ident() not in threads
    assert (first.reused, second.reused) == (False, True)
    assert second.language is first.language and cache.built == 1
    assert second.state is first.language.cache.feed(first.language.initial, " + b")


def test_a_typed_request_the_shared_language_refuses_is_built_for_itself() -> None:
    cache = LanguageCache(workers=1)
    try:
        cache.begin(LEFT, RIGHT, Scope.STATEMENT)
        odd = cache.begin(LEFT + ")", RIGHT, Scope.STATEMENT).join()  # ``)``: refused
    finally:
        cache.close()
    assert not odd.reused and cache.built == 2 and odd.state.feed(" + 1") is None


def test_a_failed_build_raises_where_it_is_joined_and_is_not_kept() -> None:
    calls = []

    def factory(left: str, right: str, scope: Scope):
        calls.append(left)
        if len(calls) == 1:
            raise RecursionError("a file too deep for the builder")
        return python_language(left, right, scope)

    cache = LanguageCache(factory=factory, workers=1)
    try:
        failed = cache.begin(LEFT, RIGHT, Scope.STATEMENT)
        with pytest.raises(RecursionError):
            failed.join()
        again = cache.begin(LEFT, RIGHT, Scope.STATEMENT).join()  # built anew, not the failure
    finally:
        cache.close()
    assert not again.reused and calls == [LEFT, LEFT]


def test_typed_text_a_language_being_built_refuses_is_built_where_it_is_joined() -> None:
    gate, threads = threading.Event(), []
    cache = LanguageCache(factory=_gated_factory(gate, threads), workers=1)
    try:
        cache.begin(LEFT, RIGHT, Scope.STATEMENT)
        odd = cache.begin(LEFT + ")", RIGHT, Scope.STATEMENT)  # shares the build, for now
        assert cache.built == 1 and not odd.built_here
        gate.set()
        hit = odd.join()
    finally:
        gate.set()
        cache.close()
    assert odd.built_here and not hit.reused and cache.built == 2
    assert threads[-1] == threading.get_ident()  # built by the joining thread
