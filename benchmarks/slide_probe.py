"""What a slid window costs in quality: the greedy middle from a prompt whose left lines were
moved in llama.cpp's cache (``StepModel.slide_stop``) against the same prompt run cold.

A slid window's cells were computed with the lines above its new start in view (they were
dropped from the cache after); a cold run of the same prompt never saw them.  At each cursor
of the fresh corpus (``benchmarks/cursor_kinds.py``'s mid-line and empty-line holes) this runs
the prompt of a full window ``--above`` lines further up first, then the cursor's prompt as the
server lays it out after a slide (its start ``SLIDE_SLACK`` below full), and compares the middle
with a cold run's: the share of identical middles, and each one's exact match with the truth.

    .venv/bin/python -m benchmarks.slide_probe --cursors 20
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import cursor_kinds, fresh_corpus  # noqa: E402
from benchmarks.report import (  # noqa: E402
    RunRecord,
    command_line,
    model_packages,
    publish,
    save_rows,
)
from fim.api import Engine  # noqa: E402
from fim.editor_policy import EMPTY_LINE, MID_LINE, auto_policy, cursor_line  # noqa: E402
from fim.eval.evaluation import edit_similarity  # noqa: E402
from lsp_server.measures import TokenCount  # noqa: E402
from lsp_server.prompt_anchors import SLIDE_SLACK, AnchorPlanner  # noqa: E402


def cases(n: int, seed: int) -> list[tuple[str, cursor_kinds.Spot]]:
    """``n`` holes (mid-line and empty-line, code) from the fresh corpus's larger files."""
    out = []
    rng = random.Random(seed)
    for pkg in fresh_corpus.FRESH:
        files = fresh_corpus.read_archive(fresh_corpus.archive(pkg), pkg.top, pkg.name)
        for f in files:
            if f.text.count("\n") < 300:
                continue
            wanted = {(k, cursor_kinds.Text.CODE): 1 for k in (
                cursor_kinds.Kind.INSIDE_LINE, cursor_kinds.Kind.REST_OF_LINE,
                cursor_kinds.Kind.EMPTY_LINE)}
            out += [(f.text, s) for s in cursor_kinds.pick(f.text, f"{seed}:{f.path}", wanted)
                    if s.line > 150]
    rng.shuffle(out)
    return out[:n]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="bundled:qwen2.5-coder-1.5b")
    p.add_argument("--cursors", type=int, default=20)
    p.add_argument("--above", type=int, default=12, help="lines the earlier cursor sat above")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--context-tokens", type=int, default=1024,
                   help="the window (the server's CPU default is 2048; smaller runs faster)")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--figures", type=Path, default=None)
    p.add_argument("--section", default="slide-probe")
    args = p.parse_args(argv)
    record = RunRecord(command_line(), packages=model_packages())
    engine = Engine.load(args.model)
    step = engine.step_model
    count = TokenCount(engine.tokenizer)
    rows = []
    for source, spot in cases(args.cursors, args.seed):
        text = spot.hole(source)
        cursor = spot.start
        before, after = cursor_line(text, cursor)
        # No time budget: on a busy machine a budget would stop the prompts part way.
        policy = dataclasses.replace(auto_policy(
            before, after, device_type="cpu", context_tokens=args.context_tokens,
            model_window=engine.window), time_budget_ms=None)
        # The left share as the server's planner computes it (no project context).
        longest = max(MID_LINE.max_tokens, EMPTY_LINE.max_tokens, policy.max_tokens)
        left_max = policy.context_tokens - longest - (policy.right_tokens or 0) - 4
        anchors = AnchorPlanner(count, left_max, 128)
        starts = [0] + [m.end() for m in re.finditer("\n", text)]
        earlier = starts[max(0, text.count("\n", 0, cursor) - args.above)]
        first = anchors.fit(text, earlier, left_max)  # a full window at the earlier cursor
        slid = anchors.fit(text, cursor, left_max - left_max // SLIDE_SLACK)
        req_first = policy.request(text[:earlier], text[earlier:], left_start=first)
        req = policy.request(text[:cursor], text[cursor:], left_start=slid)
        step.reset()
        engine.complete(req_first)
        moved = engine.complete(req)
        moved_slid = step.slid
        step.reset()
        cold = engine.complete(req)
        truth = spot.truth(source)
        if spot.kind in cursor_kinds.FIRST_LINE_KINDS:
            truth = truth.split("\n", 1)[0]
        a, b = (moved.middle or "").split("\n", 1)[0], (cold.middle or "").split("\n", 1)[0]
        if spot.kind not in cursor_kinds.FIRST_LINE_KINDS:
            a, b = moved.middle or "", cold.middle or ""
        rows.append({"kind": spot.kind.value, "slid_tokens": moved_slid, "same": a == b,
                     "exact_slid": a == truth, "exact_cold": b == truth,
                     "sim_slid": edit_similarity(a, truth), "sim_cold": edit_similarity(b, truth),
                     "slid": a, "cold": b, "truth": truth})
        print(f"{spot.kind.value}: slid {moved_slid} tokens, same {a == b}", file=sys.stderr,
              flush=True)
    record.finish()
    did = [r for r in rows if r["slid_tokens"]]
    body = (
        "| cursors | slid | same middle | exact slid / cold | edit sim. slid / cold |\n"
        "|---:|---:|---:|---|---|\n"
        f"| {len(rows)} | {len(did)} | "
        f"{statistics.fmean(r['same'] for r in did):.0%} | "
        f"{statistics.fmean(r['exact_slid'] for r in did):.0%} / "
        f"{statistics.fmean(r['exact_cold'] for r in did):.0%} | "
        f"{statistics.fmean(r['sim_slid'] for r in did):.3f} / "
        f"{statistics.fmean(r['sim_cold'] for r in did):.3f} |"
        if did else "no cursor slid")
    publish(body, record, args.figures, args.section)
    save_rows(args.json, record, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
