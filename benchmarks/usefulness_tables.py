"""The tables of ``benchmarks/usefulness.py``: per configuration and kind of cursor, per
package, paired on the same cursors, and the cursors only context could tell (issue 20:
modules by job)."""

from __future__ import annotations

import statistics

from benchmarks.stats import percentile
from benchmarks.usefulness_cases import KINDS, Config

# ----- reporting ---------------------------------------------------------------------------------


def summarize(rows: list[dict], variants: list[str]) -> dict:
    out = {}
    for kind in KINDS:
        for variant in variants:
            rs = [r for r in rows if r["kind"] == kind and r["variant"] == variant]
            if not rs:
                continue
            secs = [r["seconds"] for r in rs]
            out[f"{kind}/{variant}"] = {
                "cases": len(rs),
                "success": statistics.fmean(r["success"] for r in rs),
                "exact": statistics.fmean(r["exact"] for r in rs),
                "edit_similarity": statistics.fmean(r["edit_similarity"] for r in rs),
                "accepted": statistics.fmean(r["accepted"] for r in rs),
                "p50_s": statistics.median(secs), "p90_s": percentile(secs, 0.9),
                "context_tokens": statistics.fmean(r["context_tokens"] for r in rs),
                "prompt_tokens": statistics.fmean(r["prompt_tokens"] for r in rs),
                "unparsable": sum(r["unparsable"] for r in rs),
                **_against_off(rows, rs, kind),
            }
    return out


def _against_off(rows: list[dict], rs: list[dict], kind: str) -> dict:
    """Cases this configuration got exactly right and ``off`` did not ("won"), and the
    other way round ("lost"): the paired view of a gain on the same cursors."""
    off = {r["id"]: r["exact"] for r in rows if r["variant"] == "off" and r["kind"] == kind}
    paired = [(r["exact"], off[r["id"]]) for r in rs if r["id"] in off]
    if not paired or rs[0]["variant"] == "off":
        return {"won": None, "lost": None}
    return {"won": sum(a and not b for a, b in paired),
            "lost": sum(b and not a for a, b in paired)}


def pairs_table(rows: list[dict], pairs: str) -> str:
    """``a:b,...``: for each pair of configurations, the cases ``a`` got exactly right and
    ``b`` did not (won) and the other way round (lost), and the mean edit-similarity
    difference, per kind of cursor, on the cases both ran."""
    lines = ["| cursor | configuration | against | cases | exact: won / lost | "
             "edit sim. difference |", "| --- | --- | --- | --- | --- | --- |"]
    for pair in [p for p in pairs.split(",") if p.strip()]:
        a, _, b = pair.partition(":")
        for kind in KINDS:
            first = {r["id"]: r for r in rows if r["variant"] == a and r["kind"] == kind}
            second = {r["id"]: r for r in rows if r["variant"] == b and r["kind"] == kind}
            both = [i for i in first if i in second]
            if not both:
                raise SystemExit(f"--pairs {pair}: no {kind} cases ran in both")
            won = sum(first[i]["exact"] and not second[i]["exact"] for i in both)
            lost = sum(second[i]["exact"] and not first[i]["exact"] for i in both)
            diff = statistics.fmean(first[i]["edit_similarity"] - second[i]["edit_similarity"]
                                    for i in both)
            lines.append(f"| {kind.replace('_', '-')} | {a} | {b} | {len(both)} | "
                         f"{won} / {lost} | {diff:+.3f} |")
    return "\n".join(lines)


def by_package(rows: list[dict], variants: list[str]) -> dict:
    out = {}
    for pkg in dict.fromkeys(r["package"] for r in rows):
        for variant in variants:
            rs = [r for r in rows if r["package"] == pkg and r["variant"] == variant]
            if rs:
                out[f"{pkg}/{variant}"] = {
                    "cases": len(rs), "exact": statistics.fmean(r["exact"] for r in rs),
                    "edit_similarity": statistics.fmean(r["edit_similarity"] for r in rs)}
    return out


def table(summary: dict, packages: dict) -> str:
    lines = ["| cursor | context | cases | success | exact | edit sim. | accepted whole | "
             "exact vs off: won / lost | p50 / p90 s | context tok. | prompt tok. | "
             "unparsable |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for key, s in summary.items():
        kind, variant = key.split("/")
        vs = "-" if s.get("won") is None else f"{s['won']} / {s['lost']}"
        lines.append(
            f"| {kind.replace('_', '-')} | {variant} | {s['cases']} | {s['success']:.0%} | "
            f"{s['exact']:.0%} | {s['edit_similarity']:.3f} | {s['accepted']:.0%} | {vs} | "
            f"{s['p50_s']:.1f} / {s['p90_s']:.1f} | {s['context_tokens']:.0f} | "
            f"{s['prompt_tokens']:.0f} | {s['unparsable']} |")
    lines += ["", "| package / context | cases | exact | edit sim. |", "| --- | --- | --- | --- |"]
    for key, s in packages.items():
        lines.append(f"| {key} | {s['cases']} | {s['exact']:.0%} | "
                     f"{s['edit_similarity']:.3f} |")
    return "\n".join(lines)


def subset_table(rows: list[dict], names: list[str]) -> str:
    """Exact match on the cursors where the file's window alone cannot tell the answer."""
    if not rows or "outside" not in rows[0]:
        return ""
    lines = ["Cursors whose true text names something the file's prompt window does not show "
             "(*outside*), and of those, the ones where the project context (all sources) "
             "holds that name (*in context*): exact match per configuration.", "",
             "| cursor | subset | cases | " + " | ".join(names) + " |",
             "| --- | --- | --- | " + " | ".join("---" for _ in names) + " |"]
    for kind in KINDS:
        for flag in ("outside", "in_context"):
            ids = {r["id"] for r in rows if r["kind"] == kind and r.get(flag)}
            if not ids:
                continue
            cells = []
            for name in names:
                rs = [r for r in rows if r["variant"] == name and r["id"] in ids]
                cells.append(f"{statistics.fmean(r['exact'] for r in rs):.0%}" if rs else "-")
            lines.append(f"| {kind.replace('_', '-')} | {flag.replace('_', ' ')} | {len(ids)} | "
                         + " | ".join(cells) + " |")
    return "\n".join(lines)


def describe(configs: list[Config]) -> str:
    """What each row's configuration is, as the server would have it."""
    lines = ["| context | sources | budget (tokens) | window | right | left at a new place |",
             "| --- | --- | --- | --- | --- | --- |"]
    for c in configs:
        lines.append(
            f"| {c.name} | {c.variant} | {c.budget or 'auto'} | {c.context or 'auto'} | "
            f"{c.right or 'server'} | {'widened' if c.widened else c.left} |")
    return "\n".join(lines)
