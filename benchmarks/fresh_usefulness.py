"""Suggestions on code the model has never seen: every kind of cursor, in code and in prose,
on the fresh corpus and the standard library, Seam as shipped beside its anchors (issue 18).

Corpora (``benchmarks/fresh_corpus.py``): *fresh*, pure-Python projects first released in
2025, after the bundled model was trained, read from their pinned wheels; *stdlib*, packages
of the standard library the model has read, as the labelled control.  Cursors
(``benchmarks/cursor_kinds.py``): a hole inside a line, the rest of a line, an empty line, the
line after a block header, a block's start; each in code and in prose where it exists.  The
truth is what the author wrote.

Each request is planned exactly as the server plans it (``lsp_server.request_plan``, default
settings: the mid-line or empty-line policy, the prompt window, every project-context
source), through the same machinery as ``benchmarks/usefulness.py`` (workspace = the
project's package folder, three other modules open, recent edits, a 1 s rest before asking).
The suggestion is what the server would show: on an empty line and after a header its early
answer (the first line end where the file parses, judged on its first line), mid-line the
whole middle, at a block's start the whole block.  Configurations, on the same cursors:

* ``shipped``: Seam's defaults (constrained, ending the middle where the model would re-write
  the right context, also across a line its author wrapped);
* ``unwrapped_right_stop``: that stop only where the model re-writes the right context as
  written, not where it writes the next line's text on to the cursor's line;
* ``no_right_stop``: the same without that stop (the decoder before issue 18's lever);
* ``unconstrained``: the ``constrained: false`` setting;
* ``llama_vim``: the anchor a user would pick instead, llama.cpp's own server
  (``benchmarks/llama_server.py``, the same GGUF and thread count) driven as llama.vim drives
  it (``benchmarks/llama_vim.py``: its window, sampling, limits, ring of extra context from
  the open documents, and what it does to the answer before showing it; automatic
  completion, so nothing where more than 8 characters follow the cursor).  Its time limit
  (250 ms of generation, stopping at the next line end) is llama.vim's default and makes its
  answers depend on the machine's load; ``--llama-vim-time-limits off`` lifts it.  Its
  latency is its own: llama-server's prompt cache holds only its own requests.
* ``ranked3``: up to three complete constrained middles (greedy and branches off it,
  ``fim.alternatives``), the likeliest shown; a row also says whether the truth is among
  them (what cycling through the suggestions gives) and keeps them all, so that the table
  can rank them per token too.  On an empty line and after a header the middle ends at
  its first complete line end (``line_stop``: the early answer, which the search cannot
  interrupt).

    .venv/bin/python benchmarks/fresh_usefulness.py --per-cell 6 --stdlib-per-cell 3 \\
        --json docs/eval/fresh-usefulness.json --figures docs/usefulness.md
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import sys
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import fresh_tables as tables  # noqa: E402
from benchmarks.cursor_kinds import CELLS, FIRST_LINE_KINDS, Kind, pick  # noqa: E402
from benchmarks.fresh_corpus import (  # noqa: E402
    FRESH_CORPORA,
    STDLIB,
    project_folder,
    stdlib_folder,
)
from benchmarks.llama_server import LlamaServer, ensure_built  # noqa: E402
from benchmarks.llama_vim import LlamaVimClient, LlamaVimSettings  # noqa: E402
from benchmarks.report import RunRecord, command_line, model_packages, write_section  # noqa: E402
from benchmarks.usefulness import (  # noqa: E402
    Case,
    Config,
    FileCases,
    ask,
    first_line,
    open_documents,
    plan_case,
    project_files,
)
from fim.api import Engine  # noqa: E402
from fim.editor_policy import LEFT_FIRST_TOKENS  # noqa: E402
from fim.engine_interface import CompletionEngine  # noqa: E402
from fim.engines import bundled  # noqa: E402
from fim.engines.llama_engine import default_threads  # noqa: E402
from fim.options import Mode  # noqa: E402
from lsp_server.project.sources import ContextCollector  # noqa: E402
from lsp_server.project.workspace import Workspace  # noqa: E402
from lsp_server.request_plan import RequestPlanner  # noqa: E402

CONFIGS = ("shipped", "unwrapped_right_stop", "no_right_stop", "unconstrained", "ranked3",
           "llama_vim")
#: Configurations that are not Seam's engine: asked through their own server.
ANCHORS = frozenset({"llama_vim"})
#: Configurations that ask for ranked alternatives, and how many.
RANKED = {"ranked3": 3}


@dataclasses.dataclass
class Cursor:
    """A case of ``usefulness.Case`` with its corpus, project and kind of text."""

    case: Case
    corpus: str
    project: str
    kind: Kind
    text: str


def corpus_projects(corpus: str) -> list[tuple[str, Path]]:
    if corpus in FRESH_CORPORA:  # fresh, fresh2 (issue 29's second corpus)
        return [(p.name, project_folder(p)) for p in FRESH_CORPORA[corpus]]
    if corpus == "stdlib":
        return [(name, stdlib_folder(name)) for name in STDLIB]
    raise SystemExit(f"unknown corpus {corpus!r}: fresh, fresh2 or stdlib")


def corpus_cursors(corpus: str, per_cell: int, args) -> list[tuple[FileCases, list[Cursor]]]:
    """``per_cell`` cursors of every kind and kind of text, one per cell and file, the files
    taken from the corpus's projects in turn (seeded)."""
    projects = []
    for name, folder in corpus_projects(corpus):
        workspace = Workspace()
        workspace.add(folder.as_uri(), folder.name)
        files = project_files(folder, args.seed)
        projects.append((name, folder, workspace, list(files), files))
    wanted = {cell: per_cell for cell in CELLS}
    out = []
    turn = 0
    while any(wanted.values()) and any(p[3] for p in projects):
        name, folder, workspace, files, every = projects[turn % len(projects)]
        turn += 1
        if not files:
            continue
        path, text = files.pop(0)
        rel = path.relative_to(folder).as_posix()
        spots = pick(text, f"{args.seed}:{corpus}:{name}/{rel}", wanted)
        if not spots:
            continue
        cursors = []
        for s in spots:
            cid = f"{name}/{rel}:{s.line + 1}:{s.kind}:{s.text}"
            case = Case(cid, s.kind.value, path, s.hole(text), s.start, s.truth(text), s.line,
                        text)
            cursors.append(Cursor(case, corpus, name, s.kind, s.text.value))
        others = open_documents(path, every, args.open, args.seed)
        out.append((FileCases(path, [c.case for c in cursors], others, workspace), cursors))
    return out


