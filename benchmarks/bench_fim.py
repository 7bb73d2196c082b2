"""Benchmarks of the fim package (figures for the report; never run as unit tests).

    python benchmarks/bench_fim.py soundness --cases 200        # random model, every middle parses
    python benchmarks/bench_fim.py overhead --cases 40          # constraint ms/token vs model
    python benchmarks/bench_fim.py speed --model random:santacoder --tokens 64
                                                                # our loop vs model.generate
    python benchmarks/bench_fim.py load --model bundled:qwen2.5-coder-1.5b --repeats 5
                                                                # fresh-process load times

``soundness`` exits non-zero when any constrained middle fails ``ast.parse``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import torch

from fim.api import CompletionRequest, Engine
from fim.datasets import build_cases
from fim.decoding import decode
from fim.templates import build_prompt


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


def soundness(args) -> int:
    engine = Engine.load(args.model, device="cpu", dtype="fp32")
    cases = _cases(args.cases, args.seed, args.max_file_chars)
    unsound, results, stops, modes = [], [], {}, {}
    started = time.time()
    for i, case in enumerate(cases):
        res = engine.complete(CompletionRequest(
            case["prefix"], case["suffix"], mode="constrained", max_tokens=args.max_tokens,
            top_k=args.top_k, scope=args.scope))
        results.append(res)
        stops[res.stop] = stops.get(res.stop, 0) + 1
        modes[res.mode] = modes.get(res.mode, 0) + 1
        # ``error``: the constraint accepted a middle Python rejects (the engine then falls
        # back to the checked cut, which hides the bug from ``parses``).
        if res.error or (res.middle is not None and not res.parses):
            unsound.append({"id": case["id"], "middle": res.middle, "raw": res.raw,
                            "mode": res.mode, "error": res.error})
        if args.verbose:
            print(f"{i + 1}/{len(cases)} {case['id']} {res.stop} {res.mode}", file=sys.stderr)
    returned = sum(r.middle is not None for r in results)
    report = {
        "cases": len(cases), "returned_middles": returned, "unsound": unsound,
        "stops": stops, "language_modes": modes, "seconds": round(time.time() - started, 1),
        **_per_token(results),
    }
    print(json.dumps(report, indent=1))
    return 1 if unsound else 0


def overhead(args) -> int:
    engine = Engine.load(args.model, device=args.device, dtype=args.dtype)
    cases = _cases(args.cases, args.seed, args.max_file_chars)
    results = []
    for case in cases:
        results.append(engine.complete(CompletionRequest(
            case["prefix"], case["suffix"], mode="constrained", max_tokens=args.max_tokens,
            top_k=args.top_k, scope=args.scope)))
    print(json.dumps({"model": args.model, "cases": len(cases), **_per_token(results)},
                     indent=1))
    return 0


def speed(args) -> int:
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
        d = decode(engine._setup, prompt.ids, "", mode="unconstrained", max_tokens=args.tokens,
                   min_tokens=args.tokens)
        ours.append(d.tokens / (time.perf_counter() - t0))
    report = {
        "model": args.model, "prompt_tokens": len(prompt.ids), "new_tokens": args.tokens,
        "generate_tokens_per_s_median": statistics.median(theirs),
        "seam_tokens_per_s_median": statistics.median(ours),
        "ratio": statistics.median(ours) / statistics.median(theirs),
        "runs": args.repeats,
    }
    print(json.dumps(report, indent=1))
    return 0


# One fresh interpreter per measurement: imports, Engine.load, then the first completion.
_LOAD_CHILD = """
import json, sys, time
t0 = time.perf_counter()
import torch, transformers
from fim.api import CompletionRequest, Engine
t1 = time.perf_counter()
engine = Engine.load(sys.argv[1], device=sys.argv[2], dtype=sys.argv[3])
t2 = time.perf_counter()
res = engine.complete(CompletionRequest("def add(a, b):\\n    return ", "\\n", max_tokens=1,
                                        mode="unconstrained"))
t3 = time.perf_counter()
print(json.dumps({"imports_s": t1 - t0, "load_s": t2 - t1, "first_token_s": t3 - t2}))
"""


def load(args) -> int:
    """Wall time of a fresh process: library imports, ``Engine.load`` and the first token."""
    runs = []
    for _ in range(args.repeats):
        out = subprocess.run([sys.executable, "-c", _LOAD_CHILD, args.model, args.device,
                              args.dtype], capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        if args.verbose:
            print(runs[-1], file=sys.stderr)
    report = {"model": args.model, "runs": args.repeats}
    for key in ("imports_s", "load_s", "first_token_s"):
        values = [r[key] for r in runs]
        report[key + "_median"] = statistics.median(values)
        report[key + "_min"] = min(values)
    print(json.dumps(report, indent=1))
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("soundness", "overhead", "speed", "load"):
        s = sub.add_parser(name)
        s.add_argument("--model", default="random:santacoder")
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
    args = p.parse_args(argv)
    commands = {"soundness": soundness, "overhead": overhead, "speed": speed, "load": load}
    return commands[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
