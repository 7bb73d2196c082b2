"""Latency of suggestions as an editor user feels it: an editing session replayed through
``seam serve`` over stdio, and the same session against llama.cpp's own server.

Six standard-library files of 300 to 1,400 lines (not Seam's own code).  On each file the
client does what Seam's editor clients send for a user who

1. opens the file, whose cursor line has been cut mid-line (the user is writing it), and
   rests the cursor there for ``--pause`` seconds (``seam/cursor``), then asks
   (``textDocument/inlineCompletion``): **first** (the first request on the file);
2. types the suggestion's first two characters, ``--keystroke`` seconds apart, asking after
   each: **typing**;
3. reads the suggestion for ``--think`` seconds and accepts it (one edit inserting it), then
   asks at the new cursor: **accepted**;
4. moves to the end of another line of a function body, presses Enter (a new, indented empty
   line), rests ``--pause`` seconds and asks: **new_position**; then types two characters and
   accepts as in 2-3.

Latency is measured on the client, from sending a request to reading its answer.  The script
reports p50/p90 per kind of request, the time until the model is ready, the server's peak RSS,
and the same session for every ``--engines`` entry in one run:

* ``llama.cpp``, ``transformers``: ``seam serve`` with ``engine`` set so, default settings;
* ``llama-server``: llama.cpp's own server built from the same llama.cpp sources
  (``benchmarks/llama_server.py``), used the way llama.vim uses it (``benchmarks/llama_vim.py``:
  ``/infill`` with 256 lines before and 64 after the cursor, its sampling, time limits and
  ring of extra context, ``--cache-reuse 256``); ``--no-time-limits`` lifts its time limits.
  It gets the same requests (it has no cursor notifications, and its cache of answers is
  not modelled).

    .venv/bin/python -m benchmarks.bench_latency --engines llama.cpp,transformers,llama-server

A plain LSP client (issue 18): ``--cursor off`` runs each ``seam serve`` session as an editor
without Seam's own client would, sending no ``seam/cursor`` notifications (it only opens,
edits and asks), so nothing is warmed while the cursor rests; ``--cursor on,off`` runs both in
one run.  The issue's figures are for a user who reads a suggestion for half a second before
accepting it (``--think 0.5``); the tables also give **new place** (first and new_position
together).

    .venv/bin/python -m benchmarks.bench_latency --engines llama.cpp --cursor off --think 0.5

Project context (issue 12): with ``--workspace`` the files are opened under their real paths
and the standard library is the workspace folder, so definitions of imported names are found;
``--contexts on,off`` runs each ``seam serve`` session with the context's sources on (the
defaults) and off, in one run.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import random
import statistics
import sys
import sysconfig
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.llama_vim import LlamaVimClient, LlamaVimSettings  # noqa: E402
from benchmarks.lsp_session import LspSession  # noqa: E402
from benchmarks.report import (  # noqa: E402
    RunRecord,
    command_line,
    model_packages,
    write_section,
)
from benchmarks.stats import percentile  # noqa: E402
from lsp_server.messages import CompletionSource, StatusReply  # noqa: E402

FILES = ("shlex.py", "textwrap.py", "gettext.py", "calendar.py", "ftplib.py", "statistics.py")
KINDS = ("first", "typing", "accepted", "new_position")


@dataclass
class Edit:
    """Where the session cuts a line (mid-line cursor) and where it opens a new line."""

    cut_start: int  # the mid-line cursor; text from here to the line end is removed
    cut_end: int
    enter_at: int  # end of the line after which the user presses Enter
    indent: str


def pick_edit(text: str, seed: int) -> Edit:
    """A mid-line cut in one function body statement and a new line after another, both
    chosen reproducibly from the file's simple one-line statements inside functions."""
    tree = ast.parse(text)
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    simple = (ast.Assign, ast.AugAssign, ast.Expr, ast.Return, ast.AnnAssign)
    spots = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for stmt in fn.body:
            if isinstance(stmt, simple) and stmt.lineno == stmt.end_lineno:
                content = lines[stmt.lineno - 1].strip()
                if len(content) >= 20 and not content.startswith(("'", '"', "#")):
                    spots.append(stmt.lineno - 1)
    rng = random.Random(f"{seed}:{len(text)}")
    cut_line, enter_line = rng.sample(sorted(set(spots)), 2)
    line = lines[cut_line]
    indent = len(line) - len(line.lstrip())
    cut = indent + max(4, int(0.4 * (len(line) - indent)))
    enter = lines[enter_line]
    return Edit(offsets[cut_line] + cut, offsets[cut_line] + len(line),
                offsets[enter_line] + len(enter), " " * (len(enter) - len(enter.lstrip())))


