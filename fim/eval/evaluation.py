"""The paper's experiment: run the decoding modes over dataset cases and tabulate the outcome.

For each case the engine runs ``unconstrained`` and ``constrained`` decoding; ``checked`` is
derived from the unconstrained output (the same greedy tokens, cut to the longest parsing
prefix), which is exactly what a separate checked run would produce and saves a third of the
model time.  A mode succeeds on a case when ``ast.parse(left + middle + right)`` succeeds.

The summary has the paper's Table I/II layout (rows: unconstrained ✓, unconstrained ✗ but
checked ✓, checked ✗; columns: constrained ✓ / ✗ / total), plus per mode the success rate,
exact match and edit similarity of the middle against the removed text, mean tokens and time
per token split into model time and constraint time.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from fim import decoding
from fim.api import CompletionRequest
from fim.editor_policy import editor_request
from fim.engine_interface import CompletionEngine
from fim.options import Mode, Scope, StopReason
from quotient.constraint import LanguageMode

#: Every decoding mode, in the tables' order.
EVAL_MODES = (Mode.UNCONSTRAINED, Mode.CHECKED, Mode.CONSTRAINED)


def provenance() -> dict:
    """What produced a report: Seam's commit (and whether the tree had changes), the versions
    of the packages the figures depend on, the machine and its load."""
    import os
    import platform
    import subprocess
    from importlib import metadata

    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                                  timeout=20, check=True).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    versions = {}
    for name in ("llama-cpp-python", "transformers", "torch", "tokenizers", "numpy"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {"commit": git("rev-parse", "--short=12", "HEAD"),
            "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
            "versions": versions, "python": platform.python_version(),
            "machine": f"{platform.processor() or platform.machine()}, "
                       f"{os.cpu_count()} cores, {platform.system()} {platform.release()}",
            "load_at_end": load}


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance (insert, delete, substitute each cost 1)."""
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def edit_similarity(pred: str | None, ref: str) -> float:
    """``1 - distance / max(len)``; 0 for a failed (``None``) prediction, 1 for two empties."""
    if pred is None:
        return 0.0
    longest = max(len(pred), len(ref))
    if longest == 0:
        return 1.0
    return 1.0 - edit_distance(pred, ref) / longest


def _record(case: dict, mode: Mode, middle: str | None, stop: StopReason, tokens: int,
            setup_ms: float, model_ms: float, constraint_ms: float, lang_mode: LanguageMode,
            error: str | None = None) -> dict:
    ok = middle is not None and decoding.parses(case["left"] + middle + case["right"])
    return {
        "id": case["id"],
        "dataset": case["id"].split("/", 1)[0],
        "mode": mode,
        "middle": middle,
        "stop": stop,
        "tokens": tokens,
        "success": ok,
        "exact": middle == case["middle"],
        "edit_similarity": edit_similarity(middle, case["middle"]),
        "setup_ms": setup_ms,
        "model_ms": model_ms,
        "constraint_ms": constraint_ms,
        "lang_mode": lang_mode,
        "error": error,
    }


def run_case(engine: CompletionEngine, case: dict, *, max_tokens: int, top_k: int,
             scope: Scope | str,
             cancel: Callable[[], bool] | None = None,
             modes: Iterable[Mode | str] = EVAL_MODES, policy: str = "paper",
             context_tokens: int | None = None) -> list[dict]:
    """The records of one case for ``modes`` (checked comes with unconstrained).

    ``policy``: ``paper`` (``max_tokens`` and ``scope`` for every case, as in the paper) or
    ``ide`` (what the editor asks at this cursor: ``fim.editor_policy``, with
    ``context_tokens``; ``max_tokens`` and ``scope`` are then the policy's).
    """
    modes = set(modes)
    left, right = case["left"], case["right"]
    out = []

    def request(mode: Mode) -> CompletionRequest:
        if policy == "ide":
            return editor_request(left, right, mode=mode, top_k=top_k,
                                  context_tokens=context_tokens)
        return CompletionRequest(left, right, mode=mode, max_tokens=max_tokens, top_k=top_k,
                                 scope=scope)

    if modes & {Mode.UNCONSTRAINED, Mode.CHECKED}:
        unc = engine.complete(request(Mode.UNCONSTRAINED), cancel)
        out.append(_record(case, Mode.UNCONSTRAINED, unc.middle, unc.stop, unc.tokens,
                           unc.setup_ms, unc.model_ms, 0.0, LanguageMode.NONE))
        t0 = time.perf_counter()
        if unc.middle is None:
            chk_middle, chk_stop = None, unc.stop
        else:
            chk_middle, chk_stop = decoding.checked_cut(left, unc.middle, right, unc.stop)
        check_ms = (time.perf_counter() - t0) * 1e3
        out.append(_record(case, Mode.CHECKED, chk_middle, chk_stop, unc.tokens, unc.setup_ms,
                           unc.model_ms, check_ms, LanguageMode.NONE))
    if Mode.CONSTRAINED in modes:
        con = engine.complete(request(Mode.CONSTRAINED), cancel)
        out.append(_record(case, Mode.CONSTRAINED, con.middle, con.stop, con.tokens,
                           con.setup_ms, con.model_ms, con.constraint_ms, con.mode, con.error))
    return out


