"""A refused end through vLLM: the processor's rows refuse the model's stop where the file
cannot end, the row is forced on as the in-process decoder is, and the client, reading the
raw top token the row did not take, goes back to the same middle (``refused_end``).

The model is a tree (``tests.support.tree_model.ends_then_detours``): it says ``lue"] =
value`` and prefers to end, with ``or 1 or 2 or`` just behind.  The rows are driven as
vLLM drives them (``BatchUpdate``, the logits masked in place, greedy sampling), without a
server; what vLLM would stream is made from the generated ids and each step's raw top id.
"""

from __future__ import annotations

import pytest

from tests.support.team import need_vllm

need_vllm()

import torch  # noqa: E402
from vllm import SamplingParams  # noqa: E402
from vllm.v1.sample.logits_processor import BatchUpdate  # noqa: E402

from fim.api import CompletionRequest, Engine  # noqa: E402
from fim.engines.transformers_engine import backend_from_loaded, load_model  # noqa: E402
from fim.options import StopReason  # noqa: E402
from fim.vllm.answers import finish  # noqa: E402
from fim.vllm.processor import SeamRows  # noqa: E402
from fim.vllm.rows import SeamArgs  # noqa: E402
from fim.vllm.stream import Stream, Streamed  # noqa: E402
from tests.support.tree_model import Tree, ends_then_detours  # noqa: E402

EOS = "<|endoftext|>"
LEFT, RIGHT = 'def f(x, value):\n    x["va', ' repr(value)\n'


def tree_of(tok, said: str, detour: str) -> dict:
    """The model: ``said``, then the end just ahead of the detour (``ends_then_detours``)."""
    return ends_then_detours(tok.encode(said, add_special_tokens=False),
                             tok.encode(detour, add_special_tokens=False),
                             tok.convert_tokens_to_ids(EOS))


def streamed_by_vllm(table, tok, model: Tree, max_tokens: int = 24) -> Streamed:
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
    raw = model.prefill([1])
    for _ in range(max_tokens):
        ranked = model.tree.get(tuple(model.path), {model.eos: 40.0})
        logits = torch.from_numpy(raw.copy())[None, :]
        rows.advance()
        rows.mask(logits)
        tid = int(torch.argmax(logits[0]))  # vLLM's greedy sampler
        out.append(tid)
        done = tid in table.stop_ids
        token = tok.convert_ids_to_tokens(tid) if done else tok.decode([tid])
        top = {(EOS if t in table.stop_ids else tok.decode([t])): logit - 50.0
               for t, logit in ranked.items()}
        stream._take(got, {"choices": [{
            "text": "" if done else token, "finish_reason": "stop" if done else None,
            "logprobs": {"text_offset": [offset], "tokens": [token],
                         "token_logprobs": [0.0], "top_logprobs": [top]}}]})
        offset += 0 if done else len(token)
        if done:
            break
        raw = model.step(tid)
    return got


@pytest.mark.parametrize(("detour", "expected"), [
    (" or 1 or 2 or", ('lue"] =', StopReason.REFUSED_END)),
    (" or 1 +", ('lue"] = value or 1 +', StopReason.EOS)),  # a short forced run stays
])
def test_the_client_goes_back_where_the_in_process_decoder_does(table, random_tokenizer,
                                                                 detour, expected):
    tree = tree_of(random_tokenizer, 'lue"] = value', detour)
    backend = backend_from_loaded(load_model("random:santacoder", device="cpu", dtype="fp32"))
    eos = random_tokenizer.convert_tokens_to_ids(EOS)
    backend.step_model = Tree(backend.step_model.vocab_size, tree, eos)
    req = CompletionRequest(LEFT, RIGHT, max_tokens=24, scope="statement")
    res = Engine(backend, heal=False).complete(req)
    assert (res.middle, res.stop) == expected
    got = streamed_by_vllm(table, random_tokenizer, Tree(table.size, tree, eos))
    # The processor refused the end where the in-process constraint did.
    assert "" in got.refused
    middle, stop, parses = finish(req, got)
    assert (middle, stop, parses) == (*expected, True)
