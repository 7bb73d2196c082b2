"""Two commits' latency on the same cursors, from paired runs made in turn (e.g. A, B, B, A).

A shared machine drifts within a run of several minutes, so two sequential runs, one per
commit, can differ by more than a change costs.  Running the commits in turn and pairing the
latencies cursor by cursor cancels what drift the order can cancel.  This script only renders:
it reads ``benchmarks/paired_run.py``'s JSON files (each holds its run record, commit
included, and its rows), groups the runs by commit in the order the first of each appears, and
writes per run its p50 and mean, and per cursor the ratio of the second commit's mean latency
to the first's (median and mean over the cursors), with how many cursors showed the same
suggestion in every run.

    .venv/bin/python -m benchmarks.paired_compare docs/eval/held-ab-*.json \\
        --baseline 64721d8 --figures docs/latency.md --section held-window-paired
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.report import RunRecord, command_line, publish  # noqa: E402


def row_key(row: dict) -> tuple[str, str, str]:
    return row["id"], row["config"], row["client"]


def load(path: Path) -> tuple[dict, dict[tuple[str, str, str], dict]]:
    """A paired run's record and rows by cursor; one line and exit 2 for anything else."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data["run"], {row_key(r): r for r in data["rows"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SystemExit(f"{path}: not a paired_run.py JSON file ({type(exc).__name__}: "
                         f"{exc})") from None


def compare(runs: list[tuple[dict, dict]], baseline: str | None = None) -> str:
    """The markdown: a line per run, then the per-cursor comparison of the two commits (the
    other's latency over ``baseline``'s, a commit prefix; the first run's commit if none)."""
    commits = list(dict.fromkeys(run["commit"] for run, _ in runs))
    if len(commits) != 2:
        raise SystemExit(f"expected runs of two commits, got {len(commits)}: {commits}")
    if baseline is not None:
        if not any(c.startswith(baseline) for c in commits):
            raise SystemExit(f"no run of the baseline commit {baseline}: {commits}")
        commits.sort(key=lambda c: not c.startswith(baseline))
    keys = set.intersection(*(set(rows) for _, rows in runs))
    if not keys:
        raise SystemExit("the runs share no cursor")
    lines = ["| run | commit | started | load (1 min) before | p50 | mean |",
             "|---:|---|---|---:|---:|---:|"]
    for i, (run, rows) in enumerate(runs, 1):
        secs = [rows[k]["seconds"] for k in keys]
        load_before = run.get("load_before") or [float("nan")]
        lines.append(f"| {i} | `{run['commit']}` | {run['started']} | {load_before[0]:.2f} | "
                     f"{statistics.median(secs):.2f} s | {statistics.fmean(secs):.2f} s |")

    def mean_at(commit: str, key) -> float:
        return statistics.fmean(rows[key]["seconds"] for run, rows in runs
                                if run["commit"] == commit)

    def read_before(commit: str) -> str:
        """Of the requests that ran the model, how many found their whole prompt in the
        model's cache (read by the cursor's warm-up before the request came)."""
        servers = [rows[k].get("server") or {} for run, rows in runs if run["commit"] == commit
                   for k in keys]
        ran = [s for s in servers if s.get("prompt_tokens")]
        whole = sum(s.get("cached_tokens") == s["prompt_tokens"] for s in ran)
        return f"{whole} of {len(ran)}"

    ratios = [mean_at(commits[1], k) / mean_at(commits[0], k) for k in sorted(keys)]
    same = sum(len({rows[k]["shown"] or "" for _, rows in runs}) == 1 for k in keys)
    lines += ["", f"Per cursor, `{commits[1]}`'s mean latency over `{commits[0]}`'s "
              f"(n = {len(keys)}): median {statistics.median(ratios):.3f}, mean "
              f"{statistics.fmean(ratios):.3f}; the same suggestion in every run at "
              f"{same} of {len(keys)} cursors.",
              "", "Requests that ran the model and found their whole prompt already read "
              f"(over all runs of each commit): `{commits[0]}` {read_before(commits[0])}, "
              f"`{commits[1]}` {read_before(commits[1])}."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", type=Path, help="paired_run.py JSON files, in run order")
    p.add_argument("--figures", type=Path, default=None)
    p.add_argument("--section", default="held-window-paired")
    p.add_argument("--baseline", default=None,
                   help="the commit (a prefix) whose latency the other's is divided by")
    args = p.parse_args(argv)
    runs = [load(path) for path in args.runs]
    record = RunRecord(command_line()).finish()
    publish(compare(runs, args.baseline), record, args.figures, args.section,
            verb="Rendered", load=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
