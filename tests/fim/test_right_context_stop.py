"""Constrained decoding ends the middle where the model would re-write the right context.

A scripted model says the author's middle and then goes on with the text that already follows
the cursor (what a FIM model often prefers).  Under the real Python constraint the duplicate
cannot parse, and before ``stop_at_right`` the decoder forced the model on until something
connected; now the middle ends where the re-written text begins, when the file is complete
there.  Counting the model's steps shows that no detour was decoded.
"""

from __future__ import annotations

import dataclasses

import pytest
from test_editor_requests import Scripted

from fim import decoding
from fim.api import CompletionRequest, Engine
from fim.engines.transformers_engine import backend_from_loaded
from fim.stopping import RightStop


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
    # The model was not stepped past the point where the duplicate was settled: the right
    # context's first line with text, or ``STRONG_AGREEMENT`` characters of it, re-written.
    assert script.steps <= len(engine.tokenizer.encode(expected + settling(right))) + 1


def settling(right: str) -> str:
    """The shortest start of ``right`` that settles a re-write of it."""
    stop = RightStop.of(right, wraps=False)
    return next(right[:n] for n in range(1, len(right) + 1) if stop.settled(right[:n]))


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


# Issue 29: where the agreement with the right context starts inside a word of the middle
# (the hole ends inside a word), and where a short agreement is a coincidence.
INSIDE_A_WORD = [
    ("class Config(", "odel):\n    x: int = 1\n", "Settings, BaseModel):\n",
     "Settings, BaseM"),
    ("url = ", "R_DOCUMENTATION_URL\n", "PROVIDER_DOCUMENTATION_URL\n", "PROVIDE"),
    ("class A:\n    def f(self, t):\n        se", "lf._record_duration(t)\n",
     "lf.metrics.flush()\n        self._record_duration(t)\n", "lf.metrics.flush()\n        se"),
]


@pytest.mark.parametrize(("left", "right", "said", "expected"), INSIDE_A_WORD)
def test_a_rewrite_starting_inside_a_word_ends_the_middle(random_loaded, left, right, said,
                                                          expected):
    """Before, the re-write was not seen: the duplicate stayed where it parses
    (``PROVIDERR_DOCUMENTATION_URL``) or the constraint forced a detour."""
    engine, script = python_engine(random_loaded, said)
    res = engine.complete(CompletionRequest(left, right, max_tokens=32, scope="free"))
    assert (res.middle, res.stop, res.parses) == (expected, "right_context", True)
    assert script.steps <= len(engine.tokenizer.encode(expected + settling(right))) + 1


COINCIDENCES = [
    # the hole is `return False`, the line after it `return True`: `    return` agrees
    ("def f(x):\n    if x:\n        log(x)\n", "    return True\n", "    return False\n",
     "    return False\n"),
    # the same with the middle's line indented deeper than the right context's
    ("def f(x):\n    if x:\n", "    return True\n", "        return False\n",
     "        return False\n"),
    # prose: " is" is how "istributed" begins
    ("# Licensed software d", 'istributed on an "AS IS" BASIS.\nx = 1\n',
     "ata is read, then d", "ata is read, then d"),
]


@pytest.mark.parametrize(("left", "right", "said", "expected"), COINCIDENCES)
def test_a_short_agreement_refuted_by_the_next_tokens_is_no_stop(random_loaded, left, right,
                                                                  said, expected):
    """Before, the middle ended at the first token that agreed (bare indentation, or one
    space of prose), and the file parsed with the wrong body."""
    engine, _ = python_engine(random_loaded, said)
    res = engine.complete(CompletionRequest(left, right, max_tokens=32, scope="free"))
    assert res.middle == expected and res.parses


