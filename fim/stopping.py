"""Where a constrained middle may end: the recognizer states the loop walked through, memoised,
and the search for the best complete stopping point among them.

The decoding loop (``fim.decoding``) records one :class:`Step` per accepted token; when it runs
out of tokens, time or candidates, :func:`best_stopping_point` picks the middle among the
positions where the language is complete, and :func:`complete_line_end` finds line ends where
the middle may stop early.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from quotient.constraint import ConstraintState

_FEED_CACHE_LIMIT = 200_000


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
