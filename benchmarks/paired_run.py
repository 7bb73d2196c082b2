"""Issue 29's paired run: on each fresh corpus, the same held-out cursors asked of Seam at its
default settings and with ``constrained: false`` through ``seam serve`` over stdio, with a
plain LSP client and with the editors' cursor notifications, beside llama.vim's way as it
ships and greedy at every cursor; per cursor place exact match, edit similarity, p50 latency
and unparsable constrained middles, and the issue's Done-when lines, each met or not met.

Cursors (``benchmarks/held_out.py``): in each corpus (``fresh``: the benchmarks' fresh
corpus; ``fresh2``: a second one, other projects of 2025, ``benchmarks/fresh_corpus.py``)
``--mid-per-place`` holes in statement lines for each mid-line place (inside a word, before
punctuation, before a space, before nothing) and ``--empty`` empty lines.

An editor session per project, configuration and client: the server starts on the project's
folder (the workspace), and for each file the client opens three other modules of the
project and the file, then at each cursor takes the held-out text out (one edit), rests
``--pause`` seconds (the editors' client sends ``seam/cursor`` at the cursor first, a plain
client sends nothing), asks for the inline completion (automatic trigger) and puts the text
back.  Every request is the first at its place; latency is the client's, from request to
answer.  A suggestion is scored on what it inserts at the cursor; on an empty line on its
first line (the server's early answer).  *Unparsable*: a constrained middle after which the
file does not parse.

The llama.vim rows come from ``docs/eval/paired-anchors.jsonl``
(``benchmarks/paired_anchors.py``, asked once: they do not depend on Seam's code); the table
says when they were measured.  Rerunning only the Seam rows (e.g. after a change to the
engine) is this script alone:

    nice .venv/bin/python benchmarks/paired_run.py --json docs/eval/paired-run.json \\
        --figures docs/usefulness.md
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import paired_tables  # noqa: E402
from benchmarks.fresh_tables import score  # noqa: E402
from benchmarks.held_out import EMPTY, MID_PER_PLACE, HeldOut, corpus_held_out, judged  # noqa: E402
from benchmarks.llama_server import built  # noqa: E402
from benchmarks.lsp_session import LspSession  # noqa: E402
from benchmarks.paired_anchors import (  # noqa: E402
    ANCHORS,
    STORE,
    AnchorStore,
    corpus_projects,
    interleave,
    key,
    server_version,
)
from benchmarks.report import RunRecord, command_line, model_packages, write_section  # noqa: E402
from benchmarks.usefulness_cases import open_documents  # noqa: E402
from lexer.cpython import parses  # noqa: E402

#: Seam's configurations: the settings sent as ``initializationOptions.seam``.
SEAM = {"seam": {}, "seam_unconstrained": {"constrained": False}}
CLIENTS = ("plain", "cursor")


async def ask_at(session: LspSession, uri: str, cur: HeldOut, client: str, pause: float
                 ) -> dict:
    """Take the cursor's text out, rest, ask, put the text back; what came back."""
    session.edit(uri, cur.start, cur.end, "")
    if client == "cursor":
        session.cursor(uri, cur.start)
    await asyncio.sleep(pause)
    middle, seconds = await session.inline(uri, cur.start)
    # How the server answered (its record of the request, after the answer, so the latency
    # is not touched): the prompt it ran shows the window, which follows the prefill speed
    # the session measured, so two sessions may differ there at the same cursor.
    status = await session.request("seam/status", {})
    mine = [r for r in status.get("recent", []) if r.get("uri") == uri]
    session.edit(uri, cur.start, cur.start, cur.truth)
    record = mine[-1] if mine else {}
    return {"middle": middle, "seconds": seconds,
            "server": {k: record.get(k) for k in ("source", "stop", "prompt_tokens",
                                                  "cached_tokens", "tokens")}}


def seam_row(cur: HeldOut, config: str, client: str, out: dict) -> dict:
    middle = out["middle"]
    shown = judged(cur, middle)
    hole = cur.text
    unparsable = (config == "seam" and middle is not None
                  and not parses(hole[:cur.start] + middle + hole[cur.start:]))
    return {"id": cur.id, "corpus": cur.corpus, "project": cur.project,
            "place": cur.place.value, "config": config, "client": client,
            "truth": cur.truth, "shown": shown, "middle": middle, "seconds": out["seconds"],
            "server": out.get("server", {}),
            "latency_is_new_place": True, "unparsable": unparsable, **score(shown, cur.truth)}


async def run_project(folder: Path, files, config: str, client: str, args, rows: list[dict],
                      log: Path) -> None:
    settings = {**SEAM[config], **args.settings}
    if args.time_budget_ms:  # not the default: quality that does not follow the load
        settings["timeBudgetMs"] = args.time_budget_ms
    session = LspSession(settings, log, root_uri=folder.as_uri())
    await session.start()
    try:
        for path, every, cursors in files:
            docs = open_documents(path, every, args.open, args.seed)
            for doc in docs:
                session.open(doc.uri, doc.text)
            uri = path.as_uri()
            session.open(uri, cursors[0].source)
            for cur in cursors:
                out = await ask_at(session, uri, cur, client, args.pause)
                rows.append(seam_row(cur, config, client, out))
                if args.progress:
                    r = rows[-1]
                    print(f"{config:18} {client:6} {cur.id[:56]:56} {r['seconds']:5.2f}s "
                          f"{'=' if r['exact'] else ' '} {r['shown']!r:.40} | "
                          f"{r['truth']!r:.30}", file=sys.stderr, flush=True)
            # The editor moves on: the file and the others it had open are closed.
            for done in [d.uri for d in docs] + [uri]:
                session.notify("textDocument/didClose", {"textDocument": {"uri": done}})
    finally:
        await session.close()