def configured(request, config: str):
    """The planned request under one of ``CONFIGS``."""
    if config == "no_right_stop":
        return dataclasses.replace(request, stop_at_right=False)
    if config == "unwrapped_right_stop":
        return dataclasses.replace(request, right_wraps=False)
    if config == "unconstrained":  # what ``constrained: false`` changes in the policy
        return dataclasses.replace(request, mode=Mode.UNCONSTRAINED)
    if config in RANKED:
        return dataclasses.replace(request, alternatives=RANKED[config])
    return request


def _project_path(case: Case) -> str:
    """The file's path in its project, as llama.vim names a buffer (``expand('%')`` with the
    project folder as the working directory)."""
    return case.id.split(":", 1)[0].split("/", 1)[1]


def llama_vim_session(fc: FileCases, cursors: list[Cursor], args) -> LlamaVimClient:
    """llama.vim as a user would have it on reaching the file's first cursor: the other
    documents and then the file were opened (each BufEnter queues the chunk around its cursor,
    at the top), and the user spent a few seconds in normal mode, so the queue is in the
    ring.  One session per file, as Seam's engine starts each file from an empty cache."""
    client = LlamaVimClient(args.llama_server.url, args.llama_vim, seed=args.seed)
    rel = _project_path(cursors[0].case)
    folder = str(fc.path)[:-len(rel)]
    for doc in fc.others:
        path = Path(urllib.parse.urlparse(doc.uri).path)
        client.visit(str(path)[len(folder):] if str(path).startswith(folder) else path.name,
                     doc.text)
    client.visit(rel, cursors[0].case.source)  # the file as it is on disk, not yet edited
    client.rest()
    return client


