"""Cost against the size of a file and the size of an edit, and memory against servers that
misbehave, through ``seam serve`` over stdio (issue 28).

Three measurements, each a table in ``docs/file_size.md``:

* **first suggestion** in files of 2,000, 50,000 and 200,000 lines (standard-library modules
  concatenated) and in a file whose cursor line is 5 MB long: the document is opened, the
  cursor's line is cut after an ``=`` near the middle, and one inline request is made; the
  server's ``setup_ms`` for it (``seam/status``'s ``recent``), the request's latency, and the
  longest wait of a ``seam/status`` request sent every 50 ms meanwhile (what another request
  waits behind this document);
* **Replace All**: a ``didChange`` with one ranged change per line of an N-line file, and the
  wait of the ``seam/status`` request sent right after it;
* **misbehaving vLLM servers** (``benchmarks/bad_peers.py``: a body or line that never ends,
  a byte every 0.3 s, a stream past ``max_tokens``, a peer that is not HTTP): ``seam serve``
  with ``engine: "vllm"`` on each for ``--peer-s`` seconds, asked for suggestions meanwhile;
  its peak RSS and the status it shows.

With the tiny random model (the default) the figures are the server's own costs, not a
model's.

    .venv/bin/python -m benchmarks.bench_file_size [--figures docs/file_size.md]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bad_peers import BadPeer, Misbehaviour  # noqa: E402
from benchmarks.bench_large_file import big_file  # noqa: E402
from benchmarks.lsp_session import LspSession, position_of  # noqa: E402
from benchmarks.report import RunRecord, command_line, model_packages, publish  # noqa: E402

LINE_COUNTS = (2_000, 50_000, 200_000)
REPLACE_COUNTS = (5_000, 20_000, 40_000)


def sized(lines: list[str], count: int) -> str:
    return "\n".join(lines[:count]) + "\n"


def long_line_file() -> str:
    """A small module whose last assignment holds a 5 MB list on one line."""
    return ("import os\n\n\ndef f(x):\n    return x\n\n\n"
            "DATA = [" + "1, " * 1_700_000 + "]\nvalue = ")


async def _poll_status(session: LspSession, stop: asyncio.Event) -> float:
    """The longest wait of a ``seam/status`` sent every 50 ms until ``stop``."""
    worst = 0.0
    while not stop.is_set():
        t0 = time.perf_counter()
        await session.request("seam/status", {})
        worst = max(worst, time.perf_counter() - t0)
        await asyncio.sleep(0.05)
    return worst


async def first_suggestion(session: LspSession, uri: str, text: str, cursor: int,
                           cut: bool = True) -> dict[str, Any]:
    stop = asyncio.Event()
    poller = asyncio.create_task(_poll_status(session, stop))
    t0 = time.perf_counter()
    session.open(uri, text)
    if cut:
        end = text.find("\n", cursor)
        session.edit(uri, cursor, end if end >= 0 else len(text), "")
    _, took = await session.inline(uri, cursor)
    total = time.perf_counter() - t0
    stop.set()
    worst = await poller
    status = await session.request("seam/status", {})
    mine = [r for r in status.get("recent", []) if r.get("uri") == uri]
    record = mine[-1] if mine else {}
    return {"setup_ms": record.get("setup_ms"), "stop": record.get("stop"),
            "mode": record.get("mode"), "request_s": round(took, 3),
            "open_and_request_s": round(total, 3), "status_wait_max_s": round(worst, 3)}


def cursor_near_middle(text: str) -> int:
    i = text.find(" = ", len(text) // 2)
    return i + 3


async def replace_all(session: LspSession, count: int) -> dict[str, Any]:
    """A ``didChange`` with one ranged change per line of a ``count``-line file, and how long
    the ``seam/status`` sent right after it waits (what any request waits behind the edit)."""
    uri = f"file:///bench/replace_{count}.py"
    text = "".join(f"value_{i} = old_name(x)\n" for i in range(count))
    session.open(uri, text)
    await session.request("seam/status", {})
    changes = []
    for i in reversed(range(count)):
        start = text.index("old_name", text.index(f"value_{i} ="))
        changes.append({"range": {"start": position_of(text, start),
                                  "end": position_of(text, start + 8)},
                        "text": "new_name"})
    session.versions[uri] += 1
    t0 = time.perf_counter()
    session.notify("textDocument/didChange", {
        "textDocument": {"uri": uri, "version": session.versions[uri]},
        "contentChanges": changes})
    await session.request("seam/status", {})
    waited = time.perf_counter() - t0
    session.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    return {"changes": count, "status_wait_s": round(waited, 3)}


async def replace_only(model: str) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        session = LspSession({"model": model}, Path(tmp) / "server.log")
        await session.start()
        edits = [await replace_all(session, count) for count in REPLACE_COUNTS]
        await session.close()
    return edits


async def sizes(model: str) -> tuple[list[dict], list[dict]]:
    lines = big_file(12).split("\n")
    rows, edits = [], []
    with tempfile.TemporaryDirectory() as tmp:
        session = LspSession({"model": model}, Path(tmp) / "server.log")
        await session.start()
        for count in LINE_COUNTS:
            text = sized(lines, count)
            row = await first_suggestion(session, f"file:///bench/lines_{count}.py", text,
                                         cursor_near_middle(text))
            rows.append({"file": f"{count:,} lines", "megabytes": round(len(text) / 1e6, 2),
                         **row})
        text = long_line_file()
        row = await first_suggestion(session, "file:///bench/long_line.py", text, len(text),
                                     cut=False)
        rows.append({"file": "one 5 MB line", "megabytes": round(len(text) / 1e6, 2), **row})
        for count in REPLACE_COUNTS:
            edits.append(await replace_all(session, count))
        await session.close()
    return rows, edits


async def peers(seconds: float) -> list[dict]:
    out = []
    for how in Misbehaviour:
        peer = BadPeer(how, limit=1 << 40).start()  # (no end: the client must hang up)
        with tempfile.TemporaryDirectory() as tmp:
            session = LspSession({"engine": "vllm", "vllmServer": peer.url,
                                  "timeBudgetMs": 3000}, Path(tmp) / "server.log")
            try:
                await asyncio.wait_for(session.start(), seconds)
            except (RuntimeError, TimeoutError):
                pass  # the server is in error or still loading: what is measured is memory
            uri = "file:///bench/peer.py"
            session.open(uri, "def add(a, b):\n    return \n")
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                try:
                    await asyncio.wait_for(session.inline(uri, 25), 10)
                except TimeoutError:
                    pass
                await asyncio.sleep(0.5)
            status = await session.request("seam/status", {})
            rss = session.peak_rss_mb()
            await session.close()
        peer.stop()
        out.append({"peer": how.value, "peak_rss_mb": round(rss), "state": status["state"],
                    "message": " ".join(str(status.get("message", "")).split())[:160],
                    "sent_mb": round(peer.sent / 1e6, 1)})
    return out


def _ms(value: float | None) -> str:
    return "-" if value is None else str(round(value))


def tables(rows: list[dict], edits: list[dict], bad: list[dict], model: str) -> str:
    first = ("| file | MB | setup_ms | request (s) | open + request (s) | longest seam/status "
             "wait meanwhile (s) | mode |\n|---|---:|---:|---:|---:|---:|---|\n")
    first += "".join(
        f"| {r['file']} | {r['megabytes']} | {_ms(r['setup_ms'])} | {r['request_s']} "
        f"| {r['open_and_request_s']} | {r['status_wait_max_s']} "
        f"| {r['mode']} |\n" for r in rows)
    base = next((r["setup_ms"] for r in rows if r["file"].startswith("2,000")), None)
    big = next((r["setup_ms"] for r in rows if r["file"].startswith("200,000")), None)
    ratio = (f"\nsetup_ms at 200,000 lines is {big / base:.2f}x that at 2,000 lines "
             f"(model {model}).\n" if base and big else "")
    second = ("| Replace All: changes in one didChange (one per line) | seam/status answered "
              "after (s) |\n|---:|---:|\n")
    second += "".join(f"| {e['changes']:,} | {e['status_wait_s']} |\n" for e in edits)
    third = ("| misbehaving vLLM server | peak RSS of seam serve (MB) | MB it sent | state "
             "| status message |\n|---|---:|---:|---|---|\n")
    third += "".join(f"| {b['peer']} | {b['peak_rss_mb']} | {b['sent_mb']} | {b['state']} "
                     f"| {b['message'].replace('|', '/')} |\n" for b in bad)
    return first + ratio + "\n" + second + "\n" + third


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="random:santacoder")
    p.add_argument("--peer-s", type=float, default=15.0,
                   help="seconds seam serve spends on each misbehaving server (default 15)")
    p.add_argument("--skip-peers", action="store_true")
    p.add_argument("--replace-only", action="store_true",
                   help="only the Replace All table, printed (not written to --figures)")
    p.add_argument("--figures", type=Path, default=None,
                   help="write the tables into this page's file-size section")
    args = p.parse_args(argv)
    if args.replace_only:
        print(json.dumps(asyncio.run(replace_only(args.model)), indent=1))
        return 0
    record = RunRecord(command_line(), packages=model_packages())
    rows, edits = asyncio.run(sizes(args.model))
    bad = [] if args.skip_peers else asyncio.run(peers(args.peer_s))
    record.finish()
    print(json.dumps({"sizes": rows, "replace_all": edits, "peers": bad}, indent=1))
    publish(tables(rows, edits, bad, args.model), record, args.figures, "file-size")
    return 0


if __name__ == "__main__":
    sys.exit(main())
