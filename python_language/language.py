"""The Python fill-in-the-middle language: which middles fit between a left and right context.

    lang = FimLanguage.for_python(left, right, scope="statement")
    state = lang.initial()          # after the left context
    state = state.feed("abc")       # None when no completion can follow
    state.is_complete()             # left + fed text + right is a valid Python file

`FimLanguage` implements `quotient.Constraint`; its states (`python_language.state.FimState`)
implement `quotient.ConstraintState`. Building one takes named steps (paper sections IV-VI;
docs/DESIGN.md has the whole argument):

1. **Left window** (`python_language.left_window`): the left context is parsed from its last
   clean top-level boundary, or inside a large block from the last statement of its body.
2. **Right cuts** (`python_language.right_window.right_cuts`): where R may be cut, nearest
   first, and whether the middle must then stay inside its block's body.
3. **Middle rules** (`python_language.scopes`): the scope's checks and the file's indent width.
4. **Exact end** (`python_language.right_window.exact_window`): for the nearest clean cut, R's
   branches (every start index and plausible layout) and one reversed parse giving a quotient
   start per branch; the first cut whose quotient can follow the left window wins.
5. **Fallbacks**, never an exception for any text (`lang.mode`, `lang.reason` says why):
   "exact" — the windowed quotient is exact and the text outside the windows parses;
   "window" — as exact, but the text outside the windows is broken (the user is mid-edit
   elsewhere) and is ignored; "prefix" — no right-context branch could be built (R itself is
   broken near the cursor): left + middle + R's window must only be a valid prefix; "none" —
   the left context itself cannot be lexed or parsed: no constraint.
"""

from __future__ import annotations

from lexer.layout import Layout
from lexer.tokenizer import Tokenizer
from quotient import LanguageMode, Scope

from .fallback import outside_parses
from .grammar import python_tokenizer
from .left_window import LeftWindow, WindowTooLarge, find_left_window
from .outside import PENDING_REASON, outside_state
from .right_window import (
    MAX_RIGHT_CHARS,
    ExactWindow,
    RightCuts,
    clean_cut,
    exact_window,
    right_cuts,
)
from .scopes import MiddleRules, block_floor, indent_width, is_strict
from .state import ExactEnd, FimState, NoConstraint, PrefixEnd, Shared

_HOLD_REASON = ("the enclosing block is too large to take whole: middles are held inside its "
                "body")


