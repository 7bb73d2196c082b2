"""The draft-then-verify loop of ``benchmarks/speculative_probe.py`` on a tiny random model:
its counts of rounds and accepted tokens are what the figures are made of, so they are
checked where the answer is known (a draft identical to the model, and a middle the draft
never guesses)."""

from __future__ import annotations

import numpy as np
import pytest

from fim.engines.loading import load_backend
from fim.engines.model_specs import llama_cpp_available

pytestmark = pytest.mark.skipif(not llama_cpp_available(),
                                reason="llama-cpp-python is not installed")


def _model():
    return load_backend("random:santacoder", "llama.cpp", device="cpu").step_model.llama


@pytest.fixture(scope="module")
def pair():
    return _model(), _model()


def _greedy_chain(llama, prompt: list[int], n: int) -> list[int]:
    from benchmarks.speculative_probe import prefill

    logits = prefill(llama, 0, prompt)
    out = []
    for j in range(n):
        out.append(int(np.argmax(logits)))
        logits = llama.forward(0, [len(prompt) + j], [out[-1]], None)
    llama.seq_rm(0, -1, -1)
    return out


@pytest.mark.parametrize("k", [2, 3, 5])
def test_a_draft_equal_to_the_model_has_every_guess_accepted(pair, k: int) -> None:
    from benchmarks.speculative_probe import forward_all, prefill, speculate

    target, draft = pair
    prompt = list(range(5, 25))
    n = 13
    middle = _greedy_chain(target, prompt, n + 1)
    # The batch and the single steps agree on this model (its logits are far from ties).
    prefill(target, 0, prompt)
    rows = forward_all(target, 0, len(prompt), middle)
    assert [int(np.argmax(r)) for r in rows[:-1]] == middle[1:]
    prefill(draft, 0, prompt)
    allowed = np.zeros(target.n_vocab, dtype=bool)
    out = speculate(target, draft, prompt, middle[:n], k, allowed, middle)
    # Round r starts at token i and verifies it with k guesses, all right: i += k + 1.
    rounds = -(-n // (k + 1))
    assert out["rounds"] == rounds
    assert out["accepted"] == n - rounds
    assert out["flips"] == 0


def _expected(n: int, k: int, wrong: set[int]) -> tuple[int, int]:
    """Rounds and accepted guesses when every guess is right except at ``wrong`` positions."""
    i = rounds = accepted = 0
    while i < n:
        a = 0
        while a < k and i + 1 + a < n and i + 1 + a not in wrong:
            a += 1
        rounds, accepted, i = rounds + 1, accepted + a, i + 1 + a
    return rounds, accepted


@pytest.mark.parametrize("k", [2, 4])
def test_after_a_rejected_guess_both_caches_go_on_from_the_right_tokens(
        pair, k: int, monkeypatch) -> None:
    import benchmarks.speculative_probe as probe
    from benchmarks.speculative_probe import prefill, speculate

    real = probe.forward_all
    starts = []

    def forward_all(llama, seq, start, ids):
        # Each batch must follow the sequence's last cached token: a rejected guess left in
        # the cache would sit at the positions the batch now fills.
        starts.append((start, llama.lib.llama_memory_seq_pos_max(llama.memory, seq) + 1))
        return real(llama, seq, start, ids)

    monkeypatch.setattr(probe, "forward_all", forward_all)

    target, draft = pair
    prompt = list(range(30, 50))
    # The model's greedy middle, except that token 1 is one it would not pick: the first
    # guess is rejected after the draft ran it (for its second guess), and every later guess
    # is right only if both caches were cut back to the accepted tokens.
    head = _greedy_chain(target, prompt, 1)
    greedy_next = _greedy_chain(target, prompt, 2)[1]
    forced = next(t for t in range(100, 200) if t != greedy_next)
    middle = head + [forced] + _greedy_chain(target, prompt + head + [forced], 12)
    prefill(target, 0, prompt)
    prefill(draft, 0, prompt)
    allowed = np.zeros(target.n_vocab, dtype=bool)
    out = speculate(target, draft, prompt, middle, k, allowed, middle + [0])
    assert (out["rounds"], out["accepted"]) == _expected(len(middle), k, {1})
    assert starts and all(start == after for start, after in starts)
