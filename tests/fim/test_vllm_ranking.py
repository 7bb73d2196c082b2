"""``fim.vllm.masking._ranked``, the best ids of a logits row in order, found by a threshold
under the best score: the same ids in the same order as partitioning and sorting the whole
row, for peaked, flat, tied and mostly masked rows."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fim.vllm.masking import (
    RANK_MARGIN_MAX,
    Sampling,
    _above_threshold,
    _ranked,
    bounded_support,
    first_viable,
)


def _reference(scores: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` best ids by score, ties in id order (a stable sort of the whole row)."""
    return np.lexsort((np.arange(scores.shape[0]), -scores))[:k]


def _rows() -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    rows = []
    for scale, peak in ((2.0, 30.0), (3.0, 15.0), (4.0, 0.0), (1.0, 8.0), (0.5, 0.0)):
        row = rng.standard_normal(20000).astype(np.float32) * np.float32(scale)
        row[123] += np.float32(peak)
        rows.append(row)
    tied = np.round(rng.standard_normal(20000) * 2).astype(np.float32)  # many equal scores
    rows.append(tied)
    masked = np.full(20000, -math.inf, dtype=np.float32)
    masked[[5, 900, 17000, 4000]] = [1.0, 3.0, 3.0, -2.0]  # fewer finite ids than k
    rows.append(masked)
    far = np.zeros(20000, dtype=np.float32)
    far[[10, 20]] = [5000.0, 4000.0]  # beyond the widest margin: the whole row
    rows.append(far)
    return rows


@pytest.mark.parametrize("k", [1, 16, 128, 1024])
@pytest.mark.parametrize("row", range(8))
def test_ranked_equals_sorting_the_whole_row(row, k):
    scores = _rows()[row]
    got = _ranked(scores, k)
    assert got.shape == (k,)
    # Ties at the k-th best too: the lower ids (a partition alone picks any of them).
    assert np.array_equal(got, _reference(scores, k))


@pytest.mark.parametrize("row", range(8))
def test_a_longer_ranking_begins_with_the_shorter_one(row):
    # The scans read ``_ranked(scores, 8 * k)`` on from position k: with an id tied at the
    # k-th place picked in one ranking and not the other, it was read twice or never.
    scores = _rows()[row]
    for k in (16, 128):
        assert np.array_equal(_ranked(scores, 8 * k)[:k], _ranked(scores, k))


def test_threshold_lets_through_at_least_k_and_not_many_more():
    scores = _rows()[0]  # one outlier 30 above a bulk of standard deviation 2
    passed = _above_threshold(scores, float(scores.max()), 16)
    assert passed is not None and 16 <= len(passed) <= 2048
    assert set(_reference(scores, 16).tolist()) <= set(passed.tolist())
    far = _rows()[-1]
    assert float(far.max()) - float(np.sort(far)[-3]) > RANK_MARGIN_MAX
    assert _above_threshold(far, float(far.max()), 16) is None


def test_whole_row_when_k_covers_it():
    scores = np.array([0.5, 2.0, -math.inf, 2.0], dtype=np.float32)
    assert _ranked(scores, 4).tolist() == [1, 3, 0, 2]
    assert _ranked(scores, 9).tolist() == [1, 3, 0, 2]


@pytest.fixture(scope="module")
def table():
    from fim.engines.random_model import build_tokenizer
    from fim.vllm.rows import TokenTable

    tokenizer = build_tokenizer()
    return TokenTable.from_tokenizer(tokenizer, len(tokenizer))


@pytest.mark.parametrize("seed", range(8))
def test_a_viable_id_tied_at_the_boundary_is_not_skipped(table, seed):
    # Ten unviable ids score 6; thirty more and one viable id tie at 5, the viable one among
    # the lowest ids of the tie, so it is one of the 16 best.  Greedy must leave it (the full
    # mask's argmax), and top-k 1 too, not a viable id scoring 3 further down.
    from fim.language_cache import LanguageCache
    from fim.vllm.rows import RowConstraint, SeamArgs

    args = SeamArgs("x = (", "\n")
    language = LanguageCache().get(args.left, args.right, args.scope)
    probe = RowConstraint(args, language, table)
    width = table.size
    ok = np.array([probe.viable(i) for i in range(width)])
    viable, unviable = np.flatnonzero(ok), np.flatnonzero(~ok)
    rng = np.random.default_rng(seed)
    scores = rng.standard_normal(width).astype(np.float32)  # every other id below 4
    picks = rng.permutation(unviable)[:40]
    scores[picks[:10]], scores[picks[10:]] = 6.0, 5.0
    tied = np.sort(picks[10:])
    v = int(rng.choice(viable[viable < tied[5]]))
    scores[v] = 5.0
    assert first_viable(RowConstraint(args, language, table), scores) == v
    kept = bounded_support(RowConstraint(args, language, table), scores,
                           Sampling(temperature=1.0, top_k=1))
    assert kept == [v]
