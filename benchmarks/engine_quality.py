"""Quality of two engines on the same dev cases: `seam eval` records side by side, paired.

The llama.cpp engine must not make suggestions worse than the transformers engine it replaces
on a CPU.  Both run the same cases (same ids, same prompts, greedy), but their logits differ
(llama.cpp runs a 4-bit quantized file, transformers its float32 conversion), so the
middles differ where the model is unsure.  This script pairs the records of two `seam eval`
runs by case id and mode, keeps only the pairs both runs finished, and reports success, exact
match and edit similarity per dataset and mode for each, with the number of constrained
middles that do not parse (it must be 0 for both).

    .venv/bin/python -m fim eval --engine llama.cpp --cases 100 --max-tokens 96 \\
        --context-tokens 256 --records llama.jsonl
    .venv/bin/python -m benchmarks.engine_quality docs/eval/records-96.jsonl llama.jsonl \\
        --names transformers,llama.cpp --figures docs/evaluation.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.report import RunRecord, command_line, model_packages, publish  # noqa: E402
from benchmarks.stats import WonLost, paired_interval, won_lost  # noqa: E402

MODES = ("unconstrained", "checked", "constrained")


def load(path: Path) -> dict[tuple[str, str], dict]:
    """Records by (case id, mode); a later record of the same pair replaces an earlier one."""
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            rec = json.loads(line)
            out[(rec["id"], rec["mode"])] = rec
    return out


def unparsable(rec: dict) -> bool:
    return rec["mode"] == "constrained" and rec["middle"] is not None and not rec["success"]


def paired(first: list[dict], second: list[dict], seed: int = 0) -> str:
    """The second run against the first on the same cases: cases won / lost on success and on
    exact match, and the edit similarity difference with a 95% paired bootstrap interval (an
    interval holding 0 means the runs are within noise of each other on these cases)."""
    pairs = list(zip(first, second, strict=True))

    def won(key: str) -> WonLost:
        return won_lost((b[key], a[key]) for a, b in pairs)

    diffs = [b["edit_similarity"] - a["edit_similarity"] for a, b in pairs]
    return f"{won('success')} | {won('exact')} | {paired_interval(diffs, seed=seed)}"


def table(runs: list[dict], names: list[str]) -> str:
    """Rows per dataset and mode over the pairs every run finished."""
    shared = set.intersection(*(set(r) for r in runs))
    head = ("| dataset | mode | cases | " + " | ".join(
        f"{n}: success / exact / edit sim. / unparsable" for n in names) + " |")
    rows = [head, "|---|---|---:|" + "---|" * len(names)]
    if len(runs) == 2:  # the second against the first, case by case
        vs = f"{names[1]} vs {names[0]}"
        rows[0] += (f" {vs}: success won / lost | exact won / lost | "
                    "edit sim. difference (95% interval) |")
        rows[1] += "---|---|---|"
    datasets = sorted({runs[0][k]["dataset"] for k in shared})
    for dataset in datasets:
        for mode in MODES:
            keys = sorted(k for k in shared if k[1] == mode and runs[0][k]["dataset"] == dataset)
            if not keys:
                continue
            cells = []
            for run in runs:
                recs = [run[k] for k in keys]
                cells.append(
                    f"{sum(r['success'] for r in recs) / len(recs):.0%} / "
                    f"{sum(r['exact'] for r in recs) / len(recs):.0%} / "
                    f"{statistics.fmean(r['edit_similarity'] for r in recs):.3f} / "
                    f"{sum(unparsable(r) for r in recs)}")
            row = f"| {dataset} | {mode} | {len(keys)} | " + " | ".join(cells) + " |"
            if len(runs) == 2:
                row += " " + paired([runs[0][k] for k in keys], [runs[1][k] for k in keys]) + " |"
            rows.append(row)
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("records", type=Path, nargs="+", help="`seam eval --records` files")
    p.add_argument("--names", default=None, help="comma-separated names, one per file")
    p.add_argument("--figures", type=Path, default=None,
                   help="write the table into this page's section (see --section)")
    p.add_argument("--section", default="engines",
                   help="the figures section to write (default: engines)")
    args = p.parse_args(argv)
    names = args.names.split(",") if args.names else [str(r) for r in args.records]
    if len(names) != len(args.records):
        p.error("--names needs one name per records file")
    record = RunRecord(command_line(), packages=model_packages())
    runs = []
    for path in args.records:
        try:
            runs.append(load(path))
        except (OSError, ValueError, KeyError) as err:
            p.error(f"cannot read {path}: {err}")
    record.finish()
    publish(table(runs, names), record, args.figures, args.section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
