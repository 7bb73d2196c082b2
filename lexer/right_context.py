"""Lexing the right context when the text before it is not yet written (paper V-B and VI).

The symbols of the right context R depend on the unknown middle in two ways:

* **where its first symbol starts** — the middle's last lexeme may run into R (a half-typed
  name, an open string whose quote is in R, a comment). `start_indices` lists every index `i`
  at which a lexeme begun in the middle could end: fresh lexing resumes at `i`. At the end of
  the middle the recognizer lexes `pending + R[:i]` itself and checks that `i` really is a
  lexeme boundary, so a guess here only decides what is precomputed, never what is accepted;
* **the layout state at `i`** — bracket depth, whether `i` is at the start of a logical line
  (and with how much of the middle's indentation), and the indentation stack. `layout_
  signature` reduces a layout state to exactly the part that decides the symbols of R[i:]:
  the depth, the line-start columns, every stack level at or below the deepest column R
  itself indents to, and how many levels lie above it (they are all popped by R's first
  dedent, so only their number matters). Two layouts with one signature lex R[i:] alike.

`RightContext.branches` renders the symbol stream of R[i:] for a set of plausible layouts (the
left context's stack, shallower prefixes of it, and deeper stacks the middle may open). The
symbols are produced once per (i, depth, line-start) with the indentation left symbolic, then
rendered per stack, so many guesses cost little. The DEDENTs at the very end are left out:
there the grammar itself forces their number (every INDENT must be closed), so the recognizer
accepts any number (`DEDENT*`) without losing exactness.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from lexer.layout import Layout, LayoutError, Level, advance_ws, leading_ws, line_start
from lexer.tokenizer import LexError, SymbolicLexed, Tokenizer, Until

# Heads a middle may end with; lexing head + R tells where such a lexeme would end in R.
_HEADS = (
    "a", "1", "0x1", "1.", "1e", ".", "'", '"', "'''", '"""', "'\\", '"\\', "'''\\", '"""\\',
    "f'", 'f"', "f'''", 'f"""', "f'{", 'f"{', "f'{x:", 'f"{x:', "b'", 'b"', "rb'", 'rb"',
    "=", "*", "**", "<", "<<", ">", ">>", "!", "/", "//", "-", "+", "%", "&", "|", "^", "@", ":",
    "..", "~",
)

class Signature(NamedTuple):
    """The part of a layout state at a start index that decides how R[i:] lexes."""

    depth: int  # bracket depth
    bol: bool  # at the start of a logical line
    level: Level | None  # the line's indentation so far, when R continues that line
    kept: tuple[Level, ...]  # the stack's levels at or below the deepest column R uses
    above: int  # how many levels lie above those (R's first dedent pops them all)
    # The first line's INDENT/DEDENTs were computed from the real stack (`signature_after`).
    after_event: bool = False


class Branch(NamedTuple):
    start: int  # index in R where fresh lexing resumes
    signature: Signature  # layout signature at `start` (see module docstring)
    tokens: tuple[str, ...]  # R[start:] as terminal names, without the closing DEDENTs


def layout_signature(layout: Layout, max_col: int, col_matters: bool) -> Signature:
    """The part of a layout state that decides how R[i:] lexes (see the module docstring)."""
    stack, depth, bol, col, alt = layout[:5]
    col_matters = bol and col_matters
    limit = max(max_col, col) if col_matters else max_col
    kept = tuple(level for level in stack if level[0] <= limit)
    return Signature(depth, bol, (col, alt) if col_matters else None, kept,
                     len(stack) - len(kept))


class _Symbolic(NamedTuple):
    lexed: SymbolicLexed  # R[start:]'s terminals and its logical lines' indentation
    max_col: int  # deepest indentation after the first line's


