"""A keystroke's request as the workspace grows: many folders, many open documents, huge
import blocks, each against the same request in a one-folder, one-document workspace.

Each case is a fresh ``seam serve`` over stdio with the tiny random model (so the figures are
the server's own costs, the project context's among them, not a model's).  The document
imports twenty modules that are in no folder and one that is (as in issue 21's profile); the
client types after its last line, one character per keystroke, and asks for an inline
suggestion at each, waiting for the server to be idle in between, so that every request is
measured alone.  The cases' servers run side by side and take the keystrokes in turn, so a
change in the machine's load falls on all of them alike.  Only requests the model answered
count (not those the suggestion cache answered); the first (the caches cold) is shown apart
from the median of the rest.  The cases:

* ``baseline``: one folder, one open document;
* ``folders``: the same with ``--folders`` workspace folders (60);
* ``documents``: one folder and ``--documents`` other open Python documents (80 modules of
  the standard library);
* ``from_block`` / ``import_block``: the document with 20,000 lines of ``from a import (`` or
  50,000 lines of ``import os`` above its code.

It prints each case's first request, the median and slowest of the rest, the median's ratio
to the baseline's, and the machine's load (``os.getloadavg``) before and after: the machine
may be shared.

    .venv/bin/python benchmarks/bench_project_scale.py [--requests 16] [--max-tokens 4]
        [--cases folders,documents,from_block,import_block]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.lsp_session import LspSession  # noqa: E402
from benchmarks.report import (  # noqa: E402
    RunRecord,
    command_line,
    model_packages,
    publish,
)

HELPERS = ('def scale(value, factor):\n    """Multiply value by factor."""\n'
           "    return value * factor\n")
MISSING = "".join(f"import missing_{i}\n" for i in range(20))
USES = "".join(f"        total = total + missing_{i}.value(v)\n" for i in range(20))
MAIN = ("from helpers import scale\n" + MISSING + "\n\ndef compute(values):\n    total = 0\n"
        "    for v in values:\n" + USES + "        total = total + scale(v, 2)\n"
        "    return total\n")
#: What the user types after the document's last line, one keystroke per character.
TYPED = "\nresult = compute([1, 2, 3]) + scale(4, 5) + compute(range(10))"
CASES = ("baseline", "folders", "documents", "from_block", "import_block")


@dataclass(frozen=True)
class Case:
    """One workspace: how many folders and other open documents, and what goes above the
    document's code."""

    name: str
    folders: int = 1
    documents: int = 0
    block: str = ""


@dataclass
class Measured:
    """A case's request latencies (seconds, the client's clock), the model's requests only."""

    case: Case
    latencies: list[float] = field(default_factory=list)  # after the first
    first: float | None = None  # the first request (the sources' caches cold)
    skipped: int = 0  # answered from the suggestion cache

    @property
    def median(self) -> float:
        return statistics.median(self.latencies) if self.latencies else float("nan")


def cases_of(args: argparse.Namespace) -> dict[str, Case]:
    return {"baseline": Case("baseline"),
            "folders": Case("folders", folders=args.folders),
            "documents": Case("documents", documents=args.documents),
            "from_block": Case("from_block", block="from a import (\n" * 20_000),
            "import_block": Case("import_block", block="import os\n" * 50_000)}


def other_documents(n: int) -> list[str]:
    """``n`` texts for the other open documents: standard-library modules that parse (the
    files people keep open are modules of that size, not snippets)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    out: list[str] = []
    for path in sorted(stdlib.glob("*.py")):
        if len(out) == n:
            break
        try:
            text = path.read_text(encoding="utf-8")
            compile(text, str(path), "exec", dont_inherit=True, flags=0x400)  # ast only
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            continue
        out.append(text)
    return out


def lay_out(tmp: Path, case: Case) -> tuple[list[Path], Path, list[Path]]:
    """The folders (the first holds the document), the document and the other documents."""
    roots = [tmp / f"folder_{i}" for i in range(case.folders)]
    for i, root in enumerate(roots):
        (root / f"pkg_{i}").mkdir(parents=True)
        (root / f"pkg_{i}" / "__init__.py").write_text(f"VALUE = {i}\n")
        (root / f"module_{i}.py").write_text(f"def f_{i}(x):\n    return x + {i}\n")
    (roots[0] / "helpers.py").write_text(HELPERS)
    main = roots[0] / "main.py"
    main.write_text(case.block + MAIN)
    others = []
    for i, text in enumerate(other_documents(case.documents)):
        path = roots[0] / f"open_{i}.py"
        path.write_text(text)
        others.append(path)
    return roots, main, others


async def idle(session: LspSession) -> None:
    while True:
        st = await session.request("seam/status", {})
        if not st["running"] and st.get("idle", True):
            return
        await asyncio.sleep(0.02)


@dataclass
class Running:
    """A case's server, the document typed in, and what was measured."""

    session: LspSession
    uri: str
    tmp: tempfile.TemporaryDirectory
    measured: Measured


