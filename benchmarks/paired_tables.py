"""The tables and the Done-when lines of issue 29's paired run (``benchmarks/paired_run.py``),
made from its rows: per corpus and cursor place, exact match, edit similarity, p50 latency and
unparsable constrained middles of every configuration and client, and each of the issue's
conditions printed as met or not met with the figures it was judged on.

Comparisons are paired: two configurations are compared on the cursors both have a row for
(an anchor run cut short has fewer), and say how many.
"""

from __future__ import annotations

import json
import statistics

from benchmarks.cursor_kinds import MID_LINE_PLACES, Place
from benchmarks.report import RunRecord

#: Row groups of the tables: issue 29's "mid-line" (every place with text before the cursor
#: on its line), each finer place, and the empty line.
GROUPS = ("mid-line", *(p.value for p in MID_LINE_PLACES), Place.EMPTY_LINE.value)
NAMES = {"mid-line": "mid-line (all)", "inside_word": "inside a word",
         "before_punctuation": "before punctuation", "before_space": "before a space",
         "before_nothing": "before nothing", "empty_line": "empty line"}
#: (configuration, client) rows in the order the tables show them.
ROWS = (("seam", "plain"), ("seam", "cursor"), ("seam_unconstrained", "plain"),
        ("seam_unconstrained", "cursor"), ("llama_vim", "llama.vim"),
        ("llama_vim_greedy", "llama.vim"))
LABELS = {"seam": "Seam (default)", "seam_unconstrained": "Seam, `constrained: false`",
          "llama_vim": "llama.vim as it ships", "llama_vim_greedy": "llama.vim's window, greedy"}
CLIENT_LABELS = {"plain": "plain LSP client", "cursor": "editors' cursor notifications",
                 "llama.vim": "llama-server `/infill`"}
#: Issue 29's floors: (exact, edit similarity) for mid-line and empty lines; p50 ceiling.
FLOORS = {"mid-line": (0.40, 0.75), "empty_line": (0.40, 0.65)}
P50_LIMIT_S = 1.5


def in_group(row: dict, group: str) -> bool:
    return row["place"] != Place.EMPTY_LINE.value if group == "mid-line" else \
        row["place"] == group


def select(rows: list[dict], corpus: str, config: str, client: str, group: str) -> list[dict]:
    return [r for r in rows if r["corpus"] == corpus and r["config"] == config
            and r["client"] == client and in_group(r, group)]


def summary(rows: list[dict]) -> dict | None:
    if not rows:
        return None
    secs = [r["seconds"] for r in rows if r.get("latency_is_new_place", True)]
    return {"n": len(rows), "exact": statistics.fmean(r["exact"] for r in rows),
            "sim": statistics.fmean(r["edit_similarity"] for r in rows),
            "p50": statistics.median(secs) if secs else None,
            "asked": len(secs), "unparsable": sum(bool(r.get("unparsable")) for r in rows)}


def cell(s: dict | None) -> str:
    if s is None:
        return "–"
    p50 = "–" if s["p50"] is None else f"{s['p50']:.1f} s"
    asked = "" if s["asked"] == s["n"] else f", {s['n'] - s['asked']} not asked"
    return f"{s['exact']:.0%} / {s['sim']:.3f} / {p50} (n={s['n']}{asked})"


def corpus_table(rows: list[dict], corpus: str) -> str:
    head = "| configuration | client | " + " | ".join(NAMES[g] for g in GROUPS) + \
        " | unparsable |"
    lines = [head, "|" + " --- |" * (len(GROUPS) + 3)]
    for config, client in ROWS:
        stats = [summary(select(rows, corpus, config, client, g)) for g in GROUPS]
        if all(s is None for s in stats):
            continue
        bad = sum(r.get("unparsable", False) for r in rows if r["corpus"] == corpus
                  and r["config"] == config and r["client"] == client)
        unparsable = str(bad) if config == "seam" else "–"
        lines.append(f"| {LABELS[config]} | {CLIENT_LABELS[client]} | "
                     + " | ".join(cell(s) for s in stats) + f" | {unparsable} |")
    return "\n".join(lines)