class RightContext:
    """The right context of a completion, lexed for every start index and layout guess."""

    def __init__(self, tokenizer: Tokenizer, right: str):
        self.tokenizer = tokenizer
        self.right = right
        self.starts = self._start_indices()
        self._symbolic: dict[tuple[int, int, bool], _Symbolic | None] = {}

    # -- start indices ---------------------------------------------------------------------

    def _start_indices(self) -> list[int]:
        right = self.right
        table = self.tokenizer.table
        limit = min(len(right), 4096)
        found = {0}
        for head in _HEADS:
            text = head + right[:limit]
            try:
                hit = table.longest(text, 0, len(text))
            except (IndexError, ValueError):
                hit = None
            if hit is not None and hit[1] > len(head):
                found.add(hit[1] - len(head))
        nl = right.find("\n")
        if nl > 0:
            found.add(nl)  # a comment begun in the middle runs to the end of R's first line
        if right[:1] == "\n":
            found.add(1)  # after a backslash continuation in the middle
        ws = len(right) - len(right.lstrip(" \t\f"))
        if ws:
            found.add(ws)
        return sorted(i for i in found if i <= len(right))

    # -- symbol streams ----------------------------------------------------------------------

    def symbolic(self, start: int, depth: int, bol: bool) -> _Symbolic | None:
        key = (start, depth, bol)
        if key not in self._symbolic:
            self._symbolic[key] = self._lex_symbolic(start, depth, bol)
        return self._symbolic[key]

    def _lex_symbolic(self, start: int, depth: int, bol: bool) -> _Symbolic | None:
        try:
            lexed = self.tokenizer.lex_symbolic(self.right, start, depth=depth, bol=bol)
        except LexError:
            return None
        # The first line's indentation begins in the middle when R continues that line.
        first = 1 if bol and self.continues_line(start) else 0
        cols = [ind.level[0] for ind in lexed.indents[first:]]
        return _Symbolic(lexed, max(cols, default=0))

    def net_closers(self, start: int) -> int | None:
        """The bracket depth R[start:] must start at (its closers minus its openers)."""
        depth = 0
        lowest = 0
        try:
            # Read at an unbounded bracket depth: line breaks end nothing, closers never
            # underflow, and only the brackets are counted.
            lexed = self.tokenizer.lex_symbolic(self.right, start, depth=10**6, bol=False,
                                                until=Until.BOUNDARY)
        except LexError:
            return None
        tk = self.tokenizer
        for t in lexed.terminals:
            if t in tk.openers:
                depth += 1
            elif t in tk.closers:
                depth -= 1
                lowest = min(lowest, depth)
        if depth != lowest:
            return None  # R leaves a bracket open: no depth at the cursor closes it
        return -lowest

    def render(self, start: int, layout: Layout) -> Branch | None:
        """R[start:]'s symbols when the layout state at `start` is `layout`."""
        sym = self.symbolic(start, layout.depth, layout.bol)
        if sym is None:
            return None
        first = None
        if layout.bol and not layout.frozen and self.continues_line(start):
            # The first line's indentation begins in the middle and ends in R.
            first = advance_ws(layout.col, layout.alt, leading_ws(self.right, start))
        out = self._render(sym.lexed, layout.stack, first, first_applied=False)
        return None if out is None else Branch(start, self.signature(start, layout), out)

    def continues_line(self, start: int) -> bool:
        """Whether R[start:] has content on the physical line the middle ends on."""
        rest = self.right[start:].lstrip(" \t\f")
        return bool(rest) and rest[0] not in "\r\n#\\"

    def signature(self, start: int, layout: Layout) -> Signature | None:
        sym = self.symbolic(start, layout.depth, layout.bol)
        if sym is None:
            return None
        return layout_signature(layout, sym.max_col, self.continues_line(start))

    def render_after_event(self, start: int, stack: tuple[Level, ...]) -> Branch | None:
        """R[start:]'s symbols after its first line's indentation event, which left `stack`.

        Used when the middle ends at the start of a line that R continues: the recognizer
        computes that first event's INDENT/DEDENTs exactly from the real stack at the end of
        the middle, so only the stack it leaves behind has to be guessed.
        """
        sym = self.symbolic(start, 0, True)
        if sym is None:
            return None
        out = self._render(sym.lexed, stack, None, first_applied=True)
        return None if out is None else Branch(start, self.signature_after(start, stack), out)

    def signature_after(self, start: int, stack: tuple[Level, ...]) -> Signature | None:
        sym = self.symbolic(start, 0, True)
        if sym is None:
            return None
        kept = tuple(level for level in stack if level[0] <= sym.max_col)
        return Signature(0, True, None, kept, len(stack) - len(kept), after_event=True)

    def event_columns(self) -> list[Level]:
        """Indentation of R's logical lines in order (layout events, not bracket lines)."""
        for start in self.starts[:1]:
            sym = self.symbolic(start, self.net_closers(start) or 0, False)
            if sym is not None:
                return [ind.level for ind in sym.lexed.indents]
        return []

    def branches(self, stack: tuple[Level, ...], width: int) -> list[Branch]:
        """Render R[i:] for every start index and every plausible layout at it."""
        mid, after = plausible_stacks(stack, self.event_columns(), width)
        out: dict[tuple[int, Signature], Branch] = {}

        def add(b: Branch | None) -> None:
            if b is not None:
                out.setdefault((b.start, b.signature), b)

        for start in self.starts:
            depth = self.net_closers(start)
            if depth is None:
                continue
            for st in mid:
                add(self.render(start, Layout(st, depth, False, 0, 0)))
            if depth:
                continue
            if self.continues_line(start):
                for st in after:
                    add(self.render_after_event(start, st))
            else:
                for st in mid:
                    add(self.render(start, Layout(st, 0, True, 0, 0)))
        return list(out.values())

    def _render(self, lexed: SymbolicLexed, stack: tuple[Level, ...], first: Level | None,
                first_applied: bool) -> tuple[str, ...] | None:
        """Symbolic terminals with their indentation rendered against `stack`.

        `first` overrides the first line's indentation; with `first_applied` the first line's
        indentation is left out (the caller computed its INDENT/DEDENTs from the real stack).
        The DEDENTs at the very end are left out (the recognizer accepts any number there; the
        grammar fixes it). None when a line's indentation matches no level of the stack.
        """
        layout_terminals = self.tokenizer.layout_terminals
        out: list[str] = []
        indents = lexed.indents
        k_ind = 0
        for k, name in enumerate(lexed.terminals):
            if k_ind < len(indents) and indents[k_ind].index == k:
                level = indents[k_ind].level
                k_ind += 1
                if not (first_applied and k == 0):
                    if k == 0 and first is not None:
                        level = first
                    try:
                        change, stack = line_start(stack, level)
                    except LayoutError:
                        return None
                    out.extend(layout_terminals.for_change(change))
            out.append(name)
        dedent = layout_terminals.dedent
        while out and out[-1] == dedent:
            out.pop()
        return tuple(out)


