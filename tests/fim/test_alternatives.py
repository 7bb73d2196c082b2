"""Ranked alternatives: several complete constrained middles for one place, best first.

A model written as a tree (what it prefers after each generated prefix) makes greedy take a
first token that is a little likelier and then walks into an unlikely end, while the runner-up
first token ends at once with near certainty: ranking the complete middles by the model's
likelihood must put the runner-up first, and keep greedy's middle among the alternatives.
"""

from __future__ import annotations

import pytest

from fim.alternatives import Alternative, Ranking, branch_points, search
from fim.api import CompletionRequest, Engine
from fim.decoding import Decoded, TraceStep
from fim.engines.transformers_engine import backend_from_loaded
from fim.options import StopReason
from fim.parse_check import parses
from tests.support.tree_model import Tree, greedy_trap, tree_engine_over


def tree_engine(random_loaded, make_tree) -> tuple[Engine, Tree]:
    return tree_engine_over(backend_from_loaded(random_loaded), make_tree)


def test_the_likeliest_complete_middle_comes_first(random_loaded):
    engine, _ = tree_engine(random_loaded, greedy_trap)
    greedy = engine.complete(CompletionRequest("x = ", "\n", max_tokens=8))
    assert greedy.middle == "1" and greedy.alternatives == ()
    res = engine.complete(CompletionRequest("x = ", "\n", max_tokens=8, alternatives=3))
    middles = [a.middle for a in res.alternatives]
    assert middles == ["None", "1", "y"]
    assert res.middle == "None" and res.stop == "eos"
    assert all(isinstance(a, Alternative) for a in res.alternatives)
    scores = [a.logprob for a in res.alternatives]
    assert scores == sorted(scores, reverse=True)
    # ``None``: log P(foo) + log P(end | foo), both from the model's own logits.
    assert res.alternatives[0].logprob == pytest.approx(-1.0, abs=0.02)
    assert all(parses("x = " + m + "\n") for m in middles)


def test_at_most_the_number_asked_for(random_loaded):
    engine, _ = tree_engine(random_loaded, greedy_trap)
    res = engine.complete(CompletionRequest("x = ", "\n", max_tokens=8, alternatives=2))
    assert [a.middle for a in res.alternatives] == ["None", "1"]


def test_equal_middles_count_once(random_loaded):
    """``a`` + ``b`` and ``ab`` are the same middle: one alternative, not two."""
    def tree(one, eos):
        return {(): {one("ab"): 10.0, one("a"): 9.9},
                (one("a"),): {one("b"): 30.0}}
    engine, _ = tree_engine(random_loaded, tree)
    res = engine.complete(CompletionRequest("x = ", "\n", max_tokens=8, alternatives=3))
    middles = [a.middle for a in res.alternatives]
    assert middles.count("ab") == 1 and len(middles) == len(set(middles))


def test_an_empty_middle_goes_after_those_that_write_something(random_loaded):
    """Ending at once is the likeliest here, but an empty middle shows nothing: the middle
    that writes something comes first, the empty one stays among the alternatives."""
    def tree(one, eos):
        return {(): {eos: 12.0, one("0"): 11.0}}
    engine, _ = tree_engine(random_loaded, tree)
    res = engine.complete(CompletionRequest("x = 1", "\n", max_tokens=8, alternatives=3))
    middles = [a.middle for a in res.alternatives]
    assert middles[0] == "0" and "" in middles
    empty = next(a for a in res.alternatives if a.middle == "")
    assert empty.logprob > res.alternatives[0].logprob  # likelier, yet ranked after


def test_greedy_first_keeps_greedys_middle_first_then_the_likeliest(random_loaded):
    """The editors' order: greedy's middle (what one suggestion shows) first, the others by
    the model's likelihood."""
    engine, _ = tree_engine(random_loaded, greedy_trap)
    res = engine.complete(CompletionRequest("x = ", "\n", max_tokens=8, alternatives=3,
                                            ranking="greedy_first"))
    assert [a.middle for a in res.alternatives] == ["1", "None", "y"]
    assert res.middle == "1" and res.alternatives[0].greedy


def test_a_cancelled_search_returns_what_is_complete(random_loaded):
    engine, model = tree_engine(random_loaded, greedy_trap)
    # Cancelled once a second run starts: only greedy's middle is complete.
    res = engine.complete(CompletionRequest("x = ", "\n", max_tokens=8, alternatives=3),
                          cancel=lambda: model.prefills >= 2)
    assert [a.middle for a in res.alternatives] == ["1"] and res.middle == "1"