@dataclass
class Result:
    engine: str
    ready_s: float = 0.0  # from the process's spawn
    ready_after_initialize_s: float | None = None
    peak_rss_mb: float = 0.0
    latency: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in KINDS})
    suggestions: list[dict] = field(default_factory=list)
    #: model answers (seam/status recent): with project context in the prompt, and deferred
    context: dict[str, int] = field(default_factory=dict)

    def summary(self) -> dict:
        out = {"engine": self.engine, "ready_s": round(self.ready_s, 2),
               "ready_after_initialize_s": None if self.ready_after_initialize_s is None
               else round(self.ready_after_initialize_s, 2),
               "peak_rss_mb": round(self.peak_rss_mb), "context": self.context}
        places = self.latency["first"] + self.latency["new_position"]
        for kind, xs in [*self.latency.items(), ("new_place", places)]:
            if xs:
                out[kind] = {"n": len(xs), "p50": round(statistics.median(xs), 3),
                             "p90": round(percentile(xs, 0.9), 3)}
        return out


class SeamClient:
    """The session's requests against ``seam serve``."""

    def __init__(self, session: LspSession) -> None:
        self.s = session

    def open(self, uri, text, cursor):
        self.s.open(uri, text)
        self.s.cursor(uri, cursor)

    def edit(self, uri, start, end, new):
        self.s.edit(uri, start, end, new)

    def rest(self, uri, offset):
        self.s.cursor(uri, offset)

    async def ask(self, uri, offset):
        return await self.s.inline(uri, offset)

    def text(self, uri):
        return self.s.texts[uri]


class PlainSeamClient(SeamClient):
    """The same requests from a plain LSP client: no ``seam/cursor`` notifications."""

    def open(self, uri, text, cursor):
        self.s.open(uri, text)

    def rest(self, uri, offset):
        pass  # a plain client tells the server of the cursor only by asking



class LlamaVimSession:
    """The same requests against llama-server's ``/infill``, shaped and shown as llama.vim
    does (``benchmarks/llama_vim.py``): the client asks at every step as if the trigger key
    were pressed (llama.vim would answer the typing steps from its own cache of answers)."""

    def __init__(self, server, settings: LlamaVimSettings, seed: int) -> None:
        self.client = LlamaVimClient(server.url, settings, seed)
        self.texts: dict[str, str] = {}

    def open(self, uri, text, cursor):
        self.texts[uri] = text
        # BufEnter queues a chunk around the cursor; the ring takes it in normal mode.
        self.client.visit(uri.rsplit("/", 1)[-1], text, text.count("\n", 0, cursor))
        self.client.rest()

    def edit(self, uri, start, end, new):
        t = self.texts[uri]
        self.texts[uri] = t[:start] + new + t[end:]

    def rest(self, uri, offset):
        pass  # llama-server learns of a cursor only through a request

    async def ask(self, uri, offset):
        answer = await asyncio.to_thread(self.client.complete, uri.rsplit("/", 1)[-1],
                                         self.texts[uri], offset)
        return answer.shown, answer.seconds

    def text(self, uri):
        return self.texts[uri]


async def replay(client, result: Result, files: list[Path], args) -> None:
    for n, path in enumerate(files):
        original = path.read_text(encoding="utf-8")
        edit = pick_edit(original, args.seed)
        text = original[:edit.cut_start] + original[edit.cut_end:]
        uri = path.as_uri() if args.workspace else f"file:///bench/{n}/{path.name}"
        cursor = edit.cut_start
        client.open(uri, text, cursor)
        await asyncio.sleep(args.pause)
        await step(client, result, uri, cursor, "first", args, path.name)
        # Move elsewhere: Enter at the end of another line, rest, ask.
        enter = edit.enter_at - (edit.cut_end - edit.cut_start if edit.enter_at > edit.cut_start
                                 else 0)
        text_now = client.text(uri)
        enter = text_now.find("\n", enter - 1 if enter else 0)
        client.edit(uri, enter, enter, "\n" + edit.indent)
        cursor = enter + 1 + len(edit.indent)
        client.rest(uri, cursor)
        await asyncio.sleep(args.pause)
        await step(client, result, uri, cursor, "new_position", args, path.name)
        if args.progress:
            print(f"  {result.engine}: {path.name} done", file=sys.stderr, flush=True)


