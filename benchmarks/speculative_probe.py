"""Would speculative decoding with a small draft model pay for Seam on this CPU?  Measured
before anything is built (issue 18, item 4).

Draft-then-verify: a small model of the same tokenizer proposes ``k`` tokens greedily; the
bundled 1.5B runs them in one batch with logits at every position; the decoder (with Seam's
constraint) takes the proposed tokens for as long as they are what it would have chosen,
then the 1.5B's own choice at the first difference.  It pays when one batch of ``k + 1``
tokens costs the 1.5B much less than ``k + 1`` single steps, the draft is much cheaper than the
1.5B, and the draft's guesses are often right.  This script measures each of those on real
cursors, planned as the server plans them:

1. Seam (1.5B, llama.cpp, constrained, as shipped) completes the cursor; the prompt's ids and
   the tokens the decoder stepped (its constrained greedy choices) are recorded, with the
   1.5B's unconstrained greedy token at every position.
2. Both models run the prompt (prefill time of each), then the draft's greedy next token at
   every position of that middle: how often it equals the 1.5B's unconstrained greedy token
   and the decoder's constrained one (the acceptance rate that counts).
3. The 1.5B steps through the middle one token at a time (the ordinary decode's model time),
   and runs batches of ``m = 1..7`` tokens with logits at every position.
4. Draft-then-verify is run for real for each ``k``: the draft proposes ``k`` tokens, the
   1.5B verifies them in one batch, the recorded middle decides how many are accepted, both
   caches are cropped.  Its model time against step 3's is the speed-up at equal output
   (the constraint's own time is the same in both and left out).

The machine is shared, so only ratios taken within one case, measured back to back, are
reported; the load average is recorded beside them.  The draft is a GGUF file the caller
provides (``--draft``); ``benchmarks/speculative_probe.py --help`` lists the options.

    .venv/bin/python -m benchmarks.speculative_probe \\
        --draft ~/.cache/seam/draft/qwen2.5-coder-0.5b-draft.gguf --per-cell 1 \\
        --json docs/eval/speculative.json --figures docs/speculative.md
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.fresh_usefulness import corpus_cursors  # noqa: E402
from benchmarks.report import RunRecord, command_line, model_packages, publish  # noqa: E402
from benchmarks.usefulness import plan_case  # noqa: E402
from benchmarks.usefulness_cases import Config  # noqa: E402
from fim.api import Engine  # noqa: E402
from fim.editor_policy import LEFT_FIRST_TOKENS  # noqa: E402
from fim.engines.llama_engine import BATCH, LlamaModel  # noqa: E402
from lsp_server.project.sources import ContextCollector  # noqa: E402
from lsp_server.request_plan import RequestPlanner  # noqa: E402

KS = (2, 3, 4, 5, 6)
MAX_BATCH = max(KS) + 1


def log(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


def forward_all(llama: LlamaModel, seq: int, start: int, ids: list[int]) -> np.ndarray:
    """Run ``ids`` at positions ``start..`` of ``seq`` with logits at every position: a
    ``(len(ids), n_vocab)`` array (row ``i``: the next-token logits after ``ids[i]``)."""
    lib, batch = llama.lib, llama.batch
    if not 0 < len(ids) <= BATCH:
        raise ValueError(f"1 to {BATCH} tokens per batch, not {len(ids)}")
    for i, tok in enumerate(ids):
        batch.token[i] = tok
        batch.pos[i] = start + i
        batch.n_seq_id[i] = 1
        batch.seq_id[i][0] = seq
        batch.logits[i] = 1
    batch.n_tokens = len(ids)
    rc = lib.llama_decode(llama.ctx, batch)
    if rc != 0:
        raise RuntimeError(f"llama_decode failed ({rc})")
    ptr = lib.llama_get_logits(llama.ctx)
    arr = np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)),
                                shape=(len(ids), llama.n_vocab))
    return arr.copy()


def prefill(llama: LlamaModel, seq: int, ids: list[int]) -> np.ndarray:
    """Run a prompt from scratch in ``seq``; the logits after its last token."""
    llama.seq_rm(seq, -1, -1)
    return llama.forward(seq, range(len(ids)), ids, None)


class Recorder:
    """Wraps a step model's ``prefill``/``step`` to record the decoder's tokens."""

    def __init__(self, step_model, disallowed: np.ndarray) -> None:
        self.sm = step_model
        self.disallowed = disallowed
        self.prompt: list[int] = []
        self.tokens: list[int] = []
        self.free: list[int] = []  # the 1.5B's unconstrained greedy token at each position
        self._prefill, self._step = step_model.prefill, step_model.step
        step_model.prefill, step_model.step = self.prefill, self.step

    def _greedy(self, logits: np.ndarray) -> int:
        return int(np.argmax(np.where(self.disallowed, -np.inf, logits)))

    def prefill(self, ids, *args, **kwargs):
        out = self._prefill(ids, *args, **kwargs)
        self.prompt, self.tokens = list(ids), []
        self.free = [] if out is None else [self._greedy(out)]
        return out

    def step(self, token: int):
        out = self._step(token)
        self.tokens.append(int(token))
        self.free.append(self._greedy(out))
        return out


@dataclasses.dataclass
class Timer:
    seconds: float = 0.0

    def __call__(self, fn, *args):
        t0 = time.perf_counter()
        out = fn(*args)
        self.seconds += time.perf_counter() - t0
        return out


def greedy(logits: np.ndarray, disallowed: np.ndarray) -> int:
    return int(np.argmax(np.where(disallowed, -np.inf, logits)))


def speculate(target: LlamaModel, draft: LlamaModel, prompt: list[int], middle: list[int],
              k: int, disallowed: np.ndarray, free: list[int]) -> dict:
    """Draft-then-verify through ``middle`` (the decoder's choices) with both prompts cached
    in sequence 0: model seconds of each side, rounds, tokens the 1.5B verified, and at how
    many verified positions the batch's greedy token differs from the single steps' one
    (``free``: llama.cpp's CPU kernels are not batch-invariant)."""
    n, p = len(middle), len(prompt)
    t_draft, t_verify = Timer(), Timer()
    held: list[int] = []  # draft's cached tokens after the prompt
    i = rounds = accepted = flips = 0
    while i < n:
        # Logits after middle[:i+1] are needed: the draft catches up on what it lacks.
        confirmed = middle[:i + 1]
        keep = 0
        while keep < min(len(held), len(confirmed)) and held[keep] == confirmed[keep]:
            keep += 1
        draft.seq_rm(0, p + keep, -1)
        feed = confirmed[keep:]
        held = held[:keep] + feed
        rows = t_draft(forward_all, draft, 0, p + keep, feed)
        proposal = [greedy(rows[-1], disallowed)]
        while len(proposal) < k:
            row = t_draft(forward_all, draft, 0, p + len(held), [proposal[-1]])
            held.append(proposal[-1])
            proposal.append(greedy(row[-1], disallowed))
        # The 1.5B runs the confirmed token and the k guesses in one batch.
        target.seq_rm(0, p + i, -1)
        rows = t_verify(forward_all, target, 0, p + i, [middle[i], *proposal])
        a = 0
        while a < k and i + 1 + a < n and proposal[a] == middle[i + 1 + a]:
            a += 1
        flips += sum(greedy(rows[j], disallowed) != free[i + 1 + j]
                     for j in range(a + 1) if i + 1 + j < len(free))
        rounds += 1
        accepted += a
        i += 1 + a
    target.seq_rm(0, p, -1)
    draft.seq_rm(0, p, -1)
    return {"k": k, "rounds": rounds, "accepted": accepted, "flips": flips,
            "draft_s": t_draft.seconds,
            "verify_s": t_verify.seconds}


def single_steps(llama: LlamaModel, p: int, middle: list[int]) -> list[float]:
    out = []
    for j, tok in enumerate(middle):
        t0 = time.perf_counter()
        llama.forward(0, [p + j], [tok], None)
        out.append(time.perf_counter() - t0)
    llama.seq_rm(0, p, -1)
    return out


def measure_case(target: LlamaModel, draft: LlamaModel, rec: Recorder,
                 disallowed: np.ndarray) -> dict:
    prompt, middle, free = rec.prompt, rec.tokens, rec.free
    p, n = len(prompt), len(middle)
    row: dict = {"prompt_tokens": p, "middle_tokens": n}
    t0 = time.perf_counter()
    prefill(target, 0, prompt)
    row["target_prefill_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    first = prefill(draft, 0, prompt)
    row["draft_prefill_s"] = time.perf_counter() - t0
    # The draft's greedy guess at every position of the middle.
    guesses = [greedy(first, disallowed)]
    if n:
        for at in range(0, n - 1, BATCH):  # a batch holds at most BATCH tokens
            rows = forward_all(draft, 0, p + at, middle[at:min(n - 1, at + BATCH)])
            guesses += [greedy(r, disallowed) for r in rows]
        draft.seq_rm(0, p, -1)
    log("prefills and the draft's guesses done")
    row["match_constrained"] = sum(g == t for g, t in zip(guesses, middle, strict=True))
    row["match_free"] = sum(g == f for g, f in zip(guesses, free[:n], strict=True))
    row["free_is_constrained"] = sum(f == t for f, t in zip(free[:n], middle, strict=True))
    if n < 2:
        return row
    # Ordinary decoding: one 1.5B step per token (and one draft step, for the ratio).
    steps = single_steps(target, p, middle)
    draft_steps = single_steps(draft, p, middle)
    # Batches of m tokens with logits everywhere, m = 1..7 (middle tokens, then repeated).
    toks = (middle * MAX_BATCH)[:MAX_BATCH]
    batches = {}
    for m in range(1, MAX_BATCH + 1):
        t0 = time.perf_counter()
        forward_all(target, 0, p, toks[:m])
        batches[m] = time.perf_counter() - t0
        target.seq_rm(0, p, -1)
    row["batch_s"] = {str(m): s for m, s in batches.items()}  # as JSON keeps them
    log("single steps and batches done")
    row["spec"] = []
    for k in KS:
        row["spec"].append(speculate(target, draft, prompt, middle, k, disallowed, free))
        log(f"draft-then-verify with k={k} done")
    steps_after = single_steps(target, p, middle)  # again: load drifts during a case
    row["target_step_s"] = (sum(steps) + sum(steps_after)) / 2
    row["target_step_median_s"] = statistics.median(steps + steps_after)
    row["draft_step_s"] = sum(draft_steps)
    row["draft_step_median_s"] = statistics.median(draft_steps)
    return row


def render(rows: list[dict], ks=KS) -> str:
    measured = [r for r in rows if "spec" in r]
    if not measured:
        return "No case produced a middle of two tokens or more.\n"
    n = sum(r["middle_tokens"] for r in rows)
    mc = sum(r["match_constrained"] for r in rows)
    mf = sum(r["match_free"] for r in rows)
    fc = sum(r["free_is_constrained"] for r in rows)
    ratio_d = statistics.median(r["draft_step_median_s"] / r["target_step_median_s"]
                                for r in measured)
    ratio_p = statistics.median(r["draft_prefill_s"] / r["target_prefill_s"] for r in rows)

    def batch_ratio(m: int) -> list[float]:
        return [r["batch_s"][str(m)] / r["target_step_median_s"] for r in measured]

    lines = [
        f"{len(rows)} cursors, {n} middle tokens (the decoder's constrained greedy choices); "
        f"{len(measured)} cursors with two tokens or more are timed.",
        "",
        "| quantity | value |",
        "|---|---|",
        f"| draft greedy = decoder's constrained choice | {mc / n:.1%} ({mc}/{n}) |",
        f"| draft greedy = 1.5B's unconstrained greedy | {mf / n:.1%} ({mf}/{n}) |",
        f"| 1.5B unconstrained greedy = constrained choice | {fc / n:.1%} ({fc}/{n}) |",
        f"| draft step / 1.5B step (median of per-cursor medians) | {ratio_d:.2f} |",
        f"| draft prefill / 1.5B prefill (median per cursor) | {ratio_p:.2f} |",
        "",
        "1.5B batch of m tokens (logits at every position) / one 1.5B step, median over cursors:",
        "",
        "| m | " + " | ".join(str(m) for m in range(1, MAX_BATCH + 1)) + " |",
        "|---|" + "---|" * MAX_BATCH,
        "| time ratio | " + " | ".join(f"{statistics.median(batch_ratio(m)):.2f}"
                                       for m in range(1, MAX_BATCH + 1)) + " |",
        "",
        "Draft-then-verify, run for real on the recorded middles (model time only; speed-up = "
        "ordinary decoding's 1.5B step time / draft + verify time, summed over cursors):",
        "",
        "| k | rounds | tokens per verify | accepted per round | draft s | verify s | "
        "speculative s | ordinary s | speed-up | batch greedy != step greedy |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    base = sum(r["target_step_s"] for r in measured)
    tokens = sum(r["middle_tokens"] for r in measured)
    for i, k in enumerate(ks):
        sp = [r["spec"][i] for r in measured]
        rounds = sum(s["rounds"] for s in sp)
        acc = sum(s["accepted"] for s in sp)
        d, v = sum(s["draft_s"] for s in sp), sum(s["verify_s"] for s in sp)
        flips = (f"{sum(s['flips'] for s in sp)} of {rounds + acc}"
                 if all("flips" in s for s in sp) else "not measured")
        lines.append(f"| {k} | {rounds} | {tokens / rounds:.2f} | {acc / rounds:.2f} | "
                     f"{d:.1f} | {v:.1f} | {d + v:.1f} | {base:.1f} | {base / (d + v):.2f}x | "
                     f"{flips} |")
    prefill_t = sum(r["target_prefill_s"] for r in measured)
    prefill_d = sum(r["draft_prefill_s"] for r in measured)
    lines += ["", f"Prompt prefill on the same cursors: 1.5B {prefill_t:.1f} s, draft "
              f"{prefill_d:.1f} s (the draft's is extra on every new place unless it, too, is "
              "cached and warmed)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--draft", type=Path, required=True, help="the draft model's GGUF file")
    p.add_argument("--model", default="bundled:qwen2.5-coder-1.5b")
    p.add_argument("--engine", default="llama.cpp")
    p.add_argument("--corpus", default="fresh")
    p.add_argument("--per-cell", type=int, default=1)
    p.add_argument("--limit", type=int, default=0, help="at most this many cursors")
    p.add_argument("--context", choices=("all", "off"), default="off",
                   help="project context (off: shorter prompts, for the shared machine)")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--open", type=int, default=3)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--figures", type=Path, default=None)
    p.add_argument("--section", default="speculative")
    p.add_argument("--report-only", action="store_true")
    args = p.parse_args(argv)
    if args.report_only:
        data = json.loads(args.json.read_text(encoding="utf-8"))
        record = RunRecord(**{k: (tuple(v) if k.startswith("load") and v else v)
                              for k, v in data["run"].items()})
        publish(render(data["rows"]), record, args.figures, args.section)
        return 0
    if not args.draft.is_file():
        raise SystemExit(f"no draft model at {args.draft}")
    args.budget = args.context_tokens = args.right_tokens = None
    args.left_first = LEFT_FIRST_TOKENS
    args.time_budgets = False
    record = RunRecord(command_line(), packages=model_packages())
    log("loading")
    engine = Engine.load(args.model, engine=args.engine)
    target = engine.step_model.llama
    threads = args.threads or target.threads
    draft = LlamaModel(args.draft, slots=1, context=4096, threads=threads)
    if draft.n_vocab != target.n_vocab:
        raise SystemExit(f"the draft has {draft.n_vocab} tokens, the model {target.n_vocab}")
    disallowed = engine._setup.disallowed
    rec = Recorder(engine.step_model, disallowed)
    base = Config(args.context, args.context, None, None, None, LEFT_FIRST_TOKENS)
    rows: list[dict] = []
    log("choosing cursors")
    for fc, cursors in corpus_cursors(args.corpus, args.per_cell, args):
        planner = RequestPlanner(ContextCollector(fc.workspace), left_first=base.left,
                                 right_tokens=base.right)
        for cur in cursors:
            if args.limit and len(rows) >= args.limit:
                break
            req = plan_case(engine, planner, base, fc, cur.case, args).request
            req = dataclasses.replace(req, time_budget_ms=None)
            engine.step_model.reset()
            log(f"{cur.case.id}: completing")
            res = engine.complete(req)
            log(f"completed, {len(rec.prompt)} prompt and {len(rec.tokens)} middle tokens")
            engine.step_model.reset()  # sequence 0 is the probe's from here
            row = {"id": cur.case.id, "kind": str(cur.kind), "text": cur.text,
                   "middle": res.middle, "stop": str(res.stop)}
            row.update(measure_case(target, draft, rec, disallowed))
            target.seq_rm(0, -1, -1)
            draft.seq_rm(0, -1, -1)
            rows.append(row)
            print(f"{row['id'][:60]:60} n={row['middle_tokens']:3} "
                  f"acc={row['match_constrained']}", file=sys.stderr, flush=True)
            if args.json:
                args.json.write_text(json.dumps({"run": record.as_dict(), "rows": rows},
                                                indent=1), encoding="utf-8")
    record.finish()
    if args.json:
        args.json.write_text(json.dumps({"run": record.as_dict(), "rows": rows}, indent=1),
                             encoding="utf-8")
    publish(render(rows), record, args.figures, args.section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
