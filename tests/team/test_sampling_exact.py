"""No unviable token gets through vLLM's own V1 sampler, whatever the sampling settings, and
the checked-in-order mask (``fim.vllm.masking``) samples from exactly the distribution of the
full-vocabulary mask.

Each step runs vLLM's real ``Sampler`` twice on the same logits: once with every unviable id
masked beforehand (the full mask, checked id by id), once with Seam's processor in the
processor slot.  With ``logprobs_mode="processed_logits"`` the sampler returns the logits it
draws from (after penalties, temperature, min-p, top-k and top-p), so the two can be compared
entry by entry, and with the same seed the two draws must be the same token.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.support.team import need_vllm

need_vllm()

import torch  # noqa: E402
from vllm import SamplingParams  # noqa: E402
from vllm.config import VllmConfig  # noqa: E402
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessors  # noqa: E402
from vllm.v1.sample.logits_processor.builtin import MinPLogitsProcessor  # noqa: E402
from vllm.v1.sample.metadata import SamplingMetadata  # noqa: E402
from vllm.v1.sample.ops.penalties import apply_all_penalties  # noqa: E402
from vllm.v1.sample.sampler import Sampler  # noqa: E402

from fim.vllm.masking import Sampling, penalised  # noqa: E402
from fim.vllm.processor import SeamLogitsProcessor, SeamRows  # noqa: E402
from fim.vllm.rows import SeamArgs  # noqa: E402

CONTEXTS = [
    ("def f(a, b):\n    total = a +", "\n    return total\n", ""),
    ("x = (", ")\n", ""),
    ("items = [1, 2", "]\nprint(items)\n", ""),
    # healing: the prompt left out " ret", so the first ids must re-write it (the scan reads
    # only the ids consistent with it, ``RowConstraint.candidates``)
    ("def f(a, b):\n    total = a + b\n    ret", "\n", " ret"),
]
PROMPT = [5, 9, 9, 40, 41, 300]


def _metadata(params: SamplingParams, vocab: int, output: list[int], procs: LogitsProcessors,
              seed: int) -> SamplingMetadata:
    """vLLM's sampling metadata for a batch of one request, as its input batch makes it."""
    penalties = (params.repetition_penalty != 1.0 or params.frequency_penalty != 0.0
                 or params.presence_penalty != 0.0)
    return SamplingMetadata(
        temperature=torch.tensor([params.temperature]),
        all_greedy=params.temperature < 1e-5, all_random=params.temperature >= 1e-5,
        top_p=torch.tensor([params.top_p]) if params.top_p < 1.0 else None,
        top_k=torch.tensor([params.top_k]) if params.top_k > 0 else None,
        generators={0: torch.Generator().manual_seed(seed)},
        max_num_logprobs=-1, no_penalties=not penalties,
        prompt_token_ids=torch.tensor([PROMPT]),
        frequency_penalties=torch.tensor([params.frequency_penalty]),
        presence_penalties=torch.tensor([params.presence_penalty]),
        repetition_penalties=torch.tensor([params.repetition_penalty]),
        output_token_ids=[output], allowed_token_ids_mask=None, bad_words_token_ids={},
        logitsprocs=procs)


def _decode(table, params: SamplingParams, seed: int, steps: int = 10):
    """Yields, per step, (processed logits and draw with the full mask, the same with Seam's
    processor, the ids the constraint allows)."""
    sampler = Sampler(logprobs_mode="processed_logits")
    gen = torch.Generator().manual_seed(seed)
    output: list[int] = []
    added = BatchUpdate(batch_size=1, removed=[], added=[(0, params, PROMPT, output)], moved=[])
    rows = SeamRows(table)
    seam = SeamLogitsProcessor.over(rows)
    min_p = MinPLogitsProcessor(VllmConfig(), torch.device("cpu"), False)
    for proc in (seam, min_p):
        proc.update_state(added)
    for step in range(steps):
        scale = (1.0, 3.0, 8.0)[step % 3]  # flat, medium and peaked rows
        logits = torch.randn(1, table.size, generator=gen) * scale
        rows.advance()
        allowed = rows.rows[0].constraint.viable_mask(table.size)
        if not allowed.any():
            return
        full = logits.clone()
        full[0, torch.from_numpy(~allowed)] = -math.inf
        ref = sampler(full, _metadata(params, table.size, output,
                                      LogitsProcessors([min_p]), seed + step))
        ours = sampler(logits.clone(), _metadata(params, table.size, output,
                                                 LogitsProcessors([min_p, seam]),
                                                 seed + step))
        yield ref, ours, allowed
        output.append(int(ours.sampled_token_ids[0, 0]))


SETTINGS = [
    dict(top_k=1), dict(top_k=5), dict(top_k=40),
    dict(top_p=0.5), dict(top_p=0.9), dict(top_p=0.99),
    dict(min_p=0.05), dict(min_p=0.3),
    dict(top_k=20, top_p=0.9), dict(top_p=0.95, min_p=0.1),
    dict(top_k=10, repetition_penalty=1.3, frequency_penalty=0.5, presence_penalty=0.4),
    dict(top_p=0.8, repetition_penalty=0.7),
]


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: ",".join(f"{k}={v}"
                                                                       for k, v in s.items()))
