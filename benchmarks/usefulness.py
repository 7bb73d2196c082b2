"""Would a user keep the suggestions?  Quality and latency at the IDE's own settings, on real
packages, with project context on and off, and each context source alone, in one run.

A *project* here is one package folder (a standard-library package such as ``email`` or
``asyncio``, or an installed one such as ``lark``), which plays the workspace folder the
editor announced.  In a seeded choice of its files, the script makes the two kinds of cursor
the server distinguishes, inside function bodies, on single-line statements:

* **mid-line**: the line cut at a random column (at least two characters typed, at least two
  left); the truth is the rest of the line, the suggestion is what the server shows there
  (one statement that ends with its line);
* **empty line**: the line's text removed, its indentation kept (the user pressed Enter);
  the truth is the removed line; the suggestion is the server's early answer, the first line
  end where the file parses, and it is judged on its first line.

Each request is built by ``lsp_server.request_plan.RequestPlanner``, the function the server
plans with, from ``lsp_server.settings`` (scope, token budgets, prompt window, project context
budget), so the benchmark cannot drift from the server.  What the server would know is
modelled as follows (modelling choices, stated in the output):

* workspace: the package folder; the document's path is relative to it, the repository
  name is the folder's name; definitions come from imports resolved inside the folder;
* open documents: ``--open`` other modules of the package, chosen by a seeded draw per file,
  opened before the file; the user has not visited them, so each shows as its outline;
* recent edits: the ring holds one-line edits at two function-body lines of the file itself
  above the prompt's start (when there are any) and at one in each open document, made
  before the request, as a user who touched those places would leave it;
* the prompt's start: a fresh anchor per case (the first request at a new place in the
  file, ``LEFT_FIRST_TOKENS`` above the cursor), or with ``--widened`` the anchor the server
  widens to while the cursor rests (the whole left share of the window);
* cache and latency: the project context is in the model's cache (the server uses it only
  once it is, see ``CONTEXT_SLACK_TOKENS`` in the server), the cursor rested ``--pause``
  seconds (the server warms the prompt then), and latency is the time from the request to
  the suggestion (the early answer on an empty line);
* time budgets are off by default (``--time-budgets`` keeps the server's), so that the
  quality figures do not depend on the machine's load.

* similar code: the workspace on disk holds each file as it was, the truth included, but the
  document itself is read from the editor (the cut text), never from disk, as the server
  does for every open document; other files are read from disk as they are.

Variants: ``off`` (no project context), ``all`` (every source), and each source alone
(``definitions``, ``open_files``, ``recent_edits``, ``similar_code``) at the same budget.
Reported per variant and kind of cursor: success (the file parses with the suggestion), exact
match, edit similarity, the share a user would accept whole (exact, or the truth starts with
it and it ends at a line end), p50/p90 latency, and unparsable constrained middles (must be
0); with ``--pairs``, two configurations side by side on the same cursors.

    .venv/bin/python benchmarks/usefulness.py --packages email,asyncio,lark --cases 8 \\
        --figures docs/usefulness.md
"""

from __future__ import annotations

import argparse
import builtins
import dataclasses
import json
import keyword
import re
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.report import RunRecord, command_line, write_section  # noqa: E402
from benchmarks.usefulness_cases import (  # noqa: E402
    KINDS,
    VARIANTS,
    Case,
    Config,
    FileCases,
    cases_of,
    edit_ring,
    lines_using_package_imports,
    open_documents,
    package_folder,
    parse_splits,
    project_cases,
    project_files,
    settings_for,
    statement_lines,
)
from benchmarks.usefulness_tables import (  # noqa: E402
    by_package,
    describe,
    pairs_table,
    subset_table,
    summarize,
    table,
)
from fim.api import CompletionRequest, Engine  # noqa: E402
from fim.editor_policy import LEFT_FIRST_TOKENS  # noqa: E402
from fim.engine_interface import CompletionEngine  # noqa: E402
from fim.eval.evaluation import edit_similarity  # noqa: E402
from lsp_server.project.sources import ContextCollector, OpenDocument  # noqa: E402
from lsp_server.request_plan import RequestPlanner  # noqa: E402

# The cases and tables live in their own modules; their names stay importable from here.
__all__ = ["KINDS", "VARIANTS", "Case", "Config", "FileCases", "OpenDocument", "accepted_whole",
           "ask", "by_package", "cases_of", "context_flags", "describe", "edit_ring",
           "first_line", "lines_using_package_imports", "main", "open_documents",
           "package_folder", "pairs_table", "parse_splits", "plan_case", "project_cases",
           "project_files", "run_project", "settings_for", "statement_lines", "subset_table",
           "summarize", "table"]

