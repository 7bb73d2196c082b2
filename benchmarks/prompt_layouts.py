"""Which prompt layout to use in the editor: quality and prefill cost, measured side by side.

Each keystroke at the cursor changes the end of the left context.  In the prefix-suffix-middle
order (PSM) everything after it, the whole right context, must then run again; the options
the fast-inference issue names are measured here on the dev cases, at the server's policy
(mid-line: one statement that stays on its line; empty line: a block, judged on its first
line), with the bundled model:

* ``psm``: ``<prefix> L <suffix> R <middle>``, the right context up to 256 tokens (today);
* ``psm-line``: the cursor's line before the cursor after ``<middle>`` (llama.cpp's
  ``/infill`` layout): typing on a line only changes what follows ``<middle>``;
* ``psm-r128``, ``psm-r64``, ``psm-r32``: the same with a shorter right window, cheaper to
  recompute;
* ``spm``: ``<suffix> R <prefix> L <middle>``: typing only appends;
* ``psm-splice``: PSM where the ``<suffix> R <middle>`` block was computed for the left
  context *before the last typed characters* and is moved into place instead of recomputed
  (llama.cpp's cache reuse, extended to insert the typed tokens before the block).

It prints, per layout and cursor kind, exact match, edit similarity (first line for empty-line
cursors), the share of middles that parse, agreement with ``psm`` and the tokens each
keystroke would have to run.  Run::

    .venv/bin/python -m benchmarks.prompt_layouts --cases 40 --json out.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.report import (  # noqa: E402
    RunRecord,
    command_line,
    model_packages,
    write_section,
)
from fim.api import CompletionRequest, Engine  # noqa: E402
from fim.decoding import parses  # noqa: E402
from fim.engines.step_model import common_prefix  # noqa: E402
from fim.eval import datasets  # noqa: E402
from fim.eval.evaluation import edit_similarity  # noqa: E402
from fim.templates import PromptOrder  # noqa: E402

LAYOUTS = {
    "psm": dict(order=PromptOrder.PSM, right_tokens=256),
    "psm-line": dict(order=PromptOrder.PSM_LINE, right_tokens=256),
    "psm-r128": dict(order=PromptOrder.PSM, right_tokens=128),
    "psm-r64": dict(order=PromptOrder.PSM, right_tokens=64),
    "psm-r32": dict(order=PromptOrder.PSM, right_tokens=32),
    "spm": dict(order=PromptOrder.SPM, right_tokens=256),
    "psm-splice": dict(order=PromptOrder.PSM, right_tokens=256, splice=True),
}


def cursor_kind(left: str, right: str) -> str:
    line_before = left[left.rfind("\n") + 1:]
    line_after = right.split("\n", 1)[0]
    return "empty_line" if not line_before.strip() and not line_after.strip() else "mid_line"


def policy(kind: str) -> dict:
    """The server's policy for the cursor kind (lsp_server.settings)."""
    if kind == "mid_line":
        return dict(scope="statement", max_tokens=32, line_stop=True)
    return dict(scope="block", max_tokens=64)


def first_line(text: str | None) -> str | None:
    return None if text is None else text.split("\n", 1)[0]


def typed_tail(left: str) -> int:
    """How many characters of the cursor's line to treat as just typed (1 to 4)."""
    line = left[left.rfind("\n") + 1:]
    return max(1, min(4, len(line.strip())))


def run(args) -> dict:
    engine = Engine.load(args.model, engine=args.engine, slots=2, window=args.context)
    step = engine.step_model
    names = [d for d in args.datasets.split(",") if d]
    per = [datasets.build_cases(d, args.cases, None, seed=args.seed, per_file=1) for d in names]
    cases = [c for group in itertools.zip_longest(*per) for c in group if c]
    layouts = [x for x in args.layouts.split(",") if x]
    rows = []
    for n, case in enumerate(cases):
        left, right = case["left"], case["right"]
        kind = cursor_kind(left, right)
        for name in layouts:
            spec = dict(LAYOUTS[name])
            splice = spec.pop("splice", False)
            base = dict(mode="constrained", top_k=50, context_tokens=args.context,
                        **policy(kind), **spec)
            step.reset()
            step.splice = splice
            # The prompt as it stood before the last characters were typed: what a keystroke
            # costs with this layout is the part of the prompt that differs from it.
            k = typed_tail(left)
            before = engine.prompt_for(CompletionRequest(left[:-k], right, **base)).ids
            now = engine.prompt_for(CompletionRequest(left, right, **base)).ids
            ran = len(now) - common_prefix(before, now)
            if splice:  # run the earlier prompt, so the real one can move its cells
                step.prefill(before)
            t0 = time.perf_counter()
            res = engine.complete(CompletionRequest(left, right, **base))
            wall = time.perf_counter() - t0
            if splice:
                ran = res.prompt_tokens - step.reused - step.spliced
            truth = case["middle"]
            shown = first_line(res.middle) if kind == "empty_line" else res.middle
            want = first_line(truth) if kind == "empty_line" else truth
            rows.append({
                "id": case["id"], "kind": kind, "layout": name, "middle": res.middle,
                "stop": res.stop, "tokens": res.tokens, "prompt_tokens": res.prompt_tokens,
                "keystroke_tokens": ran, "wall_s": round(wall, 3),
                "parses": res.middle is not None and parses(left + res.middle + right),
                "exact": shown == want, "edit_similarity": edit_similarity(shown, want),
            })
        step.splice = False
        if args.progress:
            print(f"{n + 1}/{len(cases)} {case['id']}", file=sys.stderr, flush=True)
    return {"rows": rows, "layouts": layouts}


