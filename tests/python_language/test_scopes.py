"""python_language.scopes: the checks a middle's layout terminals must pass, per scope."""

from __future__ import annotations

from lexer.layout import Layout, LayoutTerminals
from python_language.scopes import MiddleRules, block_floor, indent_width, is_strict
from quotient import Scope

LT = LayoutTerminals()
NL, IN, DE = LT.newline, LT.indent, LT.dedent
STACK3 = ((0, 0), (4, 4), (8, 8))


def test_statement_scope_refuses_a_new_logical_line() -> None:
    before = after = Layout(STACK3, 0, False, 0, 0)
    assert MiddleRules(Scope.FREE, LT).admits(before, after, ["NAME", NL])
    assert not MiddleRules(Scope.STATEMENT, LT).admits(before, after, ["NAME", NL])
    assert MiddleRules(Scope.STATEMENT, LT).admits(before, after, ["NAME", "PLUS"])


def test_block_scope_bounds_dedents_by_its_floor() -> None:
    rules = MiddleRules(Scope.BLOCK, LT, block_floor=3)
    assert rules.within_block(3, [NL, IN, "NAME", NL, DE])  # back to the block's level
    assert not rules.within_block(3, [NL, DE])  # leaves the cursor's block
    assert MiddleRules(Scope.FREE, LT, block_floor=3).within_block(3, [NL, DE, DE])
    held = MiddleRules(Scope.FREE, LT, hold_floor=2)  # a body held by the right window's cut
    assert held.holds_block and held.within_block(3, [DE]) and not held.within_block(3, [DE, DE])


def test_new_blocks_follow_the_files_width() -> None:
    rules = MiddleRules(Scope.FREE, LT, indent_width=4)
    assert rules.indents_by_width(STACK3, STACK3 + ((12, 12),))
    assert not rules.indents_by_width(STACK3, STACK3 + ((10, 10),))
    assert rules.indents_by_width(STACK3, STACK3[:2])  # dedenting opens nothing
    before = Layout(STACK3, 0, False, 0, 0)
    assert not rules.admits(before, Layout(STACK3 + ((14, 14),)), [NL, IN, "NAME"])
    assert MiddleRules(Scope.FREE, LT).admits(before, Layout(STACK3 + ((14, 14),)),
                                              [NL, IN, "NAME"])


def test_width_and_floor_from_the_context() -> None:
    assert indent_width(STACK3) == 4 and indent_width(((0, 0),)) == 4
    assert indent_width(((0, 0), (2, 2), (4, 4))) == 2
    assert is_strict(STACK3, "\n    x = 1\n        y = 2\n", 4)
    assert not is_strict(STACK3, "\n   x = 1\n", 4)  # R indents by 3
    assert not is_strict(((0, 0), (4, 4), (6, 6)), "\n", 4)
    assert block_floor(Layout(STACK3, 0, False, 0, 0)) == 3  # mid-line: the whole stack
    assert block_floor(Layout(STACK3, 0, True, 4, 4)) == 2  # at column 4 of a new line
    assert block_floor(Layout(STACK3, 0, True, 0, 0)) == 1
