"""How much a core taken by another process slows a batch of completions, per thread policy.

Issue 18 asks that a machine busy elsewhere (one core taken by a build or a test run) at most
double the quiet figures.  This script loads the bundled model once with llama.cpp and runs
the same batch of constrained completions (the editor's requests at a mid-line cursor and on a
new empty line in standard-library files, default "auto" policy but no time budget, so every
run does the same work) for each thread setting in one run:

* ``2`` and ``1`` threads fixed, and ``auto`` (``fim.engines.cpu_load``: chosen before each
  request from the load other processes put on the CPUs);
* each first on the machine as it is ("quiet"), then with one core taken by a burner process
  the script starts and stops itself (a ``python -c`` spin loop).  Before each batch it waits
  ``--settle`` seconds, so the automatic choice sees the change (its window is 5 s).

The model's cache is emptied before each batch (every batch runs its prompts from scratch).
It reports each batch's time, the busy/quiet ratio per setting, the thread counts ``auto``
chose, and the load other processes put on the CPUs during each batch (the same
measurement ``auto`` uses).  The project machine is shared with other jobs: their load is
part of "quiet"; compare ratios within one run.

    .venv/bin/python -m benchmarks.bench_threads --figures docs/latency.md
"""

from __future__ import annotations

import argparse
import collections
import json
import signal
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_latency import FILES, pick_edit  # noqa: E402
from benchmarks.report import RunRecord, command_line, model_packages, publish  # noqa: E402
from fim.api import CompletionRequest, Engine  # noqa: E402
from fim.editor_policy import editor_request  # noqa: E402
from fim.engines.cpu_load import LoadMonitor, read_sample, window_load  # noqa: E402
from fim.engines.llama_engine import LlamaStepModel  # noqa: E402

SETTINGS = ("2", "1", "auto")


def batch_requests(files: list[Path], seed: int, kinds: tuple[str, ...] = ("mid", "empty"),
                   context_tokens: int | None = None) -> list[CompletionRequest]:
    """Editor requests per file: a line cut mid-way (``mid``) and a new empty line elsewhere
    (``empty``); ``context_tokens``: the prompt-plus-middle budget (``None``: the editor's)."""
    out = []
    extra = {} if context_tokens is None else {"context_tokens": context_tokens}
    for path in files:
        text = path.read_text(encoding="utf-8")
        edit = pick_edit(text, seed)
        if "mid" in kinds:
            out.append(editor_request(text[:edit.cut_start], text[edit.cut_end:], **extra))
        if "empty" in kinds:
            at = edit.enter_at
            out.append(editor_request(text[:at] + "\n" + edit.indent, text[at:], **extra))
    for req in out:
        req.time_budget_ms = None  # the same work however fast the machine is
    return out


@dataclass
class Batch:
    setting: str
    phase: str  # "quiet" or "busy"
    seconds: float = 0.0
    tokens: int = 0
    threads: collections.Counter = field(default_factory=collections.Counter)
    #: cores other processes kept busy during the batch (the burner included)
    others_load: float | None = None

    def as_dict(self) -> dict:
        return {"setting": self.setting, "phase": self.phase,
                "seconds": round(self.seconds, 3), "tokens": self.tokens,
                "threads": dict(self.threads),
                "others_load": None if self.others_load is None else round(self.others_load, 2)}


def run_batch(engine: Engine, requests: list[CompletionRequest], setting: str,
              phase: str) -> Batch:
    batch = Batch(setting, phase)
    step = engine.step_model
    if not isinstance(step, LlamaStepModel):  # loaded with engine="llama.cpp" below
        raise TypeError(f"the thread benchmark needs llama.cpp's step model, not {step!r}")
    step.reset()
    before = read_sample()
    t0 = time.perf_counter()
    for req in requests:
        result = engine.complete(req)
        batch.tokens += result.tokens
        choice = step.last_threads
        batch.threads[choice.threads if choice else 0] += 1
    batch.seconds = time.perf_counter() - t0
    batch.others_load = window_load([before, read_sample()],
                                    LoadMonitor.for_this_process().cpus)
    return batch


