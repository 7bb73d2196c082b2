"""Right-context lexing: start indices, required levels and branch signatures."""

from __future__ import annotations

from lexer.layout import Layout
from lexer.right_context import RightContext, plausible_stacks, required_levels
from python_language.grammar import python_tokenizer


def ctx(right: str) -> RightContext:
    return RightContext(python_tokenizer(), right)


def test_start_indices_cover_continued_lexemes() -> None:
    rc = ctx("ute(1) + x\n")
    assert 0 in rc.starts and 3 in rc.starts  # "comp|ute": the name may run on into R
    rc = ctx("abc' + s\n")
    assert 4 in rc.starts  # a string opened in the middle, closed by R's quote
    rc = ctx("ment\ny = 1\n")
    assert 4 in rc.starts  # a comment begun in the middle runs to the end of the line


def test_net_closers_is_the_depth_r_needs() -> None:
    rc = ctx("b, c))\nx = [1,\n 2]\n")
    assert rc.net_closers(0) == 2
    assert ctx("(\n").net_closers(0) is None  # R leaves a bracket open


def test_required_levels() -> None:
    events = [(12, 12), (8, 8), (12, 12), (4, 4), (8, 8)]
    required, first = required_levels(events)
    assert required == [(4, 4), (8, 8)] and first == (12, 12)
    mid, after = plausible_stacks(((0, 0),), events, 4)
    assert ((0, 0), (4, 4), (8, 8)) in mid


def test_branch_signature_is_that_of_the_stack_it_starts_from() -> None:
    right = "       return a\n\n    def g(self):\n        return 2\n"
    rc = ctx(right)
    for stack in [((0, 0), (4, 4), (8, 8)), ((0, 0), (4, 4), (8, 8), (12, 12))]:
        branch = rc.render_after_event(0, stack)
        assert branch is not None
        assert branch.signature == rc.signature_after(0, stack)
    a = rc.render_after_event(0, ((0, 0), (4, 4), (8, 8)))
    b = rc.render_after_event(0, ((0, 0), (4, 4), (8, 8), (12, 12)))
    assert a.signature != b.signature and a.tokens != b.tokens


def test_signature_decides_the_stream() -> None:
    rc = ctx(" + 1\n    z = 2\nw = 3\n")
    layouts = [Layout(((0, 0), (4, 4)), 0, False, 0, 0),
               Layout(((0, 0), (4, 4), (8, 8)), 0, False, 0, 0),
               Layout(((0, 0), (4, 4), (8, 8), (12, 12)), 0, False, 0, 0)]
    rendered = {}
    for layout in layouts:
        b = rc.render(0, layout)
        assert b is not None
        assert rendered.setdefault(b.signature, b.tokens) == b.tokens
