"""Request settings that mask or force tokens on their own, next to Seam's processor.

vLLM masks ids for ``min_tokens``, ``bad_words``, ``allowed_token_ids`` and structured outputs
before the logits processors run, and forces ids for a thinking budget or trace replay after
them.  Combined with Seam's arguments such a setting could leave a row with no finite entry (the
only viable ids are the stop ids, and ``min_tokens`` masked them) or overwrite the mask, so a
constrained request carrying one is refused at admission by vLLM's own validators (an HTTP 400
naming it); a finite ``logit_bias`` is accepted, and vLLM's real sampler then still only
samples viable ids.  Behind the refusal, a row whose kept ids are all ``-inf`` ends on a stop id
instead of letting vLLM's sampler pick from a row of ``-inf``.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.support.team import need_vllm

need_vllm()

import torch  # noqa: E402
from vllm import SamplingParams  # noqa: E402
from vllm.config import VllmConfig  # noqa: E402
from vllm.exceptions import VLLMValidationError  # noqa: E402
from vllm.sampling_params import StructuredOutputsParams  # noqa: E402
from vllm.v1.sample.logits_processor import (  # noqa: E402
    BatchUpdate,
    LogitsProcessors,
    validate_logits_processors_parameters,
)
from vllm.v1.sample.logits_processor.builtin import (  # noqa: E402
    LogitBiasLogitsProcessor,
    MinTokensLogitsProcessor,
)
from vllm.v1.sample.metadata import SamplingMetadata  # noqa: E402
from vllm.v1.sample.sampler import Sampler  # noqa: E402
from vllm.v1.worker.gpu.sample.logits_processor import (  # noqa: E402
    build_custom_logits_processors_params_validator,
)

from fim.vllm.processor import SeamLogitsProcessor, SeamRows  # noqa: E402
from fim.vllm.rows import SeamArgs  # noqa: E402

LEFT, RIGHT = "x = (", ")\nprint(x)\n"
SEAM = SeamArgs(LEFT, RIGHT).to_extra_args()
PROMPT = [5, 9, 40]

REFUSED = {  # the name the error must carry: the settings
    "min_tokens": dict(min_tokens=2),
    "bad_words": dict(bad_words=["print"]),
    "allowed_token_ids": dict(allowed_token_ids=[1, 2, 3]),
    "structured_outputs": dict(structured_outputs=StructuredOutputsParams(regex="[0-9]+")),
    "thinking_token_budget": dict(thinking_token_budget=8),
    "trace_decode_token_ids": dict(trace_decode_token_ids=[4, 5]),
    "logit_bias": dict(logit_bias={7: float("-inf")}),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_setting_that_fights_the_constraint_is_refused_by_vllms_validators(name):
    """Under both runners' validators (the one vLLM's front end runs at admission, whose
    error is the HTTP 400); the same setting without Seam's arguments is vLLM's business."""
    v2 = build_custom_logits_processors_params_validator([SeamLogitsProcessor])
    for validate in (lambda p: validate_logits_processors_parameters([SeamLogitsProcessor], p),
                     v2):
        with pytest.raises(VLLMValidationError, match=name):
            validate(SamplingParams(extra_args=SEAM, **REFUSED[name]))
        validate(SamplingParams(**REFUSED[name]))


def test_settings_that_do_not_fight_are_accepted():
    for settings in (dict(logit_bias={7: 100.0, 8: -100.0}), dict(min_tokens=0, bad_words=[]),
                     dict(temperature=0.8, top_k=5, top_p=0.9, min_p=0.1, seed=3,
                          repetition_penalty=1.2, logprobs=1)):
        SeamLogitsProcessor.validate_params(SamplingParams(extra_args=SEAM, **settings))


def _metadata(params: SamplingParams, output: list[int], procs: LogitsProcessors
              ) -> SamplingMetadata:
    """vLLM's sampling metadata for a batch of one request without penalties."""
    return SamplingMetadata(
        temperature=torch.tensor([params.temperature]),
        all_greedy=params.temperature < 1e-5, all_random=params.temperature >= 1e-5,
        top_p=None, top_k=None, generators={0: torch.Generator().manual_seed(1)},
        max_num_logprobs=None, no_penalties=True, prompt_token_ids=None,
        frequency_penalties=torch.tensor([0.0]), presence_penalties=torch.tensor([0.0]),
        repetition_penalties=torch.tensor([1.0]), output_token_ids=[output],
        allowed_token_ids_mask=None, bad_words_token_ids={}, logitsprocs=procs)


def _sample(table, params: SamplingParams, output: list[int], builtin, seed: int) -> int:
    """One step of vLLM's V1 sampler, its builtin processor before Seam's as vLLM orders
    them, on random logits."""
    seam = SeamLogitsProcessor.over(SeamRows(table))
    added = BatchUpdate(batch_size=1, removed=[], added=[(0, params, PROMPT, output)],
                        moved=[])
    for proc in (builtin, seam):
        proc.update_state(added)
    logits = torch.randn(1, table.size, generator=torch.Generator().manual_seed(seed)) * 4
    out = Sampler()(logits, _metadata(params, output, LogitsProcessors([builtin, seam])))
    return int(out.sampled_token_ids[0, 0])


def _dead_end(table, tokenizer) -> list[int]:
    """An output the constraint cannot continue: from there only the stop ids are viable."""
    rows = SeamRows(table)
    rows.add(0, SamplingParams(extra_args=SEAM), None, [])
    bad = tokenizer.encode("]", add_special_tokens=False)  # "x = (]" never parses
    assert not rows.rows[0].constraint.viable(bad[0])
    return bad[:1]


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_row_whose_stop_ids_were_masked_before_it_still_ends_on_a_stop(
        table, random_tokenizer, temperature):
    """``min_tokens`` got past admission (a processor loaded without the check would let it):
    vLLM's min-tokens processor masks the stop ids, the only viable ones, before Seam's; the
    sampler must still draw a stop id, not whatever it draws from a row of ``-inf``."""
    # The stop id placed as in Qwen's vocabulary, far from id 0 ("!" there), which is what
    # vLLM's argmax takes from a row of -inf (the test tokenizer's end of text is id 0).
    table = replace(table, stop_ids=frozenset({table.size - 1}))
    stops = sorted(table.stop_ids)
    for seed in range(4):
        params = SamplingParams(temperature=temperature, min_tokens=8, extra_args=SEAM,
                                stop_token_ids=stops)
        min_tokens = MinTokensLogitsProcessor(VllmConfig(), torch.device("cpu"), False)
        token = _sample(table, params, _dead_end(table, random_tokenizer), min_tokens, seed)
        assert token in table.stop_ids, token


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_logit_bias_is_ranked_and_masked_like_the_model_s_logits(table, temperature):
    """A bias of +100 on ids the constraint refuses here: vLLM adds it before Seam's
    processor, which masks them anyway; the draw is viable."""
    rows = SeamRows(table)
    rows.add(0, SamplingParams(extra_args=SEAM), None, [])
    constraint = rows.rows[0].constraint
    unviable = [t for t in range(table.size) if not constraint.viable(t)][:20]
    assert unviable
    for seed in range(4):
        params = SamplingParams(temperature=temperature, seed=seed, extra_args=SEAM,
                                logit_bias={t: 100.0 for t in unviable})
        bias = LogitBiasLogitsProcessor(VllmConfig(), torch.device("cpu"), False)
        token = _sample(table, params, [], bias, seed)
        assert constraint.viable(token), token
