"""The Go benchmark's cases and scoring: Boundary cuts at Go token boundaries of one block,
prefix-only holes, the corrupted middles both systems get, and SynCode's verdicts scored
against gofmt (an unsound "complete" must be counted)."""

from __future__ import annotations

import random
import shutil

import pytest

from benchmarks.go_cases import boundary_cases, file_cases, go_symbols, prefix_only
from benchmarks.go_corpus import GoFile
from benchmarks.go_seam import corrupt
from benchmarks.go_syncode import corrupted_texts, score

needs_gofmt = pytest.mark.skipif(shutil.which("gofmt") is None, reason="gofmt not installed")

GO = '''package demo

// A comment with braces { ( [ that must not count.
func Sum(xs []int) (total int) {
\ts := "a } string"
\tr := `raw ) string`
\tc := '}'
\tfor _, x := range xs {
\t\ttotal += x
\t}
\t_ = s + r + string(c)
\treturn total
}
'''


def test_go_symbols_depth_ignores_brackets_in_comments_strings_and_runes():
    symbols = go_symbols(GO)
    texts = [(GO[a:b], d) for a, b, d in symbols]
    assert ("package", 0) in texts and ("func", 0) in texts
    assert ('"a } string"', 1) in texts and ("`raw ) string`", 1) in texts
    assert ("'}'", 1) in texts and ("total", 2) in texts
    # the function's braces sit at the outer depth, its body one deeper
    assert texts[-1] == ("}", 0)
    assert not any("comment" in t for t, _ in texts)


def test_boundary_cases_cut_inside_a_token_and_end_at_a_later_token_of_the_same_block():
    symbols = go_symbols(GO)
    starts = {a: d for a, _, d in symbols}
    for seed in range(40):
        for left, middle, right in boundary_cases(GO, random.Random(seed), 5):
            assert left + middle + right == GO and middle
            cut, stop = len(left), len(left) + len(middle)
            first = next(s for s in symbols if s[0] <= cut < s[1])
            assert stop in starts and starts[stop] == first[2]
            # no token between the two drops below their depth: same block
            assert all(d >= first[2] for a, _, d in symbols if cut <= a < stop)


def test_file_cases_are_reproducible_and_prefix_only_holes_run_to_the_end():
    files = [GoFile("demo", "x/demo.go", GO)]
    a = file_cases("boundary", files, seed=3, per_file=4)
    assert a == file_cases("boundary", files, seed=3, per_file=4) and len(a) == 4
    assert len(file_cases("randspan", files, seed=3, per_file=4)) == 4
    with pytest.raises(ValueError):
        file_cases("random", files)
    hole = prefix_only(a[0], cap=2)
    assert hole["right"] == "" and hole["left"] + hole["middle"] == GO
    assert hole["hole"] == min(2, len(a[0]["middle"]))


def test_both_systems_get_the_same_corrupted_middles():
    holes = [prefix_only(c, 5) for c in file_cases("boundary", [GoFile("d", "d.go", GO)],
                                                  per_file=3)]
    rng = random.Random("0:corrupt")
    expected = [[corrupt(h["middle"][:h["hole"]], rng) + h["middle"][h["hole"]:]
                 for _ in range(2)] for h in holes]
    assert corrupted_texts(holes, 2, 0) == expected


@needs_gofmt
def test_score_counts_a_complete_verdict_on_a_file_gofmt_rejects_as_unsound():
    hole = {"id": "h", "left": GO[:30], "middle": GO[30:], "hole": 4}
    broken = GO[30:].replace("return total", "return total)")
    out = {"syncode": "0.4.16", "parser_s": 0.5, "holes": [
        {"id": "h", "setup_ms": 1.0, "rejected_at": None, "complete": True,
         "corruptions": [True, False], "token_ms": [0.1]}]}
    run = score(out, [hole], [[broken, GO[30:]]])
    assert run.accepted == 1 and run.checked == 3
    assert len(run.unsound) == 1 and "return total)" not in run.unsound[0][:10]
    assert len(run.missed_complete) == 1  # the second "corruption" is the true text
    out["holes"][0]["rejected_at"] = -1
    assert score(out, [hole], [[broken, GO[30:]]]).accepted == 0
