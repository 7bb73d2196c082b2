"""``benchmarks/openmp_policy.py``'s table: one row per policy, every round's figures in the
order measured, the unset policy named as such."""

from __future__ import annotations

import argparse

from benchmarks.openmp_policy import POLICIES, table


def test_each_policy_gets_its_own_rounds_in_order():
    rows = [{"policy": p, "prompt_tps": 100 + 10 * i + r, "token_ms": 70 + i + r, "threads": 2}
            for r in range(2) for i, p in enumerate(POLICIES)]
    args = argparse.Namespace(prompt=185, tokens=12, repeats=3, rounds=2)
    text = table(rows, args)
    assert "| `PASSIVE` | 100, 101 | 70, 71 |" in text
    assert "| not set | 110, 111 | 71, 72 |" in text
    assert "| `ACTIVE` | 120, 121 | 72, 73 |" in text
    assert "2 threads" in text and "185-token prompt" in text
