"""What building a language on the processor's language workers (``fim.language_cache``, the
vLLM processor's admissions) does to the engine steps running beside it, without vLLM.

A stand-in engine step: a forward pass (``--forward-ms`` of float32 matrix products, which
release the GIL as a model's kernels do) and the step's Python (a running row's constraint fed
and checked, ``--checks`` feeds of a kept language).  The script times, for one large file
(the standard library's ``argparse.py`` by default, cut in its middle):

* the build alone, on the caller's thread;
* steps with nothing else running;
* the step that builds the language itself (the design before the workers: the build inside
  the step that admits the request);
* the steps that run while a worker builds it (started at the first of them), and how many
  steps passed before the build was done, so a row due at its first mask would not wait.

The GIL is the question: the build runs Python, so it competes with the step's Python, and a
forward pass only overlaps it where its kernels release the interpreter.

Usage: ``.venv/bin/python -m benchmarks.bench_language_workers [--figures docs/team.md]``
(writes the ``language-workers`` section).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a file: the root

import torch  # noqa: E402

from benchmarks.report import RunRecord, command_line, publish  # noqa: E402
from fim.language_cache import LanguageCache, python_language  # noqa: E402
from fim.options import Scope  # noqa: E402

RUNNING = ("def total(xs):\n    s = 0\n    for x in xs:\n        s += ", "\n    return s\n")
PROBES = ("x", "x * 2", "x)", "len(x", "x if x else 0", "x\n        s -= 1")


def large_place(name: str) -> tuple[str, str]:
    text = (Path(json.__file__).resolve().parent.parent / name).read_text("utf-8")
    cut = text.index("\n", len(text) // 2) + 1
    return text[:cut] + "    x = ", "\n" + text[cut:]


class Step:
    """The stand-in engine step: products sized to ``forward_ms`` alone, then the checks."""

    def __init__(self, forward_ms: float, checks: int) -> None:
        self.a = torch.randn(384, 384)
        self.products = 1
        self.checks = checks
        self.row = LanguageCache(1).get(*RUNNING, Scope.STATEMENT)
        while self._forward() * 1e3 < forward_ms:
            self.products *= 2

    def _forward(self) -> float:
        t0 = time.perf_counter()
        b = self.a
        for _ in range(self.products):
            b = torch.tanh(self.a @ b)
        return time.perf_counter() - t0

    def __call__(self) -> float:
        t0 = time.perf_counter()
        self._forward()
        lang = self.row.language
        for k in range(self.checks):
            # A fresh memo each round, so the checks are real feeds, not cache hits.
            state = lang.initial if k % 2 else self.row.state
            for text in PROBES:
                state.feed(text)
        return time.perf_counter() - t0


def measure(args: argparse.Namespace) -> dict[str, float]:
    left, right = large_place(args.file)
    step = Step(args.forward_ms, args.checks)
    t0 = time.perf_counter()
    python_language(left, right, Scope.STATEMENT)
    alone = time.perf_counter() - t0
    quiet = [step() for _ in range(args.steps)]
    t0 = time.perf_counter()
    python_language(left + " ", right, Scope.STATEMENT)  # another text: built, not kept
    inline = time.perf_counter() - t0 + step()
    cache = LanguageCache(1, workers=2)
    pending = cache.begin(left + "  ", right, Scope.STATEMENT)
    t0 = time.perf_counter()
    beside, until = [], None
    while pending is not None or len(beside) < args.steps:
        beside.append(step())
        if pending is not None and pending.done():
            until, pending = len(beside), None
            built = time.perf_counter() - t0
        if len(beside) > 10_000:
            raise SystemExit("the build never finished")
    cache.close()
    during = beside[:until]
    return {"alone": alone, "quiet": statistics.median(quiet), "inline": inline,
            "during": statistics.median(during), "during_max": max(during),
            "steps": until, "built": built, "after": statistics.median(beside[until:] or quiet)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--file", default="argparse.py", help="a standard-library file")
    p.add_argument("--forward-ms", type=float, default=50.0)
    p.add_argument("--checks", type=int, default=4)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--switch-ms", type=float, default=None,
                   help="the interpreter's switch interval (default: as the process has it)")
    p.add_argument("--figures", type=Path, default=None)
    args = p.parse_args(argv)
    if args.switch_ms is not None:
        sys.setswitchinterval(args.switch_ms / 1e3)
    record = RunRecord(command_line())
    got = measure(args)
    record.finish()
    ms = {k: v * 1e3 for k, v in got.items() if k != "steps"}
    body = (
        f"The large file: the standard library's `{args.file}` cut in its middle; the "
        f"stand-in step: {args.forward_ms:.0f} ms of matrix products and {args.checks} rounds "
        f"of a running row's feeds; the interpreter's switch interval "
        f"{sys.getswitchinterval() * 1e3:g} ms.\n\n"
        "| building the large file's language alone ms | step ms, nothing else running | "
        "step ms that builds it inside (before the workers) | step ms while a worker builds "
        "it, median / max | steps until built | build ms on the worker, wall | step ms "
        "after |\n|---:|---:|---:|---|---:|---:|---:|\n"
        f"| {ms['alone']:.0f} | {ms['quiet']:.0f} | {ms['inline']:.0f} | "
        f"{ms['during']:.0f} / {ms['during_max']:.0f} | {got['steps']} | {ms['built']:.0f} | "
        f"{ms['after']:.0f} |\n")
    publish(body, record, args.figures, "language-workers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
