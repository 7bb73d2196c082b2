"""How OpenMP's wait policy changes the llama.cpp engine's speed: a prompt and the tokens after
it, with ``OMP_WAIT_POLICY`` set to ``PASSIVE``, left unset, and ``ACTIVE``.

The llama.cpp build runs its threads with OpenMP, whose runtime reads the policy once, when it
is loaded, so each policy runs in a process of its own (this script started again with
``--child``), in turn, ``--rounds`` times. Each run loads the model, reads a
``--prompt``-token stretch of the standard library into an empty cache and then generates
``--tokens`` tokens greedily, one forward pass each, with an interrupt check as the server
passes one; it reports the prompt's tokens per second and the time per generated token (the
median of ``--repeats`` prompts). Why the server cares: ``docs/latency.md``, "OpenMP's wait
policy".

    .venv/bin/python -m benchmarks.openmp_policy --figures docs/latency.md
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.report import RunRecord, command_line, model_packages, publish  # noqa: E402

#: The policies compared; ``None``: the variable is not set (the runtime's default).
POLICIES = ("PASSIVE", None, "ACTIVE")


def measure(model: str, prompt: int, tokens: int, repeats: int) -> dict:
    """One process's figures (the policy is whatever this process was started with)."""
    import numpy as np

    from fim.engines.loading import load_backend

    # The engine's own loader (any GGUF spec it reads); the model is driven below the step
    # model, one pass at a time, so that only llama.cpp's passes are timed.
    backend = load_backend(model, engine="llama.cpp", slots=1, window=prompt + tokens + 8)
    llama = backend.step_model.llama
    ids = llama.tokenize(Path(os.__file__).read_text(encoding="utf-8").encode(), False)
    speeds, steps = [], []
    for r in range(repeats):
        part = ids[r * prompt:(r + 1) * prompt]
        llama.seq_rm(0, 0, -1)
        t0 = time.perf_counter()
        logits = llama.forward(0, list(range(prompt)), part, lambda: False)
        speeds.append(prompt / (time.perf_counter() - t0))
        token = int(np.argmax(logits))
        t0 = time.perf_counter()
        for k in range(tokens):
            token = int(np.argmax(llama.forward(0, [prompt + k], [token], lambda: False)))
        steps.append((time.perf_counter() - t0) / tokens * 1e3)
    return {"prompt_tps": statistics.median(speeds), "token_ms": statistics.median(steps),
            "threads": llama.threads}


def run_child(policy: str | None, args: argparse.Namespace) -> dict:
    env = dict(os.environ)
    env.pop("OMP_WAIT_POLICY", None)
    if policy is not None:
        env["OMP_WAIT_POLICY"] = policy
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.openmp_policy", "--child", "--model", args.model,
         "--prompt", str(args.prompt), "--tokens", str(args.tokens),
         "--repeats", str(args.repeats)],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(rows: list[dict], args: argparse.Namespace) -> str:
    lines = [f"A {args.prompt}-token prompt into an empty cache, then {args.tokens} tokens one "
             f"pass each, {rows[0]['threads']} threads; the median of {args.repeats} prompts "
             f"per process, one process per policy and round ({args.rounds} rounds, in turn).",
             "", "| `OMP_WAIT_POLICY` | prompt, tokens/s | one token, ms |", "|---|---:|---:|"]
    for policy in POLICIES:
        mine = [r for r in rows if r["policy"] == policy]
        name = f"`{policy}`" if policy else "not set"
        speeds = ", ".join(f"{r['prompt_tps']:.0f}" for r in mine)
        steps = ", ".join(f"{r['token_ms']:.0f}" for r in mine)
        lines.append(f"| {name} | {speeds} | {steps} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="bundled:qwen2.5-coder-1.5b")
    p.add_argument("--prompt", type=int, default=185, help="prompt tokens (the first window's)")
    p.add_argument("--tokens", type=int, default=12)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--figures", type=Path, default=None)
    p.add_argument("--section", default="openmp-policy")
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.model, args.prompt, args.tokens, args.repeats)))
        return 0
    record = RunRecord(command_line(), packages=model_packages())
    rows = []
    for _ in range(args.rounds):
        for policy in POLICIES:
            rows.append({"policy": policy, **run_child(policy, args)})
            print(rows[-1], file=sys.stderr, flush=True)
    record.finish()
    publish(table(rows, args), record, args.figures, args.section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