async def start(case: Case, args: argparse.Namespace) -> Running:
    tmp = tempfile.TemporaryDirectory()
    root = Path(tmp.name)
    roots, main, others = lay_out(root, case)
    settings = {"model": args.model, "maxTokens": args.max_tokens}
    session = LspSession(settings, root / "server.log", root_uri=roots[0].as_uri())
    await session.start()
    if len(roots) > 1:
        session.notify("workspace/didChangeWorkspaceFolders", {"event": {
            "added": [{"uri": r.as_uri(), "name": r.name} for r in roots[1:]],
            "removed": []}})
    for path in others:
        session.open(path.as_uri(), path.read_text())
    uri = main.as_uri()
    session.open(uri, main.read_text())
    await idle(session)
    return Running(session, uri, tmp, Measured(case))


async def keystroke(run: Running, ch: str) -> None:
    """Type ``ch`` at the document's end and ask for a suggestion there; wait until idle."""
    session, uri, out = run.session, run.uri, run.measured
    end = len(session.texts[uri])
    session.edit(uri, end, end, ch)
    _, took = await session.inline(uri, end + 1)
    last = (await session.request("seam/status", {}))["recent"][-1]
    if last.get("source") not in ("model", "early"):
        out.skipped += 1
    elif out.first is None:
        out.first = took
    else:
        out.latencies.append(took)
    await idle(session)


async def measure_all(cases: list[Case], args: argparse.Namespace) -> list[Measured]:
    """Every case's server at once, the keystrokes taken in turn across them, so that a
    change in the machine's load falls on every case alike."""
    runs = [await start(case, args) for case in cases]
    try:
        for ch in TYPED[:args.requests]:
            for run in runs:
                await keystroke(run, ch)
    finally:
        for run in runs:
            await run.session.close()
            run.tmp.cleanup()
    return [run.measured for run in runs]


def table(results: list[Measured], base: float) -> str:
    rows = ["| case | folders | open documents | first request (s) | next requests "
            "| their median (s) | slowest (s) | median / baseline |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for m in results:
        c = m.case
        slowest = max(m.latencies) if m.latencies else float("nan")
        first = f"{m.first:.3f}" if m.first is not None else "-"
        rows.append(f"| {c.name} | {c.folders} | {c.documents + 1} | {first} | "
                    f"{len(m.latencies)} | {m.median:.3f} | {slowest:.3f} | "
                    f"{m.median / base:.2f} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="random:santacoder")
    p.add_argument("--requests", type=int, default=16, help="keystrokes per case")
    p.add_argument("--max-tokens", type=int, default=4,
                   help="the model's tokens per suggestion (few: the server's costs show)")
    p.add_argument("--folders", type=int, default=60)
    p.add_argument("--documents", type=int, default=80)
    p.add_argument("--cases", default=",".join(CASES),
                   help="comma-separated, of: " + ", ".join(CASES) + " (baseline always runs)")
    p.add_argument("--figures", type=Path, default=None,
                   help="write the table into this page's section (see --section)")
    p.add_argument("--section", default="project-scale")
    args = p.parse_args(argv)
    chosen = cases_of(args)
    names = ["baseline"] + [n for n in args.cases.split(",") if n in chosen and n != "baseline"]
    record = RunRecord(command_line(), packages=model_packages())
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    results = asyncio.run(measure_all([chosen[n] for n in names], args))
    load_after = os.getloadavg()
    record.finish()
    base = results[0].median
    print(json.dumps({m.case.name: {"first_s": m.first,
                                    "latencies_s": [round(x, 3) for x in m.latencies],
                                    "from_cache": m.skipped} for m in results}))
    body = (table(results, base)
            + f"\n\nload average (1, 5, 15 min) before {load_before}, after {load_after}; "
            f"{os.cpu_count()} CPUs; {time.perf_counter() - t0:.0f} s in all")
    publish(body, record, args.figures, args.section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
