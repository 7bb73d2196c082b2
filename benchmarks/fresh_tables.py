"""Scoring and tables of the fresh-code benchmark (``benchmarks/fresh_usefulness.py``).

Per row (one cursor, one configuration): exact match, edit similarity, the characters a
word-by-word accept keeps (the common prefix of suggestion and truth), whether there was no
suggestion, latency.  Per corpus, cursor kind and kind of text: the means and p50/p90.
Paired on the same cursors: exact won / lost against another configuration and 95% bootstrap
intervals of the differences in exact match and edit similarity.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Iterable

from benchmarks.stats import percentile
from fim.eval.evaluation import edit_similarity

KIND_LABELS = {
    "inside_line": "inside a line", "rest_of_line": "rest of a line",
    "empty_line": "empty line", "after_header": "after a header",
    "block_start": "block start",
}
#: The issue's groups: mid-line = inside a line and rest of a line together.
GROUPS = {"mid-line": ("inside_line", "rest_of_line"), "empty line": ("empty_line",),
          "after a header": ("after_header",), "block start": ("block_start",)}


def common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def score(shown: str | None, truth: str) -> dict:
    """What a user gets from ``shown`` where the author wrote ``truth``."""
    text = shown or ""
    return {"exact": text == truth,
            "edit_similarity": edit_similarity(shown, truth),
            "accepted_chars": common_prefix(text, truth),
            "accepted_share": common_prefix(text, truth) / len(truth) if truth else 1.0,
            "none": not shown}



def stats(rows: list[dict]) -> dict:
    """Means over ``rows``; latency only over the rows that paid their prompt (the first
    configuration at each cursor), ``nan`` when none did."""
    secs = [r["seconds"] for r in rows if r.get("latency_is_new_place", True)] or [math.nan]
    return {
        "cursors": len(rows),
        # an anchor's rows where it did not ask (no latency to report)
        "not_asked": sum(r.get("requested") is False for r in rows),
        "exact": statistics.fmean(r["exact"] for r in rows),
        "edit_similarity": statistics.fmean(r["edit_similarity"] for r in rows),
        "accepted_chars": statistics.fmean(r["accepted_chars"] for r in rows),
        "accepted_share": statistics.fmean(r["accepted_share"] for r in rows),
        "none": statistics.fmean(r["none"] for r in rows),
        "p50_s": statistics.median(secs), "p90_s": percentile(secs, 0.9),
        "unparsable": sum(r["unparsable"] for r in rows),
        "right_context_stops": sum(r["stop"] == "right_context" for r in rows),
    }


def _select(rows: list[dict], **want: object) -> list[dict]:
    def ok(r: dict) -> bool:
        return all(r[k] in v if isinstance(v, tuple) else r[k] == v for k, v in want.items())
    return [r for r in rows if ok(r)]


def _row(label: list[str], s: dict) -> str:
    return ("| " + " | ".join(label) + f" | {s['cursors']} | {s['exact']:.0%} | "
            f"{s['edit_similarity']:.3f} | {s['accepted_chars']:.1f} "
            f"({s['accepted_share']:.0%}) | {s['none']:.0%} | {_latency(s)} | "
            f"{s['unparsable']} | {s['right_context_stops']} |")


def _latency(s: dict) -> str:
    if math.isnan(s["p50_s"]):
        return "(not asked)" if s["not_asked"] == s["cursors"] else "(prompt cached)"
    return f"{s['p50_s']:.1f} / {s['p90_s']:.1f}"


_HEAD = ("| exact | edit sim. | accepted chars (share) | no suggestion | p50 / p90 s | "
         "unparsable | right-context stops |")


def kinds_table(rows: list[dict], corpora: list[str], configs: list[str]) -> str:
    """Every corpus, cursor kind, kind of text and configuration."""
    lines = ["| corpus | cursor | text | configuration | cursors " + _HEAD,
             "| --- " * 12 + "|"]
    for corpus in corpora:
        for kind, label in KIND_LABELS.items():
            for text in ("code", "prose"):
                for config in configs:
                    rs = _select(rows, corpus=corpus, kind=kind, text=text, config=config)
                    if rs:
                        lines.append(_row([corpus, label, text, config], stats(rs)))
    return "\n".join(lines)


def groups_table(rows: list[dict], corpora: list[str], configs: list[str]) -> str:
    """The issue's groups (code and prose together) and all cursors, per corpus."""
    lines = ["| corpus | cursors of | configuration | cursors " + _HEAD, "| --- " * 11 + "|"]
    for corpus in corpora:
        for name, kinds in [*GROUPS.items(), ("all", tuple(KIND_LABELS))]:
            for config in configs:
                rs = _select(rows, corpus=corpus, kind=kinds, config=config)
                if rs:
                    lines.append(_row([corpus, name, config], stats(rs)))
    return "\n".join(lines)


