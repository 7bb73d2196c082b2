"""Constrained decoding ends the middle where the model would re-write the right context.

A scripted model says the author's middle and then goes on with the text that already follows
the cursor (what a FIM model often prefers).  Under the real Python constraint the duplicate
cannot parse, and before ``stop_at_right`` the decoder forced the model on until something
connected; now the middle ends where the re-written text begins, when the file is complete
there.  Counting the model's steps shows that no detour was decoded.
"""

from __future__ import annotations

import pytest
from test_editor_requests import Scripted

from fim.api import CompletionRequest, Engine
from fim.engines.transformers_engine import backend_from_loaded


def python_engine(random_loaded, text: str) -> tuple[Engine, Scripted]:
    """The real Python FIM constraint and a model that says ``text``, then the end."""
    backend = backend_from_loaded(random_loaded)
    tok = backend.tokenizer
    script = Scripted(backend.step_model.vocab_size, tok.encode(text),
                      tok.token_id("<|endoftext|>"))
    backend.step_model = script
    return Engine(backend, heal=False), script


CASES = [
    # prose: the string's end is already there
    ('def f():\n    raise ValueError("Event cannot ', 'be None")\n', 'be None")\n',
     "statement", ""),
    ('def f():\n    raise ValueError("Event ', 'be None")\n', 'cannot be None")\n',
     "statement", "cannot "),
    # code: a name the import line already has
    ("from dataclasses import asdict, ", "dataclass\n", "field, dataclass\n",
     "statement", "field, "),
    # an argument inside a call, text after it on the line
    ("def f(a, b):\n    return g(", ", b)\n", "a, b)\n", "statement", "a"),
    # an empty line in a block: the model writes the line, then the next one again
    ("def f(a):\n    ", "\n    return a\n", "a += 1\n    return a\n", "block", "a += 1"),
]


@pytest.mark.parametrize(("left", "right", "said", "scope", "expected"), CASES)
def test_the_middle_ends_where_the_right_context_is_rewritten(random_loaded, left, right,
                                                                said, scope, expected):
    engine, script = python_engine(random_loaded, said)
    res = engine.complete(CompletionRequest(left, right, max_tokens=24, scope=scope))
    assert (res.middle, res.stop) == (expected, "right_context")
    assert res.parses
    # The model was not stepped past the point where the duplicate began.
    assert script.steps <= len(engine.tokenizer.encode(expected)) + 1


def test_without_it_the_constraint_forces_a_detour(random_loaded):
    """The old behaviour, still there with ``stop_at_right=False``: the duplicate is
    forbidden, so the decoder writes on with other tokens and spends the budget."""
    left, right, said, _, expected = CASES[1]
    engine, script = python_engine(random_loaded, said)
    res = engine.complete(CompletionRequest(left, right, max_tokens=24, scope="statement",
                                            stop_at_right=False))
    assert res.stop != "right_context"
    assert res.middle != expected or script.steps > len(engine.tokenizer.encode(said))


def test_no_stop_where_the_file_is_not_complete(random_loaded):
    """``g(a`` re-written before ``, b)`` would be a stop, but ``return g(`` alone is not
    complete: the model's ``, b)`` there is no duplicate to cut (it is what it writes)."""
    engine, _ = python_engine(random_loaded, "x, b)\n")
    res = engine.complete(CompletionRequest("def f(a, b):\n    return g(", ", b)\n",
                                            max_tokens=24, scope="statement"))
    assert res.middle == "x" and res.stop == "right_context"
    engine, _ = python_engine(random_loaded, "\n")
    plain = engine.complete(CompletionRequest("x = (", "1)\n", max_tokens=6,
                                              scope="statement"))
    assert plain.stop != "right_context"


def test_whitespace_alone_is_no_rewrite(random_loaded):
    """The right context of an empty line starts with a newline: the model ending its own
    line there is a line end, not a re-write, and the block goes on."""
    engine, _ = python_engine(random_loaded, "a += 1\n    a *= 2\n    return a\n")
    res = engine.complete(CompletionRequest("def f(a):\n    ", "\n    return a\n",
                                            max_tokens=40, scope="block"))
    assert res.middle == "a += 1\n    a *= 2" and res.stop == "right_context"


WRAPPED = [
    # a docstring wrapped by its author: the model writes the next line on this one
    ('def f():\n    """Stop after the', '\n    tool batch ends.\n    """\n',
     " current tool batch ends.\n", " current"),
    # a comment wrapped on to a comment line
    ("x = 1  # wait for the", "\n# tool batch to end\ny = 2\n",
     " current tool batch to end\n", " current"),
    # a call wrapped by its author
    ("def f(a, beta):\n    return g(a,", "\n             beta)\n", " c, beta)\n", " c,"),
]


@pytest.mark.parametrize(("left", "right", "said", "expected"), WRAPPED)
def test_the_next_line_written_on_this_one_is_a_rewrite_too(random_loaded, left, right,
                                                            said, expected):
    engine, _ = python_engine(random_loaded, said)
    res = engine.complete(CompletionRequest(left, right, max_tokens=24, line_stop=True))
    assert (res.middle, res.stop) == (expected, "right_context")
    engine, _ = python_engine(random_loaded, said)
    exact_only = engine.complete(CompletionRequest(left, right, max_tokens=24,
                                                   line_stop=True, right_wraps=False))
    # Compared as written only, it is no re-write: the detour is decoded (to a worse middle,
    # or to the same one found again by the best-stopping-point search after the budget).
    assert exact_only.stop != "right_context"
    assert exact_only.middle != expected or exact_only.tokens > res.tokens
