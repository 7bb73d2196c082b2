"""The Go fill-in-the-middle language: which middles fit between a left and right context.

    lang = FimLanguage.for_go(left, right, scope="statement")
    state = lang.initial()          # after the left context
    state = state.feed("abc")       # None when no completion can follow
    state.is_complete()             # left + fed text + right is a valid Go file

`FimLanguage` implements `quotient.Constraint`; its states (`go_language.state.GoState`)
implement `quotient.ConstraintState`.  Building one takes the steps Python's does
(docs/DESIGN.md, "What a language needs to join"):

1. **Left window** (`go_language.windows.find_left_window`): the left context from its last
   top-level declaration line, under a synthetic ``package _`` clause.
2. **Right cuts** (`go_language.windows.right_cuts`): R's next top-level declaration lines,
   nearest first, then R's end.
3. **Exact end** (`go_language.right_window.exact_window`): for the nearest cut, R's branches
   (every start index and semicolon-insertion bit) and one reversed parse giving a quotient
   start per branch; the first cut whose quotient can follow the left window wins.
4. **Fallbacks**, never an exception for any text (`lang.mode`, `lang.reason` says why):
   "exact" — the windowed quotient is exact and the text outside the windows parses;
   "window" — as exact, but the text outside the windows does not parse on its own;
   "prefix" — no branch of R's window can follow the left window: left + middle + R's window
   must only be a valid prefix; "none" — the left context itself cannot be lexed or parsed,
   or a budget is exceeded: no constraint while feeding, Seam's Go parser at the end.
"""

from __future__ import annotations

from quotient import LanguageMode, Scope

from .grammar import go_recognizer, terminals
from .inner import Frame, frame_at, prefix_parses, rest_parses, right_cut
from .lexer import nesting
from .right_window import MAX_RIGHT_CHARS, exact_window
from .state import ExactEnd, GoState, MiddleRules, NoConstraint, PrefixEnd, Shared
from .windows import LeftWindow, find_left_window, outside_parses, right_cuts

#: Left windows with more tokens than this are not parsed (mode "none").
MAX_LEFT_TOKENS = 12_000
#: Brackets nested deeper than this (in the left window, or closed in R's) are not parsed:
#: the quotient's items grow with the depth (mode "none" or "prefix").
MAX_DEPTH = 200
#: In scope "free", R's window is cut inside the cursor's declaration only beyond this many
#: characters (the middle is then held inside the declaration: see `_HOLD_REASON`).
MAX_WIDE_RIGHT = 20_000
_HOLD_REASON = ("the declaration after the cursor is too large to take whole: middles are held "
                "inside it")


class FimLanguage:
    """The set of middles that complete a (left, right) pair of a Go file; see the module
    docstring.  Build it with `FimLanguage.for_go`."""

    def __init__(self, *, left: str, right: str, scope: Scope, base_mode: LanguageMode,
                 reason: str, left_start: int, right_end: int, initial: GoState,
                 left_top: int | None = None, right_inner: int | None = None,
                 frame: Frame | None = None, left_frame: Frame | None = None) -> None:
        self.left = left
        self.right = right
        self.scope = scope
        self.reason = reason  # why the mode is not "exact" ("" when nothing to say), for logs
        self.left_start = left_start  # where the left window begins in `left`
        self.right_end = right_end  # where the right window ends in `right` (top level)
        # Cuts inside a function body (see go_language.windows): where the left window's
        # top-level declaration starts, and where R's window was cut inside the body.
        self.left_top = left_start if left_top is None else left_top
        self.right_inner = right_inner
        self._frame = frame  # the declaration R's window was cut inside, if any
        self._left_frame = left_frame  # the one the left window was cut inside, if any
        self._base_mode = base_mode  # EXACT, PREFIX or NONE; WINDOW is decided lazily
        self._initial = initial
        self._checked_mode: LanguageMode | None = None

    @classmethod
    def for_go(cls, left: str, right: str, scope: Scope | str = Scope.FREE, *,
               windowing: bool = True) -> FimLanguage:
        """The language of middles between `left` and `right`; never raises for any text.

        `windowing=False` parses both contexts whole (slower, for comparisons).
        """
        try:
            scope = Scope(scope)
        except ValueError:
            names = ", ".join(s.value for s in Scope)
            raise ValueError(f"scope must be one of {names}, not {scope!r}") from None
        if left.startswith("\ufeff"):
            left = left[1:]  # a byte-order mark may start a Go file
        try:
            return _build(left, right, scope, windowing)
        except (RecursionError, OverflowError):
            return _unconstrained(left, right, scope, "the text nests too deeply to analyse")

    # -- quotient.Constraint ------------------------------------------------------------------

    def initial(self) -> GoState:
        """The state after the left context."""
        return self._initial

    @property
    def mode(self) -> LanguageMode:
        """How exact the language is (see the module docstring)."""
        if self._base_mode is not LanguageMode.EXACT:
            return self._base_mode
        if self._checked_mode is None:
            ok = self._outside_parses()
            self._checked_mode = LanguageMode.EXACT if ok else LanguageMode.WINDOW
            if not ok:
                self.reason = self.reason or ("the text outside the windows does not parse "
                                              "on its own")
        return self._checked_mode

    def _outside_parses(self) -> bool:
        left, right, top, end = self.left, self.right, self.left_top, self.right_end
        if top and not outside_parses(left[:top], False):
            return False
        frame, left_frame = self._frame, self._left_frame
        if self.left_start != top and (left_frame is None or not prefix_parses(
                left_frame, left[top:self.left_start])):
            return False
        if self.right_inner is not None and (frame is None or not rest_parses(
                frame, right[self.right_inner:end])):
            return False
        return end >= len(right) or outside_parses(right[end:], True)

    def check_region(self) -> tuple[int, int] | None:
        """Offsets ``(0, b)``: in mode exact, ``left + middle + right`` is a valid file exactly
        when ``left + middle + right[:b]`` is (the right cut is a top-level declaration line
        whose rest parses on its own).  The left text is kept whole: a Go file needs its
        package clause.  None in the other modes."""
        if self.mode is not LanguageMode.EXACT:
            return None
        return 0, self.right_end