def load_records(path: Path) -> list[dict]:
    """Records from a JSONL file written by an earlier (possibly interrupted) run."""
    if not path.is_file():
        return []
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # a line cut short by an interrupted write
    return out


def run(engine: CompletionEngine, cases: Iterable[dict], *, max_tokens: int, top_k: int,
        scope: Scope | str,
        records_path: Path | None = None, progress=None, policy: str = "paper",
        context_tokens: int | None = None,
        modes: Iterable[Mode | str] = EVAL_MODES) -> list[dict]:
    """Run every case in ``modes`` (skipping what ``records_path`` already holds), appending
    records there."""
    modes = [Mode(m) for m in modes]
    # The latest record per (case, mode) wins; a case runs only the modes it lacks.
    latest: dict[tuple[str, str], dict] = {}
    for r in load_records(records_path) if records_path else []:
        latest[(r["id"], r["mode"])] = r
    sink = open(records_path, "a", encoding="utf-8") if records_path else None  # noqa: SIM115
    try:
        for case in cases:
            missing = [m for m in modes if (case["id"], m) not in latest]
            if missing:
                recs = run_case(engine, case, max_tokens=max_tokens, top_k=top_k, scope=scope,
                                modes=missing, policy=policy, context_tokens=context_tokens)
                for r in recs:
                    latest[(r["id"], r["mode"])] = r
                    if sink:
                        sink.write(json.dumps(r) + "\n")
                if sink:
                    sink.flush()
            if progress:
                progress(case)
    finally:
        if sink:
            sink.close()
    return list(latest.values())


def _rate(n: int, total: int) -> float:
    return n / total if total else 0.0


def summarize(records: list[dict]) -> dict:
    """Per dataset: the paper's agreement table and per-mode metrics."""
    by_ds: dict[str, dict[str, dict[str, dict]]] = {}
    for r in records:
        by_ds.setdefault(r["dataset"], {}).setdefault(r["id"], {})[r["mode"]] = r
    out = {}
    for ds, cases in sorted(by_ds.items()):
        cases = {i: m for i, m in cases.items() if set(EVAL_MODES) <= set(m)}
        table = {row: {"constrained_ok": 0, "constrained_fail": 0, "total": 0}
                 for row in ("unconstrained_ok", "unconstrained_fail", "checked_fail", "total")}
        for m in cases.values():
            if m[Mode.UNCONSTRAINED]["success"]:
                row = "unconstrained_ok"
            elif m[Mode.CHECKED]["success"]:
                row = "unconstrained_fail"
            else:
                row = "checked_fail"
            col = "constrained_ok" if m[Mode.CONSTRAINED]["success"] else "constrained_fail"
            for r_, c_ in ((row, col), (row, "total"), ("total", col), ("total", "total")):
                table[r_][c_] += 1
        n = len(cases)
        modes = {}
        for mode in EVAL_MODES:
            rs = [m[mode] for m in cases.values()]
            tokens = sum(r["tokens"] for r in rs)
            per_tok = [r["constraint_ms"] / r["tokens"] for r in rs if r["tokens"]]
            modes[mode] = {
                "success": _rate(sum(r["success"] for r in rs), n),
                "exact_match": _rate(sum(r["exact"] for r in rs), n),
                "edit_similarity": statistics.fmean(r["edit_similarity"] for r in rs) if rs
                else 0.0,
                "mean_tokens": tokens / n if n else 0.0,
                "model_ms_per_token": sum(r["model_ms"] for r in rs) / tokens if tokens else 0.0,
                "constraint_ms_per_token": (sum(r["constraint_ms"] for r in rs) / tokens
                                            if tokens else 0.0),
                "constraint_ms_per_token_median": statistics.median(per_tok) if per_tok else 0.0,
                "setup_ms_median": statistics.median(r["setup_ms"] for r in rs) if rs else 0.0,
                "stops": _count(r["stop"] for r in rs),
            }
        unsound = [i for i, m in cases.items()
                   if m[Mode.CONSTRAINED]["middle"] is not None
                   and not m[Mode.CONSTRAINED]["success"]]
        out[ds] = {
            "cases": n,
            "table": table,
            "modes": modes,
            "constrained_returned_unparsable": unsound,
            "unconstrained_ok_constrained_fail": [
                i for i, m in cases.items()
                if m[Mode.UNCONSTRAINED]["success"] and not m[Mode.CONSTRAINED]["success"]
            ],
            "language_modes": _count(m[Mode.CONSTRAINED]["lang_mode"] for m in cases.values()),
        }
    return out


