"""A traced decode's steps: the token each step took, and the candidates another run may take
there instead (the branch points of ``fim.alternatives``).

A branch is worth a run only if it can end somewhere the traced run did not.  Every stop token
ends the middle at the same place, so of a step's untried stop tokens one is kept, and at the
decode's own end (where it took a stop token) none: there another stop token would end the
middle just where it ended.  With the model's own stop tokens (end of text, FIM padding, file
separator, ...) often the likeliest candidates after an end, keeping them filled the few
kept candidates with runs that end at once, and the next choice that writes something was
never tried.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

#: Untried candidates a trace keeps per step.
TRACE_ALTS = 3


@dataclass(frozen=True)
class TraceStep:
    """One token a traced decode took: its log-probability under the model (non-text ids
    masked, the constraint not renormalised), the middle's length before it, and the next
    candidates in the model's order after it (``(id, logp)``; not yet tried by the
    constraint), where another run may branch off."""

    token: int
    logp: float
    chars: int
    alts: tuple[tuple[int, float], ...] = ()


def logsumexp(x: np.ndarray) -> float:
    """``log(sum(exp(x)))`` without overflow (``-inf`` when every entry is)."""
    top = float(np.max(x))
    if not math.isfinite(top):
        return top
    return top + math.log(float(np.sum(np.exp(x - top, dtype=np.float64))))


def untried(candidates: Sequence[int], index: int, masked: np.ndarray, lse: float,
            stop_ids: Collection[int], *, ended: bool) -> tuple[tuple[int, float], ...]:
    """The candidates after ``candidates[index]`` (the model's order) a branch may take, with
    their log-probabilities (``masked`` logits less ``lse``): at most ``TRACE_ALTS``, none the
    model's masks rule out, one stop token at most, and none where ``ended`` (the step is the
    decode's end: a stop token was taken)."""
    out: list[tuple[int, float]] = []
    ends_left = 0 if ended else 1
    for tid in candidates[index + 1:]:
        if len(out) == TRACE_ALTS:
            break
        logit = float(masked[tid])
        if not math.isfinite(logit):
            continue
        if tid in stop_ids:
            if not ends_left:
                continue
            ends_left -= 1
        out.append((tid, logit - lse))
    return tuple(out)


def line_steps(trace: Sequence[TraceStep], text: str, start: int) -> tuple[TraceStep, ...]:
    """The traced steps that wrote the line of ``text`` (a decode's characters) starting at
    ``start``: those from ``start`` up to the line break after its first character besides
    blanks (the line's end, where the text has none yet).  Where a decode cut what it wrote
    from ``start`` on as the right context written again, these are where a run may branch
    off into a line like it that is not a copy (``fim.alternatives``)."""
    body = len(text) - len(text[start:].lstrip(" \t\r\n"))
    end = text.find("\n", body)
    end = len(text) if end < 0 else end
    return tuple(t for t in trace if start <= t.chars <= end)
