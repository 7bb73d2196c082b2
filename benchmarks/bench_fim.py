"""Benchmarks of the fim package (figures for the report; never run as unit tests).

    python -m benchmarks.bench_fim soundness --cases 200        # random model, every middle parses
    python -m benchmarks.bench_fim overhead --cases 40          # constraint ms/token vs model
    python -m benchmarks.bench_fim speed --model random:santacoder --tokens 64
                                                                # our loop vs model.generate
    python -m benchmarks.bench_fim load --model bundled:qwen2.5-coder-1.5b --repeats 5
                                                                # fresh-process load times

``soundness`` exits non-zero when any constrained middle fails ``ast.parse`` of the whole
file.  With ``--figures docs/evaluation.md`` a command's table (and the run's commit, package
versions, machine and load) replaces the section named by ``--section`` (default: the
command's name) of that page; ``speed`` and ``load`` print one model each, so a second model
needs its own section.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.report import RunRecord, command_line, model_packages, write_section  # noqa: E402
from fim.api import CompletionRequest, Engine  # noqa: E402
from fim.decode_options import DecodeOptions  # noqa: E402
from fim.decoding import decode, parses  # noqa: E402
from fim.eval.datasets import build_cases  # noqa: E402
from fim.templates import build_prompt  # noqa: E402


def _cases(n: int, seed: int, max_file_chars: int | None) -> list[dict]:
    half = n // 2
    return (build_cases("boundary", half, seed=seed, per_file=1, max_file_chars=max_file_chars)
            + build_cases("randspan", n - half, seed=seed, per_file=1,
                          max_file_chars=max_file_chars))


def _per_token(results) -> dict:
    per_tok = [r.constraint_ms / r.tokens for r in results if r.tokens]
    tokens = sum(r.tokens for r in results)
    return {
        "tokens": tokens,
        "constraint_ms_per_token_median": statistics.median(per_tok) if per_tok else None,
        "constraint_ms_per_token_mean": (sum(r.constraint_ms for r in results) / tokens
                                         if tokens else None),
        "model_ms_per_token_mean": (sum(r.model_ms for r in results) / tokens
                                    if tokens else None),
        "setup_ms_median": statistics.median(r.setup_ms for r in results) if results else None,
    }


def _counts(counts: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))


def soundness(args) -> tuple[int, str]:
    engine = Engine.load(args.model, device="cpu", dtype=args.dtype, engine=args.engine)
    cases = _cases(args.cases, args.seed, args.max_file_chars)
    unsound, results, stops, modes, flag_wrong = [], [], {}, {}, []
    started = time.time()
    for i, case in enumerate(cases):
        res = engine.complete(CompletionRequest(
            case["left"], case["right"], mode="constrained", max_tokens=args.max_tokens,
            top_k=args.top_k, scope=args.scope))
        results.append(res)
        stops[str(res.stop)] = stops.get(str(res.stop), 0) + 1
        modes[str(res.mode)] = modes.get(str(res.mode), 0) + 1
        # Checked here on the whole file, as `seam eval` scores success: the result's own
        # ``parses`` is not a check in language mode ``window`` (always False there).
        ok = res.middle is not None and parses(case["left"] + res.middle + case["right"])
        if res.middle is not None and bool(res.parses) != ok:
            flag_wrong.append(f"{case['id']} ({res.mode}): parses={res.parses}, ast.parse: {ok}")
        # ``error``: the constraint accepted a middle Python rejects (the engine then falls
        # back to the checked cut, which hides the bug from ``parses``).
        if res.error or (res.middle is not None and not ok):
            unsound.append({"id": case["id"], "middle": res.middle, "raw": res.raw,
                            "mode": str(res.mode), "error": res.error})
        if args.verbose:
            print(f"{i + 1}/{len(cases)} {case['id']} {res.stop} {res.mode}", file=sys.stderr)
    returned = sum(r.middle is not None for r in results)
    report = {
        "cases": len(cases), "returned_middles": returned, "unsound": unsound,
        "stops": stops, "language_modes": modes, "seconds": round(time.time() - started, 1),
        "parses_flag_wrong": flag_wrong,
        **_per_token(results),
    }
    print(json.dumps(report, indent=1))
    half = len(cases) // 2

    def ms(x: float | None) -> str:
        return "–" if x is None else f"{x:.2f}"

    table = [
        f"`{args.model}` ({engine.backend.description}), constrained decoding of "
        f"{half} Stack-Boundary + {len(cases) - half} Stack-RandSpan standard-library cases "
        f"(one per file, seed {args.seed}), {args.max_tokens} tokens, top-k {args.top_k}, "
        f"scope `{args.scope}`. A middle is unsound when it does not parse, or when the "
        "constraint accepted a middle Python rejects (an `error`: the engine then cuts it "
        "back to a parsing prefix, which would hide the bug).",
        "",
        "| figure | measured |",
        "| --- | --- |",
        f"| unsound middles, of those returned | **{len(unsound)} of {returned}** |",
        f"| returned middles whose result says `parses` wrongly | {len(flag_wrong)} |",
        f"| stops | {_counts(stops)} |",
        f"| language modes | {_counts(modes)} |",
        f"| constraint time per token, median over cases / mean | "
        f"{ms(report['constraint_ms_per_token_median'])} / "
        f"{ms(report['constraint_ms_per_token_mean'])} ms |",
        f"| model time per token, mean | {ms(report['model_ms_per_token_mean'])} ms |",
        f"| constraint setup, median | {report['setup_ms_median']:.0f} ms |",
        f"| all {len(cases)} cases, wall clock | {report['seconds']:.0f} s |",
        "",
    ]
    if unsound:
        table += ["Unsound middles:", "", "```"]
        table += [f"{u['id']}: mode={u['mode']} error={u['error']} middle={u['middle']!r}"
                  for u in unsound]
        table += ["```", ""]
    if flag_wrong:
        table += ["Results whose `parses` disagrees with `ast.parse` of the whole file:", "",
                  "```", *flag_wrong, "```", ""]
    return (1 if unsound else 0), "\n".join(table)


def overhead(args) -> tuple[int, str]:
    engine = Engine.load(args.model, device=args.device, dtype=args.dtype, engine=args.engine)
    cases = _cases(args.cases, args.seed, args.max_file_chars)
    results = []
    for case in cases:
        results.append(engine.complete(CompletionRequest(
            case["left"], case["right"], mode="constrained", max_tokens=args.max_tokens,
            top_k=args.top_k, scope=args.scope)))
    report = {"model": args.model, "cases": len(cases), **_per_token(results)}
    print(json.dumps(report, indent=1))
    return 0, (
        f"`{args.model}` ({engine.backend.description}), {len(cases)} cases, constrained, "
        f"{args.max_tokens} tokens: constraint time per token median over cases "
        f"{report['constraint_ms_per_token_median']:.2f} ms, mean "
        f"{report['constraint_ms_per_token_mean']:.2f} ms; model time per token mean "
        f"{report['model_ms_per_token_mean']:.2f} ms.\n")


def speed(args) -> tuple[int, str]:
    """Unconstrained tokens/s of our loop vs ``model.generate`` on one prompt, interleaved."""
    engine = Engine.load(args.model, device=args.device, dtype=args.dtype, heal=False,
                         engine="transformers")
    tok = engine.tokenizer
    loaded = engine.backend.native
    model = loaded.model
    left = "import os\n\n\ndef list_files(root):\n    out = []\n    for name in os.listdir(root):\n"
    right = "\n    return sorted(out)\n"
    prompt = build_prompt(tok, engine.template, left, right, window=engine.window,
                          reserve=args.tokens)
    ids = torch.tensor([prompt.ids], device=loaded.device)
    ours, theirs = [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(ids, max_new_tokens=args.tokens, min_new_tokens=args.tokens,
                                 do_sample=False, pad_token_id=tok.eos_token_id)
        n = out.shape[1] - ids.shape[1]
        theirs.append(n / (time.perf_counter() - t0))
        engine.step_model.reset()  # no prompt served from the previous run's cache
        t0 = time.perf_counter()
        d = decode(engine._setup, prompt.ids, "",
                   DecodeOptions("unconstrained", max_tokens=args.tokens, min_tokens=args.tokens))
        ours.append(d.tokens / (time.perf_counter() - t0))
    report = {
        "model": args.model, "prompt_tokens": len(prompt.ids), "new_tokens": args.tokens,
        "generate_tokens_per_s_median": statistics.median(theirs),
        "seam_tokens_per_s_median": statistics.median(ours),
        "ratio": statistics.median(ours) / statistics.median(theirs),
        "runs": args.repeats,
    }
    print(json.dumps(report, indent=1))
    return 0, "\n".join([
        f"Greedy unconstrained decoding of the same prompt ({len(prompt.ids)} tokens), exactly "
        f"{args.tokens} new tokens (`min_new_tokens` / `min_tokens`), {args.repeats} runs of "
        "each loop interleaved, Seam's KV cache cleared before each of its runs; medians. "
        f"Runtime: {engine.backend.description}.",
        "",
        "| model | dtype | new tokens | `generate` tokens/s | Seam tokens/s | ratio |",
        "|---|---|---:|---:|---:|---:|",
        f"| {args.model} | {args.dtype} | {args.tokens} × {args.repeats} runs "
        f"| {report['generate_tokens_per_s_median']:.3g} "
        f"| {report['seam_tokens_per_s_median']:.3g} | {report['ratio']:.2f} |",
        "",
    ])


# One fresh interpreter per measurement: imports, Engine.load, then the first completion.
_LOAD_CHILD = """
import json, sys, time
t0 = time.perf_counter()
import torch, transformers
from fim.api import CompletionRequest, Engine
t1 = time.perf_counter()
engine = Engine.load(sys.argv[1], device=sys.argv[2], dtype=sys.argv[3], engine=sys.argv[4])
t2 = time.perf_counter()
res = engine.complete(CompletionRequest("def add(a, b):\\n    return ", "\\n", max_tokens=1,
                                        mode="unconstrained"))
