"""Suggestions in files of languages Seam has no grammar for (issue 33): Seam's unchecked path
beside the llama.vim-style anchor, on the same cursors, per language.

Files come from projects first committed in 2025, after the bundled model was trained, read
at a fixed commit from local clones (``--repo NAME=PATH``, each a git directory; the commit
goes into the record).  Per language, ``--per-language`` cursors are drawn with a seeded
generator from its files (by extension, ``fim.languages``): a line with text is picked, and the
cursor goes either after its indentation (the whole line is the truth: the "empty line" kind,
the line's text taken away) or inside it after a word (the rest of the line is the truth:
"mid-line"); the file's text after the line stays, so the right context is what the author
wrote.  Both systems get the same text with the truth taken out:

* ``seam``: the request the server plans there (``lsp_server.request_plan``, default settings,
  the file's language from its extension: ``unchecked``, the right-context stop by text; the
  workspace is the project's checkout, so the open-files, recent-edits and similar-code sources
  see sibling files of the language), on the bundled GGUF with llama.cpp, ending at the
  first line end (``line_stop``: the server's early answer, what is shown first) and with the
  server's time budget lifted;
* ``llama_vim``: llama-server on the same GGUF and thread count, driven as llama.vim drives it
  (``benchmarks/llama_vim.py``; its time limits lifted, triggered by hand, so that it asks
  everywhere, and asked to stop at the line's end, ``stop: ["\n"]``); the first line of what
  it would show.

Only first lines are compared, and both systems stop there, so that their latencies are for
the same thing; without time limits neither system's answer depends on the shared machine's
load (its latency does: the load is in the record).  Latency is from the request to the
answer, each system's prompt cache warm from the file's earlier cursors (each keeps its own).

    nice .venv/bin/python benchmarks/bench_languages.py --per-language 15 \\
        --repo crush=/path/to/crush.git --repo gemini-cli=/path/to/gemini-cli.git \\
        --json docs/eval/languages.json --figures docs/languages.md
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import re
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.fresh_tables import score  # noqa: E402
from benchmarks.llama_server import LlamaServer, ensure_built  # noqa: E402
from benchmarks.llama_vim import LlamaVimClient, LlamaVimSettings, post_infill  # noqa: E402
from benchmarks.report import RunRecord, command_line, model_packages, write_section  # noqa: E402
from fim.api import Engine  # noqa: E402
from fim.engines import bundled  # noqa: E402
from fim.engines.llama_engine import default_threads  # noqa: E402
from fim.languages import by_id, by_path  # noqa: E402
from lsp_server.project.recent_edits import EditRing  # noqa: E402
from lsp_server.project.sources import ContextCollector, OpenDocument  # noqa: E402
from lsp_server.project.workspace import Workspace  # noqa: E402
from lsp_server.request_plan import RequestPlanner  # noqa: E402
from lsp_server.settings import Settings  # noqa: E402

LANGUAGES = ("javascript", "typescript", "go", "yaml", "shell")
#: Files larger than this are skipped (generated bundles say little).
MAX_FILE_CHARS = 60_000
#: At most this many files per language are drawn from (then cursors among them).
FILES_PER_LANGUAGE = 8
WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Cursor:
    """A hole: the file, its text without the truth, the cursor's offset and the truth."""

    repo: str
    path: str
    language: str
    kind: str  # "line" (the whole line's text) or "mid_line" (the rest of the line)
    text: str
    offset: int
    truth: str


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(repo), *args], capture_output=True,
                          text=True, check=True).stdout


def repo_files(repo: Path, language: str) -> list[str]:
    """The files of ``language`` at the repository's HEAD (tests and generated files too)."""
    names = _git(repo, "ls-tree", "-r", "--name-only", "HEAD").splitlines()
    return sorted(n for n in names if by_path(n).id == language
                  and "node_modules/" not in n and not n.endswith((".min.js", ".d.ts")))


def cursor_in(repo_name: str, path: str, text: str, language: str, rng: random.Random
              ) -> Cursor | None:
    """One hole in ``text``: a line with text, emptied after its indentation or cut after a
    word of it; ``None`` when the file has no line fit for either."""
    lines = text.split("\n")
    candidates = [i for i, line in enumerate(lines) if 4 <= len(line.strip()) <= 100]
    if not candidates:
        return None
    i = rng.choice(candidates)
    line = lines[i]
    start = sum(len(x) + 1 for x in lines[:i])
    indent = len(line) - len(line.lstrip())
    words = [m.end() for m in WORD.finditer(line, indent) if m.end() < len(line.rstrip())]
    if rng.random() < 0.5 or not words:
        kind, cut = "line", indent
    else:
        kind, cut = "mid_line", rng.choice(words)
    truth = line[cut:].rstrip()
    if not truth.strip():
        return None
    offset = start + cut
    hole = text[:offset] + text[start + len(line.rstrip()):]
    return Cursor(repo_name, path, language, kind, hole, offset, truth)


