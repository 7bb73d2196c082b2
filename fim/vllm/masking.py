"""Which tokens of one logits row Seam leaves to vLLM's sampler, whatever its sampling settings.

The constraint answers "is this token viable?" one token at a time (a Python call, tens of
microseconds); asking it for all 151,936 ids of a Qwen vocabulary costs seconds per token.  The
rule here: check ids best first, only as far as the row's sampling settings can reach, and mask
every id beyond that point, viable or not.  The constraint stays exact (an id that was not
checked is never left), and the distribution is the one vLLM would sample from had every
unviable id been masked (the *full mask*), because the ids masked unchecked are ids the sampler
would have dropped anyway:

* greedy: the first viable id is argmax of the full mask; only it is left;
* plain temperature (no top-k/top-p/min-p): Seam draws the token itself, Gumbel-max over the
  row (``scores / T`` plus Gumbel noise), the first viable id in that order; an exact draw from
  ``softmax(scores / T)`` restricted to the viable ids; only it is left;
* top-k, top-p, min-p (``bounded_support``): the ids are read in score order, viable ones
  collected, until the settings provably exclude everything not read yet:

  - top-k = k: once k viable ids are found; vLLM's top-k over them keeps all k, which are the
    k best of the full mask;
  - min-p: once an id's probability is below ``min_p`` times the best viable id's (the full
    mask's maximum), every id after it is too;
  - top-p: vLLM keeps an id when the mass of the ids above it is below ``p`` times the row's
    mass, and recomputes that over whatever is left.  Over the viable ids found, ``F``, with
    mass ``S``, its nucleus is ``P``; the full mask's mass is at most ``S + U``, ``U`` the mass
    of every id not read (viable or not).  When ``p * (S + U) <= mass(P)``, the full mask's
    nucleus is exactly ``P`` (its mass reaches ``p`` of the full mass; the ids of ``P`` but its
    last have less above them than ``p * S``, so less than ``p`` of the full mass), so leaving
    ``F`` and letting vLLM cut it gives the full mask's nucleus.  Leaving only ``P`` would not:
    vLLM would cut ``P`` again, renormalised.

  With a trained model the mass sits in the first few dozen ids, so the scan stops there; with a
  flat row it reads further (never more than the full mask would check).  The probabilities are
  computed here in float64 and in vLLM in float32: an id whose probability lies within rounding
  of a cut may fall on the other side, nothing else differs.

A row still healing (re-writing the characters the prompt left out) can only take the ids
consistent with the residue (``RowConstraint.candidates``); every other id is set to ``-inf``
for the scan, which is exact: those ids are unviable, so they are neither checked nor counted
in the mass not read (the full mask's distribution is over viable ids only).

Penalties (repetition, frequency, presence) decide the order the sampler sees.  vLLM's V1
sampler applies them *after* the logits processors, so for a row with penalties the order is
computed from the row penalised as vLLM will penalise it (``penalised``), and the mask is
written into the unpenalised row (``-inf`` stays ``-inf`` under every penalty).  Model Runner V2
applies them before custom processors, so there the row is already in its final order.

Two alternatives were weighed and not taken.  A batched check of the whole vocabulary (walking
ids that share a byte prefix together) still costs one constraint feed per distinct prefix in
Python, tens of milliseconds per row at best.  Rejection and resampling needs the sampler's
draw, which a logits processor never sees (vLLM calls ``apply`` before it samples and gives the
processor neither the draw nor the request's generator).

Only numpy and the row's constraint are used: the same code serves both of vLLM's model runners.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

from fim.vllm.rows import RowConstraint

#: vLLM treats a temperature below this as greedy.
GREEDY_EPS = 1e-5
#: Ids read per batch when checking in score order; eight times as many each time they run out.
FIRST_CANDIDATES = 16
#: How far under the best score ``_ranked`` first looks for the best ids (``_above_threshold``:
#: doubled while too few pass, up to ``RANK_MARGIN_MAX``; narrowed by bisection at most
#: ``RANK_BISECTIONS`` times while too many do).
RANK_MARGIN = 4.0
RANK_MARGIN_MAX = 1024.0
RANK_BISECTIONS = 6
#: Slack added to the bound on the mass not read (relative to the row's mass): the sums of
#: float32 probabilities may round down, and a bound too low could stop the top-p scan early.
MASS_SLACK = 1e-6


class Mode(Enum):
    """How a row's mask is made (see the module docstring)."""

    GREEDY = "greedy"
    DRAWN = "drawn"  # plain temperature: Seam draws the token
    BOUNDED = "bounded"  # top-k / top-p / min-p: the ids the settings can reach are checked