#: A pure CPU spin that also ends when its parent is gone (a killed benchmark leaves no
#: burner behind): the parent is checked every few million iterations.
BURN = ("import os\np = os.getppid()\nwhile os.getppid() == p:\n"
        "    for _ in range(3_000_000):\n        pass\n")


class Burner:
    """One core kept busy by another process, for as long as the ``with`` lasts."""

    def __enter__(self) -> Burner:
        self.proc = subprocess.Popen([sys.executable, "-c", BURN])
        return self

    def __exit__(self, *exc) -> None:
        self.proc.kill()
        self.proc.wait()


def table(batches: list[Batch]) -> str:
    rows = ["| threads | quiet batch (s) | busy batch (s) | busy / quiet | threads chosen "
            "quiet / busy | others' load quiet / busy (cores) |",
            "|---|---:|---:|---:|---|---|"]
    by = {(b.setting, b.phase): b for b in batches}
    for setting in dict.fromkeys(b.setting for b in batches):
        q, b = by.get((setting, "quiet")), by.get((setting, "busy"))
        if q is None or b is None:
            continue

        def chosen(x: Batch) -> str:
            return ", ".join(f"{n}: {c}x" for n, c in sorted(x.threads.items()))

        def load(x: Batch) -> str:
            return "?" if x.others_load is None else f"{x.others_load:.2f}"

        rows.append(f"| {setting} | {q.seconds:.1f} | {b.seconds:.1f} | "
                    f"**{b.seconds / q.seconds:.2f}x** | {chosen(q)} / {chosen(b)} | "
                    f"{load(q)} / {load(b)} |")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="bundled:qwen2.5-coder-1.5b")
    p.add_argument("--settings", default=",".join(SETTINGS),
                   help="thread settings to compare: numbers and/or auto")
    p.add_argument("--files", default=",".join(FILES[:4]),
                   help="standard-library files; two completions each")
    p.add_argument("--kinds", default="mid,empty",
                   help="cursors per file: mid (a line cut mid-way), empty (a new line)")
    p.add_argument("--context-tokens", type=int, default=None,
                   help="prompt plus middle in tokens (default: the editor's, 2048 on a CPU); "
                        "smaller runs faster on a busy machine")
    p.add_argument("--settle", type=float, default=6.0,
                   help="seconds to wait after the load changes, before a batch")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--figures", type=Path, default=None)
    p.add_argument("--section", default="threads")
    args = p.parse_args(argv)
    # A terminated run still stops its burner (``Burner.__exit__`` runs on SystemExit).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    requests = batch_requests([stdlib / f for f in args.files.split(",") if f], args.seed,
                              tuple(args.kinds.split(",")), args.context_tokens)
    record = RunRecord(command_line(), packages=model_packages())
    engine = Engine.load(args.model, engine="llama.cpp", slots=4)
    governor = engine.backend.threads
    assert governor is not None
    print(f"{len(requests)} completions per batch; {engine.backend.description}",
          file=sys.stderr)
    run_batch(engine, requests, "warm-up", "quiet")  # grammar tables, first-run costs
    batches = []
    for setting in [s for s in args.settings.split(",") if s]:
        governor.pin(None if setting == "auto" else int(setting))
        time.sleep(args.settle)
        batches.append(run_batch(engine, requests, setting, "quiet"))
        with Burner():
            time.sleep(args.settle)
            batches.append(run_batch(engine, requests, setting, "busy"))
        print("  " + " | ".join(json.dumps(b.as_dict()) for b in batches[-2:]),
              file=sys.stderr, flush=True)
    record.finish()
    tokens = sorted({b.tokens for b in batches})
    body = (f"{len(requests)} constrained completions per batch (the bundled model on "
            f"llama.cpp, {governor.cpus} CPUs; tokens generated per batch: "
            f"{', '.join(map(str, tokens))}); \"busy\": one core taken by a spinning "
            "process the script starts. Others' load: cores other processes kept busy "
            "during the batch (the burner included), as `auto` measures it.\n\n"
            + table(batches))
    publish(body, record, args.figures, args.section)
    if args.json:
        args.json.write_text(json.dumps({"run": record.as_dict(),
                                         "batches": [b.as_dict() for b in batches]},
                                        indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
