"""The Python fill-in-the-middle language: which middles fit between a left and right context.

    lang = FimLanguage.for_python(left, right)
    state = lang.initial()          # after the left context
    state = state.feed("abc")       # None when no completion can follow
    state.is_complete()             # left + fed text + right is a valid Python file

How it works (paper sections IV–VI):

1. **Windows** (`lexer.windows`): the left context is cut at the last clean top-level boundary
   before the cursor and the right context at the first one after it, so the cost depends on
   the enclosing top-level statement, not on the file.
2. **Right context** (`lexer.right_context`): R's symbols are rendered for every index where a
   lexeme begun in the middle could end and every plausible layout state there (bracket depth,
   line start, indentation stack), each a *branch* with a layout signature.
3. **Quotient**: all branches, reversed, form one trie-shaped NFA (shared tails of R are parsed
   once), whose start carries a `DEDENT*` loop for the file's closing dedents. One reversed
   Earley parse gives a quotient start nonterminal per branch; the language's grammar is
   `START -> S_b MARK_b` over all branches, so one forward parse of the left context serves
   every branch.
4. **Middle**: fed text is lexed incrementally (`lexer.tokenizer`, certain lexemes only; the
   uncertain tail stays pending) and certain symbols are scanned by the fast recognizer.
   `feed` returns None when the symbols cannot continue, or when the pending tail cannot begin
   any lexeme the recognizer could scan next (with the layout symbols it would imply).
5. **End**: `is_complete` lexes `pending + R[:i]` for the smallest start index `i` that is a
   true lexeme boundary, computes the actual layout signature there and scans the symbols,
   then `MARK_b` of the matching branch, and asks whether the result is complete. When the
   actual layout matches no precomputed branch (a middle that restructures indentation in a
   way no guess covered), it answers exactly with CPython's parser instead.

Fallbacks (`lang.mode`), never an exception for any text:
  "exact"  — the windowed quotient is exact and the text outside the windows parses;
  "window" — as exact, but text outside the windows is broken (the user is mid-edit
             elsewhere) and is ignored;
  "prefix" — no right-context branch could be built (R itself is broken near the cursor):
             left + middle + R_window must only be a valid prefix;
  "none"   — the left context itself cannot be lexed or parsed: no constraint.
"""

from __future__ import annotations

import functools
from collections import Counter
from typing import Literal, NamedTuple

from lexer.cpython import parses
from lexer.layout import DEDENT, INDENT, NEWLINE, Layout, LayoutError, indent_tokens
from lexer.right_context import Branch, RightContext, advance_ws, leading_ws
from lexer.tokenizer import Lexed, LexError, Tokenizer
from lexer.windows import inner_cut, left_boundaries, right_boundaries, right_inner_end

from . import fast
from .nfa import Nfa
from .python_grammar import MARKER_PREFIX, MARKERS, python_grammar, python_tokenizer

Scope = Literal["line", "statement", "block", "free"]
SCOPES = ("line", "statement", "block", "free")
_START = "$fim"
_MAX_BRANCHES = MARKERS
_INNER_CUT_MIN = 400  # characters: smaller top-level windows are not cut again
# Budgets that keep setup well under a second on one statement of pathological size (a
# 100,000-character line): beyond them the language degrades to mode "none" and says why.
MAX_WINDOW_TOKENS = 6000
MAX_RIGHT_CHARS = 60_000
# Free scope takes the right context to the end of the enclosing top-level block, up to this
# many characters; beyond it the middle is held inside the block's body instead.
MAX_WIDE_RIGHT = 20_000
# CPython's tokenizer refuses more than 200 nested brackets ("too many nested parentheses").
MAX_NESTING = 200


class _Left(NamedTuple):
    """A lexed left window and its pending (uncertain) tail."""

    lexed: Lexed
    tail_text: str

    @property
    def tokens(self) -> list[str]:
        return self.lexed.tokens

    @property
    def layout(self) -> Layout:
        return self.lexed.layout


class _TooLarge(Exception):
    """The window exceeds a budget; the language degrades to mode "none"."""