@dataclass(frozen=True)
class Sampling:
    """The sampling settings of one request that decide its mask, read from vLLM's
    ``SamplingParams`` (``from_params``)."""

    temperature: float = 0.0
    top_k: int = 0  # 0: off
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0

    @classmethod
    def from_params(cls, params) -> Sampling:
        """The settings of a ``vllm.SamplingParams`` (``top_k`` of -1 or 0 means off)."""
        top_k = int(params.top_k) if params.top_k and params.top_k > 0 else 0
        return cls(float(params.temperature), top_k, float(params.top_p),
                   float(params.min_p), float(params.repetition_penalty),
                   float(params.frequency_penalty), float(params.presence_penalty))

    @property
    def mode(self) -> Mode:
        if self.temperature < GREEDY_EPS:
            return Mode.GREEDY
        if self.top_k == 0 and self.top_p >= 1.0 and self.min_p <= 0.0:
            return Mode.DRAWN
        return Mode.BOUNDED

    @property
    def penalties(self) -> bool:
        return (self.repetition_penalty != 1.0 or self.frequency_penalty != 0.0
                or self.presence_penalty != 0.0)


def penalised(line: np.ndarray, sampling: Sampling, prompt_ids: np.ndarray,
              output: Sequence[int]) -> np.ndarray:
    """A copy of ``line`` with vLLM's penalties applied as its V1 sampler applies them
    (``vllm.model_executor.layers.utils.apply_penalties``): repetition (ids of the prompt or the
    output: positive logits divided, others multiplied), then frequency (times the id's count in
    the output), then presence (once per id of the output), in float32 like vLLM."""
    out = np.fromiter((t for t in output if 0 <= t < line.shape[0]), dtype=np.int64)
    ids, counts = np.unique(out, return_counts=True)
    z = line.copy()
    if sampling.repetition_penalty != 1.0:
        seen = np.union1d(prompt_ids[prompt_ids < line.shape[0]], ids)
        r = np.float32(sampling.repetition_penalty)
        vals = z[seen]
        z[seen] = np.where(vals > 0, vals * (np.float32(1.0) / r), vals * r)
    if len(ids):
        z[ids] -= np.float32(sampling.frequency_penalty) * counts.astype(np.float32)
        z[ids] -= np.float32(sampling.presence_penalty)
    return z


def gumbel_scores(line: np.ndarray, temperature: float, rng: np.random.Generator) -> np.ndarray:
    """``line / T`` plus Gumbel noise: the first viable id in this order is a draw from
    ``softmax(line / T)`` restricted to the viable ids (the Gumbel-max trick)."""
    u = np.maximum(rng.random(line.shape[0], dtype=np.float32), 1e-20)
    return line / np.float32(temperature) - np.log(-np.log(u))