def draw_cursors(repos: dict[str, Path], language: str, n: int, seed: int
                 ) -> list[Cursor]:
    """``n`` cursors of ``language`` from the repositories' files, a few per file."""
    rng = random.Random(f"{seed}:{language}")
    files = [(name, path) for name, repo in repos.items()
             for path in repo_files(repo, language)]
    rng.shuffle(files)
    texts: list[tuple[str, str, str]] = []
    for name, path in files:
        text = _show(repos[name], path)
        if text is not None and 200 <= len(text) <= MAX_FILE_CHARS:
            texts.append((name, path, text))
        if len(texts) >= FILES_PER_LANGUAGE:
            break
    out: list[Cursor] = []
    for k in range(n * 4):
        if len(out) >= n or not texts:
            break
        name, path, text = texts[k % len(texts)]
        cur = cursor_in(name, path, text, language, rng)
        if cur is not None and all((c.path, c.offset) != (cur.path, cur.offset) for c in out):
            out.append(cur)
    # Grouped by file, in file order, as a user works through a file.
    return sorted(out, key=lambda c: (c.repo, c.path, c.offset))


def _show(repo: Path, path: str) -> str | None:
    """The file's text at HEAD; ``None`` when its blob is absent (a partial clone) or it is
    not UTF-8 text."""
    done = subprocess.run(["git", "--git-dir", str(repo), "show", f"HEAD:{path}"],
                          capture_output=True)
    if done.returncode != 0:
        return None
    try:
        return done.stdout.decode("utf-8")
    except UnicodeDecodeError:
        return None


def checkout(repos: dict[str, Path], into: Path, languages: list[str]) -> dict[str, Path]:
    """Each repository's files of ``languages`` at HEAD, written out (the workspace the project
    context reads: the sibling files of a language are what its sources look at)."""
    out = {}
    for name, repo in repos.items():
        folder = into / name
        for language in languages:
            for path in repo_files(repo, language):
                target = folder / path
                if target.exists():
                    continue
                text = _show(repo, path)
                if text is not None:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text(text, encoding="utf-8")
        out[name] = folder
    return out


def first_line(text: str | None) -> str | None:
    return None if text is None else text.split("\n", 1)[0].rstrip()


def ask_seam(engine: Engine, planner: RequestPlanner, folder: Path, cur: Cursor,
             settings: Settings) -> dict:
    uri = (folder / cur.path).as_uri()
    planned = planner.plan(engine, settings, uri, cur.text, cur.offset,
                           [OpenDocument(uri, cur.text, cur.language)],
                           language=cur.language)
    # The first line is what is compared: the server's early answer (line_stop), with its
    # time budget lifted so that quality does not depend on the shared machine's load.
    request = dataclasses.replace(planned.request, line_stop=True, time_budget_ms=None)
    t0 = time.perf_counter()
    res = engine.complete(request)
    return {"shown": first_line(res.middle), "seconds": time.perf_counter() - t0,
            "stop": str(res.stop), "mode": str(res.mode), "tokens": res.tokens,
            "prompt_tokens": res.prompt_tokens}


def ask_llama_vim(client: LlamaVimClient, cur: Cursor) -> dict:
    a = client.complete(cur.path, cur.text, cur.offset)
    client.rest()
    return {"shown": first_line(a.shown), "seconds": a.seconds,
            "stop": a.reason or "shown", "mode": "llama.vim", "tokens": a.predicted_tokens,
            "prompt_tokens": a.prompt_tokens}


