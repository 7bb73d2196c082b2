"""The first request at a new place, per cursor kind: quality and latency with a plain LSP
client at default settings, on the fresh corpus (issue 29, item 2).

A plain client sends no ``seam/cursor`` notifications: the server learns of a place only from
the request there, so the first request at a new place waits for whatever of its prompt the
model's cache does not hold.  Three situations, each the *first* request at its place:

* ``new file``: the file was just opened and asked at once;
* ``new file, read first`` (with ``--open-rest``): the file was opened and left that many
  seconds (the user reads it) before the first request, nothing else sent meanwhile;
* ``open file``: the file was open and asked elsewhere before; the cursor moved down to a new
  place and asked at once (the background work of the last answer may still be running);
* ``after a rest``: the same, after the user rested ``--rest`` seconds (the server's
  background work, e.g. the widened window, had time to run).

Each file of ``--files`` per package gets cursors of the cursor-kind benchmark
(``benchmarks/cursor_kinds.py``: a hole inside a line, a line's rest, an empty line), visited
top to bottom: the first in the new file, then alternately ``open file`` and ``after a rest``;
moving on puts the author's text back into the last hole and cuts the next (two edits, as an
editor sends them).  Kinds are split further by what follows the cursor on its line: ``inside
a word`` (a word character on both sides), ``before a word``, ``before punctuation``,
``before nothing`` (the line ends), and ``empty line``.

Every configuration runs the same cursors in one run: ``change`` is this checkout,
``baseline`` the server of another checkout (``--baseline-root``, e.g. the main branch), so
the comparison is made under the same load.  Per answer the server's own record gives the
prompt tokens and how many came from the cache: what was prefilled.

    .venv/bin/python -m benchmarks.bench_new_place --baseline-root /work/main --progress
"""

from __future__ import annotations

import argparse
import asyncio
import random
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

from benchmarks import cursor_kinds, fresh_corpus  # noqa: E402
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

SITUATIONS = ("new file", "open file", "after a rest")
#: The first request of a file asked ``--open-rest`` seconds after it was opened.
READ_FIRST = "new file, read first"
FINE_KINDS = ("inside a word", "before a word", "before punctuation", "before nothing",
              "empty line")
_WORD = re.compile(r"\w")
_NAME = re.compile(r"[A-Za-z_]\w{4,}")


@dataclass(frozen=True)
class Cursor:
    """A place to ask at: the file, the hole, its kind and the situation it is asked in."""

    file: str
    spot: cursor_kinds.Spot
    fine: str
    situation: str


def fine_kind(source: str, spot: cursor_kinds.Spot) -> str:
    """The cursor's finer kind, by the text on its line around the hole."""
    line_start = source.rfind("\n", 0, spot.start) + 1
    line_end = source.find("\n", spot.end)
    before = source[line_start:spot.start]
    after = source[spot.end:line_end if line_end >= 0 else len(source)]
    if not before.strip() and not after.strip():
        return "empty line"
    if not after.strip():
        return "before nothing"
    if _WORD.match(after[0]):
        return "inside a word" if before and _WORD.match(before[-1]) else "before a word"
    return "before punctuation"


def inside_word_spots(text: str, rng: random.Random, wanted: int) -> list[cursor_kinds.Spot]:
    """Holes that start and end inside words of one indented code line (``se|lf._record_
    dur|ation(x)``): the cursor splits a word and the text after it begins mid-word, the
    case of issue 29's first item. The cursor-kind benchmark cuts at token boundaries only."""
    found = []
    pos = 0
    for number, line in enumerate(text.split("\n")):
        start_of_line, pos = pos, pos + len(line) + 1
        body = line.strip()
        if not line.startswith("    ") or len(body) < 20 or body[0] in "#\"'@":
            continue
        names = list(_NAME.finditer(line))
        if not names:
            continue
        first = rng.choice(names)
        last = rng.choice([n for n in names if n.start() >= first.start()])
        begin = rng.randrange(first.start() + 2, first.end() - 2)
        end = rng.randrange(max(begin + 3, last.start() + 2), last.end() - 1) \
            if max(begin + 3, last.start() + 2) < last.end() - 1 else None
        if end is None:
            continue
        found.append(cursor_kinds.Spot(cursor_kinds.Kind.INSIDE_LINE, cursor_kinds.Text.CODE,
                                       start_of_line + begin, start_of_line + end, number))
    rng.shuffle(found)
    return found[:wanted]


