"""The right-context stop's rule (``fim.stopping.right_rewrite_cut``) on the cases issue 29
found in use: a cursor inside a word, whose re-write starts inside a word of the middle, and
a short agreement that is a coincidence (`` is`` against ``istributed``, ``    return`` then
``False`` against ``    return True``), which the next tokens refute.

Each case gives the whole middle the model wrote and the token it wants next; the rule sees
them as a decode does, one token at a time, so a short agreement is cut only once a later
token settles it.  The complete points come from a parse of the file, as the vLLM client
tells them.
"""

from __future__ import annotations

import ast

import pytest

from fim.stopping import RightStop, at_line_start, right_rewrite_cut


def parses(source: str) -> bool:
    try:
        ast.parse(source)
    except SyntaxError:
        return False
    return True


def first_cut(left: str, right: str, tokens: list[str], wraps: bool = True
              ) -> tuple[int, str] | None:
    """The first step at which the rule cuts, as a decode asks it (the middle so far, its
    last token's start, the next token), and the middle there; ``None`` if it never does.
    After the last token the model wants to stop (``ending``)."""
    stop = RightStop.of(right, wraps, at_line_start(left))
    middle, base = "", 0
    for step, wanted in enumerate([*tokens, ""]):
        text = middle + wanted

        def complete_at(c: int, text: str = text) -> bool:
            return parses(left + text[:c] + right)

        c = right_rewrite_cut(text, len(middle), base, stop, complete_at,
                              ending=step == len(tokens))
        if c is not None:
            return step, text[:c]
        base, middle = len(middle), text
    return None


# (left, right, the model's tokens, the middle the rule ends with)
INSIDE_A_WORD = [
    # the right context starts inside a word the model writes whole
    ("class Config(", "odel):\n    x: int = 1\n",
     ["Settings", ",", " Base", "Model", "):", "\n"], "Settings, BaseM"),
    ("url = ", "R_DOCUMENTATION_URL\n", ["PROVID", "ER", "_DOC", "UMENTATION", "_URL", "\n"],
     "PROVIDE"),
    ("class A:\n    def f(self, t):\n        se", "lf._record_duration(t)\n",
     ["lf", ".metrics", ".flush", "()", "\n", "        ", "self", "._", "record", "_duration",
      "(t", ")\n"],
     "lf.metrics.flush()\n        se"),
]


@pytest.mark.parametrize(("left", "right", "tokens", "middle"), INSIDE_A_WORD)
def test_a_rewrite_that_starts_inside_a_word_is_cut_where_it_starts(left, right, tokens,
                                                                     middle):
    cut = first_cut(left, right, tokens)
    assert cut is not None and cut[1] == middle
    # The file reads as the model wrote it, without the duplicate.
    assert (left + middle + right).startswith(left + "".join(tokens).rstrip("\n"))


# (left, right, the model's tokens, the middle, the step whose token settles the re-write)
COINCIDENCES = [
    # prose: " is" is how "istributed" begins, and the next word is not "tributed"
    ("# Licensed software d", 'istributed on an "AS IS" BASIS.\nx = 1\n',
     ["ata", " is", " read", ",", " then", " d", "istributed", " on", " an"],
     "ata is read, then d", 6),
    # code: the hole is `return False`, the line after it `return True`
    ("def f(x):\n    if x:\n        log(x)\n", "    return True\n",
     ["    return", " False", "\n", "    return", " True", "\n"], "    return False\n", 4),
]


@pytest.mark.parametrize(("left", "right", "tokens", "middle", "step"), COINCIDENCES)
def test_a_short_agreement_waits_for_the_next_tokens(left, right, tokens, middle, step):
    # The first agreement (" is", "    return") is refuted by the token after it; the cut
    # comes where the right context is really written again, settled by ``step``'s token.
    assert first_cut(left, right, tokens) == (step, middle)


def test_a_short_agreement_the_next_token_carries_on_is_cut_where_it_began():
    left, right = "def f(x):\n    if x:\n        log(x)\n", "    return True\n"
    assert first_cut(left, right, ["    return", " True", "\n"]) == (1, "")


def test_a_tail_inside_the_middles_indentation_is_no_rewrite():
    # Four blanks, then "    return": a line indented deeper than the right context's, not
    # the right context's line (cut there, its body would change).
    left, right = "def f(x):\n    if x:\n", "    return True\n"
    assert first_cut(left, right, ["    ", "    return", " False", "\n"]) is None
    assert first_cut(left, right, ["    ", "    return", " True", "\n"]) is None