async def step(client, result: Result, uri: str, cursor: int, kind: str, args,
               name: str) -> None:
    """Ask at ``cursor``, then type two characters of the suggestion and accept it (unless
    ``args.follow`` is false: then only ask)."""
    suggestion, took = await client.ask(uri, cursor)
    result.latency[kind].append(took)
    result.suggestions.append({"file": name, "kind": kind, "suggestion": suggestion,
                               "seconds": round(took, 3)})
    if not suggestion or not args.follow:
        return
    typed = 0
    for ch in suggestion[:2]:
        if ch == "\n":
            break
        await asyncio.sleep(args.keystroke)
        client.edit(uri, cursor, cursor, ch)
        cursor += 1
        typed += 1
        rest, took = await client.ask(uri, cursor)
        result.latency["typing"].append(took)
        result.suggestions.append({"file": name, "kind": "typing", "suggestion": rest,
                                   "seconds": round(took, 3)})
        if rest is not None:
            suggestion = suggestion[:typed] + rest
    remaining = suggestion[typed:]
    if not remaining:
        return
    await asyncio.sleep(args.think)
    client.edit(uri, cursor, cursor, remaining)
    cursor += len(remaining)
    nxt, took = await client.ask(uri, cursor)
    result.latency["accepted"].append(took)
    result.suggestions.append({"file": name, "kind": "accepted", "suggestion": nxt,
                               "seconds": round(took, 3)})


async def run_seam(engine: str, files: list[Path], args, workdir: Path,
                   context: str = "on", cursor: str = "on") -> Result:
    result = Result(engine + ("" if context == "on" else "/no-context")
                    + ("" if cursor == "on" else "/plain-client"))
    settings = {"model": args.model, "engine": engine}
    if context == "off":
        settings.update(contextDefinitions=False, contextOpenFiles=False,
                        contextRecentEdits=False, contextSimilarCode=False)
    root = Path(sysconfig.get_paths()["stdlib"]).as_uri() if args.workspace else None
    session = LspSession(settings, workdir / f"server-{engine}-{context}-{cursor}.log",
                         root_uri=root)
    result.ready_s = await session.start()
    result.ready_after_initialize_s = session.ready_after_initialize_s
    try:
        client = SeamClient(session) if cursor == "on" else PlainSeamClient(session)
        await replay(client, result, files, args)
        result.peak_rss_mb = session.peak_rss_mb()
        reply = StatusReply.from_json(await session.request("seam/status", {}))
        answers = [r for r in reply.recent
                   if r.source in (CompletionSource.MODEL, CompletionSource.EARLY)]
        result.context = {"answers": len(answers),
                          "with_context": sum(bool(r.context_tokens) for r in answers),
                          "deferred": sum(bool(r.context_deferred) for r in answers)}
    finally:
        await session.close()
    return result


async def run_llama_server(files: list[Path], args) -> Result:
    from benchmarks.llama_server import LlamaServer, ensure_built
    from fim.engines import bundled
    from fim.engines.llama_engine import default_threads

    binary = ensure_built()
    model = bundled.gguf_file(bundled.lookup_spec(args.model))
    result = Result("llama-server")
    with LlamaServer(binary, model, threads=default_threads()) as server:
        result.ready_s = server.wait_ready()
        settings = LlamaVimSettings(auto=False, time_limits=not args.no_time_limits)
        await replay(LlamaVimSession(server, settings, args.seed), result, files, args)
        result.peak_rss_mb = server.rss_mb()
    return result