def summary(rows: list[dict]) -> str:
    """Per language and system: cursors, exact, edit similarity, p50 and p90 latency."""
    out = ["| language | system | cursors | exact | edit similarity | no suggestion | "
           "p50 latency | p90 latency |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for language in dict.fromkeys(r["language"] for r in rows):
        for system in ("seam", "llama_vim"):
            rs = [r for r in rows if r["language"] == language and r["system"] == system]
            if not rs:
                continue
            secs = sorted(r["seconds"] for r in rs)
            p90 = secs[min(len(secs) - 1, int(0.9 * len(secs)))]
            out.append(
                f"| {language} | {system} | {len(rs)} | "
                f"{statistics.fmean(r['exact'] for r in rs):.0%} | "
                f"{statistics.fmean(r['edit_similarity'] for r in rs):.2f} | "
                f"{statistics.fmean(r['none'] for r in rs):.0%} | "
                f"{statistics.median(secs) * 1000:.0f} ms | {p90 * 1000:.0f} ms |")
    return "\n".join(out)


def render(rows: list[dict], run: dict, repos: dict[str, str], finished: bool) -> str:
    sources = ", ".join(f"{name} at `{commit}`" for name, commit in repos.items())
    record = RunRecord.__new__(RunRecord)
    record.__dict__.update(run)
    head = ("" if finished else "**Partial run** (the rows measured so far; the run was "
            "cut short or is still going).\n\n")
    return (head + f"Files from projects first committed in 2025 ({sources}); the first line "
            "of each system's suggestion against the author's text, on the same cursors "
            "(half whole lines after their indentation, half the rest of a line after a "
            "word). Seam's suggestions here are all `unchecked` (no grammar for these "
            "languages): the same engine, prompt, project context and right-context stop as "
            "for Python, no parse check. The anchor is llama-server driven as llama.vim "
            "drives it (time limits lifted, triggered by hand). Both stop at the first line's "
            "end (Seam's early answer; llama.vim asked with stop at a line break) with no time "
            "limit, so the answers do not depend on the load but the latencies do. Latency is "
            "each system's own, with its own prompt cache warm from the file's earlier "
            "cursors.\n\n"
            + summary(rows) + "\n\n" + record.markdown())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repo", action="append", default=[], metavar="NAME=GITDIR",
                   help="a project's git directory (its HEAD is read)")
    p.add_argument("--languages", default=",".join(LANGUAGES))
    p.add_argument("--per-language", type=int, default=15)
    p.add_argument("--model", default="bundled:qwen2.5-coder-1.5b")
    p.add_argument("--systems", default="seam,llama_vim")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workdir", type=Path, default=Path("/tmp/seam-bench-languages"))
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--figures", type=Path, default=None)
    p.add_argument("--section", default="languages")
    p.add_argument("--progress", action="store_true")
    args = p.parse_args(argv)
    repos = {k: Path(v) for k, v in (r.split("=", 1) for r in args.repo)}
    if not repos:
        raise SystemExit("name at least one --repo NAME=GITDIR")
    systems = [s for s in args.systems.split(",") if s]
    commits = {name: _git(repo, "rev-parse", "--short=12", "HEAD").strip()
               for name, repo in repos.items()}
    wanted = [x for x in args.languages.split(",") if x]
    folders = checkout(repos, args.workdir, wanted)
    record = RunRecord(command_line(), packages=model_packages())
    engine = Engine.load(args.model, engine="llama.cpp")
    server = None
    rows: list[dict] = []
    settings = Settings()

    def save(finished: bool) -> None:
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps({"run": record.as_dict(), "repos": commits,
                                             "finished": finished, "rows": rows}, indent=1))
        if args.figures and rows:
            write_section(args.figures, args.section,
                          render(rows, record.as_dict(), commits, finished))

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        if "llama_vim" in systems:
            server = start_anchor(args.model)
            record.llama_vim = {**VIM_SETTINGS.describe(), "server": server.flags}
        for language in wanted:
            assert not by_id(language).checked, f"{language} has a grammar: not this benchmark"
            cursors = draw_cursors(repos, language, args.per_language, args.seed)
            client = (LlamaVimClient(server.url, VIM_SETTINGS, seed=args.seed,
                                     post=_patient_post)
                      if server is not None else None)
            planner = RequestPlanner(ContextCollector(Workspace(), EditRing()))
            last_file = None
            for cur in cursors:
                folder = folders[cur.repo]
                if (cur.repo, cur.path) != last_file:
                    engine.step_model.reset()  # a new file: both start from its first cursor
                    planner = RequestPlanner(ContextCollector(_workspace(folder), EditRing()))
                    if client is not None:
                        client.visit(cur.path, cur.text)
                        client.rest()
                    last_file = (cur.repo, cur.path)
                for system in systems:
                    out = (ask_seam(engine, planner, folder, cur, settings) if system == "seam"
                           else ask_llama_vim(client, cur))
                    rows.append({"language": language, "system": system, "repo": cur.repo,
                                 "path": cur.path, "kind": cur.kind, "offset": cur.offset,
                                 "truth": cur.truth, **out, **score(out["shown"], cur.truth)})
                    save(finished=False)  # a run cut short keeps every row so far
                    if args.progress:
                        r = rows[-1]
                        print(f"{language:10} {system:9} {r['seconds']:6.2f}s "
                              f"{'=' if r['exact'] else ' '} {r['shown']!r:.40} | "
                              f"{r['truth']!r:.40}", file=sys.stderr, flush=True)
            save(finished=False)
    finally:
        if server is not None:
            server.close()
    record.finish()
    save(finished=True)
    print(summary(rows))
    return 0


def _patient_post(url: str, body: dict) -> dict:
    """llama.vim's request, waited for as long as a loaded shared machine needs (its answer
    has no time limit here, so the wait is the latency measured)."""
    return post_infill(url, body, timeout=3600.0)


#: llama.vim as the anchor runs: no time limits, triggered by hand, stopping at a line end.
VIM_SETTINGS = LlamaVimSettings(time_limits=False, auto=False, stop_strings=("\n",))


def start_anchor(model: str) -> LlamaServer:
    """llama-server on the model's GGUF with as many threads as Seam's engine, ready."""
    gguf = bundled.gguf_file(bundled.lookup_spec(model))
    server = LlamaServer(ensure_built(), gguf, threads=default_threads())
    try:
        server.wait_ready()
    except BaseException:
        server.close()
        raise
    return server


def _workspace(folder: Path) -> Workspace:
    workspace = Workspace()
    workspace.add(folder.as_uri(), folder.name)
    return workspace


if __name__ == "__main__":
    sys.exit(main())
