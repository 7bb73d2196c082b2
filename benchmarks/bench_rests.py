"""Short rests and the widened window (issue 29, item 2): a plain LSP client walks down a long
file, asking at each line and resting a few seconds between, and each answer's record says
whether it ran on the widened window.

After each answer the server widens the prompt in the background (about 1,400 left tokens
where the first request at a new place reads 128), and the next request interrupts that
widening.  Whether the rests between a user's requests add up to the widened window is what
this measures: the number of requests (and seconds) before the first answer on it, and the
share of answers on it.  A rest shorter than the whole widening finishes it only if each
widening resumes what the last one ran (``lsp_server.prompt_anchors``, "Interrupted widenings
add up").

The walk: ``--files`` long files of a fresh-corpus package (code the bundled model has not
read), from ``--start`` (a share of the file) down, ``--steps`` code lines one after another.
At each, the line's second half (from a word boundary) is taken out, the client asks at once
(automatic trigger), the text is put back and the client rests ``--rest`` seconds.  Quality is
scored on what the suggestion inserts, as in ``benchmarks/bench_new_place.py``.

Every configuration runs the same walks in one run: ``change`` is this checkout, ``baseline``
the server of another checkout (``--baseline-root``), so both meet the same load.

    .venv/bin/python -m benchmarks.bench_rests --baseline-root /path/to/main --progress
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import fresh_corpus  # noqa: E402
from benchmarks.baseline_runs import (  # noqa: E402
    add_options,
    baseline_note,
    configs,
    last_record,
)
from benchmarks.lsp_session import LspSession  # noqa: E402
from benchmarks.report import (  # noqa: E402
    RunRecord,
    command_line,
    model_packages,
    publish,
    save_rows,
)
from benchmarks.stats import percentile  # noqa: E402
from fim.eval.evaluation import edit_similarity  # noqa: E402

#: An answer whose prompt holds at least this many tokens ran on the widened window: the
#: first window holds 128 left tokens and 64 right ones, the widened one over a thousand.
WIDE_PROMPT_TOKENS = 600
_WORD_START = re.compile(r"\b\w")


@dataclass(frozen=True)
class Step:
    """One place of a walk: the line's text from ``start`` to ``end`` is taken out."""

    line: int
    start: int
    end: int