def markdown_tables(summaries: list[dict]) -> str:
    """Per session: ready time, peak RSS, p50 / p90 seconds per kind and how many answers
    carried project context; then the p50 ratios against Seam with llama.cpp."""
    head = ("| session | model ready after initialize / from spawn (s) | peak RSS (MB) | "
            + " | ".join(
        f"{k} p50 / p90 (s)" for k in KINDS) + " | answers with context / deferred |")
    rows = [head, "|---|---:|---:|" + "---:|" * len(KINDS) + "---|"]
    for s in summaries:
        cells = " | ".join(f"{s[k]['p50']:.2f} / {s[k]['p90']:.2f} (n={s[k]['n']})"
                           if k in s else "–" for k in KINDS)
        c = s.get("context") or {}
        ctx = f"{c['with_context']} of {c['answers']} / {c['deferred']}" if c else "–"
        after = s.get("ready_after_initialize_s")
        ready = (f"{after:.1f} / " if after is not None else "– / ") + f"{s['ready_s']:.1f}"
        rows.append(f"| {s['engine']} | {ready} | {s['peak_rss_mb']} | {cells} | "
                    f"{ctx} |")
    by = {s["engine"]: s for s in summaries}
    out = "\n".join(rows) + "\n"
    places = [f"{s['engine']} {s['new_place']['p50']:.2f} / {s['new_place']['p90']:.2f}"
              for s in summaries if "new_place" in s]
    if places:
        out += f"\nNew place (first and new_position) p50 / p90 (s): {'; '.join(places)}.\n"
    if "llama.cpp" in by:
        for other in [e for e in by if e != "llama.cpp"]:
            ratios = ", ".join(
                f"{k} {by[other][k]['p50'] / max(by['llama.cpp'][k]['p50'], 1e-3):.1f}x"
                for k in KINDS if k in by[other] and k in by["llama.cpp"])
            out += f"\np50 of {other} over Seam with llama.cpp: {ratios}.\n"
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--engines", default="llama.cpp,transformers,llama-server")
    p.add_argument("--model", default="bundled:qwen2.5-coder-1.5b")
    p.add_argument("--files", default=",".join(FILES),
                   help="standard-library files to edit (default: six of 350-1,390 lines)")
    p.add_argument("--pause", type=float, default=1.0, help="cursor rest before asking (s)")
    p.add_argument("--keystroke", type=float, default=0.15, help="between keystrokes (s)")
    p.add_argument("--think", type=float, default=1.0, help="reading before accepting (s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-time-limits", action="store_true",
                   help="llama-server: no t_max_predict_ms (llama.vim's default is a limit)")
    p.add_argument("--contexts", default="on",
                   help="project context per seam session: on, off or on,off")
    p.add_argument("--cursor", default="on",
                   help="seam/cursor notifications per seam session: on (Seam's editor "
                        "clients), off (a plain LSP client) or on,off")
    p.add_argument("--workspace", action="store_true",
                   help="open the files under their real paths, the stdlib as workspace")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--figures", type=Path, default=None,
                   help="write the tables into this page's section (see --section)")
    p.add_argument("--section", default="latency")
    p.add_argument("--progress", action="store_true")
    p.add_argument("--logs", type=Path, default=None,
                   help="keep the servers' logs in this folder (one completion record per "
                        "answer: prompt, cached and generated tokens, model time)")
    p.set_defaults(follow=True)  # the whole session (bench_team can ask at places only)
    args = p.parse_args(argv)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = [stdlib / f for f in args.files.split(",") if f]
    record = RunRecord(command_line(), packages=model_packages())
    results = []
    with tempfile.TemporaryDirectory(prefix="seam-latency-") as tmp:
        logs = Path(tmp)
        if args.logs is not None:
            args.logs.mkdir(parents=True, exist_ok=True)
            logs = args.logs
        for engine in [e for e in args.engines.split(",") if e]:
            if args.progress:
                print(f"session with {engine}", file=sys.stderr, flush=True)
            if engine == "llama-server":
                results.append(asyncio.run(run_llama_server(files, args)))
            else:
                for context in [c for c in args.contexts.split(",") if c]:
                    for cursor in [c for c in args.cursor.split(",") if c]:
                        results.append(asyncio.run(run_seam(engine, files, args, logs,
                                                            context, cursor)))
    record.finish()
    summaries = [r.summary() for r in results]
    table = markdown_tables(summaries)
    print(table)
    for s in summaries:
        if s["context"]:
            print(f"{s['engine']}: project context {s['context']}")
    print(record.markdown())
    if args.figures:
        write_section(args.figures, args.section, table + "\n" + record.markdown())
    if args.json:
        args.json.write_text(json.dumps({"run": record.as_dict(), "summaries": summaries,
                                         "suggestions": {r.engine: r.suggestions
                                                         for r in results}}, indent=1),
                             encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