@pytest.mark.parametrize("temperature", [0.6, 1.3])
def test_bounded_mask_samples_the_full_masks_distribution(table, settings, temperature):
    """Top-k, top-p, min-p and penalties: the logits vLLM draws from are those of the full
    mask, entry by entry, and the seeded draw is the same viable token."""
    compared = 0
    for case, (left, right, heal) in enumerate(CONTEXTS):
        params = SamplingParams(temperature=temperature, seed=case,
                                extra_args=SeamArgs(left, right, heal=heal).to_extra_args(),
                                **settings)
        for ref, ours, allowed in _decode(table, params, seed=17 * case + 1):
            want, got = ref.logprobs_tensors.logprobs[0], ours.logprobs_tensors.logprobs[0]
            finite = torch.isfinite(got)
            assert torch.equal(torch.isfinite(want), finite)
            assert torch.equal(want[finite], got[finite])
            assert bool(np.all(allowed[finite.numpy()]))
            token = int(ours.sampled_token_ids[0, 0])
            assert token == int(ref.sampled_token_ids[0, 0]) and allowed[token]
            compared += 1
    assert compared >= 20


def test_a_healing_rows_candidates_hold_every_viable_id_and_few_others(table):
    """``RowConstraint.candidates``: while the row heals, every viable id is among them (the
    scan reads nothing else), and they are a small part of the vocabulary; once healed, or
    for a row that does not heal, any id may be viable (``None``)."""
    left, right, heal = CONTEXTS[-1]
    rows = SeamRows(table)
    output: list[int] = []
    params = SamplingParams(temperature=0.8, top_p=0.9,
                            extra_args=SeamArgs(left, right, heal=heal).to_extra_args())
    rows.update(BatchUpdate(batch_size=1, removed=[], moved=[], added=[(0, params, PROMPT,
                                                                         output)]))
    row = rows.rows[0].constraint
    candidates = row.candidates()
    viable = np.flatnonzero(row.viable_mask(table.size))
    assert len(viable) > 0 and set(viable.tolist()) <= set(candidates.tolist())
    assert len(candidates) < table.size // 20
    # Built once per residue and shared by every row healing it (read-only: a row that wrote
    # into it would change its neighbours' scans).
    assert table.heal_consistent(heal.encode()) is candidates
    assert not candidates.flags.writeable
    checked = []
    inner = row.viable
    row.viable = lambda tid: checked.append(tid) or inner(tid)
    rows.mask(torch.zeros(1, table.size))  # a flat row: top-p 0.9 would read most of it
    assert 0 < len(checked) <= len(candidates) and set(checked) <= set(candidates.tolist())
    del row.viable
    healed = next(int(i) for i in viable if table.vocab.token_bytes[i].startswith(b" ret"))
    output.append(healed)
    rows.advance()
    assert row.candidates() is None
    plain = SeamRows(table)
    plain.update(BatchUpdate(batch_size=1, removed=[], moved=[], added=[
        (0, SamplingParams(extra_args=SeamArgs(*CONTEXTS[0][:2]).to_extra_args()), PROMPT, [])]))
    assert plain.rows[0].constraint.candidates() is None


@pytest.mark.parametrize("settings", [dict(), dict(repetition_penalty=1.5, presence_penalty=1.0),
                                      dict(frequency_penalty=2.0)])
def test_greedy_and_drawn_rows_only_sample_viable_tokens(table, settings):
    """Greedy (with penalties: the full mask's argmax after vLLM penalises) and plain
    temperature (Seam draws): the token vLLM samples is always viable."""
    for case, (left, right, heal) in enumerate(CONTEXTS):
        for temperature in (0.0, 1.0):
            params = SamplingParams(temperature=temperature, seed=case,
                                    extra_args=SeamArgs(left, right,
                                                        heal=heal).to_extra_args(),
                                    **settings)
            for ref, ours, allowed in _decode(table, params, seed=5 * case + 2):
                token = int(ours.sampled_token_ids[0, 0])
                assert allowed[token]
                if temperature == 0.0:
                    assert token == int(ref.sampled_token_ids[0, 0])


def test_penalised_ranks_a_row_as_vllm_penalises_it():
    """``penalised`` gives the row vLLM's V1 sampler makes of it (its own penalty function)."""
    gen = torch.Generator().manual_seed(4)
    logits = torch.randn(1, 500, generator=gen) * 3
    output = [7, 7, 7, 12, 300, 499, 41]
    sampling = Sampling(temperature=1.0, repetition_penalty=1.4, frequency_penalty=0.3,
                        presence_penalty=0.2)
    want = apply_all_penalties(logits.clone(), torch.tensor([PROMPT]), torch.tensor([0.2]),
                               torch.tensor([0.3]), torch.tensor([1.4]), [output])
    got = penalised(logits[0].numpy(), sampling, np.unique(PROMPT), output)
    assert np.array_equal(want[0].numpy(), got)