def _build(left: str, right: str, scope: Scope, windowing: bool) -> FimLanguage:
    lw = find_left_window(left, windowing)
    if lw is None:
        return _unconstrained(left, right, scope, "the left context does not lex as Go")
    if len(lw.kinds) > MAX_LEFT_TOKENS:
        return _unconstrained(left, right, scope,
                              f"the left window has more than {MAX_LEFT_TOKENS} tokens")
    if nesting(lw.kinds) > MAX_DEPTH:
        return _unconstrained(left, right, scope, "the text nests too deeply to analyse")
    rules = MiddleRules(scope)
    left_terminals = terminals(lw.kinds)
    frame = frame_at(left, lw.top) if windowing else None
    for end in right_cuts(right, windowing):
        # A cut inside the declaration is exact, but refuses middles that close it and open
        # another (R's lines then belong elsewhere): fine for the scopes that keep the middle
        # in its block, and in scope "free" only for a very long declaration.
        wide = scope is Scope.FREE and end <= MAX_WIDE_RIGHT
        inner = right_cut(right, end, frame) if frame is not None and not wide else None
        if (end if inner is None else inner) > MAX_RIGHT_CHARS:
            continue
        text = right[:end] if inner is None or frame is None else right[:inner] + frame.closer
        try:
            window = exact_window(text, end, left_terminals, MAX_DEPTH)
        except OverflowError:  # R's window nests too deeply for the engine's item keys
            window = None
        if window is None:
            continue
        initial = GoState(Shared(rules, ExactEnd(lw.text, window)), window.state, lw.ins,
                          "", "")
        if lw.pending:
            initial = _with_pending(initial, lw)
            if initial is None:
                continue
        held = inner is not None and scope is Scope.FREE
        return FimLanguage(left=left, right=right, scope=scope, base_mode=LanguageMode.EXACT,
                           reason=_HOLD_REASON if held else "", left_start=lw.start,
                           right_end=end, initial=initial,
                           left_top=lw.top, right_inner=inner, frame=frame,
                           left_frame=lw.frame)
    return _prefix_language(left, right, scope, lw, rules, left_terminals)


def _with_pending(state: GoState, lw: LeftWindow) -> GoState | None:
    """`state` with the left window's pending lexeme (None when no token can grow from it)."""
    assert state.parser is not None
    if not state.tail_viable(state.parser, lw.ins, lw.pending):
        return None
    return GoState(state.shared, state.parser, lw.ins, lw.pending, "")


def _prefix_language(left: str, right: str, scope: Scope, lw: LeftWindow, rules: MiddleRules,
                     left_terminals: list[str]) -> FimLanguage:
    parser = go_recognizer().scan_many(left_terminals)
    if parser is None:
        return _unconstrained(left, right, scope,
                              "the left context is not a valid prefix of a Go file")
    cut = right_cuts(right, True)[0]
    if cut > MAX_RIGHT_CHARS:
        return _unconstrained(left, right, scope,
                              f"the right window is longer than {MAX_RIGHT_CHARS} characters")
    shared = Shared(rules, PrefixEnd(right[:cut]))
    initial = GoState(shared, parser, lw.ins, lw.pending, "")
    return FimLanguage(
        left=left, right=right, scope=scope, base_mode=LanguageMode.PREFIX,
        reason="no completion of the left context can end in the right context's window",
        left_start=lw.start, right_end=cut, initial=initial)


def _unconstrained(left: str, right: str, scope: Scope, reason: str) -> FimLanguage:
    shared = Shared(MiddleRules(scope), NoConstraint(left, right))
    return FimLanguage(left=left, right=right, scope=scope, base_mode=LanguageMode.NONE,
                       reason=reason, left_start=0, right_end=len(right),
                       initial=GoState(shared, None, False, "", ""))
