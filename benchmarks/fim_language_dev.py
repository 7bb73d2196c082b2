"""Development-set measurement of `python_language.FimLanguage`.

Builds Stack-Boundary and Stack-RandSpan cases (`fim.eval.datasets`) from the standard library and
reports, over all cases:

* completeness — the true middle is accepted at every character and `is_complete()` holds at
  its end;
* soundness at the end — over the true middle and random corruptions of it (insert, delete or
  replace a character, an extra closing bracket), agreement of `is_complete()` with
  `ast.parse(left + middle + right)` on the whole file, and the share of invalid
  corruptions rejected;
* setup time (`for_python` + `initial`) and feed time per character (with an `is_complete`
  call after each).

Usage: python -m benchmarks.fim_language_dev [--cases 500] [--corruptions 4] [--json out.json]
With `--figures docs/figures.md` the table (and the run's commit, package versions, machine and
load) replaces the section named by `--section` (default `dev`) of that file.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.report import RunRecord, command_line, write_section  # noqa: E402
from benchmarks.stats import percentile  # noqa: E402
from fim.eval.datasets import build_cases  # noqa: E402
from lexer.cpython import parses  # noqa: E402  (ast.parse, warnings silenced)
from python_language import FimLanguage  # noqa: E402

CLOSERS = ")]}"
ALPHABET = "abcxyz_019 ()[]{}:.,=+-*'\"\n\t#\\"


def corrupt(middle: str, rng: random.Random, alphabet: str = ALPHABET) -> str:
    """A random non-true middle: one character of ``alphabet`` inserted, one deleted or
    replaced, or a closer inserted."""
    kind = rng.choice(["insert", "delete", "replace", "closer"])
    pos = rng.randint(0, len(middle))
    if kind == "insert":
        return middle[:pos] + rng.choice(alphabet) + middle[pos:]
    if kind == "closer":
        return middle[:pos] + rng.choice(CLOSERS) + middle[pos:]
    if not middle:
        return rng.choice(alphabet)
    pos = min(pos, len(middle) - 1)
    if kind == "delete":
        return middle[:pos] + middle[pos + 1:]
    return middle[:pos] + rng.choice(alphabet) + middle[pos + 1:]


def accepts(lang: FimLanguage, middle: str) -> bool:
    st = lang.initial().feed(middle)
    return st is not None and st.is_complete()


def run(cases: list[dict], corruptions: int, seed: int) -> dict:
    rng = random.Random(seed)
    setup_ms: list[float] = []
    setup_cpu_ms: list[float] = []
    feed_ms: list[float] = []
    modes: dict[str, int] = {}
    incomplete: list[str] = []
    agree = total = 0
    accepted = accepted_valid = 0
    invalid = rejected = 0
    disagreements: list[str] = []
    for case in cases:
        left, right, middle = case["left"], case["right"], case["middle"]
        t0, c0 = time.perf_counter(), time.process_time()
        lang = FimLanguage.for_python(left, right)
        st = lang.initial()
        setup_ms.append((time.perf_counter() - t0) * 1000)
        setup_cpu_ms.append((time.process_time() - c0) * 1000)
        mode = str(lang.mode)
        modes[mode] = modes.get(mode, 0) + 1
        ok = True
        for k, ch in enumerate(middle):
            t0 = time.perf_counter()
            nxt = st.feed(ch)
            if nxt is not None:
                nxt.is_complete()
            feed_ms.append((time.perf_counter() - t0) * 1000)
            if nxt is None:
                ok = False
                incomplete.append(f"{case['id']}: rejected at {k} {middle[:k + 1]!r}")
                break
            st = nxt
        if ok and not st.is_complete():
            ok = False
            incomplete.append(f"{case['id']}: not complete at the end")
        candidates = [middle] + [corrupt(middle, rng) for _ in range(corruptions)]
        for m in candidates:
            truth = parses(left + m + right)
            got = accepts(lang, m) if m != middle else ok
            total += 1
            agree += truth == got
            accepted += got
            accepted_valid += got and truth
            if truth != got:
                disagreements.append(f"{case['id']}: middle={m!r} ours={got} ast={truth}")
            if m != middle and not truth:
                invalid += 1
                rejected += not got
    n = len(cases)
    return {
        "cases": n,
        "complete": n - len(incomplete),
        "completeness": (n - len(incomplete)) / n if n else 0.0,
        "agreement": agree / total if total else 0.0,
        "precision": accepted_valid / accepted if accepted else 1.0,
        "accepted_middles": accepted,
        "checked_middles": total,
        "invalid_corruptions": invalid,
        "invalid_rejected": rejected / invalid if invalid else 1.0,
        "setup_ms_median": statistics.median(setup_ms),
        "setup_ms_p90": percentile(setup_ms, 0.9) if setup_ms else 0,
        "setup_cpu_ms_median": statistics.median(setup_cpu_ms),
        "setup_cpu_ms_p90": percentile(setup_cpu_ms, 0.9) if setup_cpu_ms else 0,
        "feed_ms_median": statistics.median(feed_ms) if feed_ms else 0.0,
        "feed_ms_mean": statistics.fmean(feed_ms) if feed_ms else 0.0,
        "modes": modes,
        "incomplete": incomplete[:50],
        "disagreements": disagreements[:50],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=500, help="cases per dataset")
    ap.add_argument("--corruptions", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--per-file", type=int, default=3)
    ap.add_argument("--max-file-chars", type=int, default=40_000,
                    help="largest file to take cases from (0: any size)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--figures", type=Path, help="write the figures into this file")
    ap.add_argument("--section", default="dev", help="the section of --figures")
    args = ap.parse_args()
    record = RunRecord(command_line())
    report: dict = {}
    for dataset in ("boundary", "randspan"):
        cases = build_cases(dataset, args.cases, seed=args.seed, per_file=args.per_file,
                            max_file_chars=args.max_file_chars or None)
        r = run(cases, args.corruptions, args.seed)
        report[dataset] = r
        print(f"{dataset}: {r['complete']}/{r['cases']} complete "
              f"({100 * r['completeness']:.2f}%), ast.parse agrees on "
              f"{100 * r['precision']:.2f}% of {r['accepted_middles']} accepted middles "
              f"(both ways: {100 * r['agreement']:.2f}% of {r['checked_middles']}), "
              f"invalid rejected {100 * r['invalid_rejected']:.2f}% "
              f"of {r['invalid_corruptions']}, setup median {r['setup_ms_median']:.1f} ms "
              f"p90 {r['setup_ms_p90']:.1f} ms (CPU: median {r['setup_cpu_ms_median']:.1f} ms, "
              f"p90 {r['setup_cpu_ms_p90']:.1f} ms), feed+is_complete median "
              f"{r['feed_ms_median']:.3f} ms/char (mean {r['feed_ms_mean']:.3f}), "
              f"modes {r['modes']}")
        for line in r["incomplete"][:10] + r["disagreements"][:10]:
            print("   ", line[:300])
    record.finish()
    report["run"] = record.as_dict()
    print("\n" + record.markdown())
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    if args.figures:
        write_section(args.figures, args.section, dev_markdown(report, args, record))


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def dev_markdown(report: dict, args: argparse.Namespace, record: RunRecord) -> str:
    b, r = report["boundary"], report["randspan"]
    size = f"up to {args.max_file_chars:,} characters" if args.max_file_chars else "of any size"
    cases = (f"{b['cases']} Stack-Boundary and {r['cases']} Stack-RandSpan cases from the "
             f"standard library (files {size}, {_count(args.per_file, 'case')} per file, seed "
             f"{args.seed}), each with the true middle and "
             f"{_count(args.corruptions, 'random corruption')} (insert, delete, replace a "
             "character, an extra closing bracket):")

    def percent(x: float) -> str:
        return f"{100 * x:.2f}%"

    def both(fn) -> str:
        return f"{fn(b)} | {fn(r)}"

    def modes(d: dict) -> str:
        return ", ".join(f"{n} {m}" for m, n in sorted(d["modes"].items(), key=lambda x: -x[1]))

    rows = [
        ("completeness: true middle accepted at every character and complete at its end",
         both(lambda d: f"{d['complete']}/{d['cases']} ({percent(d['completeness'])})"), "≥ 99.9%"),
        ("soundness: `ast.parse` accepts the file, among middles `is_complete()` accepts",
         both(lambda d: f"{percent(d['precision'])} of {d['accepted_middles']:,}"), "≥ 99.9%"),
        ("agreement with `ast.parse` both ways (all checked middles)",
         both(lambda d: f"{percent(d['agreement'])} of {d['checked_middles']:,}"), "—"),
        ("invalid corruptions rejected",
         both(lambda d: f"{percent(d['invalid_rejected'])} of {d['invalid_corruptions']:,}"),
         "≥ 99.5%"),
        ("setup (`for_python` + `initial`), median",
         both(lambda d: f"{d['setup_ms_median']:.1f} ms (CPU {d['setup_cpu_ms_median']:.1f})"),
         "≤ 100 ms"),
        ("setup, p90",
         both(lambda d: f"{d['setup_ms_p90']:.1f} ms (CPU {d['setup_cpu_ms_p90']:.1f})"),
         "≤ 300 ms"),
        ("feed per character with an `is_complete` after each, median",
         both(lambda d: f"{d['feed_ms_median']:.3f} ms"), "≤ 0.1 ms"),
        ("modes", both(modes), "—"),
    ]
    out = [cases, "", "| figure | Stack-Boundary | Stack-RandSpan | target |",
           "| --- | --- | --- | --- |"]
    out += [f"| {name} | {values} | {target} |" for name, values, target in rows]
    misses = [line for d in (b, r) for line in d["incomplete"] + d["disagreements"]]
    out += ["", "True middles not accepted, and disagreements with `ast.parse`"
            + (f" ({len(misses)}):" if misses else ": none."), ""]
    if misses:
        out += ["```"] + [line[:200] for line in misses[:20]] + ["```", ""]
    out.append(record.markdown())
    return "\n".join(out)


if __name__ == "__main__":
    main()