# ----- running a case ---------------------------------------------------------------------------

def first_line(text: str | None) -> str | None:
    return None if text is None else text.split("\n", 1)[0]


def accepted_whole(shown: str | None, truth: str) -> bool:
    """Exact, or the truth starts with the suggestion and the suggestion ends at a line end."""
    if not shown:
        return False
    if shown == truth:
        return True
    rest = truth[len(shown):] if truth.startswith(shown) else None
    return rest is not None and (rest == "" or rest.startswith("\n"))


def ask(engine: CompletionEngine, request: CompletionRequest, kind: str, pause: float) -> dict:
    """Rest ``pause`` seconds (the server warms the prompt), then request as the server does:
    mid-line, the whole middle; on an empty line, the first line end where the file parses."""
    until = time.perf_counter() + pause
    engine.warm(request, lambda: time.perf_counter() > until)
    first: dict = {}
    done = threading.Event()

    def partial(middle: str) -> None:
        if "middle" not in first:
            first.update(middle=middle, at=time.perf_counter())
            done.set()

    early = kind == "empty_line"
    t0 = time.perf_counter()
    res = engine.complete(request, cancel=done.is_set if early else None,
                          on_partial=partial if early else None)
    t1 = time.perf_counter()
    if early and "middle" in first:
        return {"middle": first["middle"], "seconds": first["at"] - t0, "stop": "early",
                "parses": True, "error": None, "tokens": res.tokens,
                "prompt_tokens": res.prompt_tokens, "context_tokens": res.project_tokens,
                "cached_tokens": engine.cached_tokens}
    return {"middle": res.middle, "seconds": t1 - t0, "stop": res.stop, "parses": res.parses,
            "error": res.error, "tokens": res.tokens, "prompt_tokens": res.prompt_tokens,
            "context_tokens": res.project_tokens, "cached_tokens": engine.cached_tokens}


def plan_case(engine: CompletionEngine, planner: RequestPlanner, config: Config, fc: FileCases,
              case: Case, args):
    """The request the server would make at the case's cursor under ``config``."""
    settings = settings_for(config, args)
    docs = fc.others + [OpenDocument(fc.uri, case.text)]
    planner.forget(fc.uri)  # a new place in the file: a fresh prompt start
    probe = planner.plan(engine, settings, fc.uri, case.text, case.offset, docs)
    start = probe.request.left_start
    if config.widened:
        anchors = planner.anchors(engine, probe.policy, probe.context.budget)
        wider = anchors.wider(fc.uri, probe.request.left, len(probe.request.left)) \
            if anchors else None
        start = wider if wider is not None else start
    anchor_line = case.text.count("\n", 0, start)
    planner.collector.ring = edit_ring(case, fc.others, anchor_line, args.seed)
    return planner.plan(engine, settings, fc.uri, case.text, case.offset, docs,
                        left_start=start)


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_COMMON = frozenset(keyword.kwlist) | frozenset(dir(builtins)) | {"self", "cls"}


def _has_word(text: str, word: str) -> bool:
    return re.search(rf"\b{re.escape(word)}\b", text) is not None


def context_flags(engine: CompletionEngine, fc: FileCases, case: Case, args) -> dict:
    """Whether the truth names something the file's prompt window does not show
    (``outside``: only context could tell the model), and whether the project context (all
    sources, the run's budget) holds one of those names (``in_context``)."""
    base = Config("off", "off", args.budget, args.context_tokens, args.right_tokens,
                  args.left_first)
    req = plan_case(engine, RequestPlanner(ContextCollector(fc.workspace),
                                           left_first=base.left, right_tokens=base.right),
                    base, fc, case, args).request
    prompt = engine.prompt_for(req)
    window = req.left[req.left_start:] + req.right[:len(req.right) - prompt.right_chars_dropped]
    # A mid-line cut inside a name: the whole name counts, not its typed-out tail.
    typed = re.search(r"[A-Za-z0-9_]*$", case.text[:case.offset]).group(0)
    missing = [w for w in dict.fromkeys(_NAME.findall(typed + case.truth))
               if w not in _COMMON and not _has_word(window, w)]
    every = dataclasses.replace(base, name="all", variant="all")
    ctx = plan_case(engine, RequestPlanner(ContextCollector(fc.workspace),
                                           left_first=base.left, right_tokens=base.right),
                    every, fc, case, args).request
    text = "\n".join(f.text for f in ctx.context_files)
    return {"outside": bool(missing),
            "in_context": any(_has_word(text, w) for w in missing)}