def pick_cursors(files: list[fresh_corpus.CorpusFile], per_file: int, seed: int,
                 inside_words: bool = True) -> dict[str, list[Cursor]]:
    """Each file's cursors, top to bottom, with the situation each is asked in
    (``inside_words``: with ``per_file`` holes inside words too)."""
    cells = [(cursor_kinds.Kind.INSIDE_LINE, cursor_kinds.Text.CODE),
             (cursor_kinds.Kind.REST_OF_LINE, cursor_kinds.Text.CODE),
             (cursor_kinds.Kind.EMPTY_LINE, cursor_kinds.Text.CODE)]
    out: dict[str, list[Cursor]] = {}
    for f in files:
        wanted = {c: per_file for c in cells}
        spots = cursor_kinds.pick(f.text, f"{seed}:{f.path}", wanted, per_file)
        if inside_words:
            used = {s.line for s in spots}
            spots += [s for s in inside_word_spots(f.text, random.Random(f"{seed}:{f.path}"),
                                                   per_file + len(spots))
                      if s.line not in used][:per_file]
            spots.sort(key=lambda s: s.start)
        if len(spots) < 2:
            continue
        out[f.path] = [Cursor(f.path, s, fine_kind(f.text, s),
                              SITUATIONS[0] if i == 0 else SITUATIONS[1 + (i - 1) % 2])
                       for i, s in enumerate(spots)]
    return out


def judged(shown: str | None, truth: str, spot: cursor_kinds.Spot) -> dict:
    """Exact match and edit similarity; one-line kinds are judged on the first line (the
    server's early answer)."""
    if spot.kind in cursor_kinds.FIRST_LINE_KINDS:
        shown = None if shown is None else shown.split("\n", 1)[0]
        truth = truth.split("\n", 1)[0]
    return {"exact": (shown or "") == truth, "edit_similarity": edit_similarity(shown, truth)}


async def run_config(name: str, root: Path, files: dict[str, str],
                     cursors: dict[str, list[Cursor]], workspace: Path, args,
                     logs: Path) -> list[dict]:
    """One server (of the checkout ``root``) over the workspace; every cursor, in order."""
    session = LspSession({"model": args.model}, logs / f"server-{name}-{workspace.name}.log",
                         root_uri=workspace.as_uri(), root=root)
    await session.start()
    rows: list[dict] = []
    try:
        for path, places in cursors.items():
            source = files[path]
            uri = (workspace / path).as_uri()
            first = places[0].spot
            session.open(uri, first.hole(source))
            if args.open_rest:
                await asyncio.sleep(args.open_rest)
            last = first
            for c in places:
                if c.spot is not last:
                    # Put the author's text back into the last hole, then cut this one.
                    session.edit(uri, last.start, last.start, last.truth(source))
                    session.edit(uri, c.spot.start, c.spot.end, "")
                    last = c.spot
                    if c.situation == "after a rest":
                        await asyncio.sleep(args.rest)
                before = await last_record(session)
                shown, took = await session.inline(uri, c.spot.start)
                rec = await last_record(session)
                fresh = rec if rec and rec != before else {}
                prompt = fresh.get("prompt_tokens")
                cached = fresh.get("cached_tokens")
                rows.append({
                    "config": name, "file": path, "kind": c.spot.kind.value, "fine": c.fine,
                    "situation": READ_FIRST if c.spot is first and args.open_rest
                    else c.situation, "line": c.spot.line, "seconds": round(took, 3),
                    "shown": shown, "truth": c.spot.truth(source),
                    "prompt_tokens": prompt,
                    "prefilled": None if prompt is None or cached is None else prompt - cached,
                    **judged(shown, c.spot.truth(source), c.spot)})
                if args.progress:
                    r = rows[-1]
                    print(f"{name} {path}:{c.spot.line + 1} {c.fine} / {c.situation}: "
                          f"{took:.2f} s, prompt {prompt}, prefilled {r['prefilled']}, "
                          f"exact {r['exact']}", file=sys.stderr, flush=True)
            session.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    finally:
        await session.close()
    return rows


def _summary(rows: list[dict]) -> str:
    if not rows:
        return "- | - | - | - | -"
    secs = [r["seconds"] for r in rows]
    pre = [r["prefilled"] for r in rows if r["prefilled"] is not None]
    return (f"{len(rows)} | {statistics.fmean(r['exact'] for r in rows):.0%} | "
            f"{statistics.fmean(r['edit_similarity'] for r in rows):.3f} | "
            f"{statistics.median(secs):.2f} / {percentile(secs, 0.9):.2f} | "
            f"{statistics.median(pre) if pre else '-'}")


