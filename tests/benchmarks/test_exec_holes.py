"""The execution benchmark (``benchmarks.exec_holes``): its programs pass their own tests, a
hole cuts exactly one line, the tests catch the fill issue 29 found (bare indentation that
parses and turns ``return True`` into the hole's body), and the table counts a hole the
constraint loses and names it."""

from __future__ import annotations

from benchmarks.exec_holes import all_holes, holes, passes, table
from benchmarks.exec_tasks import TASKS
from fim.parse_check import parses


def test_every_program_passes_its_tests_and_each_hole_is_one_line():
    for task in TASKS:
        assert passes(task.program, task.tests), task.name
        for hole in holes(task):
            assert hole.left + hole.middle + hole.right == task.program
            assert hole.middle.count("\n") == 1 and hole.middle.strip()
    ids = [hole.id for task in TASKS for hole in holes(task)]
    assert len(ids) == len(set(ids)) and len(ids) >= 100


def test_a_hole_the_tests_cannot_tell_is_left_out():
    # "raise IndexError" on an empty stack: list.pop raises it anyway.
    kept = {hole.id for _, hole in all_holes()}
    assert "stack:10" not in kept and "is_prime:6" in kept


def test_the_tests_fail_the_bare_indentation_that_parses():
    task = next(t for t in TASKS if t.name == "is_prime")
    hole = next(h for h in holes(task) if h.middle.strip() == "return False"
                and h.right.startswith("    return True"))
    # The model wrote four of the line's blanks, then "    return", which is how the right
    # context begins: cut there, the right context's line becomes the hole's body.
    filled = hole.left + "        " + hole.right
    assert parses(filled) and not passes(filled, task.tests)
    assert passes(hole.left + hole.middle + hole.right, task.tests)


def test_a_program_that_does_not_end_fails():
    assert not passes("while True:\n    pass\n", "", limit_s=0.5)


def _row(hole: str, mode: str, passed: bool, middle: str = "x\n") -> dict:
    return {"id": hole, "mode": mode, "middle": middle, "expected": "x\n", "stop": "eos",
            "parses": True, "passed": passed, "tokens": 1, "seconds": 0.1}


def test_the_table_counts_wins_and_names_losses():
    rows = [_row("a:2", "constrained", True), _row("a:2", "unconstrained", False),
            _row("b:3", "constrained", False, "    "), _row("b:3", "unconstrained", True),
            _row("c:4", "constrained", True), _row("c:4", "unconstrained", True)]
    text = table(rows)
    assert "| 3 | 2 | 2 | 1 | 1 | 0 |" in text
    assert "`a:2`" in text.split("Lost")[0] and "- `b:3`: `'    '`" in text