def by_project(files) -> dict[str, list]:
    """The corpus's files grouped by project (a server session each), in pick order."""
    out: dict[str, list] = {}
    for entry in files:
        out.setdefault(entry[2][0].project, []).append(entry)
    return out


async def seam_rows(args, rows: list[dict], after) -> None:
    """Every configuration and client on one project after another, the corpora's projects
    in turn, so that a run stopped early holds all the rows of the projects it reached."""
    log = Path(tempfile.mkdtemp(prefix="seam-paired-")) / "server.log"
    work = []
    for corpus in args.corpora:
        folders = dict(corpus_projects(corpus))
        files = corpus_held_out(corpus, list(folders.items()), args.mid_per_place, args.empty,
                                args.seed)
        if args.only_anchored:
            files = [(path, every, kept) for path, every, cursors in files
                     if (kept := [c for c in cursors if c.id in args.anchored])]
        work.append([(folders[project], group) for project, group in by_project(files).items()])
    for folder, files in interleave(work):
        for config in args.seam:
            for client in args.clients:
                await run_project(folder, files, config, client, args, rows, log)
                after()


def anchor_rows(args) -> tuple[list[dict], dict]:
    """The stored llama.vim rows for the run's cursors, and what is known of them."""
    store = AnchorStore(args.anchors)
    binary = built()
    server = server_version(binary) if binary else None
    rows, missing = [], 0
    for corpus in args.corpora:
        files = corpus_held_out(corpus, corpus_projects(corpus), args.mid_per_place,
                                args.empty, args.seed)
        for _, _, cursors in files:
            for cur in cursors:
                for config in ANCHORS:
                    row = store.get(key(cur, config, server, args.seed, args.open),
                                    cur.truth) if server else None
                    if row is None:
                        missing += 1
                    else:
                        rows.append({**row, "client": "llama.vim"})
    measured = sorted(r["measured"] for r in rows)
    return rows, {"server": server, "missing": missing, "stored": len(rows),
                  "measured": (measured[0], measured[-1]) if measured else None,
                  "loads": [r["load"] for r in rows],
                  "threads": sorted({r.get("threads") or 0 for r in rows}),
                  "settings": {c: s.describe() for c, s in ANCHORS.items()}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpora", default="fresh,fresh2")
    p.add_argument("--mid-per-place", type=int, default=MID_PER_PLACE)
    p.add_argument("--empty", type=int, default=EMPTY)
    p.add_argument("--seam", default=",".join(SEAM), help="Seam's configurations")
    p.add_argument("--clients", default=",".join(CLIENTS))
    p.add_argument("--open", type=int, default=3, help="other open documents per file")
    p.add_argument("--pause", type=float, default=0.5, help="cursor rest before asking (s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--time-budget-ms", type=int, default=0,
                   help="set Seam's timeBudgetMs (default: the setting's own, auto); on a "
                        "machine so loaded that the budget ends every request, a large one "
                        "measures quality apart from load (the table says so)")
    p.add_argument("--settings", type=json.loads, default={},
                   help="more settings for every Seam configuration, as a JSON object (e.g. "
                        "'{\"newPlaceMs\": 3000}'); the table names them")
    p.add_argument("--anchors", type=Path, default=STORE, help="stored llama.vim rows")
    p.add_argument("--only-anchored", action="store_true",
                   help="ask Seam only at the cursors with stored rows of both llama.vim "
                        "anchors (a machine too loaded for the whole set)")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--figures", type=Path, default=None)
    p.add_argument("--section", default="paired-fresh")
    p.add_argument("--progress", action="store_true")
    p.add_argument("--report-only", action="store_true",
                   help="render from the rows in --json (no model runs)")
    args = p.parse_args(argv)
    args.corpora = [c for c in args.corpora.split(",") if c]
    args.seam = [c for c in args.seam.split(",") if c]
    args.clients = [c for c in args.clients.split(",") if c]
    anchors, anchor_info = anchor_rows(args)
    ids = [r["id"] for r in anchors]
    args.anchored = {i for i in ids if ids.count(i) == len(ANCHORS)}
    if args.report_only:
        if args.json is None:
            raise SystemExit("--report-only needs --json FILE")
        data = json.loads(args.json.read_text(encoding="utf-8"))
        rows, run = data["rows"], {**data["run"], "finished": data.get("finished", True)}
    else:
        record = RunRecord(command_line(), packages=model_packages())
        rows = []

        def save(finished: bool = False) -> None:
            if args.json:
                args.json.write_text(json.dumps(
                    {"run": record.as_dict(), "finished": finished, "rows": rows}, indent=1),
                    encoding="utf-8")

        t0 = time.perf_counter()
        # A run stopped (``kill``, Ctrl-C) keeps and renders what it measured, said so.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        finished = False
        try:
            asyncio.run(seam_rows(args, rows, save))
            finished = True
        except (SystemExit, KeyboardInterrupt):
            print("stopped: rendering the rows measured so far", file=sys.stderr)
        record.finish()
        save(finished=finished)
        print(f"Seam rows: {len(rows)} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        run = {**record.as_dict(), "finished": finished}
    text = paired_tables.render(rows + anchors, run, anchor_info, args)
    print(text)
    if args.figures:
        write_section(args.figures, args.section, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