def tables(rows: list[dict], configs: list[str]) -> str:
    head = ("| {} | config | cursors | exact | edit sim. | p50 / p90 s | prefilled tokens "
            "(median) |\n|---|---|---:|---:|---:|---|---:|")
    out = [head.format("situation")]
    for s in [s for s in (SITUATIONS[0], READ_FIRST, *SITUATIONS[1:])
              if any(r["situation"] == s for r in rows)]:
        for c in configs:
            out.append(f"| {s} | {c} | " + _summary(
                [r for r in rows if r["situation"] == s and r["config"] == c]) + " |")
    out += ["", head.format("cursor kind")]
    for k in FINE_KINDS:
        for c in configs:
            out.append(f"| {k} | {c} | " + _summary(
                [r for r in rows if r["fine"] == k and r["config"] == c]) + " |")
    out += ["", head.format("all")]
    for c in configs:
        out.append(f"| all | {c} | " + _summary([r for r in rows if r["config"] == c]) + " |")
    if len(configs) == 2:
        a, b = configs
        p50 = {c: statistics.median([r["seconds"] for r in rows if r["config"] == c] or [0])
               for c in configs}
        open_p50 = {c: statistics.median([r["seconds"] for r in rows if r["config"] == c
                                          and r["situation"] == "open file"] or [0])
                    for c in configs}
        out += ["", f"p50 of {b} over {a}, same run: all first requests "
                    f"{p50[b] / p50[a]:.2f}x, open file {open_p50[b] / open_p50[a]:.2f}x."]
    return "\n".join(out)


def corpus_files(args, package: str
                 ) -> tuple[dict[str, str], list[fresh_corpus.CorpusFile], Path]:
    """``--files`` files of ``package`` spread over its sorted list, and its workspace."""
    pkg = next(p for p in fresh_corpus.FRESH if p.name == package)
    folder = fresh_corpus.project_folder(pkg)
    found = fresh_corpus.read_archive(fresh_corpus.archive(pkg), pkg.top, pkg.name)
    lines = [f for f in found if args.min_lines <= f.text.count("\n") <= args.max_lines]
    step = max(1, len(lines) // max(1, args.files))
    chosen = lines[::step][:args.files]
    return {f.path: f.text for f in chosen}, chosen, folder.parent


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="bundled:qwen2.5-coder-1.5b")
    p.add_argument("--packages", default="openai-agents,strands-agents",
                   help="projects of benchmarks/fresh_corpus.py's FRESH")
    p.add_argument("--files", type=int, default=4)
    p.add_argument("--per-file", type=int, default=2, help="cursors per kind and file")
    p.add_argument("--min-lines", type=int, default=150)
    p.add_argument("--max-lines", type=int, default=1500)
    p.add_argument("--rest", type=float, default=20.0, help="the rest's seconds")
    p.add_argument("--open-rest", type=float, default=0.0,
                   help="seconds each file stays open before its first request (0: asked at "
                        "once, the 'new file' situation)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-inside-words", action="store_true",
                   help="only the cursor-kind benchmark's cursors (no holes inside words)")
    add_options(p, "new-place")
    args = p.parse_args(argv)
    record = RunRecord(command_line(), packages=model_packages())
    corpora = []
    for package in [p for p in args.packages.split(",") if p]:
        texts, files, workspace = corpus_files(args, package)
        corpora.append((texts, pick_cursors(files, args.per_file, args.seed,
                                            not args.no_inside_words), workspace))
    servers = configs(args)
    rows: list[dict] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="seam-new-place-") as tmp:
        logs = args.logs or Path(tmp)
        logs.mkdir(parents=True, exist_ok=True)
        # Package by package, each configuration in turn: the load they meet stays alike.
        for texts, cursors, workspace in corpora:
            for name, root in servers:
                rows += asyncio.run(run_config(name, root, texts, cursors, workspace, args,
                                               logs))
    record.finish()
    body = tables(rows, [c for c, _ in servers])
    n_files = sum(len(c) for _, c, _ in corpora)
    n_cursors = sum(len(v) for _, c, _ in corpora for v in c.values())
    body += (f"\n\n{baseline_note(args)}Packages {args.packages}: {n_files} files, "
             f"{n_cursors} cursors per configuration, rest {args.rest:.0f} s"
             + (f", each file read {args.open_rest:.0f} s before its first request"
                if args.open_rest else "") + "; the run took "
             f"{time.perf_counter() - started:.0f} s.")
    publish(body, record, args.figures, args.section)
    save_rows(args.json, record, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
