"""The right-context stop inside vLLM (issue 19): a greedy row whose likeliest token would
start re-writing the text after the cursor, where the middle is complete, is left only its
stop ids, as the in-process decoder ends there with ``right_context``.

A scripted model says a middle and then goes on with the right context.  The processor's rows
are driven as vLLM drives them (its own ``BatchUpdate``, the engine's live output list, the
logits tensor masked in place, then greedy sampling), without a server; the same script runs
through the in-process engine, and both must end at the same token.
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
from fim.vllm.answers import right_context_end  # noqa: E402
from fim.vllm.processor import SeamRows  # noqa: E402
from fim.vllm.rows import SeamArgs, SeamArgsError  # noqa: E402

EOS = "<|endoftext|>"

# (left, right, what the model says, scope): the model writes the middle, then the right
# context again (from tests/fim/test_right_context_stop.py's cases, plus a wrapped line).
CASES = [
    ('def f():\n    raise ValueError("Event ', 'be None")\n', 'cannot be None")\n',
     "statement"),
    ("from dataclasses import asdict, ", "dataclass\n", "field, dataclass\n", "statement"),
    ("def f(a, b):\n    return g(", ", b)\n", "a, b)\n", "statement"),
    ("def f(a):\n    ", "\n    return a\n", "a += 1\n    return a\n", "block"),
    ('def f():\n    """Stop after the', '\n    tool batch ends.\n    """\n',
     " current tool batch ends.\n", "statement"),
    # issue 29: the re-write starts inside a word of the middle (the hole ends in a word)
    ("class Config(", "odel):\n    x: int = 1\n", "Settings, BaseModel):\n", "free"),
    ("url = ", "R_DOCUMENTATION_URL\n", "PROVIDER_DOCUMENTATION_URL\n", "free"),
    # and a short agreement ("    return") refuted, then the right context written again
    ("def f(x):\n    if x:\n        log(x)\n", "    return True\n",
     "    return False\n    return True\n", "free"),
    # a line of its own, then a copy of two lines further down (``RightStop.copies_lines``)
    ("def f(x):\n    ", "\n    y = x * 2\n    print(x)\n    print(x + y)\n",
     "z = 1\n    print(x)\n    print(x + y)\n", "block"),
]


def _script(tok, said: str) -> list[int]:
    return tok.encode(said, add_special_tokens=False) + [tok.convert_tokens_to_ids(EOS)]


def _logits(width: int, script: list[int], step: int) -> np.ndarray:
    """The scripted model's row at ``step``: its token far ahead, the rest level."""
    row = np.zeros(width, dtype=np.float32)
    row[script[min(step, len(script) - 1)]] = 50.0
    return row


def run_processor(table, tok, left: str, right: str, said: str, scope: str,
                  right_stop: bool = True, max_tokens: int = 24) -> tuple[list[int], int]:
    """Greedy decoding of the script through ``SeamRows`` as vLLM's V1 runner calls it:
    the generated ids (the stop id last, when one ended it) and the row's right stops."""
    script = _script(tok, said)
    args = SeamArgs(left, right, scope, right_stop=right_stop, right_wraps=True)
    params = SamplingParams(temperature=0.0, extra_args=args.to_extra_args(),
                            max_tokens=max_tokens)
    rows, out = SeamRows(table), []
    rows.update(BatchUpdate(batch_size=1, removed=[], added=[(0, params, [1], out)],
                            moved=[]))
    row = rows.rows[0].constraint
    for step in range(max_tokens):
        logits = torch.from_numpy(_logits(table.size, script, step))[None, :].clone()
        rows.advance()
        rows.mask(logits)
        tid = int(torch.argmax(logits[0]))  # vLLM's greedy sampler
        out.append(tid)
        if tid in table.stop_ids:
            break
    return out, row.right_stops


class _Scripted(StepModel):
    """The same script as an in-process model: one token per step."""

    def __init__(self, width: int, script: list[int]) -> None:
        super().__init__()
        self.width, self.script, self.at = width, script, 0

    @property
    def vocab_size(self) -> int:
        return self.width

    def prefill(self, ids, interrupt=None, progress=None, keep_cached=False, hold=False):
        self.at = 0
        return _logits(self.width, self.script, 0)

    def step(self, token):
        self.at += 1
        return _logits(self.width, self.script, self.at)

    def _forward(self, slot, ids, interrupt):  # pragma: no cover - prefill/step are scripted
        raise NotImplementedError

    _truncate = _copy_prefix = _clear = _forward


@pytest.fixture(scope="module")
def in_process():
    backend = backend_from_loaded(load_model("random:santacoder", device="cpu", dtype="fp32"))
    return backend


