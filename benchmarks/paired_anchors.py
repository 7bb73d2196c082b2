"""The llama.vim rows of issue 29's paired run, asked once and kept: llama-server driven as
llama.vim drives it, as it ships and greedy at every cursor, on the held-out cursors of
``benchmarks/held_out.py``.

These rows do not depend on Seam's code and cost 17 to 40 s a request on this machine, so
each is stored (``docs/eval/paired-anchors.jsonl``, one JSON object a line) under a key of
corpus, cursor, llama-server build, llama.vim settings, seed and open documents; a later run
of ``benchmarks/paired_run.py`` reuses a stored row whose key matches and its table says so.
A row is written as soon as it is measured, so a run cut short keeps what it asked.

One llama.vim editor session per file and configuration, as in ``fresh_usefulness``: the
other open documents and then the file are visited (their chunks fill the ring), the user
rests, then the cursors are asked in file order, resting after each.

    nice .venv/bin/python benchmarks/paired_anchors.py --corpora fresh,fresh2
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.fresh_corpus import FRESH_CORPORA, project_folder  # noqa: E402
from benchmarks.fresh_tables import score  # noqa: E402
from benchmarks.held_out import EMPTY, MID_PER_PLACE, HeldOut, corpus_held_out, judged  # noqa: E402
from benchmarks.llama_server import VERSION, LlamaServer, ensure_built  # noqa: E402
from benchmarks.llama_vim import LlamaVimClient, LlamaVimSettings, post_infill  # noqa: E402
from benchmarks.usefulness_cases import open_documents  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
STORE = ROOT / "docs" / "eval" / "paired-anchors.jsonl"

#: The two anchors: llama.vim as it ships (automatic trigger, its sampling and time limits)
#: and its window asked greedily at every cursor with no time limit.
ANCHORS = {
    "llama_vim": LlamaVimSettings(),
    "llama_vim_greedy": LlamaVimSettings(time_limits=False, auto=False, greedy=True),
}


def corpus_projects(corpus: str) -> list[tuple[str, Path]]:
    if corpus not in FRESH_CORPORA:
        raise SystemExit(f"unknown corpus {corpus!r}: one of {', '.join(FRESH_CORPORA)}")
    return [(p.name, project_folder(p)) for p in FRESH_CORPORA[corpus]]


def server_version(binary: Path) -> str:
    """The llama-server build: the llama-cpp-python release whose llama.cpp it is, and the
    key of its build flags (the folder it is cached in)."""
    return f"llama-cpp-python {VERSION} llama.cpp, build {binary.parent.name}"


def key(cursor: HeldOut, config: str, server: str, seed: int, n_open: int) -> str:
    return json.dumps({"corpus": cursor.corpus, "id": cursor.id, "config": config,
                       "server": server, "settings": ANCHORS[config].describe(),
                       "seed": seed, "open": n_open}, sort_keys=True)


class AnchorStore:
    """Stored anchor rows by key; ``put`` appends at once."""

    def __init__(self, path: Path = STORE) -> None:
        self.path = path
        self.rows: dict[str, dict] = {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    item = json.loads(line)
                    self.rows[item["key"]] = item["row"]

    def get(self, k: str, truth: str | None = None) -> dict | None:
        """The row under ``k``; with ``truth``, only if it was asked at that very hole (a
        cursor's id names its line and place, and another pick may hold out another span
        of the same line there)."""
        row = self.rows.get(k)
        return None if row is None or truth is not None and row["truth"] != truth else row

    def put(self, k: str, row: dict) -> None:
        self.rows[k] = row
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps({"key": k, "row": row}) + "\n")


def anchor_row(cursor: HeldOut, config: str, answer) -> dict:
    """One stored row: what was shown, how it scores, and what it cost."""
    shown = judged(cursor, answer.shown)
    return {"id": cursor.id, "corpus": cursor.corpus, "project": cursor.project,
            "place": cursor.place.value, "config": config, "truth": cursor.truth,
            "shown": shown, "seconds": answer.seconds, "requested": answer.requested,
            "stop": answer.reason or ("shown" if answer.requested else "not asked"),
            "prompt_tokens": answer.prompt_tokens, "tokens": answer.predicted_tokens,
            "cached_tokens": answer.cached_tokens, "truncated": answer.truncated,
            "unparsable": False, "latency_is_new_place": bool(answer.requested),
            "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "load": round(os.getloadavg()[0], 2), **score(shown, cursor.truth)}


def session(url: str, config: str, path: Path, every, cursors: list[HeldOut], n_open: int,
            seed: int) -> LlamaVimClient:
    """A llama.vim session reaching the file: the open documents, then the file, visited."""
    # A machine shared by several agents can take minutes over one prompt: wait long.
    client = LlamaVimClient(url, ANCHORS[config], seed=seed,
                            post=lambda u, body: post_infill(u, body, timeout=1200.0))
    folder = str(path)[:-len(cursors[0].rel)]
    for doc in open_documents(path, every, n_open, seed):
        other = urllib.parse.unquote(urllib.parse.urlparse(doc.uri).path)
        client.visit(other[len(folder):] if other.startswith(folder) else Path(other).name,
                     doc.text)
    client.visit(cursors[0].rel, cursors[0].source)
    client.rest()
    return client


def interleave(lists: list[list]) -> list:
    out = []
    for i in range(max(map(len, lists), default=0)):
        out.extend(lst[i] for lst in lists if i < len(lst))
    return out


def run(args) -> int:
    store = AnchorStore(args.store)
    binary = ensure_built()
    server_id = server_version(binary)
    from fim.engines import bundled
    from fim.engines.llama_engine import default_threads
    gguf = bundled.gguf_file(bundled.lookup_spec(args.model))
    threads = args.threads or default_threads()
    server = LlamaServer(binary, gguf, threads=threads)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    asked = reused = 0
    try:
        server.wait_ready()
        per_corpus = [corpus_held_out(c, corpus_projects(c), args.mid_per_place, args.empty,
                                      args.seed) for c in args.corpora.split(",")]
        # The corpora's files in turn, so that a run cut short has rows of each.
        for path, every, cursors in interleave(per_corpus):
            for config in args.configs.split(","):
                keys = [key(c, config, server_id, args.seed, args.open) for c in cursors]
                if all(store.get(k, c.truth) for k, c in zip(keys, cursors, strict=True)):
                    reused += len(keys)
                    continue
                client = session(server.url, config, path, every, cursors, args.open,
                                 args.seed)
                for cur, k in zip(cursors, keys, strict=True):
                    try:
                        answer = client.complete(cur.rel, cur.text, cur.start)
                    except OSError as e:  # no row rather than a wrong one; go on
                        print(f"{config} {cur.id}: no answer ({e})", file=sys.stderr)
                        continue
                    client.rest()
                    store.put(k, {**anchor_row(cur, config, answer), "threads": threads})
                    asked += 1
                    r = store.get(k)
                    print(f"{config:17} {cur.id[:58]:58} {r['seconds']:5.1f}s "
                          f"{'=' if r['exact'] else ' '} {r['shown']!r:.40} | "
                          f"{r['truth']!r:.30}", file=sys.stderr, flush=True)
    finally:
        server.close()
    print(f"asked {asked} rows, {reused} already stored", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpora", default="fresh,fresh2")
    p.add_argument("--mid-per-place", type=int, default=MID_PER_PLACE)
    p.add_argument("--empty", type=int, default=EMPTY)
    p.add_argument("--configs", default=",".join(ANCHORS))
    p.add_argument("--open", type=int, default=3, help="other open documents per file")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model", default="bundled:qwen2.5-coder-1.5b")
    p.add_argument("--store", type=Path, default=STORE)
    p.add_argument("--threads", type=int, default=0,
                   help="llama-server's threads (default: as many as Seam's engine; 1 on a "
                        "machine so oversubscribed that two threads wait on each other)")
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
