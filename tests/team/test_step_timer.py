"""The step timer's counters (``benchmarks/vllm_step_timer.py``): every viability check of a
constrained row and every masked row are counted, and the masks written are the processor's
own, bit for bit."""

from __future__ import annotations

from tests.support.team import need_vllm

need_vllm()

import torch  # noqa: E402
from vllm import SamplingParams  # noqa: E402
from vllm.v1.sample.logits_processor import BatchUpdate  # noqa: E402

from benchmarks.vllm_step_timer import COUNTERS, count_checks  # noqa: E402
from fim.vllm.processor import SeamRows  # noqa: E402
from fim.vllm.rows import SeamArgs  # noqa: E402

LEFT, RIGHT = "def f(a, b):\n    total = a +", "\n    return total\n"


def _batch(top_k: int) -> BatchUpdate:
    seam = SamplingParams(temperature=0.8, top_k=top_k,
                          extra_args=SeamArgs(LEFT, RIGHT).to_extra_args())
    plain = SamplingParams(temperature=0.8, top_k=top_k)
    return BatchUpdate(batch_size=3, removed=[], moved=[],
                       added=[(0, seam, [1], []), (1, plain, [1], []), (2, seam, [1], [])])


def test_counts_checks_and_rows_without_changing_the_masks(table):
    counted, plain = SeamRows(table), SeamRows(table)
    tally: dict[str, float] = {}
    count_checks(counted, tally)
    assert set(tally) == set(COUNTERS) and not any(tally.values())
    for rows in (counted, plain):
        rows.update(_batch(top_k=3))
    calls = 0
    for row in counted.rows.values():  # count the checks independently of the timer
        inner = row.constraint.viable

        def spy(tid, inner=inner):
            nonlocal calls
            calls += 1
            return inner(tid)
        row.constraint.viable = spy
        # (the timer's wrapper is what the row's ``viable`` was: it still runs under the spy)
    logits = torch.randn(3, table.size, generator=torch.Generator().manual_seed(3)) * 4
    mine, theirs = logits.clone(), logits.clone()
    counted.advance()
    plain.advance()
    counted.mask(mine)
    plain.mask(theirs)
    assert torch.equal(torch.isfinite(mine), torch.isfinite(theirs))  # same decisions
    assert torch.equal(mine[torch.isfinite(mine)], theirs[torch.isfinite(theirs)])
    assert tally["added"] == 2  # admitted: the two constrained rows, not the plain one
    assert tally["masked"] == 2  # the two constrained rows, not the plain one
    assert tally["left"] == int(torch.isfinite(mine[[0, 2]]).sum())
    assert tally["checked"] == calls >= 2 * 3  # top-k 3: at least three checks per row
    assert tally["check"] > 0