@pytest.mark.parametrize(("left", "right", "said", "scope"), CASES)
def test_a_greedy_row_ends_where_the_right_context_would_be_rewritten(
        table, random_tokenizer, left, right, said, scope):
    out, right_stops = run_processor(table, random_tokenizer, left, right, said, scope)
    assert right_stops == 1 and out[-1] in table.stop_ids
    # The row stopped before the script's end, and the middle the client makes of it has
    # no re-written text (what the row wrote after the middle, while the agreement with the
    # right context was short, is cut off).
    script = _script(random_tokenizer, said)
    taken = len(out) - 1
    assert taken < len(script) - 1
    decode = random_tokenizer.decode
    req = CompletionRequest(left, right, scope=scope)
    middle = right_context_end(req, decode(out[:-1]), decode(out[-2:-1]),
                               decode(script[taken:taken + 1]))
    assert middle is not None and said.startswith(middle)
    assert not middle.endswith(right.strip()[:3])
    # Without the stop the constraint refuses the duplicate and the row goes on.
    longer, none = run_processor(table, random_tokenizer, left, right, said, scope,
                                 right_stop=False)
    assert none == 0 and len(longer) > len(out)


@pytest.mark.parametrize(("left", "right", "said", "scope"), CASES)
def test_the_processor_and_the_in_process_decoder_end_at_the_same_token(
        table, random_tokenizer, in_process, left, right, said, scope):
    script = _script(random_tokenizer, said)
    in_process.step_model = _Scripted(in_process.step_model.vocab_size, script)
    req = CompletionRequest(left, right, max_tokens=24, scope=scope)
    res = Engine(in_process, heal=False).complete(req)
    assert res.stop == StopReason.RIGHT_CONTEXT
    out, right_stops = run_processor(table, random_tokenizer, left, right, said, scope)
    # Both stopped the model at the same step: the processor's text tokens are the ones the
    # in-process decoder was stepped through.
    taken = len(out) - 1
    assert right_stops == 1 and taken == in_process.step_model.at
    # The client's end from what vLLM streams (the text, its last token, and the model's raw
    # likeliest token at the stop) is the in-process middle, also where the cut falls inside
    # the last token or inside the wanted one.
    decode = random_tokenizer.decode
    middle = right_context_end(req, decode(out[:-1]), decode(out[-2:-1]),
                                decode(script[taken:taken + 1]))
    assert middle == res.middle


def test_a_short_agreement_refuted_by_the_next_token_ends_no_row(table, random_tokenizer):
    """``    return`` is how ``    return True`` begins; ``False`` after it is not (issue 29):
    the row writes its middle to the end."""
    said = "    return False\n"
    out, right_stops = run_processor(table, random_tokenizer,
                                     "def f(x):\n    if x:\n        log(x)\n",
                                     "    return True\n", said, "free")
    assert right_stops == 0 and out == _script(random_tokenizer, said)


def test_a_rewrite_the_model_ends_after_is_cut_by_the_client(table, random_tokenizer,
                                                             in_process):
    """The model writes its line and the right context's next line, then its own stop: the
    row ends by itself, and the client cuts the duplicate off where the in-process decoder
    does."""
    left, right, said = "def f(a):\n    ", "\n    a *= 2\n    return a\n", "a += 1\n    a *= 2\n"
    script = _script(random_tokenizer, said)
    in_process.step_model = _Scripted(in_process.step_model.vocab_size, script)
    req = CompletionRequest(left, right, max_tokens=24, scope="block")
    res = Engine(in_process, heal=False).complete(req)
    assert (res.middle, res.stop) == ("a += 1", StopReason.RIGHT_CONTEXT)
    out, right_stops = run_processor(table, random_tokenizer, left, right, said, "block")
    assert right_stops == 0 and out == script
    decode = random_tokenizer.decode
    assert right_context_end(req, decode(out[:-1]), decode(out[-2:-1]), "",
                             ending=True) == res.middle


def test_a_sampled_row_does_not_take_the_stop(table, random_tokenizer):
    left, right, said, scope = CASES[0]
    args = SeamArgs(left, right, scope, right_stop=True)
    rows = SeamRows(table)
    params = SamplingParams(temperature=0.8, seed=3, extra_args=args.to_extra_args())
    out = random_tokenizer.encode("cannot", add_special_tokens=False)
    rows.update(BatchUpdate(batch_size=1, removed=[], added=[(0, params, [1], out)],
                            moved=[]))
    rows.advance()
    script = _script(random_tokenizer, said)
    rows.mask(torch.from_numpy(_logits(table.size, script, len(out)))[None, :].clone())
    assert rows.rows[0].constraint.right_stops == 0


def test_the_flags_travel_in_the_extra_args():
    args = SeamArgs("x = ", "\n", right_stop=True, right_wraps=False)
    extra = args.to_extra_args()
    assert extra["seam_right_stop"] == 1 and extra["seam_right_wraps"] == 0
    assert SeamArgs.from_extra_args(extra) == args
    # Absent (an older client): off.
    assert not SeamArgs.from_extra_args({"seam_left": "x = ", "seam_right": "\n"}).right_stop
    assert SeamArgs.from_extra_args({**extra, "seam_right_stop": True}).right_stop
    with pytest.raises(SeamArgsError, match="seam_right_stop"):
        SeamArgs.from_extra_args({**extra, "seam_right_stop": "yes"})