def paired(rows: list[dict], corpus: str, a: tuple[str, str], b: tuple[str, str],
           group: str) -> tuple[dict, dict] | None:
    """Summaries of ``a`` and ``b`` on the cursors of ``group`` both have rows for."""
    ra = {r["id"]: r for r in select(rows, corpus, *a, group)}
    rb = {r["id"]: r for r in select(rows, corpus, *b, group)}
    both = sorted(set(ra) & set(rb))
    if not both:
        return None
    return summary([ra[i] for i in both]), summary([rb[i] for i in both])


def verdict(ok: bool | None) -> str:
    return "no rows" if ok is None else ("met" if ok else "NOT met")


def done_when(rows: list[dict], corpus: str, client: str) -> list[str]:
    """Issue 29's conditions on one corpus for Seam asked through ``client``."""
    seam = ("seam", client)
    out = []
    for other, name in ((("seam_unconstrained", client), "`constrained: false`"),
                        (("llama_vim_greedy", "llama.vim"), "llama.vim greedy")):
        for group in GROUPS:
            pair = paired(rows, corpus, seam, other, group)
            if pair is None:
                out.append(f"- Seam ≥ {name}, {NAMES[group]}: **no rows**")
                continue
            s, o = pair
            ok = s["exact"] >= o["exact"] and s["sim"] >= o["sim"]
            strict = other[0] == "seam_unconstrained" and group == Place.INSIDE_WORD.value
            if strict:
                ok = ok and s["sim"] > o["sim"]
            out.append(f"- Seam ≥ {name}{' (edit sim. strictly better)' if strict else ''}, "
                       f"{NAMES[group]} (n={s['n']}): {s['exact']:.0%} / {s['sim']:.3f} "
                       f"against {o['exact']:.0%} / {o['sim']:.3f}: **{verdict(ok)}**")
    for group, (exact, sim) in FLOORS.items():
        s = summary(select(rows, corpus, *seam, group))
        ok = None if s is None else s["exact"] >= exact and s["sim"] >= sim
        got = "" if s is None else f": {s['exact']:.0%} / {s['sim']:.3f}"
        out.append(f"- {NAMES[group]} ≥ {exact:.0%} / {sim}{got}: **{verdict(ok)}**")
    s = summary([r for r in rows if r["corpus"] == corpus and r["config"] == "seam"
                 and r["client"] == client])
    ok = None if s is None or s["p50"] is None else s["p50"] <= P50_LIMIT_S
    got = "" if ok is None else f": {s['p50']:.2f} s"
    out.append(f"- p50 of the first request at a new place ≤ {P50_LIMIT_S} s{got}: "
               f"**{verdict(ok)}**")
    ok = None if s is None else s["unparsable"] == 0
    got = "" if s is None else f": {s['unparsable']}"
    out.append(f"- 0 unparsable constrained middles{got}: **{verdict(ok)}**")
    return out


def window_of(row: dict) -> int | None:
    """The prompt tokens the server's request ran (``None`` when its record has none: an
    answer sent early, before the decode's record)."""
    return (row.get("server") or {}).get("prompt_tokens")


def same_window(rows: list[dict], corpus: str, client: str) -> list[str]:
    """Seam against ``constrained: false`` on the cursors where both requests ran the same
    window: the first window follows the prefill speed each session measured, so two
    sessions at one cursor may run 128 or 192 left tokens, and the model writes differently
    with each (``[]`` when the rows have no server records)."""
    def of(config: str) -> dict[str, dict]:
        return {r["id"]: r for r in rows if r["corpus"] == corpus and r["config"] == config
                and r["client"] == client}

    seam, free = of("seam"), of("seam_unconstrained")
    both = set(seam) & set(free)
    if not any(window_of(r) is not None for r in seam.values()):
        return []
    apart = {i for i in both if None not in (window_of(seam[i]), window_of(free[i]))
             and window_of(seam[i]) != window_of(free[i])}
    kept = [r for r in rows if r["id"] not in apart]
    out = [f"- cursors whose two requests ran prompts of different lengths: {len(apart)} of "
           f"{len(both)} (left out below; an answer sent early has no record and stays)"]
    for group in GROUPS:
        pair = paired(kept, corpus, ("seam", client), ("seam_unconstrained", client), group)
        if pair is None:
            continue
        a, b = pair
        ok = a["exact"] >= b["exact"] and a["sim"] >= b["sim"]
        if group == Place.INSIDE_WORD.value:
            ok = ok and a["sim"] > b["sim"]
        out.append(f"- {NAMES[group]} (n={a['n']}): {a['exact']:.0%} / {a['sim']:.3f} "
                   f"against {b['exact']:.0%} / {b['sim']:.3f}: **{verdict(ok)}**")
    return out