def bootstrap(diffs: list[float], seed: int = 0, n: int = 2000) -> tuple[float, float]:
    """95% percentile interval of the mean of ``diffs`` (paired per cursor)."""
    rng = random.Random(seed)
    k = len(diffs)
    means = sorted(sum(diffs[rng.randrange(k)] for _ in range(k)) / k for _ in range(n))
    return means[int(0.025 * n)], means[int(0.975 * n) - 1]


def paired(rows: list[dict], a: str, b: str, select: Callable[[dict], bool]
           ) -> dict | None:
    first = {r["id"]: r for r in rows if r["config"] == a and select(r)}
    second = {r["id"]: r for r in rows if r["config"] == b and select(r)}
    both = [i for i in first if i in second]
    if not both:
        return None
    ex = [float(first[i]["exact"]) - float(second[i]["exact"]) for i in both]
    es = [first[i]["edit_similarity"] - second[i]["edit_similarity"] for i in both]
    return {"cursors": len(both),
            "won": sum(first[i]["exact"] and not second[i]["exact"] for i in both),
            "lost": sum(second[i]["exact"] and not first[i]["exact"] for i in both),
            "exact_diff": statistics.fmean(ex), "exact_ci": bootstrap(ex),
            "edit_diff": statistics.fmean(es), "edit_ci": bootstrap(es, seed=1)}


def pairs_table(rows: list[dict], corpora: list[str], pairs: Iterable[tuple[str, str]]) -> str:
    lines = ["| corpus | cursors of | configuration | against | cursors | exact: won / lost | "
             "exact difference (95% interval) | edit sim. difference (95% interval) |",
             "| --- " * 8 + "|"]
    for corpus in corpora:
        for a, b in pairs:
            for name, kinds in [*GROUPS.items(), ("all", tuple(KIND_LABELS))]:
                p = paired(rows, a, b, lambda r, c=corpus, k=kinds: r["corpus"] == c
                           and r["kind"] in k)
                if p is None:
                    continue
                lines.append(
                    f"| {corpus} | {name} | {a} | {b} | {p['cursors']} | {p['won']} / "
                    f"{p['lost']} | {p['exact_diff']:+.0%} ({p['exact_ci'][0]:+.0%} to "
                    f"{p['exact_ci'][1]:+.0%}) | {p['edit_diff']:+.3f} ({p['edit_ci'][0]:+.3f} "
                    f"to {p['edit_ci'][1]:+.3f}) |")
    return "\n".join(lines)


def changed_examples(rows: list[dict], a: str, b: str, limit: int = 12) -> str:
    """Cursors where two configurations' suggestions differ: what the lever changed."""
    first = {r["id"]: r for r in rows if r["config"] == a}
    out = ["| cursor | truth | " + a + " | " + b + " |", "| --- | --- | --- | --- |"]
    n = 0
    for r in rows:
        if r["config"] != b or r["id"] not in first or first[r["id"]]["shown"] == r["shown"]:
            continue
        cell = [r["id"], r["truth"], first[r["id"]]["shown"], r["shown"]]
        out.append("| " + " | ".join("`" + repr(c)[:70].replace("|", "\\|") + "`"
                                     for c in cell) + " |")
        n += 1
        if n >= limit:
            break
    return "\n".join(out) if n else ""