def ask_llama_vim(client: LlamaVimClient, cur: Cursor) -> dict:
    """The first suggestion llama.vim shows at the cursor, in ``ask``'s terms."""
    case = cur.case
    a = client.complete(_project_path(case), case.text, case.offset)
    client.rest()  # the user moves on to the next place in normal mode
    return {"middle": a.shown, "seconds": a.seconds, "parses": None,
            "stop": a.reason or ("shown" if a.requested else "not asked"),
            "tokens": a.predicted_tokens, "prompt_tokens": a.prompt_tokens,
            "requested": a.requested, "cached_tokens": a.cached_tokens,
            "truncated": a.truncated}


def ask_ranked(engine: CompletionEngine, request, early: bool, pause: float) -> dict:
    """``usefulness.ask`` for a ranked configuration: rest, then the whole search (the
    early answer is the first complete line end, ``line_stop``)."""
    until = time.perf_counter() + pause
    if early:
        request = dataclasses.replace(request, line_stop=True)
    engine.warm(request, lambda: time.perf_counter() > until)
    t0 = time.perf_counter()
    res = engine.complete(request)
    return {"middle": res.middle, "seconds": time.perf_counter() - t0, "stop": res.stop,
            "parses": res.parses, "tokens": res.tokens, "prompt_tokens": res.prompt_tokens,
            "candidates": [[a.middle, a.logprob, a.tokens, a.greedy]
                           for a in res.alternatives]}


def run_file(engine: Engine, fc: FileCases, cursors: list[Cursor], args, rows: list[dict],
             after=None) -> None:
    """Every configuration at each cursor in turn.  The file starts from an empty cache; at a
    cursor the first of Seam's configurations pays the prompt (its latency is a new place's),
    the others find the same prompt cached (the shared machine could not afford a prefill per
    configuration), so only that configuration's latency is an editor's.  An anchor's latency
    is always its own (its server caches only its own prompts)."""
    base = Config(args.context, args.context, None, None, None, LEFT_FIRST_TOKENS)
    engine.step_model.reset()
    planner = RequestPlanner(ContextCollector(fc.workspace), left_first=base.left,
                             right_tokens=base.right)
    seam = [c for c in args.configs if c not in ANCHORS]
    vim = llama_vim_session(fc, cursors, args) if "llama_vim" in args.configs else None
    warmed = False
    for cur in cursors:
        case = cur.case
        early = cur.kind in FIRST_LINE_KINDS
        planned = plan_case(engine, planner, base, fc, case, args).request if seam else None
        if planned is not None and not warmed and planned.context_budget:
            # The server runs the project context into the cache in idle time and uses it
            # only once it is there.
            engine.warm(dataclasses.replace(planned, left="", right="", left_start=0))
            warmed = True
        for config in args.configs:
            if config == "llama_vim":
                out = ask_llama_vim(vim, cur)
                first = bool(out["requested"])
            else:
                first = config == seam[0]
                pause = args.pause if first else 0.0
                out = (ask_ranked(engine, configured(planned, config), early, pause)
                       if config in RANKED else
                       ask(engine, configured(planned, config),
                           "empty_line" if early else "mid_line", pause))
            rows.append(_row(cur, config, out, early, first_config=first))
            if after is not None:  # a run cut short still leaves its rows
                after()
            if args.progress:
                r = rows[-1]
                print(f"{config:14} {case.id[:60]:60} {r['seconds']:5.1f}s "
                      f"{'=' if r['exact'] else ' '} {r['shown']!r:.50} | {r['truth']!r:.40}",
                      file=sys.stderr, flush=True)


