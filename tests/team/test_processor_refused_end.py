"""A refused end through vLLM: the processor's rows refuse the model's stop where the file
cannot end, the row is forced on as the in-process decoder is, and the client, reading the
raw top token the row did not take, goes back to the same middle (``refused_end``).

The model ranks its tokens per step (its choice far ahead, the next ones just behind): it
says ``lue"] = value`` and prefers to end, then ``or 1 or 2 or``.  The rows are driven as
vLLM drives them (``BatchUpdate``, the logits masked in place, greedy sampling), without a
server; what vLLM would stream is made from the generated ids and each step's raw top id.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.team import need_vllm

need_vllm()

import torch  # noqa: E402
from vllm import SamplingParams  # noqa: E402
from vllm.v1.sample.logits_processor import BatchUpdate  # noqa: E402

from fim.api import CompletionRequest, Engine  # noqa: E402
from fim.engines.step_model import StepModel  # noqa: E402
from fim.engines.transformers_engine import backend_from_loaded, load_model  # noqa: E402
from fim.options import StopReason  # noqa: E402
from fim.vllm.answers import finish  # noqa: E402
from fim.vllm.processor import SeamRows  # noqa: E402
from fim.vllm.rows import SeamArgs  # noqa: E402
from fim.vllm.stream import Stream, Streamed  # noqa: E402

EOS = "<|endoftext|>"
LEFT, RIGHT = 'def f(x, value):\n    x["va', ' repr(value)\n'


def ranked(tok, said: str, detour: str) -> list[list[int]]:
    """Per step, the model's ids in its order: ``said``, then the end ahead of the detour."""
    eos = tok.convert_tokens_to_ids(EOS)
    rest = tok.encode(detour, add_special_tokens=False)
    return ([[t] for t in tok.encode(said, add_special_tokens=False)] + [[eos, rest[0]]]
            + [[t] for t in rest[1:]] + [[eos]])


def _logits(width: int, steps: list[list[int]], at: int) -> np.ndarray:
    row = np.zeros(width, dtype=np.float32)
    for k, tid in enumerate(steps[min(at, len(steps) - 1)]):
        row[tid] = 50.0 - k
    return row


class _Ranked(StepModel):
    def __init__(self, width: int, steps: list[list[int]]) -> None:
        super().__init__()
        self.width, self.ranked, self.at = width, steps, 0

    @property
    def vocab_size(self) -> int:
        return self.width

    def prefill(self, ids, interrupt=None, progress=None, keep_cached=False):
        self.at = 0
        return _logits(self.width, self.ranked, 0)

    def step(self, token):
        self.at += 1
        return _logits(self.width, self.ranked, self.at)

    def _forward(self, slot, ids, interrupt):  # pragma: no cover - prefill/step are ranked
        raise NotImplementedError

    _truncate = _copy_prefix = _clear = _forward


def streamed_by_vllm(table, tok, steps: list[list[int]], max_tokens: int = 24) -> Streamed:
    """Greedy rows through ``SeamRows``, streamed as vLLM streams them: each step's text
    and, in its top log-probabilities, the raw model's ids (its choice first)."""
    args = SeamArgs(LEFT, RIGHT, "statement", right_stop=True, right_wraps=True)
    params = SamplingParams(temperature=0.0, extra_args=args.to_extra_args(),
                            max_tokens=max_tokens)
    rows, out = SeamRows(table), []
    rows.update(BatchUpdate(batch_size=1, removed=[], added=[(0, params, [1], out)],
                            moved=[]))
    stream = Stream(None, {}, None, None, stops=(EOS,))  # type: ignore[arg-type]
    got, offset = Streamed(), 0
    for at in range(max_tokens):
        raw = _logits(table.size, steps, at)
        logits = torch.from_numpy(raw.copy())[None, :]
        rows.advance()
        rows.mask(logits)
        tid = int(torch.argmax(logits[0]))  # vLLM's greedy sampler
        out.append(tid)
        done = tid in table.stop_ids
        token = tok.convert_ids_to_tokens(tid) if done else tok.decode([tid])
        top = {(EOS if t in table.stop_ids else tok.decode([t])): float(raw[t]) - 50.0
               for t in steps[min(at, len(steps) - 1)]}
        stream._take(got, {"choices": [{
            "text": "" if done else token, "finish_reason": "stop" if done else None,
            "logprobs": {"text_offset": [offset], "tokens": [token],
                         "token_logprobs": [0.0], "top_logprobs": [top]}}]})
        offset += 0 if done else len(token)
        if done:
            break
    return got


@pytest.mark.parametrize(("detour", "expected"), [
    (" or 1 or 2 or", ('lue"] =', StopReason.REFUSED_END)),
    (" or 1 +", ('lue"] = value or 1 +', StopReason.EOS)),  # a short forced run stays
])
def test_the_client_goes_back_where_the_in_process_decoder_does(table, random_tokenizer,
                                                                 detour, expected):
    steps = ranked(random_tokenizer, 'lue"] = value', detour)
    backend = backend_from_loaded(load_model("random:santacoder", device="cpu", dtype="fp32"))
    backend.step_model = _Ranked(backend.step_model.vocab_size, steps)
    req = CompletionRequest(LEFT, RIGHT, max_tokens=24, scope="statement")
    res = Engine(backend, heal=False).complete(req)
    assert (res.middle, res.stop) == expected
    got = streamed_by_vllm(table, random_tokenizer, steps)
    # The processor refused the end where the in-process constraint did.
    assert "" in got.refused
    middle, stop, parses = finish(req, got)
    assert (middle, stop, parses) == (*expected, True)