def anchor_note(rows: list[dict], settings: dict | None) -> str:
    """What the ``llama_vim`` rows are: its settings, how often it asked, and whose latency."""
    mine = [r for r in rows if r["config"] == "llama_vim"]
    asked = [r for r in mine if r.get("requested")]
    s = settings or {}
    server = s.get("server", {})
    limits = (f"time limits on (generation {s.get('t_max_predict_ms')} ms, then stop at the "
              "next line end: its answers depend on the machine's load)"
              if s.get("time_limits") else "time limits lifted")
    trigger = ("automatic completion: not asked where more than "
               f"{s.get('max_line_suffix')} characters follow the cursor on its line"
               if s.get("auto_fim") else "asked at every cursor (the trigger key)")
    return (f"`llama_vim`: llama-server on the same GGUF ({server.get('threads')} threads, "
            f"context {server.get('context')}, batch {server.get('batch')}, cache reuse "
            f"{server.get('cache_reuse')}) driven as llama.vim drives it "
            f"(`benchmarks/llama_vim.py`): {limits}; {trigger} (asked at {len(asked)} of "
            f"{len(mine)} cursors; an unasked cursor counts as no suggestion); "
            f"{sum(bool(r.get('truncated')) for r in asked)} answers with the context "
            "truncated.  Its p50 / p90 is its own, over the cursors it asked at: its server's "
            "prompt cache holds only its own requests (llama.vim's ring and the previous "
            "cursor's prompt), never Seam's; Seam's column is its first configuration's at a "
            "new place.")


def _first_by(row: dict, key: Callable[[list], object]) -> str | None:
    """The candidate a ranking shows first (``row["candidates"]``: middle, logprob, tokens,
    greedy), or ``None`` when there is none."""
    cands = row.get("candidates") or []
    return max(cands, key=key)[0] if cands else None


def _as_shown(row: dict, middle: str | None, early: Callable[[dict], bool]) -> dict:
    """``score`` of ``middle`` as the row's cursor shows it (its first line on an empty line
    or after a header; a block without its trailing line end)."""
    text = middle
    if text is not None:
        text = text.split("\n", 1)[0] if early(row) else text
        if row["kind"] == "block_start":
            text = text.rstrip()
    return score(text, row["truth"])


def suggestions_table(rows: list[dict], corpora: list[str], configs: list[str]) -> str:
    """For configurations with several suggestions (rows with ``among``): exact match and
    edit similarity of what each ranking shows first (the model's likelihood of the middle,
    the same per token, greedy's middle) and how often the truth is among the suggestions
    (what cycling with next/previous gives); empty when no row has them."""
    ranked = [c for c in configs if any("among" in r for r in rows if r["config"] == c)]
    if not ranked:
        return ""

    def early(row: dict) -> bool:
        return row["kind"] in ("empty_line", "after_header")

    rankings = {
        # As ``fim.alternatives`` ranks: an empty middle after every middle that writes.
        "likelihood": lambda c: (bool(c[0].strip()), c[1]),
        "per token": lambda c: (bool(c[0].strip()), c[1] / (c[2] + 1)),
        "greedy": lambda c: float(bool(c[3])),
    }
    lines = ["| corpus | cursors of | configuration | cursors | shown first, exact: "
             "likelihood / per token / greedy | edit sim.: likelihood / per token / greedy | "
             "truth among the suggestions | suggestions (mean) | p50 / p90 s (all of them) |",
             "| --- " * 9 + "|"]
    for corpus in corpora:
        for name, kinds in [*GROUPS.items(), ("all", tuple(KIND_LABELS))]:
            for config in ranked:
                rs = [r for r in _select(rows, corpus=corpus, kind=kinds, config=config)
                      if "among" in r]
                if not rs:
                    continue
                shown = [[_as_shown(r, _first_by(r, k), early) for r in rs]
                         for k in rankings.values()]
                firsts = " / ".join(f"{statistics.fmean(s['exact'] for s in col):.0%}"
                                    for col in shown)
                sims = " / ".join(f"{statistics.fmean(s['edit_similarity'] for s in col):.2f}"
                                  for col in shown)
                secs = [r["decode_seconds"] for r in rs]
                lines.append(
                    f"| {corpus} | {name} | {config} | {len(rs)} | {firsts} | {sims} | "
                    f"{statistics.fmean(r['among'] for r in rs):.0%} | "
                    f"{statistics.fmean(r['count'] for r in rs):.1f} | "
                    f"{percentile(secs, 0.5):.2f} / {percentile(secs, 0.9):.2f} |")
    return "\n".join(lines)