def _row(cur: Cursor, config: str, out: dict, early: bool, first_config: bool) -> dict:
    shown = first_line(out["middle"]) if early else out["middle"]
    truth = cur.case.truth
    if cur.kind == Kind.BLOCK_START:  # a block's trailing line end is no difference
        shown, truth = (shown.rstrip() if shown else shown), truth.rstrip()
    return {"id": cur.case.id, "corpus": cur.corpus, "project": cur.project,
            "kind": cur.kind.value, "text": cur.text, "config": config,
            "truth": truth, "shown": shown, "seconds": out["seconds"],
            "latency_is_new_place": first_config,
            "stop": str(out["stop"]), "tokens": out["tokens"],
            "prompt_tokens": out["prompt_tokens"],
            "unparsable": out["middle"] is not None and out["parses"] is False
            and config != "unconstrained",
            **({"requested": out["requested"], "cached_tokens": out["cached_tokens"],
                "truncated": out["truncated"]} if config in ANCHORS else {}),
            **tables.score(shown, truth), **_ranked_fields(cur, out, early)}


def _ranked_fields(cur: Cursor, out: dict, early: bool) -> dict:
    """A ranked configuration's candidates (``[middle, logprob, tokens, greedy]``, the
    likeliest first), how many, and whether the truth is among them."""
    if "candidates" not in out:
        return {}
    block = cur.kind == Kind.BLOCK_START

    def shown(middle: str) -> str:
        text = first_line(middle) if early else middle
        return text.rstrip() if block else text

    truth = cur.case.truth.rstrip() if block else cur.case.truth
    return {"candidates": out["candidates"], "count": len(out["candidates"]),
            "among": any(shown(c[0]) == truth for c in out["candidates"]),
            "decode_seconds": out["seconds"]}


def render(rows: list[dict], run: dict, configs: list[str]) -> str:
    corpora = list(dict.fromkeys(r["corpus"] for r in rows))
    others = [c for c in configs if c != "shipped"]
    body = ("Issue 18's groups, code and prose together (mid-line = a hole inside a line and "
            "the rest of a line):\n\n" + tables.groups_table(rows, corpora, configs)
            + "\n\nPaired on the same cursors:\n\n"
            + tables.pairs_table(rows, corpora, [("shipped", o) for o in others])
            + "\n\nEvery cursor kind and kind of text:\n\n"
            + tables.kinds_table(rows, corpora, configs)
            + "\n\nAccepted chars are those before the first difference from the truth (what a "
              "word-by-word accept keeps); a suggestion that goes on past the truth keeps them "
              "all, so where two configurations differ only in where they stop, this column is "
              "the same and exact match tells them apart.")
    if "llama_vim" in configs:
        body += "\n\n" + tables.anchor_note(rows, run.get("llama_vim"))
    suggestions = tables.suggestions_table(rows, corpora, configs)
    if suggestions:
        body += ("\n\nSeveral suggestions per place (what each ranking shows first: the "
                 "model's likelihood of the middle, the same per token, greedy's middle; and "
                 "whether the truth is among all of them):\n\n" + suggestions)
    if "no_right_stop" in configs:
        changed = tables.changed_examples(rows, "shipped", "no_right_stop")
        if changed:
            body += ("\n\nWhere ending at the right context changed the suggestion (first "
                     "cursors, repr, cut at 70 characters):\n\n" + changed)
    record = RunRecord.__new__(RunRecord)
    record.__dict__.update(run)
    return body + "\n\n" + record.markdown()


def save(args, record: RunRecord, rows: list[dict], finished: bool) -> None:
    if args.json:
        args.json.write_text(json.dumps({"run": record.as_dict(), "configs": args.configs,
                                         "finished": finished, "rows": rows}, indent=1),
                             encoding="utf-8")


