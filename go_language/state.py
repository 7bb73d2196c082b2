"""A state of the Go FIM language: the left context plus the middle fed so far.

`feed` lexes the new text incrementally (certain lexemes only; the pending lexeme waits) and
scans the certain tokens with the language's recognizer.  It returns None when they cannot
continue, when they break the scope's rules (`MiddleRules`), or when the pending lexeme cannot
become any token the recognizer could scan next.

`is_complete` decides whether left + middle + right is a valid file.  In the exact case: for the
start indices ``i`` of R in order, the first that is a true lexeme boundary of ``pending + R``
gives the tokens up to it and the semicolon-insertion bit there; the branch precomputed for
exactly ``(i, bit)`` holds the tokens of ``R[i:]``, so the recognizer scans the boundary's
tokens and that branch's marker and says whether the stream is complete.  Where no branch was
precomputed (R does not lex from there), Seam's whole-window parse answers (`grammar.parses`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from quotient import RecognizerState, Scope
from quotient.constraint import MemoFeed

from .grammar import parses, terminal_of, terminals
from .lexer import KEYWORDS, OPERATORS, SEMI, LexError, kind_after, lex, scan
from .right_window import ExactWindow


@dataclass(frozen=True)
class MiddleRules:
    """How far a middle may reach (`quotient.Scope`), in Go's terms.

    ``line``: no line break; ``statement``: no ``;`` (explicit or inserted) and no ``}``
    closing a block the middle did not open; ``block``: statements may be added, but no ``}``
    may close the cursor's block; ``free``: anything.
    """

    scope: Scope

    def admits(self, depth: int, kinds: list[str]) -> int | None:
        """The brace depth after `kinds`, or None when they break the scope."""
        scope = self.scope
        if scope is Scope.FREE:
            return depth
        for kind in kinds:
            if kind == "{":
                depth += 1
            elif kind == "}":
                depth -= 1
                if depth < 0:
                    return None
            elif kind == SEMI and scope is not Scope.BLOCK and depth == 0:
                return None
        return depth


@dataclass(frozen=True)
class NoConstraint:
    """Mode "none": nothing is checked while feeding; Seam's parser judges the whole file."""

    left: str
    right: str


@dataclass(frozen=True)
class PrefixEnd:
    """Mode "prefix": left + middle + the right window need only be a valid prefix."""

    right_window: str


@dataclass(frozen=True, eq=False)
class ExactEnd:
    """The exact end: the right window's branches, each behind its marker."""

    left_window: str
    window: ExactWindow


End = NoConstraint | PrefixEnd | ExactEnd


@dataclass(frozen=True, eq=False)
class Shared:
    """What every state of one language shares."""

    rules: MiddleRules
    end: End
    prefix_cache: dict[str, frozenset[str]] = field(default_factory=dict, compare=False)

    def prefix_terminals(self, tail: str) -> frozenset[str]:
        """Terminals a lexeme that starts with `tail` may become (comments excluded)."""
        got = self.prefix_cache.get(tail)
        if got is None:
            table = terminal_of()
            got = frozenset(table[k] for k in _prefix_kinds(tail))
            if len(self.prefix_cache) < 4096:
                self.prefix_cache[tail] = got
        return got


def _prefix_kinds(tail: str) -> set[str]:
    c = tail[0]
    if c == "_" or c.isalpha():
        return {"IDENT"} | {k for k in KEYWORDS if k.startswith(tail)}
    if c.isdigit() or (c == "." and len(tail) > 1 and tail[1].isdigit()):
        if tail.endswith("i"):
            return {"IMAG"}
        low = tail.lower()
        hexa = low.startswith("0x")
        if "." in tail or "p" in low or (not hexa and "e" in low):
            return {"FLOAT", "IMAG"}
        return {"INT", "FLOAT", "IMAG"}
    if c in "\"`":
        return {"STRING", "PATH"}
    if c == "'":
        return {"RUNE"}
    out = {op for op in OPERATORS if op.startswith(tail)}
    if tail == ".":
        out |= {"FLOAT", "IMAG"}
    return out