class FimLanguage:
    """The set of middles that complete a (left, right) pair; see the module docstring.

    Build it with `FimLanguage.for_python`; every field is final once built.
    """

    def __init__(self, *, left: str, right: str, scope: Scope, rules: MiddleRules,
                 base_mode: LanguageMode, reason: str, left_start: int, left_window: str,
                 right_window: str, outside_right: int, initial: FimState,
                 skipped: str = "", body_column: int | None = None) -> None:
        self.left = left
        self.right = right
        self.scope = scope
        self.rules = rules
        self.reason = reason  # why the mode is not "exact" ("" when nothing to say), for logs
        self.left_start = left_start  # where the left window begins in `left`
        self.left_window = left_window  # as parsed, with a synthetic header if cut inside
        self.right_window = right_window
        self._base_mode = base_mode  # EXACT, PREFIX or NONE; WINDOW is decided lazily
        self._outside_right = outside_right  # where the text outside R's window begins
        self._initial = initial
        self._skipped = skipped  # the block's start an inner cut left out (see LeftWindow)
        self._body_column = body_column
        self._checked_mode: LanguageMode | None = None  # memo of `mode` for the exact case

    @classmethod
    def for_python(cls, left: str, right: str, *, scope: Scope | str = Scope.FREE,
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
            left = left[1:]  # CPython ignores a byte-order mark at the start of a file
        try:
            return _build(python_tokenizer(), left, right, scope, windowing)
        except RecursionError:
            return _unconstrained(left, right, scope, "the text nests too deeply to analyse")

    # -- quotient.Constraint ------------------------------------------------------------------

    def initial(self) -> FimState:
        """The state after the left context."""
        return self._initial

    @property
    def mode(self) -> LanguageMode:
        """How exact the language is (see the module docstring)."""
        if self._base_mode is not LanguageMode.EXACT:
            return self._base_mode
        if self._checked_mode is None:
            # A large outside text is judged in the background (``outside``): until it is,
            # the mode is exact within the windows, and the reason says that the text far
            # from the cursor is unconfirmed.
            answers = [outside_state(self.left[: self.left_start]),
                       outside_state(self.right[self._outside_right:])]
            if self._skipped:
                # An inner cut assumes the block's header and the body statements it left out
                # are complete: they must parse as a block of their own.
                answers.append(outside_parses(self._skipped + " " * (self._body_column or 1)
                                              + "pass\n"))
            if False in answers:
                self._checked_mode = LanguageMode.WINDOW
            elif None in answers:
                self.reason = self.reason or PENDING_REASON
                return LanguageMode.EXACT  # asked again, the answer may be known
            else:
                self._checked_mode = LanguageMode.EXACT
            if self.reason == PENDING_REASON:
                self.reason = ""
        return self._checked_mode

    def check_region(self) -> tuple[int, int] | None:
        """Where a middle's validity is decided (see `quotient.Constraint`): from the left
        window's top-level boundary to the first top-level boundary after the right window.

        Exact only in mode EXACT: both cuts then lie at clean top-level statement boundaries
        whose outside parts parse on their own (checked once per text, cached), and a Python
        module parses exactly when the statements on each side of such a boundary do (the
        parser keeps no state across a top-level NEWLINE at column 0; `ast.parse` checks
        nothing across statements, e.g. not where `from __future__` stands).
        """
        if self.mode is not LanguageMode.EXACT:
            return None
        return self.left_start, self._outside_right

    @property
    def indent_width(self) -> int | None:
        """The width new blocks must indent by (strict files only), else None."""
        return self.rules.indent_width


def _build(tok: Tokenizer, left: str, right: str, scope: Scope, windowing: bool
           ) -> FimLanguage:
    try:
        lw = find_left_window(tok, left, windowing)
    except WindowTooLarge as err:
        return _unconstrained(left, right, scope, str(err))
    if lw is None:
        return _unconstrained(left, right, scope,
                              "the left context is not a valid prefix of Python")
    cuts = right_cuts(right, lw.body_column, scope, windowing)
    rules = _middle_rules(tok, scope, lw.layout, right, cuts.hold_body)
    reason = _HOLD_REASON if cuts.hold_body else ""
    found = _exact_window(tok, right, cuts, lw, rules)
    if found is not None:
        window, initial = found
        outside_right = min((r for r in cuts.top_level if r >= window.end), default=len(right))
        return FimLanguage(
            left=left, right=right, scope=scope, rules=rules, base_mode=LanguageMode.EXACT,
            reason=reason, left_start=lw.start, left_window=lw.text, right_window=window.text,
            outside_right=outside_right, initial=initial, skipped=lw.skipped,
            body_column=lw.body_column,
        )
    # No branch fits: only ask that left + middle + R's window stays a valid prefix.
    right_window = right[: cuts.ends[0]]
    if len(right_window) > MAX_RIGHT_CHARS:
        return _unconstrained(left, right, scope,
                              f"the right window is longer than {MAX_RIGHT_CHARS} characters")
    shared = Shared(tok, rules, PrefixEnd(right_window))
    return FimLanguage(
        left=left, right=right, scope=scope, rules=rules, base_mode=LanguageMode.PREFIX,
        reason="no completion of the left context can end in the right context's window",
        left_start=lw.start, left_window=lw.text, right_window=right_window,
        outside_right=len(right), initial=FimState(shared, lw.state, lw.layout, lw.pending, ""),
    )


def _middle_rules(tok: Tokenizer, scope: Scope, layout: Layout, right: str, hold_body: bool
                  ) -> MiddleRules:
    width = indent_width(layout.stack)
    return MiddleRules(
        scope, tok.layout_terminals, block_floor=block_floor(layout),
        hold_floor=2 if hold_body else 0,
        indent_width=width if is_strict(layout.stack, right, width) else None,
    )


def _exact_window(tok: Tokenizer, right: str, cuts: RightCuts, lw: LeftWindow,
                  rules: MiddleRules) -> tuple[ExactWindow, FimState] | None:
    """The first right cut whose exact quotient can follow the left window, and the initial
    state on it; a window that presumes the cursor is in a string only if no other fits."""
    layout = lw.layout
    width = indent_width(layout.stack)
    fallback = None
    for end in dict.fromkeys(cuts.ends):
        later = [r for r in cuts.top_level if r > end]
        next_end = later[0] if later and end in cuts.top_level else None
        if min(end, len(right)) > MAX_RIGHT_CHARS or not clean_cut(tok, right, end, next_end):
            continue
        window = exact_window(tok, right, end, layout.stack, width, lw.lexed.terminals)
        if window is None:
            continue
        end_rule = ExactEnd(lw.text, window.text, window.context, window.marks, window.starts)
        initial = FimState(Shared(tok, rules, end_rule), window.state, layout, lw.pending, "")
        if lw.pending and not initial.tail_viable(window.state, layout, lw.pending):
            continue
        if not window.presumes_string(right):
            return window, initial
        fallback = fallback or (window, initial)
    return fallback


def _unconstrained(left: str, right: str, scope: Scope, reason: str) -> FimLanguage:
    tok = python_tokenizer()
    shared = Shared(tok, MiddleRules(scope, tok.layout_terminals), NoConstraint(left, right))
    return FimLanguage(
        left=left, right=right, scope=scope, rules=shared.rules, base_mode=LanguageMode.NONE,
        reason=reason, left_start=0, left_window=left, right_window=right,
        outside_right=len(right), initial=FimState(shared, None, Layout(), "", ""),
    )
