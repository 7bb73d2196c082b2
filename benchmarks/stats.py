"""The statistics every benchmark reports, defined once: percentiles, paired comparisons.

"p90" in docs/ means :func:`percentile` at 0.9: **linear interpolation between the two
closest ranks** (numpy's default ``method="linear"``, Hyndman and Fan's type 7, the same as
``statistics.quantiles(..., method="inclusive")``): on ``n`` sorted values the ``q`` point sits
at rank ``q * (n - 1)``, and a rank between two values takes the straight line between them.
It is defined for one value (that value), moves smoothly as values change, and
``percentile(xs, 0.5)`` is ``statistics.median(xs)``. Before this module, five helpers used two
other rules (the value at rank ``round(q * (n - 1))`` and at ``int(q * n)``), so two pages'
"p90" of the same runs could differ.

Paired comparisons (two configurations on the same cases) report the cases one got right and
the other did not (:func:`won_lost`) and the mean difference of a per-case score with a
bootstrap interval over the cases (:func:`paired_interval`).
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def percentile(values: Iterable[float], q: float) -> float:
    """The ``q`` point (0 <= q <= 1) of ``values`` by linear interpolation between the closest
    ranks (see the module docstring). Raises ``ValueError`` on no values or ``q`` outside
    [0, 1]."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("a percentile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"a percentile is asked at 0 <= q <= 1, not {q}")
    rank = q * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def median_p90(values: Sequence[float], fmt: str, scale: float = 1.0) -> str:
    """"median / p90" of ``values`` times ``scale``, each written with format spec ``fmt``
    (``".2f"``, ``".2%"``): how the tables put a distribution in one cell."""
    return (f"{percentile(values, 0.5) * scale:{fmt}} / "
            f"{percentile(values, 0.9) * scale:{fmt}}")


def summary(values: Sequence[float], digits: int = 3) -> dict[str, float]:
    """``n``, ``median``, ``p90`` and ``max`` of ``values``, rounded to ``digits``."""
    return {"n": len(values), "median": round(percentile(values, 0.5), digits),
            "p90": round(percentile(values, 0.9), digits), "max": round(max(values), digits)}


@dataclass(frozen=True)
class WonLost:
    """Cases the first configuration got right and the second did not (``won``), and the
    other way round (``lost``)."""

    won: int
    lost: int

    def __str__(self) -> str:
        return f"{self.won} / {self.lost}"


def won_lost(pairs: Iterable[tuple[bool, bool]]) -> WonLost:
    """Won / lost over ``(first right, second right)`` per case."""
    won = lost = 0
    for first, second in pairs:
        won += bool(first and not second)
        lost += bool(second and not first)
    return WonLost(won, lost)


@dataclass(frozen=True)
class Interval:
    """A mean and its bootstrap interval; one holding 0 means "within noise" on these cases."""

    mean: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.mean:+.3f} ({self.low:+.3f} to {self.high:+.3f})"


def paired_interval(differences: Sequence[float], level: float = 0.95, resamples: int = 2000,
                    seed: int = 0) -> Interval:
    """The mean of per-case ``differences`` (second minus first on the same case) with a
    ``level`` paired bootstrap interval: the cases resampled with replacement ``resamples``
    times (seeded, so a table is reproducible), the interval's ends the percentiles of the
    resampled means."""
    if not differences:
        raise ValueError("an interval over no cases")
    rng = random.Random(seed)
    means = [statistics.fmean(rng.choices(differences, k=len(differences)))
             for _ in range(resamples)]
    tail = (1.0 - level) / 2
    return Interval(statistics.fmean(differences), percentile(means, tail),
                    percentile(means, 1.0 - tail))