def required_levels(events: Sequence[Level]) -> tuple[list[Level], Level | None]:
    """Levels R dedents to without having opened them itself, and R's first line's level.

    Every such level must be on the stack the middle leaves behind (or R's dedent matches no
    level); R's first line may either sit on an existing level or open a new one.
    """
    required: list[Level] = []
    local: list[Level] = []
    for level in events:
        if local and level[0] > local[-1][0]:
            local.append(level)
            continue
        while local and local[-1][0] > level[0]:
            local.pop()
        if local and local[-1] == level:
            continue
        if not local and level not in required:
            required.append(level)
        local = [level]
    first = events[0] if events else None
    return sorted(set(required) - ({first} if first else set())), first


def plausible_stacks(stack: tuple[Level, ...], events: Sequence[Level],
                     width: int) -> tuple[list[tuple[Level, ...]], list[tuple[Level, ...]]]:
    """Indentation stacks the middle may leave behind, most likely first.

    Returns (stacks at a mid-line end of the middle, stacks right after the indentation event
    of a line that R continues). For every prefix of the left context's stack (the middle
    dedented to that level), the stack is completed with the levels R needs
    (`required_levels`): the middle opened exactly the blocks R goes on to close. Variants add
    R's first line's level, and one indentation width further for a middle that opens a block
    R's first line continues.
    """
    required, first = required_levels(events)
    mid: list[tuple[Level, ...]] = []
    after: list[tuple[Level, ...]] = []
    for k in range(len(stack), 0, -1):
        base = stack[:k]
        top = base[-1]
        need = tuple(lv for lv in required if lv[0] > top[0] and lv[1] > top[1])
        if len(need) + k > len(stack) + 6:
            continue
        full = base + need
        variants = [full]
        last = full[-1]
        if first is not None and first[0] > last[0] and first[1] > last[1]:
            variants.append(full + (first,))
        variants.append(full + ((last[0] + width, last[1] + width),))
        for v in variants:
            mid.append(v)
            after.append(v)
    return list(dict.fromkeys(mid)), list(dict.fromkeys(after))


__all__ = ["Branch", "RightContext", "layout_signature", "plausible_stacks", "required_levels"]