def run_project(engine: Engine, folder: Path, args, rows: list[dict]) -> None:
    for fc in project_cases(folder, args):
        flags = {c.id: context_flags(engine, fc, c, args) for c in fc.cases}
        for config in args.configs:
            engine.step_model.reset()  # each file and variant starts from an empty cache
            planner = RequestPlanner(ContextCollector(fc.workspace), left_first=config.left,
                                     right_tokens=config.right)
            warmed = False
            for case in fc.cases:
                planned = plan_case(engine, planner, config, fc, case, args)
                request = planned.request
                if not warmed and request.context_budget:
                    # The server runs the project context into the cache in idle time and
                    # uses it only once it is there.
                    engine.warm(dataclasses.replace(request, left="", right="", left_start=0))
                    warmed = True
                out = ask(engine, request, case.kind, args.pause)
                truth = case.truth
                shown = first_line(out["middle"]) if case.kind == "empty_line" else out["middle"]
                rows.append({
                    "id": case.id, "package": folder.name, "kind": case.kind,
                    "variant": config.name, "truth": truth, "shown": shown, **out,
                    "exact": shown == truth, "edit_similarity": edit_similarity(shown, truth),
                    "accepted": accepted_whole(shown, truth),
                    "unparsable": out["middle"] is not None and out["parses"] is False,
                    "success": out["middle"] is not None and out["parses"] is not False,
                    "context_by_source": dict(planned.project.tokens), **flags[case.id],
                })
                if args.progress:
                    r = rows[-1]
                    print(f"{config.name:13} {case.id:50} {r['seconds']:6.1f}s "
                          f"{'=' if r['exact'] else ' '} {shown!r:.60} | {truth!r:.40}",
                          file=sys.stderr, flush=True)


def report_only(args) -> int:
    """The tables of an earlier run's ``--json`` (e.g. after adding a column)."""
    if args.json is None:
        raise SystemExit("--report-only needs --json FILE")
    data = json.loads(args.json.read_text(encoding="utf-8"))
    rows = data["rows"]
    names = list(dict.fromkeys(r["variant"] for r in rows))
    configs = [Config(**c) for c in data.get("configs", [])]
    if rows and "outside" not in rows[0]:
        # An earlier run without the flags: rebuild its cases (the same --packages, --cases,
        # --seed, ... must be given) and flag them; planning only, no decoding.
        engine = Engine.load(args.model, engine=args.engine)
        flags = {}
        for name in [x for x in args.packages.split(",") if x]:
            for fc in project_cases(package_folder(name), args):
                for c in fc.cases:
                    flags[c.id] = context_flags(engine, fc, c, args)
        if not {r["id"] for r in rows} <= set(flags):
            raise SystemExit("the given --packages/--cases/--seed do not rebuild this run's "
                             "cases")
        rows = [{**r, **flags[r["id"]]} for r in rows]
    body = (describe(configs) + "\n\n" if configs else "") + \
        table(summarize(rows, names), by_package(rows, names))
    subset = subset_table(rows, names)
    if subset:
        body += "\n\n" + subset
    if args.pairs:
        body += "\n\nPaired on the same cursors:\n\n" + pairs_table(rows, args.pairs)
    # The run's own provenance, as it was recorded (not re-read from this machine).
    record = RunRecord.__new__(RunRecord)
    record.__dict__.update(data["run"])
    paragraph = record.markdown()
    print(body)
    print()
    print(paragraph)
    if args.figures:
        write_section(args.figures, args.section, body + "\n\n" + paragraph)
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--packages", default="email,asyncio,lark")
    p.add_argument("--cases", type=int, default=8, help="cases per kind per package")
    p.add_argument("--per-file", type=int, default=1, help="cases per kind per file")
    p.add_argument("--cursors", choices=("any", "package-imports"), default="any",
                   help="any function-body statement line, or only lines that use a name "
                        "the file imports from its own package")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--open", type=int, default=3, help="other open documents per file")
    p.add_argument("--model", default="bundled:qwen2.5-coder-1.5b")
    p.add_argument("--engine", default="llama.cpp")
    p.add_argument("--context-tokens", type=int, default=None,
                   help="the contextTokens setting (default: auto)")
    p.add_argument("--budget", type=int, default=None,
                   help="the contextBudgetTokens setting (default: auto)")
    p.add_argument("--right-tokens", type=int, default=None,
                   help="the right context's share (default: the server's RIGHT_TOKENS)")
    p.add_argument("--left-first", type=int, default=LEFT_FIRST_TOKENS,
                   help="left tokens at a new prompt start (default: the server's)")
    p.add_argument("--widened", action="store_true",
                   help="the anchor the server widens to while the cursor rests")
    p.add_argument("--splits", default="",
                   help="more configurations, measured beside the variants: "
                        "'name:key=value,...;...' with keys budget, context, right, left, "
                        "widened, variant (default all), e.g. 'b1024:budget=1024;r64:right=64'")
    p.add_argument("--pause", type=float, default=1.0, help="cursor rest before asking (s)")
    p.add_argument("--time-budgets", action="store_true",
                   help="keep the server's time budgets (quality then depends on load)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--baseline", default="",
                   help="FILE.json:off,all adds an earlier run's rows of those variants for "
                        "the same cases to the tables (splits measured without re-running "
                        "the baselines)")
    p.add_argument("--pairs", default="",
                   help="'a:b,...': exact won / lost and edit-similarity difference of "
                        "configuration a against b on the same cursors")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--figures", type=Path, default=None,
                   help="write the table into this page's section (see --section)")
    p.add_argument("--section", default="usefulness")
    p.add_argument("--progress", action="store_true")
    p.add_argument("--report-only", action="store_true",
                   help="render the tables from the rows in --json (no model runs)")
    return p