def anchor_note(info: dict) -> str:
    if not info.get("stored"):
        return (f"No stored llama.vim rows for these cursors ({info.get('missing', 0)} "
                "missing): run `benchmarks/paired_anchors.py` with the same cursor counts.")
    first, last = info["measured"]
    loads = info["loads"]
    threads = " or ".join(str(t) if t else "Seam's engine's count of" for t in info["threads"])
    return (f"llama.vim rows: {info['stored']} stored rows reused from "
            f"`docs/eval/paired-anchors.jsonl` (`benchmarks/paired_anchors.py`, measured "
            f"{first} to {last}, load average (1 min) {min(loads):.1f} to {max(loads):.1f}; "
            f"{info['missing']} rows of these cursors not measured), {info['server']}, "
            f"the same GGUF, {threads} thread(s).")


def render(rows: list[dict], run: dict, anchor_info: dict, args) -> str:
    corpora = list(dict.fromkeys(r["corpus"] for r in rows))
    seam = [r for r in rows if r["config"] in ("seam", "seam_unconstrained")]
    parts = ["Cells: exact / edit similarity / p50 latency (n = cursors; *not asked*: llama.vim's "
             "automatic trigger skips a line with more than 8 characters after the cursor, "
             "and such a cursor scores as no suggestion).  Seam's latency is the client's, "
             "every request the first at its place; llama.vim's is llama-server's, over the "
             "cursors it asked at."]
    for corpus in corpora:
        which = "the benchmarks' fresh corpus" if corpus == "fresh" else \
            "the second fresh corpus"
        parts.append(f"**{corpus}** ({which}):\n\n" + corpus_table(rows, corpus))
        for client in args.clients:
            parts.append(f"Done when, {corpus}, Seam with the {CLIENT_LABELS[client]}:\n\n"
                         + "\n".join(done_when(rows, corpus, client)))
            alike = same_window(rows, corpus, client)
            if alike:
                parts.append(f"Seam against `constrained: false` where both ran the same "
                             f"window, {corpus}, {CLIENT_LABELS[client]}:\n\n"
                             + "\n".join(alike))
    if getattr(args, "time_budget_ms", 0):
        parts.append(f"**Not the default settings:** Seam's `timeBudgetMs` was "
                     f"{args.time_budget_ms} (the default, auto, ended every request on the "
                     "machine this ran on), so its quality does not follow the load; its "
                     "latency is then how long a whole middle took.")
    if getattr(args, "settings", None):
        shown = ", ".join(f"`{k}: {json.dumps(v)}`" for k, v in args.settings.items())
        parts.append(f"**Not the default settings:** every Seam configuration also had "
                     f"{shown}.")
    if not run.get("finished", True):
        parts.append(f"The run was stopped before its end, after {len(seam)} Seam rows: the "
                     "tables hold the projects it reached (the last one perhaps only in part; "
                     "comparisons are paired by cursor).")
    parts.append(anchor_note(anchor_info))
    if getattr(args, "only_anchored", False):
        parts.append("Seam was asked only at the cursors with stored rows of both llama.vim "
                     "anchors (`--only-anchored`: the machine was too loaded for the whole "
                     "set in one session).")
    record = RunRecord.__new__(RunRecord)
    record.__dict__.update(run)
    parts.append(record.markdown())
    return "\n\n".join(parts)