def test_a_settled_agreement_is_cut_at_once():
    # The rest of the right context's line, or eight characters besides blanks of it.
    left = 'def f():\n    raise ValueError("Event '
    assert first_cut(left, 'be None")\n', ["cannot", " be", ' None")']) == (2, "cannot ")
    assert first_cut("x = g(", "a)\n", ["b", ", ", "a)"]) == (2, "b, ")
    assert first_cut("x = ", "alpha_beta_gamma + 1\n",
                     ["alpha_beta_gamma_delta"]) is None  # parts from it at "_delta"
    assert first_cut("x = ", "alpha_beta_gamma + 1\n",
                     ["2 * ", "alpha_beta_g"]) == (1, "2 * ")


def test_the_right_stop_settles_at_its_first_line_with_text():
    stop = RightStop.of("\n    return a\n    b\n", wraps=True)
    assert not stop.settled("\n    return")
    assert stop.settled("\n    return a")
    assert stop.wrapped == " return a b " and not stop.settled_wrapped(" return")
    assert stop.settled_wrapped(" return a")
    assert not RightStop.of("  \n\n", wraps=True)


PARSE_CONFIG = """def parse_config(text):
    config = {}
    for line in text.splitlines():
        line = line.strip()
"""


def test_one_short_line_of_agreement_is_no_rewrite():
    """The hole is ``if not line or line.startswith("#"):``; the model writes two guards, each
    with its own ``continue``.  Its first ``continue`` line is the right context's first line,
    but the line after it is not: cut there, the comment guard was lost (the execution
    benchmark's ``parse_config:5``).  The second ``continue`` is followed by the right
    context's next line, and that is the re-write."""
    right = ('            continue\n        key, _, value = line.partition("=")\n'
             "        config[key.strip()] = value.strip()\n")
    tokens = ["        if", " not", " line", ":\n", "           ", " continue", "\n", "       ",
              " if", " line", ".startswith", '("#', '"):', "\n", "           ", " continue",
              "\n", "       ", " key", ",", " _", ",", " value", " =", " line"]
    assert first_cut(PARSE_CONFIG, right, tokens) == (
        22, '        if not line:\n            continue\n        if line.startswith("#"):\n')


def test_a_rewrite_the_model_ends_after_is_cut():
    # The model writes its line, then the right context's next line, and stops: the duplicate
    # line is cut off though one line is short of settling a whole-line agreement.
    left, right = "def f(a):\n    ", "\n    a *= 2\n    return a\n"
    assert first_cut(left, right, ["a", " +=", " 1", "\n", "   ", " a", " *=", " 2", "\n"]) \
        == (9, "a += 1")
    # Not where the model stops after a prefix of the line (" is" before "istributed").
    assert first_cut("# d", "istributed on an AS IS BASIS\n", ["ata", " is"]) is None


# issue 29's ``strikelist.py:552``: on an empty line above a loop, the model copies the loop
# a few lines down (never reaching a point where the file parses within its 96 tokens).
LOOP_BELOW = ('\n\n        last_id = "0-0"\n        initial_load_complete = False\n'
              "        while True:\n            try:\n"
              "                async with self._redis.client() as r:\n"
              "                    await self._read(r)\n"
              "            except KeyError:\n                pass\n")
MONITOR = ("class S:\n    async def _monitor(self):\n"
           '        """Background task that monitors Redis."""\n        ')


def _tokens(text: str) -> list[str]:
    """``text`` a few characters at a time (the cut must not depend on where tokens split)."""
    return [text[i:i + 3] for i in range(0, len(text), 3)]


def test_a_copy_of_lines_further_down_is_cut_where_it_starts():
    copy = ("while True:\n            try:\n"
            "                async with self._redis.client() as r:\n")
    step, middle = first_cut(MONITOR, LOOP_BELOW, _tokens(copy + "                    x"))
    assert middle == ""
    # Cut as soon as the second whole line of the copy is written, with enough text in it
    # (``while True:`` and ``try:`` alone are 14 characters, short of 16).
    assert "".join(_tokens(copy)[:step + 1]).count("\n") == 3
    # After a line of the model's own, the copy is cut and that line kept.
    own = "self._ready = True\n"
    assert first_cut(MONITOR, LOOP_BELOW, _tokens(own + "        " + copy))[1] == own


def test_lines_that_only_resemble_the_code_below_are_kept():
    # One line equal to a line below, then the model's own: no copy.
    own = ('last_id = "0-0"\n        retries = 0\n        while retries < 3:\n'
           "            retries += 1\n")
    assert first_cut(MONITOR, LOOP_BELOW, _tokens(own)) is None
    # The same lines with another indentation are other code (a block around them).
    nested = ("if self._redis:\n            while True:\n                try:\n"
              "                    async with self._redis.client() as r:\n"
              "                        await self._read(r)\n")
    assert first_cut(MONITOR, LOOP_BELOW, _tokens(nested)) is None
