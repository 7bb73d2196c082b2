"""What building a newcomer's language does to the engine steps running beside it, without
vLLM: on a worker thread of the engine's process (``fim.language_cache`` with ``workers``) and
in a child process (``processes``, ``fim.language_processes``: what the vLLM server does).

A stand-in engine step: a forward pass (``--forward-ms`` of float32 matrix products, which
release the GIL as a model's kernels do) and the step's Python (a running row's constraint fed
and checked, ``--checks`` feeds of a kept language).  For each file (a small and a large one of
the standard library by default, each cut in its middle) the script times:

* the build alone, on the caller's thread;
* steps with nothing else running;
* the step that builds the language itself (the design before the workers);
* the steps that run while a worker thread builds it, and while a child process does (each
  started at the first of them), and how many steps passed before the build was there.

The question is whether a running request's step grows with the newcomer's file: a thread's
build holds the GIL while it runs Python, so the step's Python and every return from a kernel
waits for it; a child process holds none of this process's GIL (it runs at a lower CPU
priority, so on a machine without spare cores it takes what the step leaves), and this process
only unpickles what it sends.

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
from fim.language_processes import CHILD_NICENESS  # noqa: E402
from fim.options import Scope  # noqa: E402

RUNNING = ("def total(xs):\n    s = 0\n    for x in xs:\n        s += ", "\n    return s\n")
PROBES = ("x", "x * 2", "x)", "len(x", "x if x else 0", "x\n        s -= 1")


def place(name: str) -> tuple[str, str]:
    """A cursor in the middle of the standard library's ``name``, on a line of its own."""
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


def _beside(step: Step, pending, steps: int) -> tuple[list[float], int, float]:
    """Steps run until ``pending`` is built (at least ``steps``), the steps it took, and the
    build's wall time from the first step."""
    t0 = time.perf_counter()
    times: list[float] = []
    until, built = None, 0.0
    while pending is not None or len(times) < steps:
        times.append(step())
        if pending is not None and pending.done():
            until, pending = len(times), None
            built = time.perf_counter() - t0
        if len(times) > 10_000:
            raise SystemExit("the build never finished")
    return times, until, built


def measure(args: argparse.Namespace, name: str, step: Step, children: LanguageCache
            ) -> dict[str, float]:
    left, right = place(name)
    t0 = time.perf_counter()
    python_language(left, right, Scope.STATEMENT)
    alone = time.perf_counter() - t0
    quiet = [step() for _ in range(args.steps)]
    t0 = time.perf_counter()
    python_language(left + " ", right, Scope.STATEMENT)  # another text: built, not kept
    inline = time.perf_counter() - t0 + step()
    threads = LanguageCache(1, workers=2)
    beside, until, built = _beside(step, threads.begin(left + "  ", right, Scope.STATEMENT),
                                   args.steps)
    threads.close()
    during = beside[:until]
    # A new text each time: the child builds it, the cache keeps nothing the next file reuses.
    apart, p_until, p_built = _beside(
        step, children.begin(left + "   ", right, Scope.STATEMENT), args.steps)
    p_during = apart[:p_until]
    return {"chars": len(left) + len(right), "alone": alone, "quiet": statistics.median(quiet),
            "inline": inline, "during": statistics.median(during), "during_max": max(during),
            "steps": until, "built": built,
            "p_during": statistics.median(p_during), "p_max": max(p_during),
            "p_steps": p_until, "p_built": p_built}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--files", default="json/scanner.py,argparse.py",
                   help="standard-library files, comma-separated (small first)")
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
    step = Step(args.forward_ms, args.checks)
    children = LanguageCache(len(args.files.split(",")) + 1, processes=1)
    warm = children.begin("x = ", "\n", Scope.STATEMENT)  # the child started and warm
    warm.join()
    rows = []
    for name in args.files.split(","):
        got = measure(args, name, step, children)
        ms = {k: v * 1e3 for k, v in got.items() if k not in ("steps", "p_steps", "chars")}
        rows.append(
            f"| `{name}` | {got['chars'] / 1e3:.0f} | {ms['alone']:.0f} | {ms['quiet']:.0f} | "
            f"{ms['inline']:.0f} | {ms['during']:.0f} / {ms['during_max']:.0f} | "
            f"{got['steps']} | {ms['p_during']:.0f} / {ms['p_max']:.0f} | {got['p_steps']} | "
            f"{ms['p_built']:.0f} |")
    children.close()
    record.finish()
    body = (
        f"Each file of the standard library cut in its middle; the stand-in step: "
        f"{args.forward_ms:.0f} ms of matrix products and {args.checks} rounds of a running "
        f"row's feeds; the interpreter's switch interval {sys.getswitchinterval() * 1e3:g} ms; "
        f"the child process at niceness {CHILD_NICENESS}.\n\n"
        "| newcomer's file | k chars | its build alone ms | step ms, nothing else running | "
        "step ms that builds it inside | step ms while a thread builds it, median / max | "
        "steps until built | step ms while a child process builds it, median / max | "
        "steps until built | child build to language here ms, wall |\n"
        "|---|---:|---:|---:|---:|---|---:|---|---:|---:|\n" + "\n".join(rows) + "\n")
    publish(body, record, args.figures, "language-workers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
