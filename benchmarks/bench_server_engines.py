"""Seam on a model server it does not own, measured against its in-process engine: the
``llama-server`` and ``openai`` engines (``fim.servers``, exact by verify-and-repair) and the
in-process llama.cpp engine, on the same bundled GGUF, the same held-out cursors and the same
machine, in one run.

The server is llama.cpp's own ``llama-server`` built from the llama.cpp sources Seam's engine
runs (``benchmarks/llama_server.py``) and started as llama.vim's README starts it (batch and
micro-batch 1024, ``--cache-reuse 256``, one slot), with the same thread count and context as
the in-process engine.  Cases are Stack-Boundary and Stack-RandSpan cursors from the standard
library (``fim.eval.datasets``, alternating), each run on every engine in turn so all see the
same load:

* **new place**: the cursor's constrained request on a fresh prompt;
* **typing through**: the same cursor after the user typed the reference middle's first
  character (the prompt shares all but its end with the one before).

Per engine: answered (a middle returned), exact, edit similarity, unparsable (a middle with
which the file does not parse: must be 0), latency p50/p90 of both kinds, round trips and
repairs per suggestion; paired with the in-process engine by cursor; and how often a
position's top-N held no viable token (the middle then ended at its best complete point, or
there was none) at N = 5, 10 and 20.  The figures go to ``--figures`` (docs/server_engines.md)::

    .venv/bin/python -m benchmarks.bench_server_engines --cases 30 --figures docs/server_engines.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.llama_server import LlamaServer, ensure_built  # noqa: E402
from benchmarks.report import RunRecord, command_line, model_packages, publish  # noqa: E402
from benchmarks.stats import median_p90  # noqa: E402
from fim.api import Engine  # noqa: E402
from fim.engines import bundled  # noqa: E402
from fim.eval import datasets, evaluation  # noqa: E402
from fim.options import StopReason  # noqa: E402
from fim.parse_check import parses  # noqa: E402
from fim.request import CompletionRequest  # noqa: E402
from fim.servers.engine import ServerEngine, ServerOptions, connect  # noqa: E402

IN_PROCESS = "llama.cpp in process"
SECTION = "server-engines"


def cases(n: int) -> list[dict]:
    """``n`` cursors, boundary and randspan alternating (one per file)."""
    half = (n + 1) // 2
    groups = [datasets.build_cases(d, half, None, seed=0, per_file=1)
              for d in ("boundary", "randspan")]
    out = []
    for k in range(half):
        out += [g[k] for g in groups if k < len(g)]
    return out[:n]


def no_viable(res, max_tokens: int) -> bool:
    """The decode ended because no candidate was viable (not the budget, a stop or time)."""
    return res.stop is StopReason.NO_CANDIDATE or (
        res.stop is StopReason.BEST_COMPLETE and res.tokens < max_tokens)


def run_one(engine, case: dict, left: str, args) -> dict:
    req = CompletionRequest(left, case["right"], max_tokens=args.max_tokens,
                            context_tokens=args.context)
    t0 = time.perf_counter()
    try:
        res = engine.complete(req)
    except ConnectionError as err:
        return {"error": str(err), "seconds": time.perf_counter() - t0}
    seconds = time.perf_counter() - t0
    stats = engine.last_stats if isinstance(engine, ServerEngine) else None
    middle = res.middle
    return {"seconds": seconds, "middle": middle, "stop": str(res.stop),
            "tokens": res.tokens,
            "unparsable": middle is not None and not parses(left + middle + case["right"]),
            "no_viable": no_viable(res, args.max_tokens),
            "round_trips": stats.round_trips if stats else 0,
            "repairs": stats.repairs if stats else 0}


def table(records: dict[str, list[dict]], cases_: list[dict]) -> str:
    base = records[IN_PROCESS]
    base_p50 = statistics.median(r["new"]["seconds"] for r in base)
    lines = ["| engine | answered | exact | edit sim. | unparsable | p50 / p90 new place (s) "
             "| p50 / p90 typing (s) | p50 ratio | round trips / sugg. | repairs / sugg. |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, recs in records.items():
        new = [r["new"] for r in recs]
        typing = [r["typing"] for r in recs if r.get("typing")]
        answered = sum(r.get("middle") is not None for r in new)
        exact = sum(r.get("middle") == c["middle"] for r, c in zip(new, cases_, strict=True))
        sim = statistics.mean(evaluation.edit_similarity(r.get("middle"), c["middle"])
                              for r, c in zip(new, cases_, strict=True))
        bad = sum(bool(r.get("unparsable")) for r in new + typing)
        p50 = statistics.median(r["seconds"] for r in new)
        both = new + typing
        trips = statistics.mean(r.get("round_trips", 0) for r in both)
        repairs = statistics.mean(r.get("repairs", 0) for r in both)
        lines.append(
            f"| {name} | {answered}/{len(new)} | {exact} | {sim:.3f} | {bad} | "
            f"{median_p90([r['seconds'] for r in new], '.2f')} | "
            + (f"{median_p90([r['seconds'] for r in typing], '.2f')} | " if typing else "- | ")
            +
            f"{p50 / base_p50:.2f} | "
            + (f"{trips:.2f} | {repairs:.2f} |" if name != IN_PROCESS else "- | - |"))
    return "\n".join(lines)


def paired(records: dict[str, list[dict]], cases_: list[dict]) -> str:
    base = records[IN_PROCESS]
    lines = ["| engine vs. in process | same middle | answered: only server / only in process "
             "| exact: only server / only in process |", "|---|---|---|---|"]
    for name, recs in records.items():
        if name == IN_PROCESS:
            continue
        same = ans_s = ans_b = ex_s = ex_b = 0
        for r, b, c in zip(recs, base, cases_, strict=True):
            m, mb = r["new"].get("middle"), b["new"].get("middle")
            same += m == mb
            ans_s += m is not None and mb is None
            ans_b += mb is not None and m is None
            ex_s += m == c["middle"] and mb != c["middle"]
            ex_b += mb == c["middle"] and m != c["middle"]
        lines.append(f"| {name} | {same}/{len(recs)} | {ans_s} / {ans_b} | {ex_s} / {ex_b} |")
    return "\n".join(lines)


def viability(records: dict[str, list[dict]]) -> str:
    lines = ["| top-N | requests whose top-N held no viable token at some position "
             "| of them, no suggestion |", "|---|---|---|"]
    for name, recs in records.items():
        if not name.startswith("llama-server"):
            continue
        both = [r["new"] for r in recs]
        hit = [r for r in both if r.get("no_viable")]
        lines.append(f"| {name} | {len(hit)}/{len(both)} | "
                     f"{sum(r.get('middle') is None for r in hit)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=30)
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--context", type=int, default=2048, help="window of every engine")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--top-n", default="10,5,20",
                   help="llama-server top-N values; the first also runs the openai route")
    p.add_argument("--out", type=Path, default=Path("/tmp/seam-bench-server-engines.jsonl"))
    p.add_argument("--figures", type=Path, default=None)
    p.add_argument("--section", default=SECTION,
                   help=f"the figures' section in --figures (default: {SECTION})")
    p.add_argument("--render", action="store_true",
                   help="only write the tables from the records of an earlier run in --out "
                        "(the cursors every engine finished; its run record is kept)")
    args = p.parse_args(argv)
    if args.render:
        lines = args.out.read_text(encoding="utf-8").splitlines()
        first = json.loads(lines[0])
        # The run's record as it finished (its last line), else as it started: the load
        # after it is then "unknown", never the load when this renders.
        last = json.loads(lines[-1])
        earlier = RunRecord(**(last["finished"] if "finished" in last else first["record"]))
        render(args.out, cases(first["args"]["cases"]), earlier, args.figures,
               "Measured (rendered from the run's records)", args.section)
        return 0
    record = RunRecord(command_line(), packages=model_packages())
    cases_ = cases(args.cases)
    spec = bundled.lookup_spec("bundled:qwen2.5-coder-1.5b")
    model = bundled.gguf_file(spec)
    local = Engine.load("bundled:qwen2.5-coder-1.5b", engine="llama.cpp", window=args.context)
    if local.backend.threads is not None:
        local.backend.threads.pin(args.threads)
    tops = [int(x) for x in args.top_n.split(",")]
    with LlamaServer(ensure_built(), model, threads=args.threads, context=args.context,
                     batch=1024, cache_reuse=256) as server:
        server.wait_ready()
        # The other top-N run right after the first, on the prompt it left in the server's
        # one slot; the openai route last (its text prompt is another token sequence).
        engines: dict[str, object] = {IN_PROCESS: local}
        for n in tops:
            engines[f"llama-server, top-{n}"] = connect(
                "llama-server", ServerOptions(server.url, top_n=n, timeout=60))
        engines[f"openai route on llama-server, top-{tops[0]}"] = connect(
            "openai", ServerOptions(server.url, top_n=tops[0], timeout=60))
        typing = {IN_PROCESS, f"llama-server, top-{tops[0]}",
                  f"openai route on llama-server, top-{tops[0]}"}
        with open(args.out, "w", encoding="utf-8") as log:
            log.write(json.dumps({"record": record.as_dict(), "args": vars(args)},
                                 default=str) + "\n")
            for k, case in enumerate(cases_):
                line = []
                for name, engine in engines.items():
                    rec = {"id": case["id"], "engine": name,
                           "new": run_one(engine, case, case["left"], args)}
                    if case["middle"] and name in typing:
                        rec["typing"] = run_one(engine, case,
                                                case["left"] + case["middle"][0], args)
                    log.write(json.dumps(rec) + "\n")
                    log.flush()
                    line.append(f"{name} {rec['new']['seconds']:.1f} s")
                print(f"case {k + 1}/{len(cases_)}: " + ", ".join(line), file=sys.stderr,
                      flush=True)
    record.finish()
    with open(args.out, "a", encoding="utf-8") as log:
        log.write(json.dumps({"finished": record.as_dict()}, default=str) + "\n")
    render(args.out, cases_, record, args.figures, "Measured", args.section)
    return 0


def render(out: Path, cases_: list[dict], record: RunRecord, figures: Path | None,
           verb: str, section: str = SECTION) -> None:
    """The tables from the records in ``out`` (the cursors every engine finished)."""
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines() if x]
    args = argparse.Namespace(**lines[0]["args"])
    by_engine: dict[str, dict[str, dict]] = {}
    for rec in lines[1:]:
        if "finished" in rec:
            continue
        by_engine.setdefault(rec["engine"], {})[rec["id"]] = rec
    done = [c for c in cases_ if all(c["id"] in recs for recs in by_engine.values())]
    records = {name: [recs[c["id"]] for c in done] for name, recs in by_engine.items()}
    cases_ = done
    body = (f"{len(cases_)} held-out cursors (Stack-Boundary and Stack-RandSpan from the "
            f"standard library, alternating), constrained, greedy, at most {args.max_tokens} "
            f"tokens, a {args.context}-token window and {args.threads} threads for every "
            "engine; the bundled Qwen2.5-Coder-1.5B GGUF in process and in llama-server "
            "(built from the same llama.cpp sources, started as llama.vim's README starts "
            "it). Unparsable counts both kinds of request. The other top-N run right after "
            "the first top-N on the prompt it left in the server's one slot, so their latency "
            "is not a new place's (their rows are for quality and the top-N counts).\n\n"
            + table(records, cases_) + "\n\nPaired by cursor (new place):\n\n"
            + paired(records, cases_) + "\n\nNo viable token in the top-N (new place; the "
            "middle then ends at its best complete point, or there is none):\n\n"
            + viability(records) + "\n\nTyping through: the same cursor after the reference "
            "middle's first character was typed (in process, llama-server at the first top-N "
            "and the openai route). Round trips and repairs count both kinds of request.\n")
    publish(body, record, figures, section, verb)


if __name__ == "__main__":
    raise SystemExit(main())
