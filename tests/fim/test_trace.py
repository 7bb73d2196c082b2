"""The candidates a traced step keeps for branches (``fim.trace.untried``): a stop token
ends a middle where any other would, so a step keeps one at most, and an end keeps none.
And the steps that wrote a copied line (``fim.trace.line_steps``), where a branch may part
from the copy."""

from __future__ import annotations

import math

import numpy as np

from fim.trace import TRACE_ALTS, TraceStep, line_steps, untried

STOPS = {0, 1, 2}


def logits(values: dict[int, float], size: int = 16) -> np.ndarray:
    out = np.full(size, -np.inf)
    for tid, value in values.items():
        out[tid] = value
    return out


def test_an_end_keeps_no_other_stop_token():
    """Greedy ended with stop token 0; stops 1 and 2 were next: the kept candidates are the
    text tokens after them."""
    masked = logits({0: 5.0, 1: 4.0, 2: 3.5, 7: 3.0, 8: 2.0, 9: 1.0, 10: 0.5})
    alts = untried([0, 1, 2, 7, 8, 9, 10], 0, masked, 5.0, STOPS, ended=True)
    assert [tid for tid, _ in alts] == [7, 8, 9]
    assert alts[0][1] == -2.0


def test_a_taken_token_keeps_one_stop_token_the_likeliest():
    masked = logits({7: 5.0, 1: 4.0, 2: 3.9, 8: 3.0, 0: 2.5, 9: 2.0})
    alts = untried([7, 1, 2, 8, 0, 9], 0, masked, 6.0, STOPS, ended=False)
    assert [tid for tid, _ in alts] == [1, 8, 9]


def test_ruled_out_candidates_are_skipped_and_at_most_trace_alts_kept():
    masked = logits({7: 5.0, 8: 4.0, 10: 3.0, 11: 2.0, 12: 1.0})
    candidates = [7, 8, 9, 10, 11, 12]  # 9 is masked (-inf)
    alts = untried(candidates, 0, masked, 5.0, STOPS, ended=False)
    assert [tid for tid, _ in alts] == [8, 10, 11][:TRACE_ALTS]
    assert all(math.isfinite(lp) for _, lp in alts)


def test_the_last_candidate_has_none_after_it():
    masked = logits({7: 5.0})
    assert untried([7], 0, masked, 5.0, STOPS, ended=False) == ()


def test_line_steps_are_those_of_the_first_line_with_text_from_the_cut():
    """``text`` is ``"a = 1\n\n    print(x)\n    print(y)"``, cut at 5 (the line break
    before the copy): the steps from there to the line break after ``print(x)``, the one
    that writes that break included (going on with the line is a branch too)."""
    text = "a = 1\n\n    print(x)\n    print(y)"
    starts = [0, 2, 5, 6, 7, 11, 17, 18, 19, 21, 30]
    trace = [TraceStep(i, -0.1, c) for i, c in enumerate(starts)]
    assert [t.chars for t in line_steps(trace, text, 5)] == [5, 6, 7, 11, 17, 18, 19]
    # Where the text has no line break after the line yet, the line runs to the end.
    assert [t.chars for t in line_steps(trace, "    print(x", 0)] == [0, 2, 5, 6, 7, 11]