def summarize(rows: list[dict], layouts: list[str]) -> dict:
    by = {(r["id"], r["layout"]): r for r in rows}
    out = {}
    for kind in ("mid_line", "empty_line", "all"):
        for name in layouts:
            rs = [r for r in rows if r["layout"] == name and kind in ("all", r["kind"])]
            if not rs:
                continue
            agree = [r["middle"] == by[(r["id"], "psm")]["middle"] for r in rs
                     if (r["id"], "psm") in by]
            ks = [r["keystroke_tokens"] for r in rs if r["keystroke_tokens"] is not None]
            out[f"{kind}/{name}"] = {
                "cases": len(rs),
                "exact_match": statistics.fmean(r["exact"] for r in rs),
                "edit_similarity": statistics.fmean(r["edit_similarity"] for r in rs),
                "parses": statistics.fmean(r["parses"] for r in rs),
                "same_middle_as_psm": statistics.fmean(agree) if agree else None,
                "prompt_tokens_mean": statistics.fmean(r["prompt_tokens"] for r in rs),
                "keystroke_tokens_mean": statistics.fmean(ks) if ks else None,
            }
    return out


def markdown_table(summary: dict) -> str:
    rows = ["| cursor / layout | cases | exact | edit sim. | parses | same as psm | prompt "
            "tokens | tokens per keystroke |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for key, s in summary.items():
        agree = "–" if s["same_middle_as_psm"] is None else f"{s['same_middle_as_psm']:.0%}"
        per_key = ("–" if s["keystroke_tokens_mean"] is None
                   else f"{s['keystroke_tokens_mean']:.0f}")
        rows.append(f"| {key} | {s['cases']} | {s['exact_match']:.0%} | "
                    f"{s['edit_similarity']:.3f} | {s['parses']:.0%} | {agree} | "
                    f"{s['prompt_tokens_mean']:.0f} | {per_key} |")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="bundled:qwen2.5-coder-1.5b")
    p.add_argument("--engine", default="llama.cpp")
    p.add_argument("--cases", type=int, default=40, help="cases per dataset (default 40)")
    p.add_argument("--datasets", default="boundary,randspan")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--context", type=int, default=1024,
                   help="prompt plus middle in tokens (default 1024, the server's CPU default)")
    p.add_argument("--layouts", default=",".join(LAYOUTS))
    p.add_argument("--json", type=Path, default=None, help="write rows and summary here")
    p.add_argument("--figures", type=Path, default=None,
                   help="write the table into this page's prompt-layouts section "
                        "(docs/latency.md)")
    p.add_argument("--progress", action="store_true")
    p.add_argument("--from-json", type=Path, default=None,
                   help="do not run: show (and with --figures write) a saved --json run")
    args = p.parse_args(argv)
    if args.from_json:
        saved = json.loads(args.from_json.read_text(encoding="utf-8"))
        record = RunRecord(**{k: tuple(v) if k.startswith("load") and v else v
                              for k, v in saved["run"].items()})
        result = {"rows": saved["rows"], "layouts": saved["layouts"]}
    else:
        record = RunRecord(command_line(), packages=model_packages())
        result = run(args)
        record.finish()
    summary = summarize(result["rows"], result["layouts"])
    table = markdown_table(summary)
    print(table)
    print(record.markdown())
    if args.figures:
        write_section(args.figures, "prompt-layouts", table + "\n" + record.markdown())
    if args.json and not args.from_json:
        args.json.write_text(json.dumps({"run": record.as_dict(), "summary": summary,
                                         **result}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
