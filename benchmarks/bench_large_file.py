"""A completion request on a 5 MB Python file, through ``seam serve`` over stdio.

The file is standard-library modules concatenated until it reaches ``--mb`` megabytes.  The
client opens it, rests the cursor near its middle (``seam/cursor``), and asks for inline
suggestions at a few cursors, typing between them; it reports each request's latency next
to its time budget.  With the tiny random model (the default) the figures are the server's
own costs (document sync, windows, prompt, the check that the middle parses), not a model's.

    .venv/bin/python -m benchmarks.bench_large_file [--model random:santacoder] [--mb 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.lsp_session import LspSession  # noqa: E402
from benchmarks.report import (  # noqa: E402
    RunRecord,
    command_line,
    model_packages,
    write_section,
)
from fim.editor_policy import MID_LINE  # noqa: E402


def big_file(megabytes: float) -> str:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    parts, size = [], 0
    for path in sorted(stdlib.glob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
            compile(text, str(path), "exec", dont_inherit=True, flags=0x400)  # ast only
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            continue
        parts.append(text if text.endswith("\n") else text + "\n")
        size += len(text)
        if size >= megabytes * 1e6:
            break
    return "".join(parts)


async def run(args) -> dict:
    text = big_file(args.mb)
    # Cursors: the end of assignment lines near the middle, after the "= ".
    middle = len(text) // 2
    cursors = []
    pos = middle
    while len(cursors) < args.requests:
        i = text.find(" = ", pos)
        j = text.find("\n", i)
        if i < 0:
            break
        cursors.append(i + 3)
        pos = j + 5000
    with tempfile.TemporaryDirectory() as tmp:
        session = LspSession({"model": args.model}, Path(tmp) / "server.log")
        ready = await session.start()
        uri = "file:///bench/big.py"
        t0 = time.perf_counter()
        session.open(uri, text)
        session.cursor(uri, cursors[0])
        await session.request("seam/status", {})  # the open has been handled
        open_s = time.perf_counter() - t0
        latencies = []
        for c in cursors:
            # Cut the line after the cursor, as if the user were writing it.
            end = session.texts[uri].find("\n", c)
            session.edit(uri, c, end, "")
            _, took = await session.inline(uri, c)
            latencies.append(took)
        rss = session.peak_rss_mb()
        await session.close()
    return {"megabytes": round(len(text) / 1e6, 2), "lines": text.count("\n"),
            "ready_s": round(ready, 2), "open_s": round(open_s, 3),
            "latency_s": [round(x, 3) for x in latencies],
            "median_s": round(statistics.median(latencies), 3),
            "budget_s": MID_LINE.time_budget_ms / 1000, "peak_rss_mb": round(rss)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="random:santacoder")
    p.add_argument("--mb", type=float, default=5.0)
    p.add_argument("--requests", type=int, default=5)
    p.add_argument("--figures", type=Path, default=None,
                   help="write the table into this page's large-file section (docs/latency.md)")
    args = p.parse_args(argv)
    record = RunRecord(command_line(), packages=model_packages())
    out = asyncio.run(run(args))
    record.finish()
    print(json.dumps(out, indent=1))
    print(record.markdown())
    if args.figures:
        table = ("| file | lines | model | open + sync (s) | latency per request (s) | median (s) "
                 "| time budget (s) | peak RSS (MB) |\n|---|---:|---|---:|---|---:|---:|---:|\n"
                 f"| {out['megabytes']} MB | {out['lines']} | {args.model} | {out['open_s']} | "
                 f"{', '.join(str(x) for x in out['latency_s'])} | {out['median_s']} | "
                 f"{out['budget_s']:g} | {out['peak_rss_mb']} |\n")
        write_section(args.figures, "large-file", table + "\n" + record.markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