def _count(items: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in items:
        out[str(x)] = out.get(str(x), 0) + 1
    return dict(sorted(out.items()))


def format_summary(summary: dict) -> str:
    """The tables as text, in the paper's layout."""
    lines = []
    names = {"boundary": "Stack-Boundary", "randspan": "Stack-RandSpan"}
    for ds, s in summary.items():
        t = s["table"]
        lines.append(f"{names.get(ds, ds)}: {s['cases']} cases")
        lines.append(f"{'':28}{'Constrained ✓':>15}{'Constrained ✗':>15}{'Total':>8}")
        for key, label in (("unconstrained_ok", "Unconstrained ✓"),
                           ("unconstrained_fail", "Unconstrained ✗"),
                           ("checked_fail", "Checked Unconstrained ✗"), ("total", "Total")):
            row = t[key]
            lines.append(f"{label:28}{row['constrained_ok']:>15}{row['constrained_fail']:>15}"
                         f"{row['total']:>8}")
        lines.append("")
        lines.append(f"{'mode':15}{'success':>9}{'exact':>8}{'edit sim':>10}{'tokens':>8}"
                     f"{'model ms/tok':>14}{'constr ms/tok':>15}{'(median)':>10}")
        for mode, m in s["modes"].items():
            lines.append(
                f"{mode:15}{m['success']:>9.1%}{m['exact_match']:>8.1%}"
                f"{m['edit_similarity']:>10.3f}{m['mean_tokens']:>8.1f}"
                f"{m['model_ms_per_token']:>14.1f}{m['constraint_ms_per_token']:>15.3f}"
                f"{m['constraint_ms_per_token_median']:>10.3f}"
            )
        if s["constrained_returned_unparsable"]:
            lines.append(f"UNSOUND constrained middles: {s['constrained_returned_unparsable']}")
        lines.append("")
    return "\n".join(lines)


def format_markdown(summary: dict) -> str:
    """The same tables as Markdown (the layout of docs/evaluation.md)."""
    names = {"boundary": "Stack-Boundary", "randspan": "Stack-RandSpan"}
    rows = (("unconstrained_ok", "Unconstrained ✓"),
            ("unconstrained_fail", "Unconstrained ✗ (checked ✓)"),
            ("checked_fail", "Checked unconstrained ✗"), ("total", "Total"))
    lines = []
    for ds, s in summary.items():
        t = s["table"]
        lines += [f"#### {names.get(ds, ds)} ({s['cases']} cases)", "",
                  "| | Constrained ✓ | Constrained ✗ | Total |", "|---|---:|---:|---:|"]
        for key, label in rows:
            r = t[key]
            lines.append(f"| {label} | {r['constrained_ok']} | {r['constrained_fail']} "
                         f"| {r['total']} |")
        lines += ["", "| mode | success | exact match | edit similarity | mean tokens "
                  "| model ms/token | constraint ms/token (mean / median) | stops |",
                  "|---|---:|---:|---:|---:|---:|---:|---|"]
        for mode, m in s["modes"].items():
            constraint = ("–" if mode == Mode.UNCONSTRAINED else
                          f"{m['constraint_ms_per_token']:.3f} / "
                          f"{m['constraint_ms_per_token_median']:.3f}")
            stops = ", ".join(f"{k} {v}" for k, v in m["stops"].items())
            lines.append(
                f"| {mode} | {m['success']:.1%} | {m['exact_match']:.1%} "
                f"| {m['edit_similarity']:.3f} | {m['mean_tokens']:.1f} "
                f"| {m['model_ms_per_token']:.0f} | {constraint} | {stops} |")
        lines.append("")
        if s["constrained_returned_unparsable"]:
            lines += [f"Unsound constrained middles: {s['constrained_returned_unparsable']}", ""]
        if s["unconstrained_ok_constrained_fail"]:
            lines += ["Unconstrained ✓ / constrained ✗: "
                      f"{', '.join(s['unconstrained_ok_constrained_fail'])}", ""]
    return "\n".join(lines)