def walk(text: str, start_share: float, steps: int) -> list[Step]:
    """``steps`` code lines from ``start_share`` of ``text`` down, each cut at the first word
    start past the middle of its code (lines with nothing to cut are passed over)."""
    lines = text.split("\n")
    offsets, at = [], 0
    for line in lines:
        offsets.append(at)
        at += len(line) + 1
    out: list[Step] = []
    for n in range(int(len(lines) * start_share), len(lines)):
        line = lines[n]
        body = line.strip()
        if len(body) < 12 or body.startswith(("#", '"', "'")):
            continue
        indent = len(line) - len(line.lstrip())
        # past the middle of the code, never at its first word (a mid-line cursor)
        found = _WORD_START.search(line, max(indent + 1, indent + len(body) // 2))
        if found is None or not line[found.start():].strip():
            continue
        out.append(Step(n, offsets[n] + found.start(), offsets[n] + len(line)))
        if len(out) == steps:
            break
    return out


async def run_config(name: str, root: Path, files: dict[str, str], workspace: Path, args,
                     logs: Path) -> list[dict]:
    """One server (of the checkout ``root``) over the workspace; every walk, in order."""
    settings = {"model": args.model, **json.loads(args.settings)}
    session = LspSession(settings, logs / f"server-{name}.log", root_uri=workspace.as_uri(),
                         root=root)
    await session.start()
    rows: list[dict] = []
    try:
        for path, text in files.items():
            uri = (workspace / path).as_uri()
            session.open(uri, text)
            began = time.perf_counter()
            for i, step in enumerate(walk(text, args.start, args.steps)):
                truth = text[step.start:step.end]
                session.edit(uri, step.start, step.end, "")
                before = await last_record(session)
                shown, took = await session.inline(uri, step.start)
                rec = await last_record(session)
                session.edit(uri, step.start, step.start, truth)
                fresh = rec if rec and rec != before else {}
                prompt, cached = fresh.get("prompt_tokens"), fresh.get("cached_tokens")
                shown = (shown or "").split("\n")[0]
                rows.append({
                    "config": name, "file": path, "step": i, "line": step.line + 1,
                    "since_open": round(time.perf_counter() - began, 2),
                    "seconds": round(took, 3), "prompt_tokens": prompt,
                    "prefilled": None if prompt is None or cached is None else prompt - cached,
                    "wide": prompt is not None and prompt >= WIDE_PROMPT_TOKENS,
                    "shown": shown, "truth": truth, "exact": shown == truth,
                    "edit_similarity": edit_similarity(shown, truth)})
                if args.progress:
                    r = rows[-1]
                    print(f"{name} {path}:{step.line + 1} {took:.2f} s, prompt {prompt}, "
                          f"prefilled {r['prefilled']}, exact {r['exact']}",
                          file=sys.stderr, flush=True)
                await asyncio.sleep(args.rest)
            session.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    finally:
        await session.close()
    return rows


def first_wide(rows: list[dict]) -> tuple[int | None, float | None]:
    """The first answer on the widened window of a walk: its request's number (from 1) and
    the seconds since the file was opened; ``None`` when none was."""
    for r in rows:
        if r["wide"]:
            return r["step"] + 1, r["since_open"]
    return None, None


def tables(rows: list[dict], configs: list[str]) -> str:
    out = ["| file | config | requests | on the widened window | first on it: request / s "
           "| exact | edit sim. | p50 s | prefilled (median) |",
           "|---|---|---:|---:|---|---:|---:|---:|---:|"]
    files = list(dict.fromkeys(r["file"] for r in rows))
    for scope in files + ["all"]:
        for c in configs:
            mine = [r for r in rows if r["config"] == c and scope in ("all", r["file"])]
            if not mine:
                continue
            if scope == "all":
                reached = [first_wide([r for r in mine if r["file"] == f]) for f in files]
                got = [n for n, _ in reached if n is not None]
                first = (f"{len(got)} of {len(reached)} walks" if len(got) < len(reached)
                         else f"median request {statistics.median(got):g}")
            else:
                n, s = first_wide(mine)
                first = "never" if n is None else f"{n} / {s:.0f} s"
            prefilled = [r["prefilled"] for r in mine if r["prefilled"] is not None]
            seconds = [r["seconds"] for r in mine]
            out.append(
                f"| {scope} | {c} | {len(mine)} | {sum(r['wide'] for r in mine)} | {first} | "
                f"{sum(r['exact'] for r in mine) / len(mine):.0%} | "
                f"{statistics.mean(r['edit_similarity'] for r in mine):.3f} | "
                f"{percentile(seconds, 0.5):.2f} | "
                f"{statistics.median(prefilled) if prefilled else '-'} |")
    return "\n".join(out)


def corpus_files(args) -> tuple[dict[str, str], Path]:
    """``--files`` of the package's files with at least ``--min-lines`` lines (the longest
    first: a walk deep in a long file is where the first window reads least of it)."""
    pkg = next(p for p in fresh_corpus.FRESH if p.name == args.package)
    folder = fresh_corpus.project_folder(pkg)
    found = fresh_corpus.read_archive(fresh_corpus.archive(pkg), pkg.top, pkg.name)
    long = sorted((f for f in found if f.text.count("\n") >= args.min_lines),
                  key=lambda f: (-f.text.count("\n"), f.path))
    return {f.path: f.text for f in long[:args.files]}, folder.parent


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="bundled:qwen2.5-coder-1.5b")
    p.add_argument("--package", default="openai-agents")
    p.add_argument("--settings", default="{}", help="more settings (JSON), both configs")
    p.add_argument("--files", type=int, default=2)
    p.add_argument("--min-lines", type=int, default=400)
    p.add_argument("--start", type=float, default=0.5, help="where walks start (share)")
    p.add_argument("--steps", type=int, default=16, help="requests per walk")
    p.add_argument("--rest", type=float, default=2.0, help="seconds between requests")
    add_options(p, "rests")
    args = p.parse_args(argv)
    record = RunRecord(command_line(), packages=model_packages())
    files, workspace = corpus_files(args)
    servers = configs(args)
    rows: list[dict] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="seam-rests-") as tmp:
        logs = args.logs or Path(tmp)
        logs.mkdir(parents=True, exist_ok=True)
        for name, root in servers:
            rows += asyncio.run(run_config(name, root, files, workspace, args, logs))
    record.finish()
    body = tables(rows, [c for c, _ in servers])
    body += (f"\n\n{baseline_note(args)}Package {args.package}: {len(files)} files, "
             f"{args.steps} requests per walk from {args.start:.0%} of the file down, a "
             f"{args.rest:g} s rest after each; an answer on the widened window is one whose "
             f"prompt held at least {WIDE_PROMPT_TOKENS} tokens. The run took "
             f"{time.perf_counter() - started:.0f} s.")
    publish(body, record, args.figures, args.section)
    save_rows(args.json, record, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
