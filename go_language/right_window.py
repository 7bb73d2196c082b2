"""The right window's branches and their quotient: the exact end of a Go FIM language.

R's tokens depend on the unknown middle in two ways (paper V-B, VI):

* *where R's first lexeme starts*: the middle's last lexeme may run into R (a half-typed name
  or number, an open string, rune, raw string or comment, an operator that grows: ``<`` + ``-``).
  `start_indices` lists every index where such a lexeme could end (a superset: an index that
  is never a lexeme boundary only costs a branch);
* *the layout bit there*: whether the token before it lets a newline insert a semicolon.  Go's
  whole layout state is that bit, so each start index has two branches.

Each branch ``(i, ins)`` is the token stream of ``R[i:]`` lexed from ``ins`` to the end (the
window ends after a newline at a declaration line, or at the file's end, so lexing it as the
end of a file gives its true tokens).  All branches, reversed, form one trie (their tails
coincide after a few lexemes and are parsed once); one reversed Earley parse gives a quotient
start per branch, and the language's grammar is ``START -> Q_b MARK_b``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from quotient import Nfa, RecognizerState, recognizer, right_quotient_split

from .grammar import MARKER_PREFIX, MARKERS, go_grammar, terminal_of
from .lexer import SEMI, LexError, kind_after, lex, nesting, scan

_START = "$fim"
#: Longer right windows are not quotiented.
MAX_RIGHT_CHARS = 60_000
#: A name or number that R starts with is followed this far for start indices.
_MAX_WORD = 64
_WORD = re.compile(r"(?:[\w.]|(?<=[eEpP])[+-])*")

BranchKey = tuple[int, bool]  # (start index in R's window, semicolon-insertion bit there)


def start_indices(window: str) -> list[int]:
    """Every index of `window` where a lexeme begun in the middle could end, in order."""
    out = {0, 1, 2}  # operators grow by at most two characters (``&`` + ``^=``)
    word = _WORD.match(window, 0, _MAX_WORD)
    out.update(range(word.end() + 1) if word else ())
    line_end = window.find("\n")
    first_line = window if line_end < 0 else window[:line_end]
    for quote in ('"', "'"):  # an interpreted string or a rune the middle opened
        k = first_line.find(quote)
        for _ in range(4):
            if k < 0:
                break
            out.add(k + 1)
            k = first_line.find(quote, k + 1)
    out.add(len(window) if line_end < 0 else line_end)  # a line comment
    for token in ("`", "*/"):  # a raw string; a general comment
        k = window.find(token)
        if k >= 0:
            out.add(k + len(token))
            k2 = window.find(token, k + len(token))
            if k2 >= 0 and token == "*/":
                out.add(k2 + 2)
    return sorted(i for i in out if i <= len(window))


@dataclass(frozen=True, eq=False)
class ExactWindow:
    """A right window with an exact quotient, and the recognizer after the left window."""

    end: int  # where R is cut
    text: str  # R[:end], or R[:end] + "}\n" for a cut inside a function body
    marks: dict[BranchKey, str]  # branch -> its marker terminal
    starts: tuple[int, ...]  # start indices that have a branch, in order
    state: RecognizerState  # the quotient's recognizer after the left window's tokens


def exact_window(window: str, end: int, left_terminals: list[str], max_depth: int = 10**9
                 ) -> ExactWindow | None:
    """The exact quotient for the right window `window` (R cut at `end`, perhaps with a
    synthetic closing brace), or None when no branch of it can follow the left window's
    terminals, or its brackets nest deeper than `max_depth`."""
    if _closing_depth(window) > max_depth:
        return None
    nfa, finals = _branch_trie(window)
    if not finals:
        return None
    quotient, starts = right_quotient_split(go_grammar(), nfa)
    rules = []
    marks: dict[BranchKey, str] = {}
    for k, (node, keys) in enumerate(finals.items()):
        nt = starts.get(node)
        if nt is None or k >= MARKERS:
            continue
        mark = f"{MARKER_PREFIX}{k}"
        rules.append((_START, (nt, mark)))
        for key in keys:
            marks[key] = mark
    if not rules:
        return None
    state = recognizer(quotient.with_rules(rules, start=_START)).scan_many(left_terminals)
    if state is None:
        return None
    return ExactWindow(end, window, marks, tuple(sorted({i for i, _ in marks})), state)


def _closing_depth(window: str) -> int:
    """How deep R's window nests its brackets (read as code from its start; 0 if it does not
    lex so)."""
    try:
        return nesting(lex(window, final=True).kinds)
    except LexError:
        return 0


def _branch_trie(window: str) -> tuple[Nfa, dict[int, list[BranchKey]]]:
    """The reversed token streams of every branch as one trie, and the branches ending at each
    of its nodes (a node per distinct stream)."""
    table = terminal_of()
    nfa = Nfa(1, 0, [])
    trie: dict[tuple[int, str], int] = {}

    def child(node: int, sym: str) -> int:
        nxt = trie.get((node, sym))
        if nxt is None:
            nxt = trie[(node, sym)] = nfa.add_state()
            nfa.add_edge(node, sym, nxt)
        return nxt

    n = len(window)
    node_of: dict[BranchKey, int | None] = {(n, False): 0, (n, True): child(0, table[SEMI])}
    for i in start_indices(window):
        for ins in (False, True):
            _walk(window, (i, ins), node_of, child, table)
    finals: dict[int, list[BranchKey]] = {}
    for i in start_indices(window):
        for ins in (False, True):
            node = node_of.get((i, ins))
            if node is not None:
                finals.setdefault(node, []).append((i, ins))
    for node in finals:
        nfa.finals.add(node)
    return nfa, finals


def _walk(window: str, key: BranchKey, node_of: dict[BranchKey, int | None], child,
          table: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    """Lex forward from `key` until a known position, then give each position passed its
    trie node (None for all of them when the text does not lex from `key`)."""
    path: list[tuple[BranchKey, list[str]]] = []
    pos, ins = key
    while (pos, ins) not in node_of:
        try:
            lx = scan(window, pos, True)
        except LexError:
            lx = None
        if lx is None:
            node = None
            break
        kinds, nins = kind_after(lx.kind, lx.newline, ins)
        path.append(((pos, ins), kinds))
        pos, ins = lx.end, nins
    else:
        node = node_of[(pos, ins)]
    for at, kinds in reversed(path):
        if node is not None:
            for kind in reversed(kinds):
                node = child(node, table[kind])
        node_of[at] = node
