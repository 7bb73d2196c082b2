"""Where a constrained middle may end: the recognizer states the loop walked through, memoised,
and the search for the best complete stopping point among them, and the right-context stop.

The decoding loop (``fim.decoding``) records one :class:`Step` per accepted token; when it runs
out of tokens, time or candidates, :func:`best_stopping_point` picks the middle among the
positions where the language is complete, and :func:`complete_line_end` finds line ends where
the middle may stop early.  :func:`right_rewrite_cut` decides where the model's next token
would start re-writing the text after the cursor; it is the one rule for the in-process loop,
the vLLM processor (``fim.vllm``) and the vLLM client, which differ only in how they tell a
complete point (the constraint's state, or a parse).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from quotient.constraint import ConstraintState

_FEED_CACHE_LIMIT = 200_000
#: How much of the right context the right-context stop compares (a re-write shows in its
#: first line or two; comparing all of a long file would cost for nothing).
RIGHT_PROBE_CHARS = 256


class FeedCache:
    """Memoised ``feed`` and ``is_complete`` for persistent recognizer states.

    Keys use ``id(state)``; the cache keeps every keyed state alive, so ids cannot be reused
    while an entry exists.
    """

    def __init__(self) -> None:
        self._feed: dict[tuple[int, str],
                         tuple[ConstraintState, ConstraintState | None]] = {}
        self._complete: dict[int, tuple[ConstraintState, bool]] = {}

    def feed(self, state: ConstraintState, text: str) -> ConstraintState | None:
        if not text:
            return state
        key = (id(state), text)
        hit = self._feed.get(key)
        if hit is not None:
            return hit[1]
        if len(self._feed) > _FEED_CACHE_LIMIT:
            self._feed.clear()
            self._complete.clear()
        result = state.feed(text)
        self._feed[key] = (state, result)
        return result

    def is_complete(self, state: ConstraintState) -> bool:
        hit = self._complete.get(id(state))
        if hit is not None:
            return hit[1]
        result = bool(state.is_complete())
        self._complete[id(state)] = (state, result)
        return result


@dataclass
class Step:
    """A constrained step, kept for the best-stopping-point search."""

    state: ConstraintState  # the constraint's state before this step's token
    chars: int  # middle length before this step's token
    eos_logp: float  # log-probability of stopping before this step's token
    text: str = ""  # characters this step's token added to the middle


def complete_line_end(step: Step | None, text: str, chars: int, cache: FeedCache | None
                       ) -> int | None:
    """The middle length up to the first newline in ``text`` (what the last token added, the
    middle now being ``chars`` long) where the middle is complete; with no constraint
    (``step`` is ``None``) the first newline; ``None`` when there is none."""
    before = chars - len(text)
    k = text.find("\n")
    while k >= 0:
        if step is None:
            return before + k
        state = cache.feed(step.state, text[:k])
        if state is not None and cache.is_complete(state):
            return before + k
        k = text.find("\n", k + 1)
    return None


def best_stopping_point(
    steps: list[Step], final_state: ConstraintState, final_chars: int,
    final_logp: float | None,
    cache: FeedCache,
) -> int | None:
    """The middle length (in characters) of the best complete stopping point, or ``None``.

    Token boundaries come first: each boundary where the language is complete scores
    ``log P(EOS) + log(1 + chars)``, the paper's "EOS probability weighted by generation
    length", with the model's own EOS estimate there.  Only when no boundary is complete are
    positions inside tokens considered; they have no EOS estimate of their own and borrow the
    one from the start of their token (so they rank by that and by length).
    """
    if final_logp is None and steps:
        final_logp = steps[-1].eos_logp
    best, best_score = None, -math.inf
    boundaries = [(st.state, st.chars, st.eos_logp) for st in steps]
    if final_logp is not None:
        boundaries.append((final_state, final_chars, final_logp))
    for state, chars, logp in boundaries:
        if cache.is_complete(state):
            score = logp + math.log1p(chars)
            if score > best_score:
                best, best_score = chars, score
    if best is not None:
        return best
    for st in steps:
        state = st.state
        for j in range(1, len(st.text)):
            state = cache.feed(state, st.text[j - 1])
            if state is None:
                break
            if cache.is_complete(state):
                score = st.eos_logp + math.log1p(st.chars + j)
                if score > best_score:
                    best, best_score = st.chars + j, score
    return best


_WRAP = re.compile(r"[ \t]*\n[ \t]*(?:#[ \t]*)?|[ \t]+")


def unwrap(text: str) -> str:
    """``text`` with each line break (its indentation and a comment's ``#`` included) and
    each run of blanks read as one space."""
    return _WRAP.sub(" ", text)


def wrapped_right(right: str, wraps: bool) -> str:
    """The right context as a line wrap reads (``unwrap``), when ``wraps`` and it starts on a
    new line with something to say; else ``""`` (no wrapped re-write is looked for)."""
    lead = right[:len(right) - len(right.lstrip())]
    return unwrap(right) if wraps and "\n" in lead and right.strip() else ""


def _word(char: str) -> bool:
    return char.isalnum() or char == "_"


def _wrapped_rewrite(tail: str, wrapped: str) -> bool:
    """``tail`` (at least three characters besides whitespace) is how the right context's next
    line goes on, written on the cursor's line."""
    if not wrapped:
        return False
    flat = unwrap(tail)
    return len(flat.strip()) >= 3 and (wrapped.startswith(flat) or flat.startswith(wrapped))


def rewrite_cut_after(cache: FeedCache, base_state: ConstraintState, joined: str, base: int,
                      added: str, right: str, wrapped: str) -> int | None:
    """:func:`right_rewrite_cut` over a decode's states, as the in-process decoder and vLLM's
    rows both ask it: ``joined`` is the text so far, ``base`` where its last token starts
    (``base_state`` the constraint's state there) and ``added`` the characters of the token
    the model wants next; the cut, counted from ``base``, or ``None``."""
    text = joined[base:] + added

    def complete_at(c: int) -> bool:
        state = cache.feed(base_state, text[:c])
        return state is not None and cache.is_complete(state)

    return right_rewrite_cut(text, joined[base - 1] if base else "", right, wrapped,
                             complete_at)


def right_rewrite_cut(text: str, before: str, right: str, wrapped: str,
                      complete_at: Callable[[int], bool]) -> int | None:
    """Where in ``text`` the middle ends because the model would re-write the right context,
    or ``None``.

    ``text`` is the middle from the start of its last token, followed by the characters of
    the token the model wants next; ``before`` is the character before ``text`` (``""`` at
    the middle's start); ``wrapped`` is ``wrapped_right(right, ...)``; ``complete_at(c)``
    tells whether the middle ending at ``text[:c]`` is complete.  The earliest tail of
    ``text`` (with something besides whitespace) that the right context starts with, that
    starts with the whole right context, or that is the right context's next line written on
    this one, is a re-write; its start ``c`` is the cut when the middle is complete there.
    A tail starting inside a word of the middle is no re-write (``fiel`` + ``d`` is not the
    ``dataclass`` that follows).
    """
    for c in range(len(text)):
        tail = text[c:]
        if not tail.strip():
            return None
        if not (right.startswith(tail) or (right.strip() and tail.startswith(right))
                or _wrapped_rewrite(tail, wrapped)):
            continue
        prev = text[c - 1] if c else before
        if prev and _word(prev) and _word(tail[0]):
            continue
        if complete_at(c):
            return c
    return None
