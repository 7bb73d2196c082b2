"""The right window and its quotient: the exact end of a FIM language (paper IV-B, V-B, VI).

Where R is cut (`right_cuts`): at its next clean top-level boundaries (nearest first), at its
end, and at a decorator line as a last resort; when the left window was cut inside a block, first
at the end of that block's body or, for the scopes that keep the middle inside its block, at the
body's next statement.

For one cut, `exact_end` lexes the window for every start index and plausible layout
(`lexer.right_context`), reverses all branches into one trie-shaped automaton (shared tails of R
are parsed once) whose start carries a ``DEDENT*`` loop for the file's closing dedents, and
takes one reversed Earley parse for a quotient start nonterminal per branch
(`quotient.right_quotient_split`). The language's grammar is ``START -> S_b MARK_b`` over all
branches, so one forward parse of the left context serves every branch, and the marker tells
`is_complete` which branch's layout guess is the real one.
"""

from __future__ import annotations

from dataclasses import dataclass

from lexer.layout import Level
from lexer.right_context import Branch, RightContext, Signature
from lexer.tokenizer import LexError, Tokenizer, Until
from quotient import Nfa, RecognizerState, Scope, recognizer, right_quotient_split

from .grammar import MARKER_PREFIX, MARKERS, python_grammar
from .windows import right_boundaries, right_inner_end

_START = "$fim"
#: Top-level boundaries tried, nearest first, before R's end.
MAX_RIGHT_CANDIDATES = 3
#: Longer right windows are not quotiented (mode "none" if no shorter one works).
MAX_RIGHT_CHARS = 60_000
#: Free scope takes the right context to the end of the enclosing block, up to this many
#: characters; beyond it the middle is held inside the block's body instead.
MAX_WIDE_RIGHT = 20_000


@dataclass(frozen=True)
class RightCuts:
    """Where R may be cut, nearest first, and what the cuts imply for the middle."""

    ends: list[int]  # candidate window ends, in the order they are tried
    top_level: list[int]  # the top-level boundaries among them (and R's end)
    hold_body: bool  # the middle must stay inside the block body (a sibling cut was forced)


def right_cuts(right: str, body_column: int | None, scope: Scope, windowing: bool
               ) -> RightCuts:
    """The window ends to try for `right` (see the module docstring)."""
    if not windowing:
        return RightCuts([len(right)], [len(right)], False)
    ambiguous: list[int] = []
    top = right_boundaries(right, ambiguous=ambiguous)[:MAX_RIGHT_CANDIDATES] + [len(right)] \
        + ambiguous[:1]
    if body_column is None:
        return RightCuts(list(top), top, False)
    siblings = scope is not Scope.FREE
    hold = False
    if not siblings and right_inner_end(right, body_column, False) > MAX_WIDE_RIGHT:
        # The rest of the block is too large to take whole. Cutting at the next statement of
        # the body is exact for middles that stay in the body, so the middle is held there
        # (as scope "block" would): a sound subset.
        siblings = hold = True
    return RightCuts([right_inner_end(right, body_column, siblings)] + top, top, hold)


def clean_cut(tokenizer: Tokenizer, right: str, end: int, next_end: int | None) -> bool:
    """Whether cutting R at `end` leaves no string or comment open across the cut.

    Boundaries are found line by line (`python_language.windows`), so a line of a
    triple-quoted string can look like one. Lexing R from its start, bracket depth unbounded,
    shows whether a lexeme is still open at the cut. For a top-level cut, `next_end` is the
    next boundary, and the statement between the two must also lex with nothing left open: R
    may begin inside a string the middle opens and then read as code up to the cut; the
    statement after a true boundary lexes with nothing left open, one that starts inside a
    string does not (the string's closing quote opens one). Both checks only reject cuts, and
    a rejected cut costs a larger window, not correctness.
    """
    if end >= len(right):
        return True
    if not _lexes_closed(tokenizer, right[:end]):
        return False
    return next_end is None or _lexes_closed(tokenizer, right[end:next_end])


def _lexes_closed(tokenizer: Tokenizer, text: str) -> bool:
    """No string or other lexeme is still open at the end of `text` (read as code)."""
    try:
        lexed = tokenizer.lex_symbolic(text, depth=10**6, bol=False, until=Until.CERTAIN)
    except LexError:
        return True  # not readable as code from here: no evidence against the cut
    tail = text[lexed.tail:]
    return not tail.strip() or tail.lstrip().startswith("#")


@dataclass(frozen=True, eq=False)
class ExactWindow:
    """A right window with an exact quotient, and the recognizer after the left window."""

    end: int  # where R is cut
    text: str  # R[:end]
    context: RightContext
    branches: list[Branch]
    marks: dict[tuple[int, Signature], str]  # (start index, signature) -> marker terminal
    state: RecognizerState  # the quotient's recognizer after the left window's terminals

    @property
    def starts(self) -> tuple[int, ...]:
        return tuple(sorted({b.start for b in self.branches}))

    def presumes_string(self, right: str) -> bool:
        """Whether every branch starts past R's first line (or has nothing after it).

        Such a window presumes the middle opens a string R closes far away (or swallows all
        of R): true when the cursor is in a string, but also what a window cut inside a
        string looks like, so a window without that presumption is preferred.
        """
        first_line = right.find("\n")
        first_line = len(right) if first_line < 0 else first_line
        return not any(b.start <= first_line + 1 and self.text[b.start:].strip()
                       for b in self.branches)


def exact_window(tokenizer: Tokenizer, right: str, end: int, stack: tuple[Level, ...],
                 width: int, left_terminals: list[str]) -> ExactWindow | None:
    """The exact quotient for the window ``right[:end]``, or None when no branch of it can
    follow the left window (`left_terminals`, ending with the indentation `stack`)."""
    window = right[:end]
    rc = RightContext(tokenizer, window)
    branches = rc.branches(stack, width)[:MARKERS]
    if not branches:
        return None
    built = _branch_parser(tokenizer, branches)
    if built is None:
        return None
    parser, marks = built
    state = parser.scan_many(left_terminals)
    if state is None:
        return None
    return ExactWindow(end, window, rc, branches, marks, state)


def _branch_parser(tokenizer: Tokenizer, branches: list[Branch]
                   ) -> tuple[RecognizerState, dict[tuple[int, Signature], str]] | None:
    """The recognizer of ``START -> S_b MARK_b`` over every branch ``b`` that has a non-empty
    quotient, and each branch's marker; None when no branch has one."""
    nfa = Nfa(1, 0, [])
    # The file's closing DEDENTs: the grammar fixes how many.
    nfa.add_edge(0, tokenizer.layout_terminals.dedent, 0)
    trie: dict[tuple[int, str], int] = {}
    finals: dict[int, list[tuple[int, Signature]]] = {}
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
    quotient, starts = right_quotient_split(python_grammar(), nfa)
    rules = []
    marks: dict[tuple[int, Signature], str] = {}
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
    return recognizer(quotient.with_rules(rules, start=_START)), marks
