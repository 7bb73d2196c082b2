"""A model that chose to end where the file could not is not forced into a long detour.

``x["va|lue"] = repr(value)`` with the text ``lue"] =`` held out: the model writes ``lue"] =
value`` and ends; the file cannot end there (``value repr(value)``), so the constraint makes it
go on, and the old decoder kept whatever it wrote until something connected with the right
context (``value or 1 or 2 or``).  What the model wrote after the last complete point was its
own version of the right context, so the middle goes back to the best complete point before
that end (``lue"] =``).  A short forced run, the bracket that closes ``print(x``, is kept.

The model is a tree (``tests.support.tree_model.ends_then_detours``): its choice far ahead of
every other token, and where it ends, the detour's first token just behind the end.
"""

from __future__ import annotations

import pytest

from fim import stopping
from fim.api import CompletionRequest, Engine
from fim.engines.transformers_engine import backend_from_loaded
from tests.support.tree_model import Tree, ends_then_detours

LEFT = 'def f(x, value):\n    x["va'
RIGHT = ' repr(value)\n'


def ranked_engine(random_loaded, said: str, detour: str, end: str = "<|endoftext|>"
                  ) -> Engine:
    """A model that says ``said``, then prefers ``end`` (the stop token by default), and
    after that says ``detour``."""
    backend = backend_from_loaded(random_loaded)
    tok = backend.tokenizer
    eos = tok.token_id("<|endoftext|>")
    ends = eos if end == "<|endoftext|>" else tok.encode(end)[0]
    tree = ends_then_detours(tok.encode(said), tok.encode(detour), ends)
    backend.step_model = Tree(backend.step_model.vocab_size, tree, eos)
    return Engine(backend, heal=False)


def test_a_long_forced_run_goes_back_before_the_refused_end(random_loaded):
    said = 'lue"] = value'
    engine = ranked_engine(random_loaded, said, " or 1 or 2 or 3 or 4 or 5 or")
    res = engine.complete(CompletionRequest(LEFT, RIGHT, max_tokens=32, scope="statement"))
    assert (res.middle, res.stop) == ('lue"] =', "refused_end")
    assert res.parses
    # Once the forced run was longer than the slack, the rest of it was not decoded: the
    # model was stepped after each token taken but the last (the run's slack-plus-first).
    said_tokens = len(engine.tokenizer.encode(said))
    assert engine.step_model.steps == said_tokens + stopping.REFUSED_END_SLACK


def test_out_of_budget_after_a_refused_end(random_loaded):
    """The detour never ends by itself: out of tokens, the complete point before the model's
    end wins over the longer ones after it (which the length weight would favour)."""
    engine = ranked_engine(random_loaded, 'lue"] = value', " or 1 or 2 or 3 or 4 or 5 or")
    res = engine.complete(CompletionRequest(LEFT, RIGHT, max_tokens=14, scope="statement"))
    assert (res.middle, res.stop) == ('lue"] =', "refused_end")


def test_a_line_end_the_file_cannot_take_is_a_refused_end(random_loaded):
    """At a mid-line cursor (``line_stop``) a newline is the model ending its middle."""
    engine = ranked_engine(random_loaded, 'lue"] = value', " or 1 or 2 or", end="\n")
    res = engine.complete(CompletionRequest(LEFT, RIGHT, max_tokens=32, scope="statement",
                                            line_stop=True))
    assert (res.middle, res.stop) == ('lue"] =', "refused_end")


def test_a_short_forced_run_is_kept(random_loaded):
    """``print(x`` cannot end before a line break; the ``)`` the constraint asks for is one
    token, and the model then ends: the middle stays whole."""
    engine = ranked_engine(random_loaded, "print(x", ")")
    res = engine.complete(CompletionRequest("def f(x):\n    ", "\n", max_tokens=16,
                                            scope="statement"))
    assert (res.middle, res.stop) == ("print(x)", "eos")


@pytest.mark.parametrize(("slack", "expected"), [
    (stopping.REFUSED_END_SLACK, ('lue"] =', "refused_end")),
    (10**6, ('lue"] = value or 1 or 2 or', "eos")),  # no limit: the old behaviour
])
def test_the_slack_decides(random_loaded, monkeypatch, slack, expected):
    monkeypatch.setattr(stopping, "REFUSED_END_SLACK", slack)
    engine = ranked_engine(random_loaded, 'lue"] = value', " or 1 or 2 or")
    res = engine.complete(CompletionRequest(LEFT, RIGHT, max_tokens=32, scope="statement"))
    assert (res.middle, res.stop) == expected


def test_no_complete_point_before_the_end_keeps_the_detour(random_loaded):
    """``x = [a`` can end nowhere before the model's refused end (the bracket is open at
    every point after the cursor): the forced run is what the file needs, and stays."""
    engine = ranked_engine(random_loaded, "[a", " + b + c + d]")
    res = engine.complete(CompletionRequest("def f(a, b, c, d):\n    x = ", "\n",
                                            max_tokens=32, scope="statement"))
    assert res.middle == "[a + b + c + d]"
    assert res.stop == "eos"


#: ``args += ["--", self.contain|er, "sh", command]`` with ``s += ["--", self.contain`` held
#: out: the cursor splits a word.
SPLIT_LEFT = "def f(args, container, command):\n    arg"
SPLIT_RIGHT = 'er, "sh", command]\n'


def test_where_the_cursor_splits_a_word_the_middle_goes_back_to_the_models_word(random_loaded):
    """The model writes its own line, ``s += ["--", container, command]``, and ends, which
    the file cannot (``command]er``); the detour is long.  The best token boundary before
    the end would keep ``s += ["--",``; the model's own word meets the right context inside
    its token ``container`` (``contain|er,``), and the middle ends there: the file reads
    ``container, "sh", command]``."""
    engine = ranked_engine(random_loaded, 's += ["--", container, command]',
                           " + [a, b, c, d, e, f,")
    res = engine.complete(CompletionRequest(SPLIT_LEFT, SPLIT_RIGHT, max_tokens=40,
                                            scope="statement"))
    assert (res.middle, res.stop) == ('s += ["--", contain', "refused_end")
    assert res.parses


@pytest.mark.parametrize(("middle", "right", "found"), [
    ('s += ["--", container, command]', 'er, "sh"]', [len('s += ["--", contain')]),
    ("k = f(other_user, user, z)", "er, x)",
     [len("k = f(other_us"), len("k = f(other_user, us")]),
    ("x = user", "er", []),  # nothing after the word to agree on
    ("x = (user)", " er, y", []),  # the cursor splits no word
    ("x = er, y", "er, y", []),  # a word of its own, not the model's word meeting it
])
def test_where_a_word_meets_the_right_context(middle, right, found):
    assert stopping.word_meets_right(middle, right, len(middle)) == found[::-1]
    assert stopping.word_meets_right(middle, right, 0) == []
