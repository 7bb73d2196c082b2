"""The plugin under vLLM's Model Runner V2, against V2's own types: its request-state table
(``vllm.v1.worker.gpu.states.RequestState``, seen through ``LogitsProcRequestState``), its
per-step ``LogitsContext`` and its processor loader and parameter validator.

Model Runner V2 cannot run on this CPU (its batch kernels are Triton, and this Triton has no
CPU backend), so the runner's two writes a processor depends on are made here by hand, as its
kernels make them: a request's ids into ``all_token_ids`` and its length into ``total_len``.
The request table itself is V2's, with the host buffer vLLM's CPU worker swaps in for pinned
memory (``vllm.v1.worker.cpu.buffer_utils.UvaBuffer``).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.team import need_vllm

need_vllm()

import torch  # noqa: E402
from vllm import SamplingParams  # noqa: E402
from vllm.v1.sample.logits_processor import LogitsProcessor as V1LogitsProcessor  # noqa: E402
from vllm.v1.worker.gpu.sample.logits_processor import (  # noqa: E402
    LogitsContext,
    LogitsProcRequestState,
    build_custom_logits_processors_params_validator,
)

from fim.vllm.processor import SeamLogitsProcessor, SeamRows  # noqa: E402
from fim.vllm.rows import SeamArgs  # noqa: E402

LEFT, RIGHT = "def f(a, b):\n    total = a +", "\n    return total\n"
PROMPT = [3, 4, 5]
FQCN = "fim.vllm.processor:SeamLogitsProcessor"


@pytest.fixture
def req_states(monkeypatch, table):
    import vllm.v1.worker.cpu.buffer_utils as cpu_buffers
    import vllm.v1.worker.gpu.buffer_utils as gpu_buffers

    monkeypatch.setattr(gpu_buffers, "UvaBuffer", cpu_buffers.UvaBuffer)
    from vllm.v1.worker.gpu.states import RequestState

    return RequestState(max_num_reqs=4, max_model_len=256, max_num_batched_tokens=256,
                        num_speculative_steps=0, vocab_size=table.size,
                        device=torch.device("cpu"))


def _params(seam: bool, left: str = LEFT, right: str = RIGHT) -> SamplingParams:
    extra = SeamArgs(left, right).to_extra_args() if seam else None
    return SamplingParams(temperature=0.0, extra_args=extra)


def _admit(states, req_id: str, tokens: list[int], prompt_len: int = len(PROMPT)) -> int:
    """The runner admitting a request: its slot, prompt length, and (its kernels' part) the
    ids fed at (re)fill in the token table."""
    states.add_request(req_id, prompt_len, tokens, num_computed_tokens=0, max_tokens=64)
    slot = states.req_id_to_index[req_id]
    states.prompt_len.copy_to_uva()
    _commit(states, slot, tokens, at=0)
    return slot


def _commit(states, slot: int, tokens: list[int], at: int | None = None) -> None:
    """The runner committing sampled ids to a slot (what its postprocess kernel writes)."""
    start = int(states.total_len.gpu[slot]) if at is None else at
    states.all_token_ids.gpu[slot, start:start + len(tokens)] = torch.tensor(tokens)
    states.total_len.gpu[slot] = start + len(tokens)


def _ctx(slots: list[int]) -> LogitsContext:
    """A decode step's layout: logits row i is the request in slot ``slots[i]``."""
    idx = torch.tensor(slots, dtype=torch.int32)
    n = len(slots)
    return LogitsContext(expanded_idx_mapping=idx, idx_mapping=idx,
                         idx_mapping_np=np.array(slots, dtype=np.int32),
                         expanded_local_pos=torch.zeros(n, dtype=torch.int32),
                         input_ids=torch.zeros(n, dtype=torch.int32),
                         pos=torch.zeros(n, dtype=torch.int32),
                         seq_lens_upper_bound_np=np.zeros(n, dtype=np.int32))


def _ids(tok, text):
    return tok.encode(text, add_special_tokens=False)


def _processor(table, req_states) -> SeamLogitsProcessor:
    return SeamLogitsProcessor.over(SeamRows(table, penalties_after=False),
                                    LogitsProcRequestState.from_request_state(req_states))


def _best_viable(constraint, line: torch.Tensor) -> int:
    order = sorted(range(line.shape[0]), key=lambda i: (-float(line[i]), i))
    return next(i for i in order if constraint.viable(i))


def test_rows_follow_slots_whatever_the_row_order(table, req_states, random_tokenizer):
    """Only slots whose request has Seam's arguments are constrained; each logits row is
    masked by the constraint of the slot the context maps it to, in any order."""
    proc = _processor(table, req_states)
    plain = _admit(req_states, "plain", PROMPT)
    one = _admit(req_states, "one", PROMPT)
    two = _admit(req_states, "two", PROMPT)
    assert not proc.add_request(plain, _params(False))
    assert proc.add_request(one, _params(True))
    assert proc.add_request(two, _params(True, "x = [", "]\n"))
    gen = torch.Generator().manual_seed(2)
    for slots in ([one, plain, two], [two, one, plain], [plain, two, one]):
        logits = torch.randn(3, table.size, generator=gen) * 3
        before = logits.clone()
        proc.apply(logits, _ctx(slots))
        for at, slot in enumerate(slots):
            if slot == plain:
                assert torch.equal(logits[at], before[at])  # untouched, bit for bit
                continue
            kept = torch.isfinite(logits[at]).nonzero().flatten().tolist()
            assert kept == [_best_viable(proc.rows.rows[slot].constraint, before[at])]
            _commit(req_states, slot, kept)


def test_generated_ids_are_read_from_the_runners_token_table(table, req_states,
                                                             random_tokenizer):
    proc = _processor(table, req_states)
    slot = _admit(req_states, "r", PROMPT)
    proc.add_request(slot, _params(True))
    _commit(req_states, slot, _ids(random_tokenizer, " b"))
    proc.apply(torch.randn(1, table.size), _ctx([slot]))
    _commit(req_states, slot, _ids(random_tokenizer, " * 2"))
    proc.apply(torch.randn(1, table.size), _ctx([slot]))
    row = proc.rows.rows[slot].constraint
    assert row.seq.joined() == " b * 2" and row.complete()


def test_a_reused_slot_starts_afresh(table, req_states, random_tokenizer):
    """V2 recycles slots without telling processors a request left: ``add_request`` resets."""
    proc = _processor(table, req_states)
    slot = _admit(req_states, "first", PROMPT)
    proc.add_request(slot, _params(True))
    _commit(req_states, slot, _ids(random_tokenizer, " b"))
    proc.apply(torch.randn(1, table.size), _ctx([slot]))
    first = proc.rows.rows[slot].constraint
    req_states.remove_request("first")
    again = _admit(req_states, "second", PROMPT)
    assert again == slot
    proc.add_request(again, _params(True, "y = (", ")\n"))
    row = proc.rows.rows[again].constraint
    assert row is not first and row.seen == 0 and row.args.left == "y = ("
    assert proc.rows.drain_finished() == []  # logged when the slot was taken
    req_states.remove_request("second")
    third = _admit(req_states, "third", PROMPT)
    assert not proc.add_request(third, _params(False)) and third not in proc.rows.rows
    logits = torch.randn(1, table.size)
    before = logits.clone()
    proc.apply(logits, _ctx([third]))
    assert torch.equal(logits, before)


def test_a_preempted_request_resumes_with_its_output_replayed(table, req_states,
                                                              random_tokenizer):
    """Resumed after preemption, a request is admitted again (another slot, perhaps) with its
    earlier output in the prefill: the constraint replays it, the language is not rebuilt."""
    proc = _processor(table, req_states)
    slot = _admit(req_states, "r", PROMPT)
    proc.add_request(slot, _params(True))
    done = _ids(random_tokenizer, " a")
    _commit(req_states, slot, done)
    proc.apply(torch.randn(1, table.size), _ctx([slot]))
    req_states.remove_request("r")
    _admit(req_states, "other", PROMPT)  # the freed slot goes to someone else
    earlier = done + _ids(random_tokenizer, " * 3")
    back = _admit(req_states, "r", PROMPT + earlier)
    proc.add_request(back, _params(True))
    proc.apply(torch.randn(1, table.size), _ctx([back]))
    row = proc.rows.rows[back].constraint
    assert row.seq.joined() == " a * 3" and row.complete() and proc.rows.languages.built == 1


def test_vllms_loaders_accept_the_processor_under_both_runners():
    """vLLM loads the one class name under either runner (each checks its own interface), the
    V2 frontend validator turns bad Seam arguments into a request error, and a constructor
    call from neither runner fails loudly."""
    from vllm.exceptions import VLLMValidationError
    from vllm.v1.sample.logits_processor import _load_custom_logitsprocs
    from vllm.v1.worker.gpu.sample.logits_processor.loader import _load_v2_logitsprocs

    assert SeamLogitsProcessor in _load_v2_logitsprocs([FQCN])
    assert SeamLogitsProcessor in _load_custom_logitsprocs([FQCN])
    assert issubclass(SeamLogitsProcessor, V1LogitsProcessor)
    validate = build_custom_logits_processors_params_validator([FQCN])
    validate(_params(True))
    with pytest.raises(VLLMValidationError, match="seam_scope"):
        validate(SamplingParams(extra_args={"seam_left": "x = ", "seam_scope": "galaxy"}))
    with pytest.raises(TypeError, match="neither of vLLM's model runners"):
        SeamLogitsProcessor(None, "what", "is", "this")

