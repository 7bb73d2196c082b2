"""How soon ``seam serve`` can answer: model ready after ``initialize``, started N times.

The fast-inference target is "model ready <= 2 s after ``initialize`` on a warm disk". This
starts the server as an editor does (stdio, default settings, bundled model), waits for
``seam/status`` to say ``ready``, stops it, and repeats; the first start warms the disk cache
(the GGUF file's pages) and is reported apart. From each server's log it also reads where the
time went: the engine's load, the grammar tables (built beside the load) and the warm-ups.

    .venv/bin/python -m benchmarks.bench_ready --runs 5 --figures docs/latency.md
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a file: the root

from benchmarks.lsp_session import LspSession  # noqa: E402
from benchmarks.report import RunRecord, command_line, model_packages, write_section  # noqa: E402

_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
#: log lines that mark the phases, by the name they are reported under
_PHASES = {
    "initialized": re.compile(r"\binitialized: "),
    "load_started": re.compile(r"\bloading model "),
    "engine_loaded": re.compile(r"\bmodel runtime: "),
    "ready": re.compile(r"\bmodel \S+ ready$"),
}
_TOOK = re.compile(r"(grammar tables built|unconstrained warm-up took|constrained warm-up "
                   r"took)(?: in)? ([0-9.]+) s")


def phases(log_text: str) -> dict[str, float]:
    """Seconds spent per phase of one server start, read from its log."""
    at: dict[str, datetime] = {}
    took: dict[str, float] = {}
    for line in log_text.splitlines():
        stamp = _STAMP.match(line)
        if stamp is None:
            continue
        when = datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f")
        for name, pattern in _PHASES.items():
            if name not in at and pattern.search(line):
                at[name] = when
        m = _TOOK.search(line)
        if m:
            took[m.group(1).split()[0]] = float(m.group(2))
    out: dict[str, float] = {}
    if {"load_started", "engine_loaded"} <= at.keys():
        out["engine_load_s"] = (at["engine_loaded"] - at["load_started"]).total_seconds()
    if {"initialized", "load_started"} <= at.keys():
        out["before_load_s"] = (at["load_started"] - at["initialized"]).total_seconds()
    out["grammar_s"] = took.get("grammar", float("nan"))
    out["warm_up_s"] = took.get("unconstrained", 0.0) + took.get("constrained", 0.0)
    return out


async def one_start(model: str, log: Path) -> dict[str, float]:
    session = LspSession({"model": model}, log)
    try:
        from_spawn = await session.start()
        rss = session.peak_rss_mb()
    finally:
        await session.close()
    assert session.ready_after_initialize_s is not None
    return {"after_initialize_s": session.ready_after_initialize_s,
            "from_spawn_s": from_spawn, "rss_mb": rss,
            **phases(log.read_text(encoding="utf-8", errors="replace"))}


async def run(model: str, runs: int) -> list[dict[str, float]]:
    out = []
    with tempfile.TemporaryDirectory(prefix="seam-ready-") as tmp:
        for i in range(runs + 1):
            rec = await one_start(model, Path(tmp) / f"server-{i}.log")
            rec["disk_warming"] = i == 0
            out.append(rec)
            print(json.dumps({k: round(v, 3) if isinstance(v, float) else v
                              for k, v in rec.items()}), file=sys.stderr)
    return out


def table(model: str, records: list[dict[str, float]]) -> str:
    warm = [r for r in records if not r["disk_warming"]]

    def cell(key: str) -> str:
        values = [r[key] for r in warm]
        return (f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})")

    keys = ("after_initialize_s", "from_spawn_s", "before_load_s", "engine_load_s",
            "grammar_s", "warm_up_s")
    head = ("| model | starts | ready after initialize | ready from spawn | initialize to "
            "load | engine load | grammar tables (beside the load) | warm-up | RSS MB |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    row = (f"| {model} | {len(warm)} | " + " | ".join(cell(k) for k in keys)
           + f" | {statistics.median(r['rss_mb'] for r in warm):.0f} |\n")
    first = records[0]
    note = (f"\nSeconds: median (min-max) over the starts after a first one that brings the "
            f"model file into the page cache (that one: ready {first['after_initialize_s']:.2f}"
            f" s after initialize).\n")
    return head + row + note


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="bundled:qwen2.5-coder-1.5b", help="model spec "
                   "(default: the bundled model)")
    p.add_argument("--runs", type=int, default=5,
                   help="starts measured after the disk-warming one (default: 5)")
    p.add_argument("--figures", type=Path, default=None,
                   help="write the table into this page's `ready` section (default: print)")
    args = p.parse_args(argv)
    record = RunRecord(command_line(), packages=model_packages())
    records = asyncio.run(run(args.model, args.runs))
    record.finish()
    body = table(args.model, records) + "\n" + record.markdown()
    print(body)
    if args.figures:
        write_section(args.figures, "ready", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
