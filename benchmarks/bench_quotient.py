"""Benchmark of the quotient engine on lark's Python grammar and real standard-library files.

Prints a table per measurement:

* right quotient of ``python.lark`` (start ``file_input``) w.r.t. the last N terminals of a
  file (target: <= 100 ms for N = 500), cold (first call, includes compiling the reversed
  grammar's tables) and warm (median of repeats), with the number of derived rules; the
  quotient is checked by recognizing the rest of the file with it;
* `right_quotient_split` on a reversed suffix that branches near its beginning (three
  branches dropping 0, 1 or 2 leading terminals), the shape the Python FIM language uses;
* the reference string recognizer's throughput and single-scan latency (for comparison with
  the fast recognizer, which owns those figures).

Usage: ``.venv/bin/python -m benchmarks.bench_quotient [--suffix 500] [--repeat 7] [FILE...]``
With ``--figures docs/figures.md`` the right-quotient table (and the run's commit, package
versions, machine and load) replaces the ``quotient`` section of that file.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a file: the root

from benchmarks.py_terminals import (  # noqa: E402
    PYTHON_START,
    file_terminals,
    python_lark_text,
    stdlib_file,
)
from benchmarks.report import RunRecord, command_line, write_section  # noqa: E402
from python_language.grammar import lex_python, python_grammar  # noqa: E402
from quotient import Grammar, Nfa, right_quotient, right_quotient_split  # noqa: E402
from quotient.earley import recognizer  # noqa: E402

DEFAULT_FILES = ["textwrap.py", "ast.py", "typing.py", "argparse.py", "dataclasses.py"]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:9.1f}"


def _timed(fn, repeat: int) -> tuple[float, float, float, object]:
    """(median wall, min wall, median CPU) seconds of `repeat` calls, and the last result.

    CPU time (process_time) is reported because the benchmark machine is shared: wall time
    includes waiting for a core."""
    wall, cpu = [], []
    result = None
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return statistics.median(wall), min(wall), statistics.median(cpu), result


def bench_right_quotient(g: Grammar, files: list[str], n: int, repeat: int) -> list[dict]:
    """Right quotients by each file's last `n` terminals; one result row per file."""
    print(f"\nright quotient w.r.t. the last {n} terminals (ms)")
    print(f"{'file':<16}{'terms':>7}{'cold':>9}{'wall med':>9}{'wall min':>9}{'cpu med':>9}"
          f"{'derived':>9}  check")
    rows = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            terms = file_terminals(f.read())
        suffix, prefix = terms[-n:], terms[:-n]
        # Cold: a freshly loaded grammar, whose analysis, reversal and tables are built on
        # the way (loading it is not timed).
        fresh = Grammar.from_lark(python_lark_text(), PYTHON_START)
        gc.collect()  # leftovers of the previous file must not be collected inside the timing
        t0 = time.perf_counter()
        right_quotient(fresh, suffix)
        cold = time.perf_counter() - t0
        med, low, cpu, q = _timed(lambda s=suffix: right_quotient(g, s), repeat)
        st = recognizer(q).scan_many(prefix)
        ok = st is not None and st.is_complete()
        derived = len(q.rules) - q.n_base_rules
        print(f"{os.path.basename(path):<16}{len(terms):>7}{_ms(cold)}{_ms(med)}{_ms(low)}"
              f"{_ms(cpu)}{derived:>9}  {'ok' if ok else 'FAILED'}")
        rows.append({"file": os.path.basename(path), "terminals": len(terms), "cold_ms": cold * 1e3,
                     "wall_ms": med * 1e3, "cpu_ms": cpu * 1e3, "derived": derived, "ok": ok})
    return rows


def quotient_markdown(rows: list[dict], n: int, repeat: int, record: RunRecord) -> str:
    out = [
        f"Right quotient of lark's `python.lark` (start `file_input`) by the last {n} "
        f"terminals of standard-library files (target: ≤ 100 ms); median of {repeat} warm "
        "runs, and a cold run on a freshly loaded grammar. The quotient is checked by "
        "recognizing the rest of the file with it.",
        "",
        "| file | terminals | cold (ms) | warm wall (ms) | warm CPU (ms) | derived rules | check |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        out.append(f"| {r['file']} | {r['terminals']:,} | {r['cold_ms']:.1f} | {r['wall_ms']:.1f}"
                   f" | {r['cpu_ms']:.1f} | {r['derived']:,} | {'ok' if r['ok'] else 'FAILED'} |")
    out += ["", record.markdown()]
    return "\n".join(out)