def test_mean_ranking_divides_by_length(random_loaded):
    """Per token, ``1`` + end (two tokens) against ``y`` + end: the ranking changes with it."""
    engine, _ = tree_engine(random_loaded, greedy_trap)
    res = engine.complete(CompletionRequest("x = ", "\n", max_tokens=8, alternatives=3,
                                            ranking="mean"))
    alts = res.alternatives
    means = [a.logprob / (a.tokens + 1) for a in alts]
    assert means == sorted(means, reverse=True) and alts[0].middle == "None"


def test_branch_points_first_token_first_then_smallest_margin():
    trace = [TraceStep(1, -0.1, 0, ((2, -3.0), (3, -5.0))),
             TraceStep(4, -2.0, 1, ((5, -2.1),)),
             TraceStep(6, -0.5, 2, ((7, -4.0),))]
    got = [(b.step, b.token) for b in branch_points(trace, 4)]
    assert got == [(0, 2), (0, 3), (1, 5), (2, 7)]
    assert [(b.step, b.token) for b in branch_points(trace, 1)] == [(0, 2)]


def test_branch_points_take_every_step_before_the_first_text_first():
    """Healing steps write no middle, and which of them the model takes decides the first
    word too: their candidates join the first text step's, by margin, before later steps."""
    trace = [TraceStep(1, -0.1, 0, ((2, -3.0),)),
             TraceStep(4, -0.2, 0, ((5, -2.0), (6, -4.0), (7, -5.0))),
             TraceStep(8, -0.5, 3, ((9, -0.6),))]
    got = [(b.step, b.token) for b in branch_points(trace, 5)]
    assert got == [(1, 5), (0, 2), (1, 6), (1, 7), (2, 9)]


def test_bad_requests_are_refused(random_loaded):
    engine, _ = tree_engine(random_loaded, greedy_trap)
    with pytest.raises(ValueError, match="alternatives"):
        engine.complete(CompletionRequest("x = ", "\n", alternatives=0))
    with pytest.raises(ValueError, match="ranking"):
        engine.complete(CompletionRequest("x = ", "\n", alternatives=2, ranking="best"))


@pytest.mark.parametrize(("left", "right"), [
    ("def f(a, b):\n    return ", "\n"),
    ("import os\nx = [", "]\n"),
    ("def f(x):\n    y = ", "\n    return y\n"),
])
def test_every_alternative_parses_with_a_real_model(engine, left, right):
    """The random model with the Python constraint: distinct middles, each parses, best
    first, greedy's among them."""
    greedy = engine.complete(CompletionRequest(left, right, max_tokens=12))
    res = engine.complete(CompletionRequest(left, right, max_tokens=12, alternatives=3))
    middles = [a.middle for a in res.alternatives]
    assert middles and len(middles) == len(set(middles)) and res.middle == middles[0]
    assert all(parses(left + m + right) for m in middles)
    assert greedy.middle in middles
    # Best first among the middles that write something; an empty one only after them.
    written = [a for a in res.alternatives if a.middle.strip()]
    assert res.alternatives[:len(written)] == tuple(written)
    scores = [a.logprob for a in written]
    assert scores == sorted(scores, reverse=True)
    assert res.tokens >= greedy.tokens


def test_ranked_mode_needs_greedy_constrained(engine):
    res = engine.complete(CompletionRequest("x = ", "\n", max_tokens=6, alternatives=3,
                                            mode="unconstrained"))
    assert res.alternatives == ()
    assert Ranking("mean") == Ranking.MEAN


def test_branches_reuse_the_cached_prompt_and_path(engine, monkeypatch):
    """After the greedy request, the ranked one retraces greedy's path from the cache and
    runs only the branches' new tokens: never the prompt again."""
    left, right = "def f(a, b):\n    return ", "\n"
    greedy = engine.complete(CompletionRequest(left, right, max_tokens=12))
    model = engine.step_model
    forward = model._forward
    ran: list[int] = []

    def counting(slot, ids, interrupt):
        ran.append(len(ids))
        return forward(slot, ids, interrupt)

    monkeypatch.setattr(model, "_forward", counting)
    res = engine.complete(CompletionRequest(left, right, max_tokens=12, alternatives=3))
    assert len(res.alternatives) > 1
    assert 0 < sum(ran) <= res.tokens - greedy.tokens