class GoState(MemoFeed):
    """A persistent state: `feed` never changes it."""

    __slots__ = ("shared", "parser", "ins", "pending", "text", "depth", "_memo", "_complete")

    def __init__(self, shared: Shared, parser: RecognizerState | None, ins: bool,
                 pending: str, text: str, depth: int = 0) -> None:
        self.shared = shared
        self.parser = parser  # None in mode "none"
        self.ins = ins  # the semicolon-insertion bit after the scanned tokens
        self.pending = pending  # the pending lexeme: not yet scanned
        self.text = text  # everything fed since the initial state
        self.depth = depth  # braces the middle opened and has not closed
        self._memo: dict[str, GoState | None] | None = None
        self._complete: bool | None = None

    def _feed(self, text: str) -> GoState | None:
        shared = self.shared
        if isinstance(shared.end, NoConstraint):
            return GoState(shared, None, self.ins, "", self.text + text)
        if shared.rules.scope is Scope.LINE and ("\n" in text or "\r" in text):
            return None
        pending = self.pending + text
        try:
            lexed = lex(pending, 0, self.ins)
        except LexError:
            return None
        depth = shared.rules.admits(self.depth, lexed.kinds)
        if depth is None:
            return None
        parser = self.parser
        assert parser is not None
        if lexed.kinds:
            parser = parser.scan_many(terminals(lexed.kinds))
            if parser is None:
                return None
        tail = pending[lexed.tail:]
        if tail and not self.tail_viable(parser, lexed.ins, tail):
            return None
        return GoState(shared, parser, lexed.ins, tail, self.text + text, depth)

    def tail_viable(self, parser: RecognizerState, ins: bool, tail: str) -> bool:
        """Whether the pending `tail` can still become a token the recognizer accepts (a
        comment: whether the newline that may end it can be taken)."""
        allowed = parser.allowed_terminals()
        if tail.startswith("//") or (tail.startswith("/*") and "\n" in tail):
            return not ins or terminal_of()[SEMI] in allowed
        if tail.startswith("/*") or tail == "/":
            return True  # a general comment on one line is a space
        return not self.shared.prefix_terminals(tail).isdisjoint(allowed)

    # -- the end of the middle ---------------------------------------------------------------

    def is_complete(self) -> bool:
        """True iff left + fed text + right is a valid Go file (within the windows)."""
        if self._complete is None:
            end = self.shared.end
            if isinstance(end, ExactEnd):
                self._complete = self._exact_complete(end)
            elif isinstance(end, PrefixEnd):
                self._complete = self._prefix_complete(end)
            else:
                self._complete = parses(end.left + self.text + end.right)
        return self._complete

    def _exact_complete(self, end: ExactEnd) -> bool:
        window = end.window
        right = window.text
        parser = self.parser
        assert parser is not None
        for i in window.starts:
            boundary = self._at_boundary(right, i)
            if boundary is None:
                continue
            kinds, ins = boundary
            mark = window.marks.get((i, ins))
            if mark is None:
                break
            st = parser.scan_many(terminals(kinds)) if kinds else parser
            if st is None:
                return False
            st = st.scan(mark)
            return st is not None and st.is_complete()
        return parses(end.left_window + self.text + right)

    def _at_boundary(self, right: str, i: int) -> tuple[list[str], bool] | None:
        """The tokens of ``pending + R[:i]`` and the bit after them, if ``i`` is a lexeme
        boundary of ``pending + R``; else None."""
        head = self.pending + right[:i]
        try:
            lexed = lex(head, 0, self.ins)
        except LexError:
            return None
        if lexed.tail == len(head):
            return lexed.kinds, lexed.ins
        # The pending lexeme: where does it really end, with R after it?
        upto = i + 256
        try:
            lx = scan(head + right[i:upto], lexed.tail, upto >= len(right))
            if lx is None:
                lx = scan(head + right[i:], lexed.tail, True)
        except LexError:
            return None
        if lx is None or lx.end != len(head):
            return None
        kinds, ins = kind_after(lx.kind, lx.newline, lexed.ins)
        return lexed.kinds + kinds, ins

    def _prefix_complete(self, end: PrefixEnd) -> bool:
        text = self.pending + end.right_window
        try:
            lexed = lex(text, 0, self.ins)
        except LexError:
            return False
        assert self.parser is not None
        st = self.parser.scan_many(terminals(lexed.kinds))
        if st is None:
            return False
        tail = text[lexed.tail:]
        return not tail or self.tail_viable(st, lexed.ins, tail)

    def __repr__(self) -> str:
        return f"GoState(text={self.text!r}, pending={self.pending!r})"


__all__ = ["End", "ExactEnd", "GoState", "MiddleRules", "NoConstraint",
           "PrefixEnd", "Shared"]
