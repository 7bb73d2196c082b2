"""Setup and feed cost of `python_language.FimLanguage` as the file around a fixed block grows.

The cursor sits in the same 30-line function in every file; the file is padded with N
top-level functions before and after it. Windowing should keep setup flat: the issue asks
for at most 1.5x the time when the padding grows tenfold. Also reports feed time per
character (each followed by `is_complete`, as the decoder does).

Usage: python -m benchmarks.bench_fim_language [--repeats 15]
With `--figures docs/figures.md` the table (and the run's commit, package versions, machine and
load) replaces the `flat` section of that file.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.report import RunRecord, command_line, write_section  # noqa: E402
from python_language import FimLanguage  # noqa: E402

BLOCK_LEFT = "def target(rows, key=None):\n" + "".join(
    f"    v{k} = [r[{k}] for r in rows if r is not None]\n" for k in range(14)
) + "    total = sum(v0) + "
BLOCK_RIGHT = "len(v1)\n" + "".join(
    f"    v{k} = sorted(v{k}, key=key)\n" for k in range(14)
) + "    return total\n\n\n"
MIDDLE = "sum(v2) * 2 + "


def pad(n: int, tag: str) -> str:
    return "".join(
        f"def {tag}{k}(a, b=1):\n    if a:\n        return a + b\n    return [b] * {k}\n\n\n"
        for k in range(n)
    )


def measure(n_pad: int, repeats: int) -> tuple[float, float, float]:
    left = pad(n_pad, "before") + BLOCK_LEFT
    right = BLOCK_RIGHT + pad(n_pad, "after")
    setup = []
    cpu = []
    feed = []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        lang = FimLanguage.for_python(left, right)
        state = lang.initial()
        setup.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        for ch in MIDDLE:
            t1 = time.perf_counter()
            state = state.feed(ch)
            state.is_complete()
            feed.append(time.perf_counter() - t1)
    assert state.is_complete()
    return statistics.median(setup) * 1e3, statistics.median(cpu) * 1e3, \
        statistics.median(feed) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--pad", type=int, default=50, help="functions on each side (small file)")
    ap.add_argument("--figures", type=Path, help="write the figures into this file's section")
    args = ap.parse_args()
    record = RunRecord(command_line())
    FimLanguage.for_python("x = 1\n", "\n")  # load the grammar and tables once
    rows = []
    for n in (args.pad, args.pad * 10):
        lines = (pad(n, "b") + BLOCK_LEFT + BLOCK_RIGHT + pad(n, "a")).count("\n")
        setup, cpu, feed = measure(n, args.repeats)
        rows.append((lines, setup, cpu, feed))
        print(f"{lines:7d} lines: setup median {setup:7.1f} ms (CPU {cpu:7.1f} ms), "
              f"feed+is_complete median {feed:.3f} ms/char")
    print(f"setup ratio (10x padding): wall {rows[1][1] / rows[0][1]:.2f}x, "
          f"CPU {rows[1][2] / rows[0][2]:.2f}x")
    record.finish()
    print("\n" + record.markdown())
    if args.figures:
        write_section(args.figures, "flat", flat_markdown(rows, args, record))


def flat_markdown(rows: list[tuple[int, float, float, float]], args: argparse.Namespace,
                  record: RunRecord) -> str:
    (small, s_setup, s_cpu, s_feed), (big, b_setup, b_cpu, b_feed) = rows
    return "\n".join([
        "Setup as the file grows around a fixed block (the same 30-line function, padded with "
        f"{args.pad} vs {args.pad * 10} top-level functions on each side; medians of "
        f"{args.repeats} runs):",
        "",
        "| file | setup median | feed + `is_complete` median |",
        "| --- | --- | --- |",
        f"| {small:,} lines | {s_setup:.1f} ms (CPU {s_cpu:.1f}) | {s_feed:.3f} ms/char |",
        f"| {big:,} lines | {b_setup:.1f} ms (CPU {b_cpu:.1f}) | {b_feed:.3f} ms/char |",
        f"| ratio | {b_setup / s_setup:.2f}× wall, {b_cpu / s_cpu:.2f}× CPU | "
        "target ≤ 1.5× |",
        "",
        "(Each repetition feeds a fresh language only a few characters, so the feed figure "
        "includes building that language's DFA states on first use; the development set is "
        "the steady state.)",
        "",
        record.markdown(),
    ])


if __name__ == "__main__":
    main()