def test_the_search_branches_latest_first_and_past_greedys_end():
    """The search over a runner that records what it was asked: each branch takes the
    traced path up to its step, the latest step runs first (each run crops only what it
    replaces), and the end is a branch point too (going on where greedy stopped)."""
    trace = [TraceStep(10, -0.1, 0, ((20, -0.5),)), TraceStep(11, -0.2, 1, ((21, -3.0),))]
    first = Decoded("ab", StopReason.EOS, 2, trace=trace, logprob=-1.0,
                    end_step=TraceStep(0, -0.7, 2, ((12, -0.9),)))
    asked: list[tuple[int, ...]] = []

    def run(forced):
        asked.append(forced)
        middle = {(20,): "z", (10, 11, 12): "abc"}.get(forced)
        return Decoded(middle, StopReason.EOS, len(forced) + 1, trace=[],
                       logprob=-0.2 if middle == "abc" else -2.0)

    found, tokens = search(run, first, 3, lambda m, s: (m, s))
    # First batch: the first token's runner-up and the end (margin 0.2), latest first.
    assert asked == [(10, 11, 12), (20,)]
    assert [a.middle for a in found] == ["abc", "ab", "z"]
    assert [a.greedy for a in found] == [False, True, False]
    assert tokens == 2 + 4 + 2


def test_the_search_stops_at_its_deadline():
    trace = [TraceStep(10, -0.1, 0, ((20, -0.5), (30, -0.6)))]
    first = Decoded("a", StopReason.EOS, 1, trace=trace, logprob=-1.0)
    asked = []
    found, _ = search(lambda f: asked.append(f), first, 3, lambda m, s: (m, s),
                      deadline=0.0)
    assert asked == [] and [a.middle for a in found] == ["a"]


def test_a_branch_that_shows_nothing_does_not_end_the_search():
    """Greedy ends at once; the branches at its end find another end and a space (nothing to
    show), and the search goes on to the branch that writes something."""
    trace = [TraceStep(10, -0.1, 0, ((30, -3.0),))]
    first = Decoded("", StopReason.EOS, 1, trace=trace, logprob=-0.1,
                    end_step=TraceStep(0, -0.2, 0, ((12, -0.5), (13, -0.6))))
    asked: list[tuple[int, ...]] = []

    def run(forced):
        asked.append(forced)
        middle = {(10, 12): "", (10, 13): " ", (30,): "x"}[forced]
        return Decoded(middle, StopReason.EOS, len(forced) + 1, trace=[], logprob=-4.0)

    found, _ = search(run, first, 2, lambda m, s: (m, s), Ranking.GREEDY_FIRST)
    assert asked == [(10, 12), (10, 13), (30,)]
    assert [a.middle for a in found] == ["x", ""]


def test_an_indentation_retyped_otherwise_is_tried_before_more_blanks_at_the_end():
    """An empty line (cost_tracker.py:145): greedy re-types the healed indentation with a
    short blank token and ends at once; at its end the model's next choices are more
    blanks, each ending at once again.  The healing step's other candidate (the indentation
    as the model writes it before a word) is what writes a line, and it is reached within
    the search's runs (before, the end's three blank candidates and the healing step's
    likelier one used all four)."""
    trace = [TraceStep(10, -0.3, 0, ((11, -2.97), (12, -3.62)))]
    first = Decoded("", StopReason.EOS, 1, trace=trace, logprob=-0.8,
                    end_step=TraceStep(0, -0.46, 0, ((20, -2.55), (21, -7.0), (22, -7.7))))
    asked: list[tuple[int, ...]] = []

    def run(forced):
        asked.append(forced)
        middle = "return summary" if forced == (12,) else ""
        return Decoded(middle, StopReason.EOS, len(forced) + 1, trace=[], logprob=-5.0)

    found, _ = search(run, first, 2, lambda m, s: (m, s), Ranking.GREEDY_FIRST)
    assert asked == [(10, 20), (11,), (12,)]
    assert [a.middle for a in found] == ["return summary", ""]


