"""The first request at a new place near where the user rested, in a file already open: quality,
latency and prefilled tokens with a plain LSP client at default settings, on the fresh corpus
(issue 29, item 2: "move within a file without paying for its left context again").

Per file, pairs of cursors of the cursor-kind benchmark (``benchmarks/cursor_kinds.py``) at most
``--within`` lines apart: the user asks at the first (the *rest* place), rests ``--rest``
seconds (the server's background work runs: the widened window, and since the held base the
window below the cursor), then puts the author's text back, cuts the second hole (two edits, as
an editor sends them) and asks there at once.  Only that second request is scored, split by
where it lies from the rest place (above, or how far below) and by cursor kind (by what
follows the cursor on its line, as ``bench_new_place``).  Each pair opens its file afresh and
closes it after, so pairs do not share a cache.  With ``--keep-hole`` the rest place keeps its
hole (the user read the suggestion there and moved on): the only edit is the new place's own,
so the text between the window's start and a place below the rest place is what the server
held; without it, the line written at the rest place changes the text above such a place.

``change`` is this checkout's server, ``baseline`` another checkout's (``--baseline-root``), in
the same run.  "Prefilled" is the prompt less what the server's record says came from the
cache; an early answer (an empty line's first line) has no record yet and is left out there.

    .venv/bin/python -m benchmarks.bench_moves --baseline-root /tmp/base --progress
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import cursor_kinds  # noqa: E402
from benchmarks.baseline_runs import add_options, baseline_note, configs, last_record  # noqa: E402
from benchmarks.bench_new_place import _summary, corpus_files, fine_kind, judged  # noqa: E402
from benchmarks.lsp_session import LspSession  # noqa: E402
from benchmarks.report import RunRecord, command_line, model_packages, publish, save_rows  # noqa: E402

#: Where the scored cursor lies from the rest place, in lines (upper bounds of "below").
SPANS = ((0, "above"), (15, "1 to 15 lines below"), (30, "16 to 30 lines below"),
         (10**9, "over 30 lines below"))
KINDS = (cursor_kinds.Kind.EMPTY_LINE, cursor_kinds.Kind.REST_OF_LINE,
         cursor_kinds.Kind.INSIDE_LINE)
WANTED = frozenset((kind, cursor_kinds.Text.CODE) for kind in KINDS)


@dataclass(frozen=True)
class Move:
    """A rest place and the place asked at next, in one file."""

    file: str
    rest: cursor_kinds.Spot
    to: cursor_kinds.Spot

    @property
    def lines(self) -> int:
        return self.to.line - self.rest.line


def span(lines: int) -> str:
    return next(name for bound, name in SPANS if lines <= bound)


def pick_moves(text: str, path: str, seed: int, per_file: int, within: int,
               at_least: int = 8) -> list[Move]:
    """``per_file`` moves in ``text``: a rest place, then the nearest cursor below it at
    least ``at_least`` and at most ``within`` lines away, alternating with one above it,
    seeded; no spot used twice."""
    rng = random.Random(f"{seed}:{path}")
    by_line: dict[int, list[cursor_kinds.Spot]] = {}
    for spot in cursor_kinds.spots(text, rng):
        if (spot.kind, spot.text) in WANTED:
            by_line.setdefault(spot.line, []).append(spot)
    # One cursor per line (a line offers several kinds), seeded.
    spots = sorted((rng.choice(options) for options in by_line.values()),
                   key=lambda spot: spot.start)
    moves: list[Move] = []
    used: set[int] = set()
    for i, rest in enumerate(spots):
        if len(moves) == per_file:
            break
        if rest.line in used:
            continue
        down = len(moves) % 2 == 0
        near = [s for s in (spots[i + 1:] if down else reversed(spots[:i]))
                if s.line not in used and s.line != rest.line
                and at_least <= abs(s.line - rest.line) <= within]
        # The kinds in turn (an empty line, a line's rest, a hole inside a line), the
        # nearest of the move's kind where there is one.
        kind = KINDS[len(moves) % len(KINDS)]
        near = [s for s in near if s.kind == kind] or near
        if near:
            moves.append(Move(path, rest, near[0]))
            used |= {rest.line, near[0].line}
    return moves


async def run_config(name: str, root: Path, texts: dict[str, str], moves: list[Move],
                     workspace: Path, args, logs: Path) -> list[dict]:
    """One server (of the checkout ``root``) over the workspace; every move, in order."""
    session = LspSession({"model": args.model}, logs / f"server-{name}-{workspace.name}.log",
                         root_uri=workspace.as_uri(), root=root)
    await session.start()
    rows: list[dict] = []
    try:
        for move in moves:
            source = texts[move.file]
            uri = (workspace / move.file).as_uri()
            session.open(uri, move.rest.hole(source))
            await session.inline(uri, move.rest.start)
            await asyncio.sleep(args.rest)
            # Put the author's text back into the rest place's hole (the user wrote the line
            # there; ``--keep-hole``: the user left it and moved on), then cut the next one.
            hole = 0
            if not args.keep_hole:
                session.edit(uri, move.rest.start, move.rest.start, move.rest.truth(source))
            elif move.to.start > move.rest.start:
                hole = move.rest.end - move.rest.start  # the text below moved up by it
            session.edit(uri, move.to.start - hole, move.to.end - hole, "")
            before = await last_record(session)
            shown, took = await session.inline(uri, move.to.start - hole)
            rec = await last_record(session)
            fresh = rec if rec and rec != before else {}
            prompt, cached = fresh.get("prompt_tokens"), fresh.get("cached_tokens")
            truth = move.to.truth(source)
            rows.append({
                "config": name, "file": move.file, "kind": move.to.kind.value,
                "fine": fine_kind(source, move.to), "lines": move.lines,
                "span": span(move.lines), "line": move.to.line, "seconds": round(took, 3),
                "shown": shown, "truth": truth, "prompt_tokens": prompt,
                "prefilled": None if prompt is None or cached is None else prompt - cached,
                **judged(shown, truth, move.to)})
            session.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
            if args.progress:
                r = rows[-1]
                print(f"{name} {move.file}:{move.to.line + 1} ({move.lines:+d} lines) "
                      f"{r['fine']}: {took:.2f} s, prompt {prompt}, prefilled "
                      f"{r['prefilled']}, exact {r['exact']}", file=sys.stderr, flush=True)
    finally:
        await session.close()
    return rows


def tables(rows: list[dict], names: list[str]) -> str:
    head = ("| {} | config | cursors | exact | edit sim. | p50 / p90 s | prefilled tokens "
            "(median) |\n|---|---|---:|---:|---:|---|---:|")
    out = [head.format("from the rest place")]
    for _, where in SPANS:
        for c in names:
            out.append(f"| {where} | {c} | " + _summary(
                [r for r in rows if r["span"] == where and r["config"] == c]) + " |")
    out += ["", head.format("cursor kind")]
    for kind in sorted({r["fine"] for r in rows}):
        for c in names:
            out.append(f"| {kind} | {c} | " + _summary(
                [r for r in rows if r["fine"] == kind and r["config"] == c]) + " |")
    out += ["", head.format("all")]
    for c in names:
        out.append(f"| all | {c} | " + _summary([r for r in rows if r["config"] == c]) + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="bundled:qwen2.5-coder-1.5b")
    p.add_argument("--packages", default="openai-agents,strands-agents",
                   help="projects of benchmarks/fresh_corpus.py's FRESH")
    p.add_argument("--files", type=int, default=3)
    p.add_argument("--per-file", type=int, default=2, help="moves per file")
    p.add_argument("--within", type=int, default=40, help="most lines between the places")
    p.add_argument("--at-least", type=int, default=8, help="fewest lines between them")
    p.add_argument("--min-lines", type=int, default=150)
    p.add_argument("--max-lines", type=int, default=1500)
    p.add_argument("--rest", type=float, default=15.0, help="the rest's seconds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--keep-hole", action="store_true",
                   help="leave the rest place's hole as it is (no edit above or below the "
                        "next place but its own)")
    add_options(p, "moves")
    args = p.parse_args(argv)
    record = RunRecord(command_line(), packages=model_packages())
    corpora = []
    for package in [p for p in args.packages.split(",") if p]:
        texts, files, workspace = corpus_files(args, package)
        moves = [m for f in files
                 for m in pick_moves(f.text, f.path, args.seed, args.per_file, args.within,
                                     args.at_least)]
        corpora.append((texts, moves, workspace))
    servers = configs(args)
    rows: list[dict] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="seam-moves-") as tmp:
        logs = args.logs or Path(tmp)
        logs.mkdir(parents=True, exist_ok=True)
        for texts, moves, workspace in corpora:  # each configuration in turn, per package
            for name, root in servers:
                rows += asyncio.run(run_config(name, root, texts, moves, workspace, args,
                                               logs))
    record.finish()
    body = tables(rows, [c for c, _ in servers])
    n_moves = sum(len(m) for _, m, _ in corpora)
    left = ("the rest place's hole left as it was" if args.keep_hole
            else "the author's text put back at the rest place")
    body += (f"\n\n{baseline_note(args)}Packages {args.packages}: {n_moves} moves per "
             f"configuration, {args.at_least} to {args.within} lines each, after a rest of "
             f"{args.rest:.0f} s, {left}; the run took {time.perf_counter() - started:.0f} s.")
    publish(body, record, args.figures, args.section)
    save_rows(args.json, record, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