def bench_split(g: Grammar, files: list[str], n: int, repeat: int) -> None:
    print(f"\nright_quotient_split, {n}-terminal suffix branching into 3 near its start (ms)")
    print(f"{'file':<16}{'wall med':>9}{'wall min':>9}{'cpu med':>9}{'derived':>9}  check")
    for path in files:
        with open(path, encoding="utf-8") as f:
            terms = file_terminals(f.read())
        suffix, prefix = terms[-n:], terms[:-n]
        # Reversed right context: a common chain, then branches skipping 0, 1, 2 terminals.
        rev_common = Nfa.from_symbols(suffix[:2:-1])
        branches = [Nfa.from_symbols(suffix[k:3][::-1]) for k in range(3)]
        rev = rev_common.concat(Nfa.union(*branches))
        med, low, cpu, res = _timed(lambda r=rev: right_quotient_split(g, r), repeat)
        q, starts = res
        # Branch dropping 0 terminals: the real prefix must complete it.
        finals = sorted(starts)
        ok = []
        for k, f in enumerate(finals):
            name = starts[f]
            st = None if name is None else recognizer(q.with_rules([], start=name)).scan_many(
                prefix + suffix[:k])
            ok.append(st is not None and st.is_complete())
        derived = len(q.rules) - q.n_base_rules
        print(f"{os.path.basename(path):<16}{_ms(med)}{_ms(low)}{_ms(cpu)}{derived:>9}  "
              f"{'ok' if all(ok) else 'FAILED ' + str(ok)}")


def bench_reference_recognizer(g: Grammar, files: list[str]) -> None:
    print("\nreference recognizer (quotient.earley), whole files")
    print(f"{'file':<16}{'terms':>7}{'ms':>9}{'terms/s':>9}{'scan med us':>12}")
    for path in files:
        with open(path, encoding="utf-8") as f:
            terms = file_terminals(f.read())
        t0 = time.perf_counter()
        st = recognizer(g).scan_many(terms)
        dt = time.perf_counter() - t0
        assert st is not None and st.is_complete(), path
        # Single-scan latency: fresh scans (not memoised) along the file.
        root = recognizer(g)
        cur, lat = root, []
        for name in terms[:2000]:
            t0 = time.perf_counter()
            cur = cur.scan(name)
            lat.append(time.perf_counter() - t0)
        print(f"{os.path.basename(path):<16}{len(terms):>7}{_ms(dt)}{len(terms) / dt:>9.0f}"
              f"{statistics.median(lat) * 1e6:>12.1f}")


def bench_seam_grammar(files: list[str], n: int, repeat: int) -> None:
    """Right quotient on Seam's own Python grammar, with Seam's lexer."""
    g = python_grammar()
    print(f"\nSeam grammar ({len(g.rules)} rules): right quotient w.r.t. the last {n} terminals")
    print(f"{'file':<16}{'terms':>7}{'wall med':>9}{'wall min':>9}{'cpu med':>9}{'derived':>9}"
          "  check")
    for path in files:
        with open(path, encoding="utf-8") as f:
            try:
                terms = lex_python(f.read())
            except Exception as exc:  # a lexer limitation must not stop the benchmark
                print(f"{os.path.basename(path):<16}  lexer failed: {exc}")
                continue
        suffix, prefix = terms[-n:], terms[:-n]
        right_quotient(g, suffix)  # warm the reversed grammar's tables
        med, low, cpu, q = _timed(lambda s=suffix: right_quotient(g, s), repeat)
        st = recognizer(q).scan_many(prefix)
        ok = st is not None and st.is_complete()
        print(f"{os.path.basename(path):<16}{len(terms):>7}{_ms(med)}{_ms(low)}{_ms(cpu)}"
              f"{len(q.rules) - q.n_base_rules:>9}  {'ok' if ok else 'FAILED'}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--suffix", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--skip-recognizer", action="store_true")
    ap.add_argument("--figures", type=Path, help="write the figures into this file's section")
    args = ap.parse_args()
    record = RunRecord(command_line())
    files = args.files or [stdlib_file(f) for f in DEFAULT_FILES]
    t0 = time.perf_counter()
    g = Grammar.from_lark(python_lark_text(), PYTHON_START)
    print(f"python.lark: {len(g.rules)} rules, {g.n_terminals} terminals, "
          f"loaded in {(time.perf_counter() - t0) * 1000:.0f} ms")
    rows = bench_right_quotient(g, files, args.suffix, args.repeat)
    bench_split(g, files, args.suffix, args.repeat)
    bench_seam_grammar(files, args.suffix, args.repeat)
    if not args.skip_recognizer:
        bench_reference_recognizer(g, files)
    record.finish()
    print("\n" + record.markdown())
    if args.figures:
        write_section(args.figures, "quotient",
                      quotient_markdown(rows, args.suffix, args.repeat, record))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
