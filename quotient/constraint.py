"""The contract between a decoder and a constraint language: what `fim` may rely on.

A *constraint* is the set of middles that fit between a left and a right context. The decoder
asks it two questions, token by token, and nothing else:

    lang = <language>.for_...(left, right, scope=Scope.STATEMENT)   # once per request
    state = lang.initial()              # after the left context
    state = state.feed("abc")           # None: no completion can follow this text
    state.is_complete()                 # True: left + fed text + right is a valid file
    lang.mode, lang.reason              # how exact the answer is, and why not exact

States are persistent: `feed` never changes the state it is called on, so a decoder may try
many candidate tokens from one state. The protocol lives in the engine package so that both the
decoder (`fim`) and a language package (e.g. `python_language`) import it without either
depending on the other's internals; a second language is a new package implementing it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol, runtime_checkable


class LanguageMode(StrEnum):
    """How exact a constraint is (weakest last). String-valued: ``mode == "exact"`` works."""

    #: ``is_complete`` is exactly "the whole file parses" and ``feed`` rejects a prefix as soon
    #: as no completion can follow it.
    EXACT = "exact"
    #: as EXACT within windows around the cursor; the text outside them is broken (the user
    #: is mid-edit elsewhere) and ignored, so the whole file may not parse whatever the middle.
    WINDOW = "window"
    #: only "left + middle + the right window is a valid prefix": no exact right context could
    #: be built (the right context itself is broken near the cursor).
    PREFIX = "prefix"
    #: no constraint while feeding (the left context cannot be analysed); ``is_complete``
    #: still answers with the language's own parser.
    NONE = "none"
    #: the file's language has no grammar in Seam: every middle is accepted and complete
    #: anywhere; nothing checks it (``fim.languages``: the editor labels it unchecked).
    UNCHECKED = "unchecked"


class Scope(StrEnum):
    """How far a middle may reach, from a single line to anything."""

    LINE = "line"  # no line break
    STATEMENT = "statement"  # inside the current statement (no new logical line)
    BLOCK = "block"  # may add statements, but not dedent out of the cursor's block
    FREE = "free"  # anything that makes the file valid


@runtime_checkable
class ConstraintState(Protocol):
    """The left context plus the middle fed so far (persistent)."""

    def feed(self, text: str) -> ConstraintState | None:
        """The state after `text`, or None when no completion can follow it."""
        ...

    def is_complete(self) -> bool:
        """Whether left + the text fed so far + right is a valid file."""
        ...


@runtime_checkable
class Constraint(Protocol):
    """The middles that fit one (left, right) pair."""

    @property
    def mode(self) -> LanguageMode:
        """How exact the constraint is."""
        ...

    @property
    def reason(self) -> str:
        """Why the mode is not EXACT ("" when it is), for logs."""
        ...

    def initial(self) -> ConstraintState:
        """The state after the left context, before any middle."""
        ...

    def check_region(self) -> tuple[int, int] | None:
        """Offsets ``(a, b)`` such that ``left + middle + right`` is valid exactly when
        ``left[a:] + middle + right[:b]`` is, for every middle; ``None`` when the constraint
        cannot promise that (the caller then checks the whole text).  Lets a caller verify a
        middle in a large file without re-reading all of it."""
        ...


class MemoFeed:
    """``feed`` remembered per text on each state, for a language's state class to inherit.

    A decoder asks one state about many token texts in a step (every candidate) and asks the
    same ones again on the next request at the place: each state keeps its answers, up to
    ``MEMO_SIZE`` texts.  The class writes ``_feed`` and sets ``_memo`` to ``None`` in its
    constructor (a slot of its own)."""

    __slots__ = ()
    MEMO_SIZE = 256
    _memo: dict | None

    def feed(self, text: str):  # -> the subclass's state, or None
        """The state after `text`, or None when no completion can follow it."""
        if not text:
            return self
        memo = self._memo
        if memo is None:
            memo = self._memo = {}
        elif text in memo:
            return memo[text]
        result = self._feed(text)
        if len(memo) < self.MEMO_SIZE:
            memo[text] = result
        return result

    def _feed(self, text: str):  # pragma: no cover - every language's state writes it
        raise NotImplementedError