def _with_baseline(spec: str, rows: list[dict], names: list[str]
                   ) -> tuple[list[dict], list[str], str]:
    """Earlier rows of the same cases (greedy decoding: the same prompt gives the same middle),
    shown beside this run's configurations; ``spec`` is ``FILE.json:name,...``."""
    path, _, wanted = spec.partition(":")
    earlier = json.loads(Path(path).read_text(encoding="utf-8"))
    flags = {r["id"]: {k: r[k] for k in ("outside", "in_context") if k in r} for r in rows}
    picked = [{**r, **flags[r["id"]]} for r in earlier["rows"]
              if r["variant"] in wanted.split(",") and r["id"] in flags]
    note = (f"\n\nRows {wanted} are the same cases from an earlier run "
            f"(`{earlier['run']['command']}`, commit `{earlier['run']['commit']}`): "
            "decoding is greedy, so the same prompts give the same middles as long as "
            "the prompt-building code is the same at both commits; their latency is "
            "that run's.")
    return picked + rows, [n for n in wanted.split(",") if n] + names, note


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.report_only:
        return report_only(args)
    variants = [v for v in args.variants.split(",") if v]
    base = Config("", "off", args.budget, args.context_tokens, args.right_tokens,
                  args.left_first, args.widened)
    args.configs = [dataclasses.replace(base, name=v, variant=v) for v in variants] + \
        parse_splits(args.splits, base)
    unknown = {c.variant for c in args.configs} - set(VARIANTS)
    if unknown:
        raise SystemExit(f"unknown variants {sorted(unknown)}; known: {', '.join(VARIANTS)}")
    names = [c.name for c in args.configs]
    if len(set(names)) != len(names) or not (names or args.baseline):
        raise SystemExit(f"configuration names must be distinct and given: {names}")
    record = RunRecord(command_line())
    engine = Engine.load(args.model, engine=args.engine)
    rows: list[dict] = []
    for name in [x for x in args.packages.split(",") if x]:
        run_project(engine, package_folder(name), args, rows)
    record.finish()
    note = ""
    if args.baseline:
        rows, names, note = _with_baseline(args.baseline, rows, names)
    summary = summarize(rows, names)
    packages = by_package(rows, names)
    body = describe(args.configs) + "\n\n" + table(summary, packages) + note
    subset = subset_table(rows, names)
    if subset:
        body += "\n\n" + subset
    if args.pairs:
        body += "\n\nPaired on the same cursors:\n\n" + pairs_table(rows, args.pairs)
    print(body)
    print()
    print(record.markdown())
    if args.figures:
        write_section(args.figures, args.section, body + "\n\n" + record.markdown())
    if args.json:
        args.json.write_text(json.dumps({"run": record.as_dict(), "summary": summary,
                                         "configs": [dataclasses.asdict(c)
                                                     for c in args.configs],
                                         "packages": packages, "rows": rows}, indent=1),
                             encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