class FimLanguage:
    """The set of middles that complete a (left, right) pair; see the module docstring."""

    mode: str

    def __init__(self) -> None:  # use FimLanguage.for_python
        self.tokenizer: Tokenizer = python_tokenizer()
        self.scope: Scope = "free"
        self.left = self.right = self.left_text = ""
        self.left_start = 0
        self.right_end = 0
        self._outside_right = 0
        self.right_window = ""
        self.marks: dict[tuple[int, tuple], str] = {}
        self.starts: list[int] = []
        self.rc: RightContext | None = None
        self._base_mode = "none"
        self._mode_checked: str | None = None
        self._initial: FimState | None = None
        self._prefix_cache: dict[str, frozenset[str]] = {}
        self.block_floor = 1
        self.hold_floor = 0  # > 0: the middle may not dedent below this many levels
        self.indent_width: int | None = None  # enforced for new blocks in strict files
        self.reason = ""  # why the mode is not "exact", for logs

    # -- construction -----------------------------------------------------------------------

    @classmethod
    def for_python(cls, left: str, right: str, *, scope: Scope = "free",
                   windowing: bool = True) -> FimLanguage:
        if scope not in SCOPES:
            raise ValueError(f"scope must be one of {', '.join(SCOPES)}, not {scope!r}")
        lang = cls()
        lang.scope = scope
        if left.startswith("\ufeff"):
            left = left[1:]  # CPython ignores a byte-order mark at the start of a file
        lang.left, lang.right = left, right
        try:
            lang._build(windowing)
        except RecursionError:
            lang._unconstrained("the text nests too deeply to analyse")
        return lang

    def _build(self, windowing: bool) -> None:
        tok = self.tokenizer
        lefts = left_boundaries(self.left)[:4] + [0] if windowing else [0]
        found = None
        try:
            for start in dict.fromkeys(lefts):
                got = self._left_window(start, windowing)
                if got is None:
                    continue
                if found is None:
                    found = got
                # A pending tail across lines means an open string at the cursor -- or a
                # boundary guessed inside a string, whose closing quote now opens one. Look
                # further back for a window that agrees the cursor is not in a string.
                if "\n" not in got[1][0].tail_text:
                    found = got
                    break
        except _TooLarge as err:
            self._unconstrained(str(err))
            return
        if found is None:
            self._unconstrained("the left context is not a valid prefix of Python")
            return
        self.left_start, (lexed, base_state), self.left_text, column = found
        ambiguous: list[int] = []
        rights = right_boundaries(self.right, ambiguous=ambiguous)[:3] + [len(self.right)] \
            + ambiguous[:1] if windowing else [len(self.right)]
        top_rights = list(rights)
        if column is not None:
            siblings = self.scope != "free"
            if not siblings and right_inner_end(self.right, column, False) > MAX_WIDE_RIGHT:
                # The rest of the block is too large to take whole. Cutting at the next
                # statement of the body is exact for middles that stay in the body, so the
                # middle is held there (as scope "block" would): a sound subset.
                siblings = True
                self.hold_floor = 2
                self.reason = ("the enclosing block is too large to take whole: middles are "
                               "held inside its body")
            rights = [right_inner_end(self.right, column, siblings)] + rights
        layout = lexed.layout
        pending = lexed.tail_text
        width = _indent_width(layout.stack)
        self.block_floor = _block_floor(layout)
        self.indent_width = width if _strict(layout.stack, self.right, width) else None
        first_line = self.right.find("\n")
        first_line = len(self.right) if first_line < 0 else first_line
        fallback = None
        for end in dict.fromkeys(rights):
            window = self.right[:end]
            later = [r for r in top_rights if r > end]
            if len(window) > MAX_RIGHT_CHARS or not self._clean_cut(
                    end, later[0] if later and end in top_rights else None):
                continue
            rc = RightContext(tok, window)
            branches = rc.branches(layout.stack, width)[:_MAX_BRANCHES]
            if not branches:
                continue
            built = self._exact_parser(branches)
            if built is None:
                continue
            parser, marks = built
            state = parser.scan_many(lexed.tokens)
            if state is None:
                continue
            initial = FimState(self, state, layout, pending, "")
            if pending and not initial._tail_viable(state, layout, pending):
                continue
            candidate = (rc, end, window, marks, branches, initial)
            # A window whose branches all start past R's first line presumes that the middle
            # opens a string R closes far away (or swallows all of R): true when the cursor is
            # in a string, but also what a window cut inside a string looks like. Prefer a
            # window that needs no such presumption.
            if any(b.start <= first_line + 1 and window[b.start:].strip() for b in branches):
                self._accept(candidate, top_rights)
                return
            fallback = fallback or candidate
        if fallback is not None:
            self._accept(fallback, top_rights)
            return
        # No branch fits: only ask that left + middle + R_window stays a valid prefix.
        self.right_end = rights[0]
        self.right_window = self.right[: self.right_end]
        if len(self.right_window) > MAX_RIGHT_CHARS:
            self._unconstrained(f"the right window is longer than {MAX_RIGHT_CHARS} characters")
            return
        self.reason = "no completion of the left context can end in the right context's window"
        self._base_mode = "prefix"
        self._initial = FimState(self, base_state, layout, pending, "")

    def _left_window(self, start: int, windowing: bool):
        """The left window from `start`, cut again inside a large block when possible.

        Returns (start, (lexed, base parser state), window text, body column or None), or
        None when the window is not a valid prefix of Python. The size budget applies to the
        window actually used, after the inner cut.
        """
        tok = self.tokenizer
        text = self.left[start:]
        try:
            lexed = tok.lex(text, 0, len(text), Layout(), final=False)
        except LexError:
            return None
        column = None
        if windowing and len(text) > _INNER_CUT_MIN:
            layout = lexed.layout
            cut = inner_cut(text, lexed.tokens, lexed.starts,
                            layout.col if layout.bol else None)
            if cut is not None:
                offset, header, column = cut
                inner_text = header + text[offset:]
                try:
                    inner = tok.lex(inner_text, 0, len(inner_text), Layout(), final=False)
                    text, lexed = inner_text, inner
                except LexError:
                    column = None
        if lexed.layout.depth > MAX_NESTING:
            raise _TooLarge(f"more than {MAX_NESTING} nested brackets (CPython refuses them)")
        if len(lexed.tokens) > MAX_WINDOW_TOKENS:
            raise _TooLarge(f"the statement around the cursor has more than "
                            f"{MAX_WINDOW_TOKENS} symbols")
        state = fast.recognizer(python_grammar()).scan_many(lexed.tokens)
        if state is None:
            return None
        return start, (_Left(lexed, text[lexed.tail:]), state), text, column

    def _clean_cut(self, end: int, next_end: int | None) -> bool:
        """Whether cutting R at `end` leaves no string or comment open across the cut.

        Boundaries are found line by line (`lexer.windows`), so a line of a triple-quoted
        string can look like one. Lexing R from its start, bracket depth unbounded, shows
        whether a lexeme is still open at the cut. For a top-level cut, `next_end` is the next
        boundary, and the statement between the two must also lex with nothing left open: R
        may begin inside a string the middle opens and then read as code up to the cut. Both
        checks only reject cuts, and a rejected cut costs a larger window, not correctness.
        """
        if end >= len(self.right):
            return True
        if not self._lexes_closed(self.right[:end]):
            return False
        # R may begin inside a string the middle opens, and then reads as code up to the
        # cut; the statement after a true boundary lexes with nothing left open, one that
        # starts inside a string does not (the string's closing quote opens one).
        return next_end is None or self._lexes_closed(self.right[end:next_end])

    def _lexes_closed(self, text: str) -> bool:
        """No string or other lexeme is still open at the end of `text` (read as code)."""
        try:
            lexed = self.tokenizer.lex(text, 0, len(text), Layout(((0, 0),), 10**6, False, 0, 0),
                                       final=False, events=True)
        except LexError:
            return True  # not readable as code from here: no evidence against the cut
        tail = text[lexed.tail:]
        return not tail.strip() or tail.lstrip().startswith("#")

    def _accept(self, candidate: tuple, top_rights: list[int]) -> None:
        rc, end, window, marks, branches, initial = candidate
        self.rc, self.right_end, self.right_window, self.marks = rc, end, window, marks
        self._outside_right = min((r for r in top_rights if r >= end), default=len(self.right))
        self.starts = sorted({b.start for b in branches})
        self._base_mode = "exact"
        self._initial = initial

    def _exact_parser(self, branches: list[Branch]) -> tuple[fast.State, dict] | None:
        g = python_grammar()
        nfa = Nfa(1, 0, [])
        nfa.add_edge(0, DEDENT, 0)  # the file's closing DEDENTs: the grammar fixes how many
        trie: dict[tuple[int, str], int] = {}
        finals: dict[int, list[tuple[int, tuple]]] = {}
        for b in branches:
            node = 0
            for sym in reversed(b.tokens):
                nxt = trie.get((node, sym))
                if nxt is None:
                    nxt = nfa.add_state()
                    nfa.add_edge(node, sym, nxt)
                    trie[(node, sym)] = nxt
                node = nxt
            finals.setdefault(node, []).append((b.start, b.signature))
        for node in finals:
            nfa.finals.add(node)
        quotient, starts = g.right_quotient_split(nfa)
        rules = []
        marks: dict[tuple[int, tuple], str] = {}
        for k, (node, keys) in enumerate(finals.items()):
            nt = starts.get(node)
            if nt is None:
                continue
            mark = f"{MARKER_PREFIX}{k}"
            rules.append((_START, (nt, mark)))
            for key in keys:
                marks[key] = mark
        if not rules:
            return None
        return fast.recognizer(quotient.with_rules(rules, start=_START)), marks

    def _unconstrained(self, reason: str) -> None:
        self.reason = reason
        self._base_mode = "none"
        self.left_text = self.left
        self.right_window = self.right
        self._initial = FimState(self, None, Layout(), "", "")

    # -- public ------------------------------------------------------------------------------

    def initial(self) -> FimState:
        assert self._initial is not None
        return self._initial

    @property
    def mode(self) -> str:
        """"exact" | "window" | "prefix" | "none" (see the module docstring)."""
        if self._base_mode != "exact":
            return self._base_mode
        if self._mode_checked is None:
            outside = (self.left[: self.left_start], self.right[self._outside_right:])
            self._mode_checked = "exact" if all(map(_outside_parses, outside)) else "window"
        return self._mode_checked

    @property
    def left_window(self) -> str:
        """The left context as parsed: its window, with a synthetic header if cut inside."""
        return self.left_text

    def prefix_terminals(self, tail: str) -> frozenset[str]:
        got = self._prefix_cache.get(tail)
        if got is None:
            got = frozenset(self.tokenizer.table.prefix_terminals(tail))
            if len(self._prefix_cache) < 4096:
                self._prefix_cache[tail] = got
        return got


