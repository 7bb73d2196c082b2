"""Soundness with the real constraint: every constrained middle makes the file parse.

A random model proposes arbitrary tokens, the harshest test of the constraint.  This is the
fast subset; ``benchmarks/bench_fim.py soundness --cases 200`` runs the full figure.
"""

from __future__ import annotations

import pytest

from fim.api import CompletionRequest
from fim.decoding import parses
from fim.eval.datasets import build_cases

SMALL = [
    ("def f(x):\n    return ", "\n"),
    ("items = [1, 2", "]\nprint(items)\n"),
    ("class A:\n    def m(self):\n        if self.x:\n            ", "\n        return 1\n"),
    ("x = {'a': (1, ", ")}\n"),
    ("s = 'abc", "'\n"),
    ("for i in range(3):\n", "\nprint('done')\n"),
]


def _check(res, left: str, right: str) -> None:
    """A returned middle makes the file parse; and when the empty middle already does, the
    decoder always has a complete stopping point (the start), so something is returned."""
    if parses(left + right):
        assert res.middle is not None, (left, right, res.stop, res.mode)
    if res.middle is not None:
        assert res.parses, (left, res.middle, right, res.mode)
        assert res.error is None
    else:
        assert res.stop in ("no_candidate", "budget"), res.stop


@pytest.mark.parametrize("left,right", SMALL)
@pytest.mark.parametrize("scope", ["free", "statement"])
def test_small_contexts(engine, left, right, scope):
    res = engine.complete(CompletionRequest(left, right, max_tokens=12, scope=scope))
    assert res.mode == "exact"
    _check(res, left, right)


def test_stdlib_cases(engine):
    cases = (build_cases("boundary", 6, seed=11, per_file=1, max_file_chars=15000)
             + build_cases("randspan", 6, seed=11, per_file=1, max_file_chars=15000))
    assert len(cases) == 12
    returned = 0
    for case in cases:
        res = engine.complete(CompletionRequest(case["left"], case["right"], max_tokens=12,
                                                scope="free"))
        _check(res, case["left"], case["right"])
        returned += res.middle is not None
    assert returned > 0
