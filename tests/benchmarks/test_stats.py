"""The benchmarks' one percentile and paired statistics (``benchmarks.stats``)."""

from __future__ import annotations

import random
import statistics

import numpy as np
import pytest

from benchmarks.stats import median_p90, paired_interval, percentile, summary, won_lost


@pytest.mark.parametrize("n", [1, 2, 3, 10, 11, 97])
def test_percentile_is_numpys_linear_default_and_the_median_at_half(n: int) -> None:
    rng = random.Random(n)
    xs = [rng.expovariate(1.0) for _ in range(n)]
    for q in (0.0, 0.1, 0.5, 0.9, 0.95, 1.0):
        assert percentile(xs, q) == pytest.approx(float(np.percentile(xs, q * 100)))
    assert percentile(xs, 0.5) == pytest.approx(statistics.median(xs))


def test_p90_interpolates_between_ranks() -> None:
    # rank 0.9 * 9 = 8.1: a tenth of the way from the 9th value to the 10th
    assert percentile(range(1, 11), 0.9) == pytest.approx(9.1)
    assert summary([3.0, 1.0, 2.0]) == {"n": 3, "median": 2.0, "p90": 2.8, "max": 3.0}


def test_median_p90_writes_both_points_of_the_one_percentile_scaled() -> None:
    seconds = [0.001 * k for k in range(1, 11)]  # p90 at rank 8.1: 9.1 ms
    assert median_p90(seconds, ".2f", scale=1e3) == "5.50 / 9.10"
    assert median_p90([0.1, 0.3], ".1%") == "20.0% / 28.0%"


def test_percentile_refuses_no_values_and_q_outside_0_1() -> None:
    with pytest.raises(ValueError):
        percentile([], 0.5)
    with pytest.raises(ValueError):
        percentile([1.0], 90)


def test_won_lost_counts_each_side() -> None:
    result = won_lost([(True, False), (True, True), (False, True), (False, False), (1, 0)])
    assert (result.won, result.lost, str(result)) == (2, 1, "2 / 1")


def test_paired_interval_holds_the_mean_and_is_reproducible() -> None:
    diffs = [0.1, -0.05, 0.2, 0.0, 0.15, 0.05]
    first, again = paired_interval(diffs), paired_interval(diffs)
    assert first == again
    assert first.low <= first.mean <= first.high
    assert first.mean == pytest.approx(statistics.fmean(diffs))
    same = paired_interval([0.0] * 5)
    assert (same.low, same.mean, same.high) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError):
        paired_interval([])