def _ranked(scores: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` best ids of ``scores``, best first; ties in id order, as argmax and a stable
    sort break them, so the first ``k`` of ``_ranked(scores, m)`` are ``_ranked(scores, k)``
    for every ``m > k``.

    A partition of a whole 151,936-id row costs about 3 ms, most of a sampled row's mask
    (measured in vLLM with the real model).  With a trained model's peaked row the best ids
    stand far above the rest, so they are first found with a comparison against a threshold
    under the best score (a comparison over the row costs about a tenth of the partition),
    widened until ``k`` ids pass; only the ids that passed are partitioned and sorted.  Every
    id scoring at least the ``k``-th best passes, so the result is the same."""
    width = scores.shape[0]
    if k >= width:
        top = np.arange(width)
        return top[np.lexsort((top, -scores[top]))]
    best = float(np.max(scores))
    passed = None
    if math.isfinite(best):
        passed = _above_threshold(scores, best, k)
    if passed is None:  # a flat row, one mostly -inf, or NaN: the whole row
        passed = np.arange(width)
    passed = _first_k(scores, passed, k)
    return passed[np.lexsort((passed, -scores[passed]))]


def _first_k(scores: np.ndarray, ids: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` best of ``ids`` (ascending, holding every id of the row's ``k`` best), ties
    at the ``k``-th score broken by lower id.  A partition alone picks any of the tied ids,
    and a different pick for another ``k``: the callers read ``_ranked(scores, 8 * k)`` on
    from position ``k``, and an id tied at the boundary would be read twice or never."""
    if len(ids) <= k:
        return ids
    values = scores[ids]
    kth = values[np.argpartition(-values, k - 1)[k - 1]]
    if math.isnan(kth):  # fewer than k ids that are numbers: the partition's pick
        return ids[np.argpartition(-values, k - 1)[:k]]
    above = ids[values > kth]
    return np.concatenate((above, ids[values == kth][:k - len(above)]))


def _above_threshold(scores: np.ndarray, best: float, k: int) -> np.ndarray | None:
    """Ids scoring at least ``best - margin``, for a margin that lets at least ``k`` and not
    many more pass (doubled from ``RANK_MARGIN``, then halved back between the last two
    tries a few times when too many passed); ``None`` when no margin up to
    ``RANK_MARGIN_MAX`` keeps them few (a flat row: partition it all)."""
    enough = max(8 * k, 2048)  # few enough to gather and partition cheaply

    def passing(margin: float) -> tuple[np.ndarray, int]:
        above = scores >= np.float32(best - margin)
        return above, int(np.count_nonzero(above))

    low, high = 0.0, RANK_MARGIN
    while True:
        above, count = passing(high)
        if count >= k:
            break
        if high >= RANK_MARGIN_MAX:
            return None
        low, high = high, high * 2.0
    for _ in range(RANK_BISECTIONS):
        if count <= enough:
            break
        middle = (low + high) / 2.0
        m_above, m_count = passing(middle)
        if m_count >= k:
            high, above, count = middle, m_above, m_count
        else:
            low = middle
    return np.flatnonzero(above) if count <= scores.shape[0] // 8 else None


def _restricted(scores: np.ndarray, candidates: np.ndarray | None) -> np.ndarray:
    """``scores`` with every id outside ``candidates`` at ``-inf`` (``None``: unchanged): the
    scans stop at the first ``-inf``, so ids known unviable are never checked one by one."""
    if candidates is None:
        return scores
    out = np.full_like(scores, -math.inf)
    ids = candidates[candidates < scores.shape[0]]
    out[ids] = scores[ids]
    return out


def first_viable(constraint: RowConstraint, scores: np.ndarray,
                 candidates: np.ndarray | None = None) -> int | None:
    """The best viable id by ``scores`` (never one whose score is ``-inf``), reading candidates
    in score order: the first ``FIRST_CANDIDATES``, then eight times as many each time all were
    refused; counts the step and a masked likeliest id.  ``candidates``: the only ids that can
    be viable (``RowConstraint.candidates``), when known."""
    constraint.steps += 1
    likeliest = int(np.argmax(scores))
    scores = _restricted(scores, candidates)
    best = int(np.argmax(scores))
    if scores[best] > -math.inf and constraint.viable(best):
        found: int | None = best  # the common case with a trained model: no sorting at all
    else:
        width = scores.shape[0]
        k, tried = min(FIRST_CANDIDATES, width), 0
        while True:
            order = _ranked(scores, k)
            fresh = [int(i) for i in order[tried:] if scores[i] > -math.inf]
            found = constraint.first_viable(fresh)
            if found is not None or k == width or len(fresh) < k - tried:
                break
            tried, k = k, min(width, k * 8)
    if found is not None and found != likeliest:
        constraint.masked_top += 1
    return found


def bounded_support(constraint: RowConstraint, scores: np.ndarray,
                    sampling: Sampling, candidates: np.ndarray | None = None) -> list[int]:
    """The viable ids to leave in a row sampled with top-k, top-p and/or min-p, best first: the
    viable ids read in score order up to the point the settings exclude everything after it
    (see the module docstring for why vLLM's sampler then draws from the full mask's
    distribution).  ``scores`` is the row in the order the sampler sees it (penalised).  Counts
    the step and a masked likeliest id.  ``candidates``: the only ids that can be viable
    (``RowConstraint.candidates``), when known; the others are left out of the scan and of the
    mass not read, which is exact (the full mask's distribution is over viable ids only, and
    the bound needs only the unread *viable* mass)."""
    constraint.steps += 1
    raw, likeliest = scores, float(np.max(scores))
    scores = _restricted(scores, candidates)
    width = scores.shape[0]
    # float32 over the vocabulary (as vLLM computes), float64 for the sums that decide a cut
    s = scores / np.float32(max(sampling.temperature, GREEDY_EPS))
    top = float(np.max(s))
    if top == -math.inf:
        return []
    weights = np.exp(s - np.float32(top))  # unnormalised probabilities, the best id's being 1
    total = float(weights.sum(dtype=np.float64))
    slack = total * MASS_SLACK
    log_min_p = math.log(sampling.min_p) if sampling.min_p > 0.0 else -math.inf
    top_p = sampling.top_p if sampling.top_p < 1.0 else None
    kept: list[int] = []
    cum = [0.0]  # cum[i]: mass of the first i ids kept
    best_s = None  # the best viable id's scaled score (the full mask's maximum)
    k, tried = min(FIRST_CANDIDATES, width), 0
    while True:
        order = _ranked(s, k)
        # The mass not read after position j: that of the ids of ``order`` after j (summed
        # directly) and of the ids beyond ``order`` (the rest of the total: the slack covers
        # the rounding of the subtraction).
        chunk = weights[order].astype(np.float64)
        rest = max(total - float(chunk.sum()), 0.0)
        after = np.concatenate((np.cumsum(chunk[::-1])[::-1][1:], [0.0])) + rest
        for j in range(tried, len(order)):
            tid = int(order[j])
            if s[tid] == -math.inf:
                return _done(constraint, kept, raw, likeliest)
            if best_s is not None and s[tid] - best_s < log_min_p:
                # min-p drops this id and all after it
                return _done(constraint, kept, raw, likeliest)
            if not constraint.viable(tid):
                continue
            if best_s is None:
                best_s = s[tid]
            kept.append(tid)
            cum.append(cum[-1] + float(weights[tid]))
            if sampling.top_k and len(kept) >= sampling.top_k:
                return _done(constraint, kept, raw, likeliest)
            if top_p is not None:
                mass = cum[-1]
                # mass(P): the first prefix sum reaching p * mass (vLLM keeps an id while the
                # mass above it is below that)
                nucleus = cum[min(bisect_left(cum, top_p * mass), len(cum) - 1)]
                unread = after[j] * (1.0 + MASS_SLACK) + slack
                if top_p * (mass + unread) <= nucleus:
                    return _done(constraint, kept, raw, likeliest)
        if k == width:
            return _done(constraint, kept, raw, likeliest)
        tried, k = k, min(width, k * 8)


def _done(constraint: RowConstraint, kept: list[int], raw: np.ndarray,
          likeliest: float) -> list[int]:
    if kept and raw[kept[0]] < likeliest:
        constraint.masked_top += 1
    return kept
