"""Constrained and unconstrained decoding on the same prompt, at the paired run's cursors.

The paired run (``benchmarks/paired_run.py``) asks a server per configuration, and each server
picks its first window from the prefill speed it measured: two sessions at one cursor may run
different prompts, and the model writes differently with each.  This benchmark holds the
prompt fixed: at every cursor of the paired run it builds one request (``--left`` tokens of left
context from a line start, ``--right`` tokens of right context, no project context, no time
budget) and decodes it with the bundled model constrained and unconstrained, so every
difference between the two middles is the decoding's.  Scored as the paired run scores: the
inserted text, an empty line on its first line.

    .venv/bin/python -m benchmarks.same_prompt_modes --figures docs/usefulness.md
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.fresh_tables import score  # noqa: E402
from benchmarks.held_out import EMPTY, MID_PER_PLACE, HeldOut, corpus_held_out, judged  # noqa: E402
from benchmarks.paired_anchors import corpus_projects  # noqa: E402
from benchmarks.report import (  # noqa: E402
    RunRecord,
    command_line,
    model_packages,
    publish,
    save_rows,
)
from benchmarks.scope_outline import outline_for  # noqa: E402
from fim.api import Engine  # noqa: E402
from fim.editor_policy import EMPTY_LINE, MID_LINE  # noqa: E402
from fim.options import Mode  # noqa: E402
from lsp_server.measures import TokenCount  # noqa: E402
from lsp_server.prompt_anchors import AnchorPlanner  # noqa: E402

MODES = (Mode.CONSTRAINED, Mode.UNCONSTRAINED)


def cursors(corpora: list[str], mid: int, empty: int, seed: int) -> list[HeldOut]:
    out = []
    for corpus in corpora:
        folders = dict(corpus_projects(corpus))
        for _path, _every, held in corpus_held_out(corpus, list(folders.items()), mid, empty,
                                                   seed):
            out.extend(held)
    return out


def ask(engine: Engine, anchors: AnchorPlanner, cur: HeldOut, left_tokens: int,
        right_tokens: int, mode: Mode, outline: bool = False) -> dict:
    """One decode at ``cur`` (``outline``: with the document's outline above the prompt's
    start: ``benchmarks.scope_outline``, an experiment the server does not send)."""
    hole = cur.text
    left, right = hole[:cur.start], hole[cur.start:]
    policy = EMPTY_LINE if cur.place.value == "empty_line" else MID_LINE
    start = anchors.fit(left, len(left), left_tokens)
    req = dataclasses.replace(policy.request(left, right, left_start=start),
                              time_budget_ms=None, right_tokens=right_tokens, mode=mode)
    found = (outline_for(left, start, cur.id.split(":")[0], TokenCount(engine.tokenizer))
             if outline else None)
    if found is not None:
        req = dataclasses.replace(req, context_files=(found.file,), context_budget=found.budget,
                                  path=found.file.path)
    res = engine.complete(req)
    return {"id": cur.id, "corpus": cur.corpus, "place": cur.place.value, "mode": mode.value,
            "middle": res.middle, "stop": str(res.stop), "truth": cur.truth,
            **score(judged(cur, res.middle), cur.truth)}


def table(rows: list[dict]) -> str:
    """Per corpus and cursor kind: each mode's exact / edit similarity, and the cursors where
    the two shown middles differ."""
    lines = ["| corpus | cursors | n | constrained | unconstrained | middles that differ |",
             "|---|---|---:|---|---|---:|"]
    by = {(r["id"], r["mode"]): r for r in rows}
    ids = list(dict.fromkeys(r["id"] for r in rows))
    for corpus in dict.fromkeys(r["corpus"] for r in rows):
        for kind, empty in (("mid-line", False), ("empty line", True)):
            mine = [i for i in ids if by[(i, "constrained")]["corpus"] == corpus
                    and (by[(i, "constrained")]["place"] == "empty_line") == empty]
            if not mine:
                continue
            cells = []
            for mode in MODES:
                got = [by[(i, mode.value)] for i in mine]
                cells.append(f"{statistics.fmean(r['exact'] for r in got):.0%} / "
                             f"{statistics.fmean(r['edit_similarity'] for r in got):.3f}")
            differ = sum(judged_text(by[(i, "constrained")]) != judged_text(
                by[(i, "unconstrained")]) for i in mine)
            lines.append(f"| {corpus} | {kind} | {len(mine)} | {cells[0]} | {cells[1]} | "
                         f"{differ} |")
    return "\n".join(lines)


def judged_text(row: dict) -> str:
    middle = row["middle"] or ""
    return middle.split("\n", 1)[0] if row["place"] == "empty_line" else middle


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="bundled:qwen2.5-coder-1.5b")
    p.add_argument("--corpora", default="fresh,fresh2")
    p.add_argument("--mid-per-place", type=int, default=MID_PER_PLACE)
    p.add_argument("--empty", type=int, default=EMPTY)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--left", type=int, default=128, help="left tokens (the first window)")
    p.add_argument("--right", type=int, default=64, help="right tokens")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--figures", type=Path, default=None)
    p.add_argument("--section", default="same-prompt-modes")
    args = p.parse_args(argv)
    record = RunRecord(command_line(), packages=model_packages())
    engine = Engine.load(args.model)
    anchors = AnchorPlanner(TokenCount(engine.tokenizer), args.left, args.left)
    rows = []
    for cur in cursors([c for c in args.corpora.split(",") if c], args.mid_per_place,
                       args.empty, args.seed):
        for mode in MODES:
            rows.append(ask(engine, anchors, cur, args.left, args.right, mode))
            r = rows[-1]
            print(f"{mode.value:13} {cur.id[:60]:60} {'=' if r['exact'] else ' '} "
                  f"{judged_text(r)!r:.50}", file=sys.stderr, flush=True)
    record.finish()
    save_rows(args.json, record, rows)
    head = (f"The paired run's cursors, one prompt each ({args.left} left tokens from a line "
            f"start, {args.right} right tokens, no project context, greedy, no time budget), "
            "decoded constrained and unconstrained; cells: exact / edit similarity.")
    publish(head + "\n\n" + table(rows), record, args.figures, args.section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
