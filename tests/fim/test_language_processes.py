"""Languages built in child processes (``fim.language_processes``, the vLLM server's rows):
they answer as languages built here do, for Python and Go; a child that dies costs no request
(its dispatcher builds that language itself, and the next one gets a new child); a build's
own error reaches the joining thread."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fim.language_cache import LanguageCache, python_language
from fim.language_processes import Built, LanguageProcesses
from fim.languages import by_id
from fim.options import Scope

LEFT = "def mean(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total / "
RIGHT = "\n\n\nprint(mean([1, 2, 3]))\n"
PROBES = ["len(xs)", "len(xs", "len(xs))", "max(1, len(xs))\n", "(", "1 if xs else 1", "xs:"]

GO_LEFT = "package main\n\nfunc sum(xs []int) int {\n\ttotal := 0\n\tfor _, x := range xs {\n\t\t"
GO_RIGHT = "\n\t}\n\treturn total\n}\n"
GO_PROBES = ["total += x", "total += x)", "total = total + x\n", "{", "if x > 0 {", "x :="]


def _verdicts(language, probes):
    out = []
    for text in probes:
        state = language.initial().feed(text)
        out.append((state is not None, state is not None and state.is_complete()))
    return out


@pytest.fixture(scope="module")
def processes():
    pool = LanguageProcesses(1, languages=("python",))
    yield pool
    pool.close()


def _never():
    raise AssertionError("the child should have built it")


def test_a_python_language_from_a_child_answers_as_one_built_here(processes):
    built = processes.submit(by_id("python"), LEFT, RIGHT, Scope.FREE, _never).result(300)
    here = python_language(LEFT, RIGHT, Scope.FREE)
    assert _verdicts(built.language, PROBES) == _verdicts(here, PROBES)
    assert _verdicts(here, PROBES)[0] == (True, True)
    assert built.initial is built.language.initial()


def test_a_go_language_from_a_child_answers_as_one_built_here(processes):
    go = by_id("go")
    built = processes.submit(go, GO_LEFT, GO_RIGHT, Scope.FREE, _never).result(300)
    here = go.constraint(GO_LEFT, GO_RIGHT, Scope.FREE)
    assert _verdicts(built.language, GO_PROBES) == _verdicts(here, GO_PROBES)
    assert _verdicts(here, GO_PROBES)[0] == (True, True)


def test_a_child_that_died_costs_no_request(processes, monkeypatch):
    processes.submit(by_id("python"), LEFT, RIGHT, Scope.FREE, _never).result(300)
    (child,) = processes._children
    child.proc.kill()
    child.proc.wait()
    # The next child dies before it answers (an import error, the kernel's OOM killer).
    start = child._start
    monkeypatch.setattr(child, "_start", lambda: subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.exit(3)"], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE))
    fallbacks, received = processes.fallbacks, processes.received
    calls = []

    def here():
        calls.append(1)
        language = python_language(LEFT + "len", RIGHT, Scope.FREE)
        return Built(language, language.initial())

    built = processes.submit(by_id("python"), LEFT + "len", RIGHT, Scope.FREE, here).result(300)
    assert calls == [1] and processes.fallbacks == fallbacks + 1
    assert built.language.initial().feed("(xs)") is not None
    # The next request gets a new child.
    monkeypatch.setattr(child, "_start", start)
    processes.submit(by_id("python"), LEFT, RIGHT, Scope.FREE, _never).result(300)
    assert processes.received == received + 1


def test_a_builds_own_error_reaches_the_joining_thread(processes):
    # A scope no language knows: the child's build raises, and nothing is built here.
    done = processes.submit(by_id("python"), LEFT, RIGHT, "sideways",  # type: ignore[arg-type]
                            _never)
    with pytest.raises(ValueError, match="not a valid Scope"):
        done.result(300)


def test_the_cache_builds_in_processes_and_reuses_what_they_built():
    cache = LanguageCache(4, processes=1)
    try:
        pending = cache.begin(LEFT, RIGHT, Scope.FREE)
        hit = pending.join()
        assert not hit.reused and cache.processes.received == 1
        assert hit.state.feed("len(xs)").is_complete()
        typed = cache.begin(LEFT + "len(", RIGHT, Scope.FREE).join()
        assert typed.reused and cache.processes.received == 1
        assert typed.state.feed("xs)").is_complete() and typed.state.feed("xs))") is None
    finally:
        cache.close()
