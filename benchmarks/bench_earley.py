"""Speed of the forward Earley recognizers on lark's Python grammar and real stdlib files.

Prints tables of medians and p90s over repeats. The machine is shared, so every figure is
given twice: wall-clock time and this process's CPU time (``time.process_time``); under load
the CPU figure is the better estimate of an idle machine's wall-clock time.

1. compile: ``Grammar.from_lark`` of python.lark, the fast recognizer's tables for it
   (one-time), and for a ``with_rules`` extension: a real right quotient by a file's last 500
   terminals (built by ``Grammar.right_quotient``, the per-request case);
2. parsing the prefix of that file with the quotient grammar: cold (the extension's own DFA
   states are built on the way) and warm;
3. whole files with ``scan_many`` from a fresh root: the fast recognizer with a cold DFA
   (fresh grammar) and a warm one, and the reference recognizer (``quotient.earley``);
4. single first (non-memoised) ``scan`` calls: stepping through files, after a ``scan_many``
   to a random position (the next terminal and up to 10 other allowed ones: the decoder's
   pattern), and the same after ``gc.collect()``, which evicts CPU caches roughly as a model
   forward pass between two decoding steps does.

Usage: ``.venv/bin/python -m benchmarks.bench_earley [--repeats N] [--samples N]
[--no-reference] [files]`` (default files: a fixed set of stdlib modules). With
``--check-stdlib`` it times nothing and instead runs both recognizers over every stdlib module
(plus randomly corrupted copies) and reports any disagreement. With ``--figures
docs/figures.md`` the summary (and the run's commit, package versions, machine and load)
replaces the ``earley`` section of that file, or ``earley-check`` for ``--check-stdlib``.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import sys
import time
import tokenize
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.py_terminals import (  # noqa: E402
    PYTHON_START,
    file_terminals,
    python_lark_text,
    stdlib_file,
)
from benchmarks.report import RunRecord, command_line, write_section  # noqa: E402
from benchmarks.stats import percentile as pct  # noqa: E402
from quotient import Grammar, earley, fast, lr0, right_quotient  # noqa: E402

DEFAULT_FILES = [
    "textwrap.py",
    "shlex.py",
    "heapq.py",
    "difflib.py",
    "argparse.py",
    "typing.py",
    "pathlib.py",
    "tarfile.py",
]


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def timed(fn: Callable[[], object]) -> tuple[float, float, object]:
    """(wall seconds, CPU seconds, result) of one call."""
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - w0, time.process_time() - c0, out


def terminals(name: str) -> list[str]:
    with open(name if os.sep in name else stdlib_file(name), encoding="utf-8") as f:
        return file_terminals(f.read())


def fresh_grammar() -> Grammar:
    return Grammar.from_lark(python_lark_text(), PYTHON_START)


def bench_compile(repeats: int, quotient_file: str) -> tuple[Grammar, dict]:
    rows: dict[str, tuple[list[float], list[float]]] = {}

    def add(label: str, wall: float, cpu: float) -> None:
        w, c = rows.setdefault(label, ([], []))
        w.append(wall)
        c.append(cpu)

    g = None
    for _ in range(repeats):
        wall, cpu, g = timed(fresh_grammar)
        add("Grammar.from_lark(python.lark)", wall, cpu)
        wall, cpu, _ = timed(lambda: (g.analysis, lr0.automaton(g)))  # noqa: B023
        add("analysis + fast tables: base grammar", wall, cpu)
    assert isinstance(g, Grammar)
    word = terminals(quotient_file)
    suffix, prefix = word[-500:], word[:-500]
    fast.recognizer(g).scan_many(word)  # a server's base DFA is warm after its first request
    n_rules = 0
    for k in range(repeats):
        # A different suffix each time, so that nothing is cached between repeats.
        wall, cpu, q = timed(lambda: right_quotient(g, word[-500 - k :]))  # noqa: B023
        add("right_quotient(g, 500 terminals)", wall, cpu)
        assert isinstance(q, Grammar) and q.base is g
        n_rules = len(q.rules) - len(g.rules)
        # The extension's analysis (items and derived sets, extended from the base's) and
        # its fast tables: the per-request compile cost.
        wall, cpu, _ = timed(lambda: (q.analysis, lr0.automaton(q)))  # noqa: B023
        add("analysis + fast tables: the extension", wall, cpu)
        wall, cpu, st = timed(lambda: fast.recognizer(q).scan_many(prefix[: len(prefix) - k]))  # noqa: B023
        add(f"quotient: parse {len(prefix)}-terminal prefix, cold", wall, cpu)
        wall, cpu, st = timed(lambda: fast.recognizer(q).scan_many(prefix[: len(prefix) - k]))  # noqa: B023
        add(f"quotient: parse {len(prefix)}-terminal prefix, warm", wall, cpu)
    del suffix
    print(f"compile and extension (ms; median of {repeats})   wall      p90      cpu")
    for label, (w, c) in rows.items():
        print(f"  {label:42s} {med(w) * 1e3:8.2f} {pct(w, 0.9) * 1e3:8.2f} {med(c) * 1e3:8.2f}")
    print(
        f"  base grammar: {len(g.rules)} rules, {g.n_terminals} terminals; quotient of "
        f"{quotient_file}: +{n_rules} rules"
    )
    extension = rows["analysis + fast tables: the extension"]
    return g, {"extension_rules": n_rules, "extension_ms": med(extension[0]) * 1e3,
               "extension_cpu_ms": med(extension[1]) * 1e3}


def bench_files(g: Grammar, files: list[str], repeats: int, reference: bool) -> dict:
    print()
    print("whole files, scan_many from a fresh root (terminals/s, median over repeats)")
    header = f"  {'file':14s} {'terms':>6s} {'cold wall':>10s} {'cold cpu':>9s}"
    header += f" {'warm wall':>10s} {'warm p90':>9s} {'warm cpu':>9s}"
    if reference:
        header += f" {'ref wall':>9s} {'ref cpu':>8s}"
    print(header)
    warm_cpu_rates, warm_wall_rates, cold_wall_rates = [], [], []
    largest: dict = {}
    sizes = []
    for name in files:
        word = terminals(name)
        n = len(word)
        cold_w, cold_c, warm_w, warm_c = [], [], [], []
        for _ in range(max(1, repeats // 2)):
            g2 = fresh_grammar()  # a cold DFA: new tables, nothing built yet
            wall, cpu, st = timed(lambda: fast.recognizer(g2).scan_many(word))  # noqa: B023
            assert st is not None and st.is_complete(), name
            cold_w.append(wall)
            cold_c.append(cpu)
        for _ in range(repeats):
            wall, cpu, st = timed(lambda: fast.recognizer(g).scan_many(word))  # noqa: B023
            assert st is not None and st.is_complete(), name
            warm_w.append(wall)
            warm_c.append(cpu)
            st = None
        line = (
            f"  {name:14s} {n:6d} {n / med(cold_w):10.0f} {n / med(cold_c):9.0f}"
            f" {n / med(warm_w):10.0f} {n / pct(warm_w, 0.9):9.0f} {n / med(warm_c):9.0f}"
        )
        if reference:
            wall, cpu, st = timed(lambda: earley.recognizer(g).scan_many(word))  # noqa: B023
            st = None
            line += f" {n / wall:9.0f} {n / cpu:8.0f}"
        print(line)
        warm_cpu_rates.append(n / med(warm_c))
        warm_wall_rates.append(n / med(warm_w))
        cold_wall_rates.append(n / med(cold_w))
        sizes.append(n)
        if n > largest.get("terminals", 0):
            largest = {"file": name, "terminals": n, "wall_s": med(warm_w), "cpu_s": med(warm_c)}
    print(
        f"  median over files: warm {med(warm_wall_rates):.0f} t/s wall, "
        f"{med(warm_cpu_rates):.0f} t/s cpu; cold {med(cold_wall_rates):.0f} t/s wall; "
        f"slowest file warm {min(warm_wall_rates):.0f} t/s wall"
    )
    return {"files": len(files), "min_terminals": min(sizes), "max_terminals": max(sizes),
            "warm_wall_rate": med(warm_wall_rates), "warm_cpu_rate": med(warm_cpu_rates),
            "largest": largest}


def bench_single_scan(g: Grammar, files: list[str], samples: int) -> dict:
    rng = random.Random(1)
    rows: dict[str, tuple[list[float], list[float]]] = {"stepping through files": ([], [])}
    wall_clock, cpu_clock = time.perf_counter, time.process_time
    for name in files:
        word = terminals(name)
        st = fast.recognizer(g)
        w, c = rows["stepping through files"]
        for t in word:
            w0, c0 = wall_clock(), cpu_clock()
            st = st.scan(t)
            w.append(wall_clock() - w0)
            c.append(cpu_clock() - c0)
        for label, collect in [("after scan_many", False), ("after gc.collect", True)]:
            nw, nc = rows.setdefault(f"{label}: next terminal", ([], []))
            ow, oc = rows.setdefault(f"{label}: other allowed", ([], []))
            for _ in range(samples):
                pos = rng.randrange(len(word))
                # Drop the previous sample's store first: freeing it is not part of a scan.
                st = nxt = None
                st = fast.recognizer(g).scan_many(word[:pos])
                if collect:
                    gc.collect()
                w0, c0 = wall_clock(), cpu_clock()
                nxt = st.scan(word[pos])
                nw.append(wall_clock() - w0)
                nc.append(cpu_clock() - c0)
                assert nxt is not None
                for t in sorted(st.allowed_terminals() - {word[pos]})[:10]:
                    w0, c0 = wall_clock(), cpu_clock()
                    st.scan(t)
                    ow.append(wall_clock() - w0)
                    oc.append(cpu_clock() - c0)
    print()
    print("single scan from an existing state, first (non-memoised) call (µs)")
    print(
        f"  {'':38s} {'n':>6s} {'median':>8s} {'p90':>8s} {'mean':>8s} {'cpu med':>8s}"
        f" {'cpu p90':>8s}"
    )
    for label, (w, c) in rows.items():
        print(
            f"  {label:38s} {len(w):6d} {med(w) * 1e6:8.1f} {pct(w, 0.9) * 1e6:8.1f} "
            f"{statistics.mean(w) * 1e6:8.1f} {med(c) * 1e6:8.1f} {pct(c, 0.9) * 1e6:8.1f}"
        )
    print(
        "  (a wall figure far above its CPU figure means the process was not running:"
        " another process had the core)"
    )
    step_w, step_c = rows["stepping through files"]
    gc_w, _ = rows["after gc.collect: next terminal"]
    return {"median_us": med(step_w) * 1e6, "p90_us": pct(step_w, 0.9) * 1e6,
            "cpu_median_us": med(step_c) * 1e6, "after_gc_median_us": med(gc_w) * 1e6}


def earley_markdown(compiled: dict, whole: dict, scan: dict, record: RunRecord) -> str:
    big = whole["largest"]
    return "\n".join([
        "On lark's `python.lark` (start `file_input`), fed the terminal streams of "
        "standard-library files (`benchmarks/py_terminals.py`):",
        "",
        "| figure | measured | target |",
        "| --- | --- | --- |",
        f"| recognition throughput, warm tables, median over {whole['files']} files "
        f"({whole['min_terminals']:,}–{whole['max_terminals']:,} terminals) | "
        f"{whole['warm_wall_rate'] / 1e3:.0f}k terminals/s wall, "
        f"{whole['warm_cpu_rate'] / 1e3:.0f}k CPU | ≥ 20,000/s |",
        f"| the largest, {big['file']} ({big['terminals']:,} terminals), warm | "
        f"{big['wall_s']:.2f} s wall ({big['cpu_s']:.2f} s CPU) | 10k terminals ≤ 0.5 s |",
        f"| one `scan` from an existing state, stepping through the files | "
        f"median {scan['median_us']:.1f} µs, p90 {scan['p90_us']:.1f} µs "
        f"({scan['after_gc_median_us']:.1f} µs right after a full GC) | median ≤ 50 µs |",
        f"| compiling a `with_rules` extension's analysis and fast tables "
        f"(+{compiled['extension_rules']:,} rules) | {compiled['extension_ms']:.2f} ms "
        f"({compiled['extension_cpu_ms']:.2f} ms CPU) | — |",
        "",
        record.markdown(),
    ])


def check_stdlib(g: Grammar, variants: int = 3, seed: int = 7) -> tuple[int, int]:
    """Differential run over every stdlib module this interpreter has: the fast and the
    reference recognizer on each file's stream and on `variants` copies with one random
    edit each must reject at the same terminal, or end in the same completeness with the same
    allowed terminals. Prints differences; returns their number."""
    import sysconfig

    names = sorted(g.terminals)
    rng = random.Random(seed)

    def run(make: Callable[[Grammar], object], word: list[str]) -> object:
        st = make(g)
        for i, t in enumerate(word):
            st = st.scan(t)  # type: ignore[attr-defined]
            if st is None:
                return i
        return (st.is_complete(), st.allowed_terminals())  # type: ignore[attr-defined]

    stdlib = sysconfig.get_paths()["stdlib"]
    compared = differ = 0
    for name in sorted(os.listdir(stdlib)):
        if not name.endswith(".py"):
            continue
        try:
            word = terminals(os.path.join(stdlib, name))
        except (tokenize.TokenError, SyntaxError, ValueError):
            continue  # not tokenizable, or an operator lark's grammar lacks
        streams = [word]
        for _ in range(variants):
            w = list(word)
            pos = rng.randrange(len(w))
            edit = rng.choice("rdi")
            if edit == "r":
                w[pos] = rng.choice(names)
            elif edit == "d":
                del w[pos]
            else:
                w.insert(pos, rng.choice(names))
            streams.append(w)
        for w in streams:
            compared += 1
            a, b = run(fast.recognizer, w), run(earley.recognizer, w)
            if a != b:
                differ += 1
                print(f"  DIFFERENCE in {name}: fast {a!r:.60} reference {b!r:.60}")
    print(f"stdlib check: {compared} streams compared, {differ} differences")
    return compared, differ


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("files", nargs="*", default=DEFAULT_FILES)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--samples", type=int, default=30, help="single-scan samples per file")
    ap.add_argument("--no-reference", action="store_true")
    ap.add_argument(
        "--check-stdlib",
        action="store_true",
        help="instead of timing, compare fast and reference on the whole stdlib",
    )
    ap.add_argument("--figures", type=Path, help="write the figures into this file's section")
    args = ap.parse_args(argv)
    record = RunRecord(command_line())
    if args.check_stdlib:
        compared, differ = check_stdlib(fresh_grammar())
        record.finish()
        if args.figures:
            write_section(args.figures, "earley-check", (
                "The fast recognizer against the reference (`quotient.earley`) on every "
                "standard-library module's terminal stream and 3 randomly edited copies of "
                f"each: {compared:,} streams, {differ} differences (rejection position, or "
                "completeness and allowed terminals at the end).\n\n" + record.markdown()))
        return 1 if differ else 0
    g, compiled = bench_compile(args.repeats, args.files[0])
    whole = bench_files(g, args.files, args.repeats, not args.no_reference)
    scan = bench_single_scan(g, args.files, args.samples)
    record.finish()
    print("\n" + record.markdown())
    if args.figures:
        write_section(args.figures, "earley", earley_markdown(compiled, whole, scan, record))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
