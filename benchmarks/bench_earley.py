"""Speed of the forward Earley recognizers on lark's Python grammar and real stdlib files.

Prints tables (medians and p90 over repeats; the machine is shared, so single runs are noisy):

1. one-time compile of the base grammar (``Grammar.from_lark`` and the recognizer tables), and
   compile of a ``with_rules`` extension of a few hundred new rules on top of it;
2. whole-file throughput (terminals/s) with ``scan_many`` from a fresh root, for the fast
   recognizer (``quotient.fast``, cold DFA and warm DFA) and the reference
   (``quotient.earley``);
3. single ``scan`` latency: from states at sampled positions of the files, the first (not
   memoised) scan of the file's next terminal, and of every other allowed terminal.

Usage: ``.venv/bin/python benchmarks/bench_earley.py [--repeats N] [--no-reference] [files]``
(default files: a fixed set of stdlib modules).
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.py_terminals import (  # noqa: E402
    PYTHON_START,
    file_terminals,
    python_lark_text,
    stdlib_file,
)
from quotient import Grammar, earley, fast  # noqa: E402

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


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def extension_rules(g: Grammar, n: int, seed: int = 0) -> list[tuple[str, tuple[str, ...]]]:
    """`n` rules over new nonterminals ``Q0..`` shaped like quotient rules: a new nonterminal
    followed by a suffix of an existing rule's right side, or a base nonterminal alone."""
    rng = random.Random(seed)
    base_rules = [r for r in g.rules if r[1]]
    news = [f"Q{i}" for i in range(max(1, n // 3))]
    out = []
    for i in range(n):
        lhs = news[i % len(news)]
        _, rhs = rng.choice(base_rules)
        cut = rng.randrange(len(rhs))
        if rng.random() < 0.5 and i + 1 < n:
            out.append((lhs, (news[(i + 1) % len(news)], *rhs[cut:])))
        else:
            out.append((lhs, tuple(rhs[cut:])))
    out.append((news[-1], (PYTHON_START,)))
    return out


def bench_compile(repeats: int) -> tuple[Grammar, list[tuple[str, ...]]]:
    load, comp, ext_make, ext_comp, ext_first = [], [], [], [], []
    g = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        g = Grammar.from_lark(python_lark_text(), PYTHON_START)
        t1 = time.perf_counter()
        fast.automaton(g)
        t2 = time.perf_counter()
        load.append(t1 - t0)
        comp.append(t2 - t1)
    assert g is not None
    rules = extension_rules(g, 300)
    # Warm the base DFA as a server would have after its first request.
    fast.recognizer(g).scan_many(file_terminals(open(stdlib_file("textwrap.py")).read()))
    for _ in range(repeats):
        t0 = time.perf_counter()
        ext = g.with_rules(rules, start="Q0")
        t1 = time.perf_counter()
        root = fast.recognizer(ext)
        t2 = time.perf_counter()
        root.allowed_terminals()
        for t in sorted(root.allowed_terminals())[:20]:
            root.scan(t)
        t3 = time.perf_counter()
        ext_make.append(t1 - t0)
        ext_comp.append(t2 - t1)
        ext_first.append(t3 - t2)
    print("compile (ms)                          median      p90")
    for name, xs in [
        ("Grammar.from_lark(python.lark)", load),
        ("fast tables, base grammar", comp),
        ("with_rules(300 rules) [Grammar]", ext_make),
        ("fast tables, extension", ext_comp),
        ("extension: 20 first scans", ext_first),
    ]:
        print(f"  {name:34s} {statistics.median(xs) * 1e3:9.3f} {pct(xs, 0.9) * 1e3:9.3f}")
    print(f"  base grammar: {len(g.rules)} rules, {g.n_terminals} terminals")
    return g, []


def bench_files(g: Grammar, files: list[str], repeats: int, reference: bool) -> None:
    streams = {}
    for name in files:
        with open(name if os.sep in name else stdlib_file(name), encoding="utf-8") as f:
            streams[name] = file_terminals(f.read())
    print()
    print("whole files, scan_many from a fresh root (terminals/s; median over repeats)")
    header = f"  {'file':16s} {'terminals':>9s} {'fast cold':>10s} {'fast warm':>10s}"
    header += f" {'p90 warm':>10s}"
    if reference:
        header += f" {'reference':>10s}"
    print(header)
    rates_cold, rates_warm = [], []
    for name, word in streams.items():
        cold = []
        for _ in range(max(1, repeats // 2)):
            g2 = Grammar.from_lark(python_lark_text(), PYTHON_START)  # cold DFA: new tables
            t0 = time.perf_counter()
            st = fast.recognizer(g2).scan_many(word)
            cold.append(time.perf_counter() - t0)
            assert st is not None and st.is_complete(), name
        warm = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            st = fast.recognizer(g).scan_many(word)
            warm.append(time.perf_counter() - t0)
            assert st is not None and st.is_complete(), name
        n = len(word)
        rc = n / statistics.median(cold)
        rw = n / statistics.median(warm)
        line = f"  {name:16s} {n:9d} {rc:10.0f} {rw:10.0f} {n / pct(warm, 0.9):10.0f}"
        if reference:
            t0 = time.perf_counter()
            st = earley.recognizer(g).scan_many(word)
            line += f" {n / (time.perf_counter() - t0):10.0f}"
        print(line)
        rates_cold.append(rc)
        rates_warm.append(rw)
    print(
        f"  over files: median {statistics.median(rates_warm):.0f} t/s warm, "
        f"{statistics.median(rates_cold):.0f} t/s cold; min warm {min(rates_warm):.0f} t/s"
    )


def bench_single_scan(g: Grammar, files: list[str], samples: int) -> None:
    """First (non-memoised) scans, in three situations:

    * stepping: ``scan`` one terminal at a time through a whole file (caches warm);
    * after scan_many: a fresh root, ``scan_many`` to a random position, then the next
      terminal and up to 10 other allowed terminals from that state (the decoder's pattern);
    * after gc.collect: the same, with a full collection in between, which evicts the CPU
      caches the way a model forward pass between two decoding steps does.
    """
    rng = random.Random(1)
    stepping: list[float] = []
    rows: dict[str, list[float]] = {}
    for name in files:
        with open(name if os.sep in name else stdlib_file(name), encoding="utf-8") as f:
            word = file_terminals(f.read())
        st = fast.recognizer(g)
        for t in word:
            t0 = time.perf_counter()
            st = st.scan(t)
            stepping.append(time.perf_counter() - t0)
        for label, collect in [("after scan_many", False), ("after gc.collect", True)]:
            nexts = rows.setdefault(f"{label}: next terminal", [])
            others = rows.setdefault(f"{label}: other allowed", [])
            for _ in range(samples):
                pos = rng.randrange(len(word))
                # Drop the previous sample's store first: freeing it is not part of a scan.
                st = nxt = None
                st = fast.recognizer(g).scan_many(word[:pos])
                if collect:
                    gc.collect()
                t0 = time.perf_counter()
                nxt = st.scan(word[pos])
                nexts.append(time.perf_counter() - t0)
                assert nxt is not None
                for t in sorted(st.allowed_terminals() - {word[pos]})[:10]:
                    t0 = time.perf_counter()
                    st.scan(t)
                    others.append(time.perf_counter() - t0)
    print()
    print("single scan from an existing state, first (non-memoised) call (µs)")
    print(f"  {'':38s} {'n':>6s} {'median':>8s} {'p90':>8s} {'mean':>8s}")
    for label, xs in [("stepping through files", stepping), *rows.items()]:
        print(
            f"  {label:38s} {len(xs):6d} {statistics.median(xs) * 1e6:8.1f} "
            f"{pct(xs, 0.9) * 1e6:8.1f} {statistics.mean(xs) * 1e6:8.1f}"
        )


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", default=DEFAULT_FILES)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--samples", type=int, default=30, help="single-scan samples per file")
    ap.add_argument("--no-reference", action="store_true")
    args = ap.parse_args(argv)
    g, _ = bench_compile(args.repeats)
    bench_files(g, args.files, args.repeats, not args.no_reference)
    bench_single_scan(g, args.files, args.samples)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
