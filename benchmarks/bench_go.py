"""Go, exactly: Seam's Go constraint on held-out Go, beside SynCode, judged by ``gofmt -e``.

Three parts, each writing its section of docs/go.md (``--figures docs/go.md``):

* ``fim``: Boundary and RandSpan fill-in-the-middle holes (`benchmarks.go_cases`) from the
  pinned Debian Go sources (`benchmarks.go_corpus`): every true middle viable at each
  character and complete at its end, complete verdicts on the true and on random non-true
  middles against ``gofmt -e`` (0 unsound is the target), setup (``for_go`` + ``initial``)
  p50/p90 (p90 ≤ 100 ms is the target), feed cost per character and per model token.
  Only Seam applies here: SynCode has no right context.
* ``prefix``: prefix-only holes, SynCode's setting (left context only, the middle runs to
  the end of the file): Seam (``for_go(left, "")``) and SynCode 0.4.16 (its Go grammar and
  incremental parser, in .venv-syncode, `benchmarks.go_syncode`) on the same holes and the
  same corrupted middles.
* ``model``: constrained and unconstrained middles of the bundled model, read from the
  rows `benchmarks.go_model` wrote (generation is slow on a shared CPU, so it runs apart).

    .venv/bin/python -m benchmarks.bench_go fim --figures docs/go.md
    .venv/bin/python -m benchmarks.bench_go prefix --figures docs/go.md
    .venv/bin/python -m benchmarks.bench_go model --rows /tmp/go_model.json --figures docs/go.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.go_cases import file_cases, prefix_only, sample  # noqa: E402
from benchmarks.go_corpus import PACKAGES, corpus  # noqa: E402
from benchmarks.go_seam import SeamRun, measure, model_tokenizer  # noqa: E402
from benchmarks.report import RunRecord, command_line, model_packages, publish  # noqa: E402
from benchmarks.stats import percentile  # noqa: E402


def go_build(left: str, right: str):  # type: ignore[no-untyped-def]
    from go_language import FimLanguage

    return FimLanguage.for_go(left, right, "free")


def _ms(values: list[float], digits: int = 1) -> str:
    if not values:
        return "–"
    return (f"{statistics.median(values):.{digits}f} / {percentile(values, 0.9):.{digits}f} ms")


def _share(n: int, d: int) -> str:
    return f"{n}/{d} ({100 * n / d:.1f}%)" if d else "–"


def _listing(title: str, lines: list[str]) -> list[str]:
    if not lines:
        return [f"{title}: none.", ""]
    return [f"{title} ({len(lines)}):", "", "```", *[x[:200] for x in lines[:15]], "```", ""]


def _seam_rows(r: SeamRun) -> list[str]:
    return [
        _share(r.accepted, r.cases),
        f"{len(r.unsound)} of {r.checked}",
        _share(r.invalid_rejected, r.invalid),
        str(len(r.missed_complete)),
        _ms(r.setup_ms),
        _ms(r.char_ms, 3),
        _ms(r.token_ms, 3),
        ", ".join(f"{n} {m}" for m, n in sorted(r.modes.items(), key=lambda x: -x[1])),
    ]


_ROWS = ("true middles accepted (viable at every character, complete at the end)",
         "unsound complete verdicts (gofmt rejects the file)",
         "non-true middles gofmt rejects, called not complete",
         "middles gofmt accepts, called not complete",
         "setup (`for_go` + `initial`), median / p90",
         "feed per character (+ `is_complete`), median / p90",
         "feed per model token (+ `is_complete`), median / p90",
         "language modes")


def part_fim(args: argparse.Namespace) -> str:
    files = corpus(fetch=not args.offline)
    tok = model_tokenizer()
    runs = {}
    for dataset in ("boundary", "randspan"):
        cases = file_cases(dataset, files, seed=args.seed, per_file=args.per_file)
        runs[dataset] = measure(cases, go_build, corruptions=args.corruptions, seed=args.seed,
                                tokenize=tok)
        print(f"{dataset}: {runs[dataset].accepted}/{runs[dataset].cases}", file=sys.stderr)
    b, r = runs["boundary"], runs["randspan"]
    out = [f"{b.cases} Boundary and {r.cases} RandSpan holes ({args.per_file} of each per file, "
           f"seed {args.seed}) from {len(files)} files of {len(PACKAGES)} packages; each true "
           f"middle and {args.corruptions} random non-true middles checked against "
           "`gofmt -e` on the whole file. Targets: every true middle accepted, 0 unsound, "
           "setup p90 ≤ 100 ms.", "",
           "| figure | Boundary | RandSpan |", "| --- | --- | --- |"]
    out += [f"| {name} | {x} | {y} |"
            for name, x, y in zip(_ROWS, _seam_rows(b), _seam_rows(r), strict=True)]
    out.append("")
    out += _listing("True middles not accepted", b.misses + r.misses)
    out += _listing("Unsound verdicts", b.unsound + r.unsound)
    out += _listing("Middles gofmt accepts that Seam does not call complete",
                    b.missed_complete + r.missed_complete)
    return "\n".join(out)


def part_prefix(args: argparse.Namespace) -> str:
    from benchmarks.go_syncode import run_syncode

    files = corpus(fetch=not args.offline)
    holes = [prefix_only(c, args.hole_chars) for c in sample(
        file_cases("boundary", files, seed=args.seed, per_file=1), args.holes, args.seed)]
    seam = measure(holes, go_build, corruptions=args.corruptions, seed=args.seed,
                   tokenize=model_tokenizer())
    print(f"seam: {seam.accepted}/{seam.cases}", file=sys.stderr)
    sc = run_syncode(holes, args.corruptions, args.seed)
    left_rejected = sum(": rejected at -1 " in m for m in sc.misses)
    out = [f"{len(holes)} prefix-only holes: Boundary cuts (one per file, {len(holes)} files "
           f"sampled, seed {args.seed}) with nothing on the right; the middle runs to the end "
           f"of the file. The first {args.hole_chars} characters of each middle (at most) are "
           "checked step by step, the rest is given in one piece and the end of the file must "
           f"be complete. Each true middle and {args.corruptions} random non-true middles "
           "(corrupted within the checked part, the same for both) are compared with "
           "`gofmt -e`. SynCode " + sc.version + " runs its Go grammar's incremental LALR "
           "parser on the whole text at each model token (how its constrainer steps); its "
           "mask store over the model's vocabulary was not built (see below), so its per-token "
           "figure is parser time, while Seam's is its full feed.", "",
           "| figure | Seam | SynCode |", "| --- | --- | --- |",
           f"| true middles accepted | {_share(seam.accepted, seam.cases)} | "
           f"{_share(sc.accepted, sc.cases)} |",
           f"| … of which rejected already in the left context | 0 | {left_rejected} |",
           f"| unsound complete verdicts (gofmt rejects) | {len(seam.unsound)} of "
           f"{seam.checked} | {len(sc.unsound)} of {sc.checked} |",
           f"| middles gofmt accepts, called not complete | {len(seam.missed_complete)} | "
           f"{len(sc.missed_complete)} |",
           f"| setup per hole (Seam: `for_go` + `initial`; SynCode: parse of the left "
           f"context), median / p90 | {_ms(seam.setup_ms)} | {_ms(sc.setup_ms)} |",
           f"| one-off setup (SynCode: load its cached LALR tables) | – | {sc.parser_s:.2f} s |",
           f"| per model token, median / p90 | {_ms(seam.token_ms, 3)} | "
           f"{_ms(sc.token_ms, 1)} |", ""]
    out += _listing("SynCode: true middles not accepted", sc.misses)
    out += _listing("SynCode: unsound verdicts", sc.unsound)
    out += _listing("Seam: true middles not accepted", seam.misses)
    out += _listing("Seam: unsound verdicts", seam.unsound)
    return "\n".join(out)


def part_model(args: argparse.Namespace) -> str:
    from benchmarks.go_corpus import gofmt_accepts
    from benchmarks.go_model import model_cases

    data = json.loads(args.rows.read_text())
    rows = data["rows"]
    n = len(rows)
    # Judged again here, by the oracle as it is now (the rows' own verdicts came from the
    # run's), on the same holes rebuilt from the pinned corpus.
    cases = {c["id"]: c for c in model_cases(data.get("planned", n), data["seed"])}
    for r in rows:
        case = cases[r["id"]]
        for mode in ("constrained", "unconstrained"):
            m = r[mode]["middle"]
            r[mode]["parses"] = m is not None and gofmt_accepts(case["left"] + m + case["right"])

    def count(mode: str, key: str) -> int:
        return sum(bool(r[mode][key]) for r in rows)

    returned = {m: sum(r[m]["middle"] is not None for r in rows)
                for m in ("constrained", "unconstrained")}
    out = [f"`{data['model']}` ({data['description']}), greedy, at most {data['max_tokens']} "
           f"tokens, scope free, on {n} of {data.get('planned', n)} planned holes (half "
           f"Boundary, half RandSpan, one per file, seed {data['seed']}); each middle judged "
           "by `gofmt -e` on the whole file. Rows written by "
           f"`benchmarks.go_model --json {args.rows.name}`.", "",
           "| figure | constrained (Seam's Go language) | unconstrained |",
           "| --- | --- | --- |",
           f"| middles returned | {returned['constrained']}/{n} | "
           f"{returned['unconstrained']}/{n} |",
           f"| unparsable middles (returned, gofmt rejects the file) | "
           f"{returned['constrained'] - count('constrained', 'parses')} | "
           f"{returned['unconstrained'] - count('unconstrained', 'parses')} |",
           f"| exact match with the true middle | {count('constrained', 'exact')} | "
           f"{count('unconstrained', 'exact')} |", ""]
    bad = [f"{r['id']}: {r['constrained']['middle']!r}" for r in rows
           if r["constrained"]["middle"] is not None and not r["constrained"]["parses"]]
    out += _listing("Constrained middles gofmt rejects", bad)
    out += _listing("Holes with no constrained middle (stop reason)",
                    [f"{r['id']}: {r['constrained']['stop']}" for r in rows
                     if r["constrained"]["middle"] is None])
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("part", choices=("fim", "prefix", "model"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--per-file", type=int, default=1)
    ap.add_argument("--corruptions", type=int, default=2)
    ap.add_argument("--holes", type=int, default=30, help="prefix-only holes")
    ap.add_argument("--hole-chars", type=int, default=40,
                    help="characters of a prefix-only middle checked step by step")
    ap.add_argument("--rows", type=Path, help="benchmarks.go_model's JSON (part model)")
    ap.add_argument("--offline", action="store_true", help="never download the corpus")
    ap.add_argument("--figures", type=Path, help="write the section into this page")
    args = ap.parse_args(argv)
    if args.part == "model" and args.rows is None:
        ap.error("part model needs --rows")
    record = RunRecord(command_line(), packages=model_packages() if args.part == "model"
                       else {})
    body = {"fim": part_fim, "prefix": part_prefix, "model": part_model}[args.part](args)
    record.finish()
    publish(body, record, args.figures, args.part, verb="Rendered" if args.part == "model"
            else "Measured", load=args.part != "model")
    return 0


if __name__ == "__main__":
    sys.exit(main())