class FimState:
    """A persistent recognizer state: the left context plus the middle fed so far."""

    __slots__ = ("lang", "parser", "layout", "pending", "text", "_memo", "_complete")

    def __init__(self, lang: FimLanguage, parser: fast.State | None, layout: Layout,
                 pending: str, text: str):
        self.lang = lang
        self.parser = parser
        self.layout = layout
        self.pending = pending
        self.text = text
        self._memo: dict[str, FimState | None] | None = None
        self._complete: bool | None = None

    def feed(self, text: str) -> FimState | None:
        """The state after `text`, or None when no completion can follow it."""
        if not text:
            return self
        memo = self._memo
        if memo is None:
            memo = self._memo = {}
        elif text in memo:
            return memo[text]
        result = self._feed(text)
        if len(memo) < 256:
            memo[text] = result
        return result

    def _feed(self, text: str) -> FimState | None:
        lang = self.lang
        if lang._base_mode == "none":
            return FimState(lang, None, self.layout, "", self.text + text)
        scope = lang.scope
        if scope == "line" and ("\n" in text or "\r" in text):
            return None
        pending = self.pending + text
        try:
            lexed = lang.tokenizer.lex(pending, 0, len(pending), self.layout, final=False)
        except LexError:
            return None
        toks = lexed.tokens
        if toks:
            if scope == "statement" and NEWLINE in toks:
                return None
            if (scope == "block" or lang.hold_floor) and not self._within_block(toks):
                return None
            if lang.indent_width and INDENT in toks and not self._indents_by(lang.indent_width,
                                                                              lexed.layout):
                return None
            parser = self.parser.scan_many(toks)
            if parser is None:
                return None
        else:
            parser = self.parser
        tail = pending[lexed.tail:]
        if tail and not self._tail_viable(parser, lexed.layout, tail):
            return None
        return FimState(lang, parser, lexed.layout, tail, self.text + text)

    def _within_block(self, toks: list[str]) -> bool:
        depth = len(self.layout.stack)
        lang = self.lang
        floor = max(lang.block_floor if lang.scope == "block" else 1, lang.hold_floor)
        for t in toks:
            if t == DEDENT:
                depth -= 1
                if depth < floor:
                    return False
            elif t == INDENT:
                depth += 1
        return True

    def _indents_by(self, width: int, layout: Layout) -> bool:
        """New blocks of the middle indent by the file's own width (strict files only)."""
        old = self.layout.stack
        new = layout.stack
        for k in range(1, len(new)):
            if k >= len(old) or new[k] != old[k]:
                step = new[k][0] - new[k - 1][0]
                if step != width or new[k][1] - new[k - 1][1] != width:
                    return False
        return True

    def _tail_viable(self, parser: fast.State, layout: Layout, tail: str) -> bool:
        c = tail[0]
        if c == "#":
            return True
        if c == "\\":
            return tail == "\\"
        if layout.bol and layout.depth == 0:
            try:
                pre, stack = indent_tokens(layout)
            except LayoutError:
                return False
            width = self.lang.indent_width
            if width and pre == [INDENT] and not self._indents_by(width, layout._replace(
                    stack=stack)):
                return False
            if DEDENT in pre and (self.lang.scope == "block" or self.lang.hold_floor):
                if not FimState(self.lang, parser, layout, "", "")._within_block(pre):
                    return False
            if pre:
                parser = parser.scan_many(pre)
                if parser is None:
                    return False
        allowed = parser.allowed_terminals()
        return not self.lang.prefix_terminals(tail).isdisjoint(allowed)

    # -- the end of the middle ------------------------------------------------------------

    def is_complete(self) -> bool:
        """True iff left + fed text + right is a valid Python file (within the windows)."""
        if self._complete is None:
            self._complete = self._is_complete()
        return self._complete

    def _is_complete(self) -> bool:
        lang = self.lang
        mode = lang._base_mode
        if mode == "none":
            # No constraint was built; at the end, CPython's parser still answers exactly.
            return _parses(lang.left + self.text + lang.right)
        if mode == "prefix":
            return self._prefix_complete()
        right = lang.right_window
        for i in lang.starts:
            head = self.pending + right[:i]
            boundary = self._at_boundary(head, right, i)
            if boundary is None:
                continue
            toks, layout = boundary
            if i == len(right) and layout.joined:
                return False  # the file would end right after a line continuation
            rc = lang.rc
            if layout.bol and layout.depth == 0 and rc.continues_line(i):
                # The middle ends at the start of a line R continues: its INDENT/DEDENTs
                # follow from the real stack (computed here), not from a guess.
                col, alt = (layout.col, layout.alt) if layout.frozen else \
                    advance_ws(layout.col, layout.alt, leading_ws(right, i))
                try:
                    pre, stack = indent_tokens(layout._replace(col=col, alt=alt))
                except LayoutError:
                    return False
                toks = toks + pre
                sig = rc.signature_after(i, stack)
            else:
                sig = rc.signature(i, layout)
            if sig is None:
                return False  # R[i:] does not even lex from this layout (e.g. bracket depth)
            mark = lang.marks.get((i, sig))
            if mark is None:
                return self._exact_fallback()
            st = self.parser.scan_many(toks) if toks else self.parser
            if st is None:
                return False
            st = st.scan(mark)
            return st is not None and st.is_complete()
        return self._exact_fallback()

    def _at_boundary(self, head: str, right: str, i: int) -> tuple[list[str], Layout] | None:
        """Lex `head` (= pending + R[:i]) if `i` is a lexeme boundary of pending + R."""
        tok = self.lang.tokenizer
        try:
            lexed = tok.lex(head, 0, len(head), self.layout, final=False)
        except LexError:
            return None
        tail_start = lexed.tail
        if tail_start == len(head):
            return lexed.tokens, lexed.layout
        tail = head[tail_start:]
        nxt = right[i:i + 1]
        if tail[0] == "#":
            if nxt in ("", "\n", "\r"):
                return lexed.tokens, lexed.layout
            return None
        if tail[0] == "\\":
            return None
        probe = head + nxt
        if nxt and tok.table.is_prefix(probe, tail_start, len(probe)):
            return None  # the lexeme runs on into R[i:]
        try:
            rest = tok.lex(head, tail_start, len(head), lexed.layout, final=True, eof=False)
        except LexError:
            return None
        return lexed.tokens + rest.tokens, rest.layout

    def _prefix_complete(self) -> bool:
        text = self.pending + self.lang.right_window
        try:
            lexed = self.lang.tokenizer.lex(text, 0, len(text), self.layout, final=False)
        except LexError:
            return False
        st = self.parser.scan_many(lexed.tokens)
        if st is None:
            return False
        tail = text[lexed.tail:]
        return not tail or self._tail_viable(st, lexed.layout, tail)

    def _exact_fallback(self) -> bool:
        lang = self.lang
        return _parses(lang.left_window + self.text + lang.right_window)

    def __repr__(self) -> str:
        return f"FimState(text={self.text!r}, pending={self.pending!r})"


def _parses(text: str) -> bool:
    return not text.strip() or parses(text)


#: The text outside the windows stays the same while the user edits near the cursor, but each
#: new right context builds a new language; on a large file the parse is the costly part
#: (~0.4 s per MB), so the answers are remembered by content.
_outside_parses = functools.lru_cache(maxsize=8)(_parses)


def _indent_width(stack: tuple[tuple[int, int], ...]) -> int:
    steps = Counter(b[0] - a[0] for a, b in zip(stack, stack[1:], strict=False))
    return steps.most_common(1)[0][0] if steps else 4


def _strict(stack: tuple[tuple[int, int], ...], right: str, width: int) -> bool:
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


def _block_floor(layout: Layout) -> int:
    """How many indentation levels the middle may not dedent out of (scope "block")."""
    if not layout.bol:
        return len(layout.stack)
    return max(1, sum(1 for level in layout.stack if level[0] <= layout.col))
