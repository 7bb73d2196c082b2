"""Execution benchmark: does a filled-in line keep the program working?

Each program of ``benchmarks.exec_tasks`` is cut at one line of its functions' bodies at a
time (the whole line, its indentation and line break included: the left context ends where
the line began, the right context starts with the next line).  The model fills the hole
constrained and unconstrained, with the same request otherwise; the program with the middle
is written to a temporary file with its unit tests after it and run in a fresh interpreter
(``python -I``, a time limit).  A hole is passed when the tests pass.

The table gives holes passed by each mode and, paired by hole, those the constraint wins and
loses against the unconstrained model, with every lost hole listed (issue 29: a stop that
ended ``return False`` as bare indentation before ``    return True`` lost such holes).
Constrained middles that do not parse are counted (there must be none).  Decoding is greedy
with no time budget, so the middles do not depend on the machine's load; the request is the
one a plain client would send for a whole-line hole (``--max-tokens``, scope ``free``, no line
stop), with the right-context stop at its default (on).

    .venv/bin/python -m benchmarks.exec_holes --json /tmp/exec.json \\
        --figures docs/execution.md
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.exec_tasks import TASKS, Task  # noqa: E402
from benchmarks.report import RunRecord, command_line, model_packages, publish  # noqa: E402

MODES = ("constrained", "unconstrained")
#: Seconds a filled program and its tests may run (they take milliseconds; a middle may loop).
RUN_LIMIT_S = 10.0


@dataclass(frozen=True)
class Hole:
    """One held-out line: where it is, the text around it and the line itself."""

    task: str
    line: int  # 1-based line number in the program
    left: str
    middle: str  # the held-out line, with its line break
    right: str

    @property
    def id(self) -> str:
        return f"{self.task}:{self.line}"


def holes(task: Task) -> list[Hole]:
    """A hole at every line of a function or method body (indented, not blank, not a
    ``def``): the lines a single-line fill can get right or wrong."""
    lines = task.program.splitlines(keepends=True)
    out = []
    for k, line in enumerate(lines):
        text = line.strip()
        if not line.startswith((" ", "\t")) or not text or text.startswith(("def ", "#")):
            continue
        out.append(Hole(task.name, k + 1, "".join(lines[:k]), line, "".join(lines[k + 1:])))
    return out


def telling(task: Task, hole: Hole) -> bool:
    """Whether the tests can tell a wrong line there: with ``pass`` in its place they fail
    (a line they do not need, a guard the code after it repeats, is no test of a fill)."""
    indent = hole.middle[:len(hole.middle) - len(hole.middle.lstrip())]
    return not passes(hole.left + indent + "pass\n" + hole.right, task.tests)


def all_holes(limit: int | None = None) -> list[tuple[Task, Hole]]:
    """Every task's holes the tests can tell (``telling``), in order; with ``limit``, that
    many spread evenly over them."""
    every = [(task, hole) for task in TASKS for hole in holes(task) if telling(task, hole)]
    if limit is None or limit >= len(every):
        return every
    step = len(every) / limit
    return [every[int(i * step)] for i in range(limit)]


def passes(program: str, tests: str, limit_s: float = RUN_LIMIT_S) -> bool:
    """Whether ``program`` followed by ``tests`` runs to its end in a fresh interpreter."""
    with tempfile.TemporaryDirectory(prefix="seam-exec-") as folder:
        path = Path(folder) / "filled.py"
        path.write_text(program + "\n\n" + tests, encoding="utf-8")
        try:
            done = subprocess.run([sys.executable, "-I", str(path)], cwd=folder,
                                  capture_output=True, timeout=limit_s, check=False)
        except subprocess.TimeoutExpired:
            return False
    return done.returncode == 0


def request(hole: Hole, mode: str, max_tokens: int):
    from fim.api import CompletionRequest
    from fim.options import Scope

    return CompletionRequest(hole.left, hole.right, mode=mode, max_tokens=max_tokens,
                             scope=Scope.FREE, temperature=0.0, line_stop=False)


def run(engine, picked: list[tuple[Task, Hole]], modes: list[str], max_tokens: int,
        progress: bool = False) -> list[dict]:
    """One row per hole and mode: the middle, why it stopped, whether it parses and passes."""
    from fim.parse_check import parses

    rows = []
    for n, (task, hole) in enumerate(picked, 1):
        for mode in modes:
            t0 = time.perf_counter()
            res = engine.complete(request(hole, mode, max_tokens))
            seconds = time.perf_counter() - t0
            middle = res.middle
            filled = hole.left + (middle or "") + hole.right
            rows.append({"id": hole.id, "mode": mode, "middle": middle,
                         "expected": hole.middle, "stop": str(res.stop),
                         "parses": middle is not None and parses(filled),
                         "passed": middle is not None and passes(filled, task.tests),
                         "tokens": res.tokens, "seconds": round(seconds, 3)})
            if progress:
                r = rows[-1]
                print(f"[{n}/{len(picked)}] {hole.id} {mode}: {r['passed']} "
                      f"{middle!r} ({r['stop']}, {seconds:.1f} s)", file=sys.stderr)
    return rows


def table(rows: list[dict]) -> str:
    """Passed holes per mode, the constraint's wins and losses paired by hole, the lost
    holes, and constrained middles that do not parse."""
    by = {(r["id"], r["mode"]): r for r in rows}
    ids = list(dict.fromkeys(r["id"] for r in rows))
    both = [i for i in ids if all((i, m) in by for m in MODES)]
    out = ["| holes | constrained passed | unconstrained passed | constraint wins | "
           "constraint loses | constrained middles that do not parse |",
           "|---:|---:|---:|---:|---:|---:|"]
    con = [by[(i, "constrained")] for i in both]
    unc = [by[(i, "unconstrained")] for i in both]
    wins = [c["id"] for c, u in zip(con, unc, strict=True) if c["passed"] and not u["passed"]]
    losses = [c for c, u in zip(con, unc, strict=True) if u["passed"] and not c["passed"]]
    unparsable = sum(c["middle"] is not None and not c["parses"] for c in con)
    out.append(f"| {len(both)} | {sum(c['passed'] for c in con)} | "
               f"{sum(u['passed'] for u in unc)} | {len(wins)} | {len(losses)} | "
               f"{unparsable} |")
    if wins:
        out.append("\nWon by the constraint: " + ", ".join(f"`{i}`" for i in wins) + ".")
    if losses:
        out.append("\nLost by the constraint (hole: constrained middle, stop; "
                   "unconstrained middle):\n")
        for c in losses:
            u = by[(c["id"], "unconstrained")]
            out.append(f"- `{c['id']}`: `{c['middle']!r}` ({c['stop']}); `{u['middle']!r}`")
    return "\n".join(out) + "\n"


def describe(picked: list[tuple[Task, Hole]], max_tokens: int, model: str) -> str:
    return (f"{len(picked)} single-line holes in {len({t.name for t, _ in picked})} programs "
            f"(`benchmarks/exec_tasks.py`; every body line whose removal the tests notice), "
            f"model `{model}`, greedy, at most {max_tokens} tokens, scope `free`, no line "
            "stop, no time budget; a hole passes when the program's unit tests pass with the "
            "middle in place.")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="bundled:qwen2.5-coder-1.5b")
    p.add_argument("--engine", default="llama.cpp")
    p.add_argument("--limit", type=int, default=None,
                   help="this many holes, spread evenly over the programs (default: all)")
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--modes", default=",".join(MODES),
                   help="the modes to run (the table pairs constrained with unconstrained)")
    p.add_argument("--json", type=Path, default=None, help="write the rows here")
    p.add_argument("--report-only", action="store_true",
                   help="render the table from the rows in --json (no model runs)")
    p.add_argument("--figures", type=Path, default=None,
                   help="write the table into this page's section (see --section)")
    p.add_argument("--section", default="exec_holes")
    p.add_argument("--progress", action="store_true")
    args = p.parse_args(argv)
    picked = all_holes(args.limit)
    if args.report_only:
        if args.json is None:
            p.error("--report-only reads the rows from --json")
        saved = json.loads(args.json.read_text(encoding="utf-8"))
        record = RunRecord(**saved["run"])
        body = (saved["describe"] + "\n\n" + table(saved["rows"]) + "\nRendered from the "
                f"rows in `{args.json}` by `{command_line()}`; measured as follows.\n")
        publish(body, record, args.figures, args.section)
        return 0
    from fim.api import Engine

    record = RunRecord(command_line(), packages=model_packages())
    engine = Engine.load(args.model, engine=args.engine)
    modes = [m for m in args.modes.split(",") if m]
    if not set(modes) <= set(MODES):
        p.error(f"--modes takes {', '.join(MODES)}")
    rows = run(engine, picked, modes, args.max_tokens, args.progress)
    record.finish()
    body = describe(picked, args.max_tokens, args.model) + "\n\n" + table(rows)
    if args.json is not None:
        args.json.write_text(json.dumps({"run": record.as_dict(), "describe": body.split(
            "\n\n")[0], "holes": [asdict(h) for _, h in picked], "rows": rows}, indent=1),
            encoding="utf-8")
    publish(body, record, args.figures, args.section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