def start_llama_server(args, record: RunRecord) -> None:
    """llama-server on the same GGUF with as many threads as Seam's engine; its settings and
    llama.vim's go into the run record."""
    if not args.model.startswith("bundled:"):
        raise SystemExit("llama_vim needs a bundled GGUF model (--model bundled:...)")
    binary = ensure_built()
    gguf = bundled.gguf_file(bundled.lookup_spec(args.model))
    args.llama_server = LlamaServer(binary, gguf, threads=default_threads())
    try:
        args.llama_server.wait_ready()
    except BaseException:  # not ready, or the run was stopped meanwhile
        args.llama_server.close()
        raise
    args.llama_vim = LlamaVimSettings(time_limits=args.llama_vim_time_limits == "on",
                                      auto=args.llama_vim_trigger == "auto")
    record.llama_vim = {**args.llama_vim.describe(),
                        "server": {**args.llama_server.flags, "binary": binary.parent.name}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpora", default="fresh,stdlib")
    p.add_argument("--per-cell", type=int, default=6,
                   help="fresh corpus: cursors per cursor kind and kind of text")
    p.add_argument("--stdlib-per-cell", type=int, default=3)
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--context", choices=("all", "off"), default="all",
                   help="project context: every source (the default settings) or none (a "
                        "prompt a third as long, for a machine too loaded for the context "
                        "that similar code and recent edits change at every cursor)")
    p.add_argument("--open", type=int, default=3, help="other open documents per file")
    p.add_argument("--model", default="bundled:qwen2.5-coder-1.5b")
    p.add_argument("--engine", default="llama.cpp")
    p.add_argument("--pause", type=float, default=1.0, help="cursor rest before asking (s)")
    p.add_argument("--time-budgets", action="store_true",
                   help="keep the server's time budgets (quality then depends on load)")
    p.add_argument("--llama-vim-time-limits", choices=("on", "off"), default="on",
                   help="llama_vim: llama.vim's own time limits (on, what a user gets; its "
                        "answers then depend on the machine's load) or none (off)")
    p.add_argument("--llama-vim-trigger", choices=("auto", "manual"), default="auto",
                   help="llama_vim: automatic completion (llama.vim's default: nothing where "
                        "more than 8 characters follow the cursor) or the trigger key")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--figures", type=Path, default=None)
    p.add_argument("--section", default="fresh-code")
    p.add_argument("--progress", action="store_true")
    p.add_argument("--report-only", action="store_true",
                   help="render the tables from the rows in --json (no model runs)")
    args = p.parse_args(argv)
    args.configs = [c for c in args.configs.split(",") if c]
    if set(args.configs) - set(CONFIGS):
        raise SystemExit(f"configurations are among {', '.join(CONFIGS)}")
    # What ``usefulness.plan_case`` reads: the server's automatic budgets and windows.
    args.budget = args.context_tokens = args.right_tokens = None
    args.left_first = LEFT_FIRST_TOKENS
    if args.report_only:
        if args.json is None:
            raise SystemExit("--report-only needs --json FILE")
        data = json.loads(args.json.read_text(encoding="utf-8"))
        text = render(data["rows"], data["run"], data["configs"])
    else:
        record = RunRecord(command_line(), packages=model_packages())
        engine = Engine.load(args.model, engine=args.engine)
        args.llama_server = None
        if "llama_vim" in args.configs:
            # A terminated run (``timeout``, ``kill``) still stops its llama-server: the
            # ``finally`` below runs on SystemExit, not on a bare SIGTERM.
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
            start_llama_server(args, record)
        rows: list[dict] = []
        try:
            for corpus in [c for c in args.corpora.split(",") if c]:
                n = args.stdlib_per_cell if corpus == "stdlib" else args.per_cell
                for fc, cursors in corpus_cursors(corpus, n, args):
                    run_file(engine, fc, cursors, args, rows,
                             lambda: save(args, record, rows, finished=False))
                    # After every file, so that a run cut short still leaves its rows.
                    save(args, record, rows, finished=False)
        finally:
            if args.llama_server is not None:
                args.llama_server.close()
        record.finish()
        save(args, record, rows, finished=True)
        text = render(rows, record.as_dict(), args.configs)
    print(text)
    if args.figures:
        write_section(args.figures, args.section, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
