"""Issue 29's cursors: the finer places, the held-out picker, and both pickers giving the same
cursors in every process whatever Python's string-hash seed."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

from benchmarks.cursor_kinds import MID_LINE_PLACES, Place, place_of
from benchmarks.held_out import HeldOut, file_cursors, judged

ROOT = Path(__file__).resolve().parents[2]

#: Lines on which the cursor-kind pickers meet ties: a subscript whose slice is a tuple (the
#: tuple and its first element start at the same column), nested calls, strings, comments.
SOURCE = textwrap.dedent('''\
    """A module."""


    def first(d, a, b):
        """Look two keys up in a table of tables, and say what was found there."""
        value = d[a, b]
        other = d[b, a] + d[a, b]
        # the value is looked up twice, on purpose, to compare both orders
        result = combine(value, other, label="a combined value here")
        if result is None:
            return fallback(d[a, b], default=None)
        return result


    def second(rows, key):
        total = 0
        for row in rows:
            total += row[key, 0]
            total -= row[0, key] * scale(row, key)
        message = "the total of all the rows we have seen"
        return total, message
    ''')


def test_places_of_cursors():
    assert place_of("class Config(", "BaseM", "odel):") == Place.INSIDE_WORD
    assert place_of("    se", "", "lf.x()") == Place.INSIDE_WORD  # an empty hole splits a word
    assert place_of("foo(", "a", ", b)") == Place.BEFORE_PUNCTUATION
    assert place_of("x = ", "a", " + b") == Place.BEFORE_SPACE
    assert place_of("x = ", "a + b", "") == Place.BEFORE_NOTHING
    assert place_of("x = ", "a + b", "   ") == Place.BEFORE_NOTHING
    assert place_of("    ", "return x", "") == Place.EMPTY_LINE
    assert place_of("return ", "x", "(y)") == Place.BEFORE_PUNCTUATION  # after a word: punct.


def test_held_out_cursors_are_the_places_they_claim():
    wanted = {p: 3 for p in MID_LINE_PLACES} | {Place.EMPTY_LINE: 3}
    before = dict(wanted)
    lines = SOURCE.split("\n")
    picked = []
    for i in range(12):
        picked += file_cursors(SOURCE, f"seed{i}", wanted, per_file=2)
    assert picked
    for place, start, end, n in picked:
        line_start = sum(len(x) + 1 for x in lines[:n])
        line = lines[n]
        before_cur, truth, after = (line[:start - line_start], SOURCE[start:end],
                                    line[end - line_start:])
        assert truth and "\n" not in truth
        assert place_of(before_cur, truth, after) == place
    assert sum(before.values()) - sum(wanted.values()) == len(picked)
    assert all(v >= 0 for v in wanted.values())


def test_an_empty_line_is_judged_on_its_first_line():
    src = "def f():\n    x = 1\n    return x\n"
    cur = HeldOut("p/m.py:2:empty_line", "fresh", "p", Path("m.py"), Place.EMPTY_LINE, src,
                  13, 18, 1)
    assert cur.truth == "x = 1" and cur.text == "def f():\n    \n    return x\n"
    assert judged(cur, "x = 1\n    y = 2") == "x = 1"
    mid = HeldOut("p/m.py:2:before_nothing", "fresh", "p", Path("m.py"),
                  Place.BEFORE_NOTHING, src, 15, 18, 1)
    assert judged(mid, "= 1\n") == "= 1\n" and cur.rel == "m.py"


_PICKERS = textwrap.dedent('''\
    import json, random, sys
    from benchmarks.cursor_kinds import CELLS, pick
    from benchmarks.held_out import file_cursors
    from benchmarks.cursor_kinds import MID_LINE_PLACES, Place
    text = open(sys.argv[1]).read()
    out = []
    for i in range(20):
        wanted = {cell: 2 for cell in CELLS}
        out.append([(s.kind, s.text, s.start, s.end) for s in pick(text, f"s{i}", wanted)])
        held = {p: 2 for p in MID_LINE_PLACES} | {Place.EMPTY_LINE: 2}
        out.append(file_cursors(text, f"s{i}", held))
    print(json.dumps(out))
    ''')


def test_pickers_agree_across_processes_and_hash_seeds(tmp_path):
    """Two interpreters with different ``PYTHONHASHSEED`` pick the same cursors.  Before the
    fix, ``cursor_kinds.spots`` sorted a set by a key that tied on spots starting together,
    so their order (and the seeded shuffle's draw) followed the process's string hashes."""
    src = tmp_path / "m.py"
    src.write_text(SOURCE, encoding="utf-8")
    results = []
    for seed in ("1", "2", "3"):
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(ROOT))
        done = subprocess.run([sys.executable, "-c", _PICKERS, str(src)], env=env,
                              capture_output=True, text=True, check=True, cwd=ROOT)
        results.append(json.loads(done.stdout))
    assert results[0] == results[1] == results[2]
    assert any(results[0][0::2]) and any(results[0][1::2])


def test_same_seed_same_pick_in_process():
    wanted_a = {p: 2 for p in MID_LINE_PLACES} | {Place.EMPTY_LINE: 2}
    wanted_b = dict(wanted_a)
    assert file_cursors(SOURCE, "x", wanted_a) == file_cursors(SOURCE, "x", wanted_b)
    random.seed(5)  # the global generator plays no part
    assert file_cursors(SOURCE, "x", dict(wanted_b)) == file_cursors(SOURCE, "x",
                                                                     dict(wanted_b))