def test_other_stop_tokens_after_greedys_end_leave_room_for_a_middle(random_loaded):
    """A model with several stop tokens ends at once, its other stop tokens next, then a
    text token: a branch to another stop token ends where greedy did, so the end's branch
    points are the text tokens, and the search finds the middle that writes something
    (before, the three kept candidates were the three other stop tokens: nothing found)."""
    def tree(one, eos):
        return {(): {eos: 12.0, 1: 11.9, 3: 11.8, 4: 11.7, one("z"): 11.0}}
    backend = backend_from_loaded(random_loaded)
    engine, _ = tree_engine_over(backend, tree, stops=(
        "<|endoftext|>", "<fim-prefix>", "<fim-suffix>", "<fim-pad>"))
    res = engine.complete(CompletionRequest("x = 1\n", "\ny = 2\n", max_tokens=8,
                                            alternatives=2, ranking=Ranking.GREEDY_FIRST))
    assert [a.middle for a in res.alternatives] == ["z", ""]


def test_branch_points_rank_a_copys_steps_by_margin_alone():
    """A middle cut to nothing as a copy of the lines below: no step came before its text,
    so the step inside the copied line where the model was least sure comes first; with
    text of its own before the copy, that text's first word still comes first."""
    trace = [TraceStep(1, -0.1, 0, ((2, -3.0),)),
             TraceStep(4, -0.2, 6, ((5, -0.9),)),
             TraceStep(6, -0.1, 7, ((7, -4.0),))]
    assert [(b.step, b.token) for b in branch_points(trace, 3, copied_from=0)] == [
        (1, 5), (0, 2), (2, 7)]
    assert [(b.step, b.token) for b in branch_points(trace, 3)] == [(0, 2), (1, 5), (2, 7)]


def test_a_middle_cut_as_a_copy_branches_inside_the_copied_line():
    """Greedy's middle was cut to nothing as a copy (``Decoded.copied``: the steps of the
    copied line, the first being the end); the search runs the copy's path up to the step
    where the model was least sure, and the other token there: a line like the copy that
    is not one.  Before, only the end's candidates were branch points."""
    copied = (TraceStep(10, -0.1, 0, ((30, -3.0),)), TraceStep(11, -0.2, 6, ((21, -0.7),)),
              TraceStep(12, -0.1, 7, ((31, -5.0),)))
    first = Decoded("", StopReason.RIGHT_CONTEXT, 5, trace=[], logprob=-0.3,
                    end_step=copied[0], copied=copied)
    asked: list[tuple[int, ...]] = []

    def run(forced):
        asked.append(forced)
        return Decoded({(10, 21): "print(y)"}.get(forced, ""), StopReason.EOS,
                       len(forced) + 1, trace=[], logprob=-4.0)

    found, _ = search(run, first, 2, lambda m, s: (m, s), Ranking.GREEDY_FIRST)
    assert asked == [(10, 21)]
    assert [a.middle for a in found] == ["print(y)", ""]


COPY_LEFT = "def f(x):\n    "
COPY_RIGHT = "\n    y = x * 2\n    print(x)\n    print(x + y)\n"


def copy_tree(tok):
    """Greedy writes the last two lines of ``COPY_RIGHT`` again; after ``print(`` it
    prefers ``x`` only a little over ``y``, and after ``print(y`` it closes the call."""
    def make(one, eos):
        said = tok.encode("print(") + [one("x")] + tok.encode(")\n    print(x + y)\n")
        tree = {tuple(said[:k]): {tid: 20.0} for k, tid in enumerate(said)}
        at = len(tok.encode("print("))
        tree[tuple(said[:at])] = {one("x"): 20.0, one("y"): 19.5}
        tree[tuple(said[:at]) + (one("y"),)] = {one(")"): 20.0}
        return tree
    return make


def test_a_copy_of_the_lines_below_is_searched_for_a_line_like_it(random_loaded):
    """Through the engine, with the real constraint: greedy's middle is cut to nothing as a
    copy, and the search's first run parts from the copy where the model was least sure
    (``x`` against ``y``), which writes a line of the model's own."""
    backend = backend_from_loaded(random_loaded)
    engine, model = tree_engine_over(backend, copy_tree(backend.tokenizer))
    req = CompletionRequest(COPY_LEFT, COPY_RIGHT, max_tokens=24, line_stop=True,
                            scope="block")
    greedy = engine.complete(req)
    assert (greedy.middle, greedy.stop) == ("", "right_context")
    res = engine.complete(CompletionRequest(COPY_LEFT, COPY_RIGHT, max_tokens=24,
                                            line_stop=True, scope="block", alternatives=2,
                                            ranking=Ranking.GREEDY_FIRST))
    assert [a.middle for a in res.alternatives] == ["print(y)", ""]