t3 = time.perf_counter()
print(json.dumps({"imports_s": t1 - t0, "load_s": t2 - t1, "first_token_s": t3 - t2}))
"""


def load(args) -> tuple[int, str]:
    """Wall time of a fresh process: library imports, ``Engine.load`` and the first token."""
    runs = []
    for _ in range(args.repeats):
        out = subprocess.run([sys.executable, "-c", _LOAD_CHILD, args.model, args.device,
                              args.dtype, args.engine], capture_output=True, text=True,
                             check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        if args.verbose:
            print(runs[-1], file=sys.stderr)
    report = {"model": args.model, "runs": args.repeats}
    for key in ("imports_s", "load_s", "first_token_s"):
        values = [r[key] for r in runs]
        report[key + "_median"] = statistics.median(values)
        report[key + "_min"] = min(values)
    print(json.dumps(report, indent=1))
    labels = {"imports_s": "imports (`torch`, `transformers`, `fim.api`)",
              "load_s": "`Engine.load`", "first_token_s": "first token (short prompt)"}
    rows = [f"| {labels[k]} | {report[k + '_median']:.2f} s | {report[k + '_min']:.2f} s |"
            for k in ("imports_s", "load_s", "first_token_s")]
    return 0, "\n".join([
        f"`{args.model}` with the {args.engine} engine ({args.dtype}), {args.repeats} fresh "
        "interpreters, one after another:",
        "",
        "| phase | median | fastest |",
        "|---|---:|---:|",
        *rows,
        "",
    ])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("soundness", "overhead", "speed", "load"):
        s = sub.add_parser(name)
        s.add_argument("--model", default="random:santacoder")
        s.add_argument("--engine", default="transformers",
                       help="transformers (default) or llama.cpp")
        s.add_argument("--device", default="cpu")
        s.add_argument("--dtype", default="fp32")
        s.add_argument("--cases", type=int, default=200)
        s.add_argument("--seed", type=int, default=0)
        s.add_argument("--max-tokens", type=int, default=32)
        s.add_argument("--top-k", type=int, default=50)
        s.add_argument("--scope", default="free")
        s.add_argument("--max-file-chars", type=int, default=None)
        s.add_argument("--tokens", type=int, default=64)
        s.add_argument("--repeats", type=int, default=5)
        s.add_argument("--verbose", action="store_true")
        s.add_argument("--figures", type=Path, default=None,
                       help="write the table into this page's section (see --section)")
        s.add_argument("--section", default=None,
                       help=f"the figures section to write (default: {name})")
    args = p.parse_args(argv)
    commands = {"soundness": soundness, "overhead": overhead, "speed": speed, "load": load}
    record = RunRecord(command_line(), packages=model_packages())
    status, body = commands[args.cmd](args)
    record.finish()
    print("\n" + body + "\n" + record.markdown())
    if args.figures:
        write_section(args.figures, args.section or args.cmd, body + "\n" + record.markdown())
    return status


if __name__ == "__main__":
    sys.exit(main())