def test_a_settled_rewrite_after_a_refuted_one_is_cut(random_loaded):
    left, right = "def f(x):\n    if x:\n        log(x)\n", "    return True\n"
    said = "    return False\n    return True\n"
    engine, _ = python_engine(random_loaded, said)
    req = CompletionRequest(left, right, max_tokens=32, scope="free")
    res = engine.complete(req)
    assert (res.middle, res.stop) == ("    return False\n", "right_context")
    # Traced, the tokens that settled the re-write are not the middle's: the trace ends
    # with the middle, and the first re-written token is where the decode chose to end.
    engine, _ = python_engine(random_loaded, said)
    entry, state, _, prompt = engine._prepare(req, None)
    out = decoding.decode(engine._setup, prompt.ids, prompt.healed,
                          dataclasses.replace(req.decode_options(None), trace=True), state,
                          entry.cache)
    assert out.middle == res.middle
    starts, at = [], 0  # each scripted token and where it starts in the middle
    for tid in engine.tokenizer.encode(said):
        starts.append((tid, at))
        at += len(engine.tokenizer.decode([tid]))
    kept = [tid for tid, at in starts if at < len(res.middle)]
    assert [t.token for t in out.trace] == kept
    assert (out.end_step.token, out.end_step.chars) == starts[len(kept)]
    assert out.end_step.chars >= len(res.middle)


def test_one_short_line_of_agreement_is_no_rewrite(random_loaded):
    """The execution benchmark's ``parse_config:5``: the hole is ``if not line or
    line.startswith("#"):`` and the model writes two guards, each with its own ``continue``.
    The first ``continue`` line is the right context's first line, but the next is not: the
    middle does not end there (the comment guard would be lost); it ends before the second,
    which the right context's next line follows."""
    left = ("def parse_config(text):\n    config = {}\n    for line in text.splitlines():\n"
            "        line = line.strip()\n")
    right = ('            continue\n        key, _, value = line.partition("=")\n'
             "        config[key.strip()] = value.strip()\n    return config\n")
    middle = '        if not line:\n            continue\n        if line.startswith("#"):\n'
    engine, _ = python_engine(random_loaded, middle + right)
    res = engine.complete(CompletionRequest(left, right, max_tokens=48, scope="free"))
    assert (res.middle, res.stop) == (middle, "right_context")


def test_a_rewrite_the_model_ends_after_is_cut(random_loaded):
    """The model writes its line and the right context's next line, then stops: one whole
    line is not enough to settle a re-write while the model goes on, but where it ends, the
    duplicate is cut off."""
    engine, _ = python_engine(random_loaded, "a += 1\n    a *= 2\n")
    res = engine.complete(CompletionRequest("def f(a):\n    ", "\n    a *= 2\n    return a\n",
                                            max_tokens=24, scope="block"))
    assert (res.middle, res.stop) == ("a += 1", "right_context")


def test_a_line_that_may_be_a_rewrite_is_not_shown_early(random_loaded):
    """An empty line's early answer is its first complete line end; a line that agrees with
    the right context's next line so far is held back until the next tokens settle it (here
    they do, and the middle ends before it) instead of being shown as a duplicate."""
    engine, _ = python_engine(random_loaded, "a += 1\n    a *= 2\n    return a\n")
    shown: list[str] = []
    res = engine.complete(CompletionRequest("def f(a):\n    ",
                                            "\n    a *= 2\n    return a\n    y = 3\n",
                                            max_tokens=24, scope="block"),
                          on_partial=shown.append)
    assert (res.middle, res.stop) == ("a += 1", "right_context")
    assert shown == ["a += 1"]


# A line-start cursor above code the model may copy (``RightStop.copies_lines``): with
# ``line_stop`` (the empty-line rescue's first line), a first line equal to a line below is
# held until the next line tells a copy from the model's own code.
COPY_LEFT = "def f(x):\n    "
COPY_RIGHT = "\n    y = x * 2\n    print(x)\n    print(x + y)\n"


@pytest.mark.parametrize(("said", "middle", "stop"), [
    # a copy of the last two lines: cut where it starts
    ("print(x)\n    print(x + y)\n", "", "right_context"),
    # the same first line, then the model's own: the first line, the second only looked at
    ("print(x)\n    return x\n", "print(x)", "line_end"),
    # a first line that is no line below ends at once
    ("return x\n    print(x)\n", "return x", "line_end"),
])
def test_a_line_stop_looks_one_line_further_where_a_copy_may_start(random_loaded, said,
                                                                   middle, stop):
    engine, script = python_engine(random_loaded, said)
    res = engine.complete(CompletionRequest(COPY_LEFT, COPY_RIGHT, max_tokens=24,
                                            line_stop=True, scope="block"))
    assert (res.middle, res.stop) == (middle, stop)
