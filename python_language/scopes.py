"""What a middle may do besides fitting the grammar: its scope and the file's indent width.

A scope (`quotient.Scope`) bounds how far a completion reaches. `MiddleRules` holds, for one
request, the checks the recognizer applies to the layout terminals a middle produces:

* ``line``: no line break at all (checked on the text);
* ``statement``: no NEWLINE terminal, i.e. the middle stays inside the current logical line;
* ``block``: the middle may add statements, but never DEDENT below the cursor's block
  (`block_floor` levels of the indentation stack stay open);
* ``free``: anything the grammar allows.

Independently of the scope, `hold_floor` keeps the middle inside a block's body when the right
window was cut at the body's next statement (that cut is exact only for such middles), and in
files that indent by one fixed width, `indent_width` holds the blocks a middle opens to that
width (a deliberate subset: CPython would accept a 7-space block in a 4-space file).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from lexer.layout import Layout, LayoutTerminals, Level
from quotient import Scope


@dataclass(frozen=True)
class MiddleRules:
    """The scope checks of one request (see the module docstring)."""

    scope: Scope
    terminals: LayoutTerminals
    block_floor: int = 1  # levels a "block" middle may not dedent out of
    hold_floor: int = 0  # > 0: no middle may dedent below this many levels
    indent_width: int | None = None  # enforced for new blocks in strict files

    @property
    def holds_block(self) -> bool:
        """Whether DEDENTs are bounded (scope "block" or a held body)."""
        return self.scope is Scope.BLOCK or self.hold_floor > 0

    def admits(self, before: Layout, after: Layout, terminals: Sequence[str]) -> bool:
        """Whether `terminals`, lexed from layout `before` to `after`, stay in bounds."""
        lt = self.terminals
        if self.scope is Scope.STATEMENT and lt.newline in terminals:
            return False
        if self.holds_block and not self.within_block(len(before.stack), terminals):
            return False
        return not (self.indent_width and lt.indent in terminals
                    and not self.indents_by_width(before.stack, after.stack))

    def within_block(self, depth: int, terminals: Sequence[str]) -> bool:
        """Whether the DEDENTs among `terminals`, from `depth` open levels, stay above the
        floor."""
        floor = max(self.block_floor if self.scope is Scope.BLOCK else 1, self.hold_floor)
        lt = self.terminals
        for t in terminals:
            if t == lt.dedent:
                depth -= 1
                if depth < floor:
                    return False
            elif t == lt.indent:
                depth += 1
        return True

    def indents_by_width(self, old: tuple[Level, ...], new: tuple[Level, ...]) -> bool:
        """Whether every level `new` has beyond `old` is one `indent_width` deeper."""
        width = self.indent_width
        for k in range(1, len(new)):
            if k >= len(old) or new[k] != old[k]:
                step = new[k][0] - new[k - 1][0]
                if step != width or new[k][1] - new[k - 1][1] != width:
                    return False
        return True


def indent_width(stack: tuple[Level, ...]) -> int:
    """The most common step between the levels of `stack` (4 when there is none)."""
    steps = Counter(b[0] - a[0] for a, b in zip(stack, stack[1:], strict=False))
    return steps.most_common(1)[0][0] if steps else 4


def is_strict(stack: tuple[Level, ...], right: str, width: int) -> bool:
    """Whether the file indents by one fixed width (spaces only) around the cursor.

    Every level of the cursor's stack is one width deeper than the previous, and every line
    of the right context's first 200 lines is indented by a multiple of it.
    """
    if len(stack) < 2:
        return False
    for a, b in zip(stack, stack[1:], strict=False):
        if b[0] - a[0] != width or b[1] - a[1] != width:
            return False
    for line in right.split("\n", 200)[1:200]:
        body = line.lstrip(" ")
        if not body or body[0] in "#\r":
            continue
        if body[0] in "\t\f" or (len(line) - len(body)) % width:
            return False
    return True


def block_floor(layout: Layout) -> int:
    """How many indentation levels a "block" middle may not dedent out of."""
    if not layout.bol:
        return len(layout.stack)
    return max(1, sum(1 for level in layout.stack if level[0] <= layout.col))
