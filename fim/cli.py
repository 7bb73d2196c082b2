"""The ``seam`` command line: ``complete`` (one position or a JSONL batch) and ``eval``.

``seam complete FILE:LINE:COL`` prints the middle for the cursor at 1-based LINE and COL
(COL counts characters; ``len(line) + 1`` is the end of the line).  ``seam complete --jsonl IN
--out OUT`` reads ``{"id", "prefix", "suffix"}`` lines and writes one result line each.
``seam eval`` rebuilds Stack-Boundary and Stack-RandSpan from a folder of Python files and runs
the paper's experiment (see ``fim.evaluation``).

Exit codes: 0 success, 1 no completion, 2 bad input, 130 interrupted (Ctrl-C).  The ``serve``
command belongs to the LSP server, whose console script forwards everything else here.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

from fim import datasets
from fim.api import SCOPES, CompletionRequest, ConstraintUnavailable, Engine
from fim.decoding import MODES
from fim.model_specs import ENGINE_NAMES, SPEC_FORMS
from fim.templates import PromptTooLong

DEFAULT_MODEL = "bundled:qwen2.5-coder-1.5b"


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit code 2."""


def _model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"model spec (default {DEFAULT_MODEL}); forms: " + "; ".join(SPEC_FORMS))
    p.add_argument("--engine", default="auto", choices=ENGINE_NAMES,
                   help="model runtime (default auto: llama.cpp for GGUF models such as the "
                        "bundled one on a CPU, transformers for hub ids, directories and CUDA)")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda[:N]")
    p.add_argument("--dtype", default="auto", help="auto | fp32 | bf16 | fp16")
    p.add_argument("--trust-remote-code", action="store_true",
                   help="allow model code from the hub (off unless given)")
    p.add_argument("--template", default=None,
                   help="FIM template override (santacoder, starcoder, qwen2.5-coder, ...)")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--top-k", type=int, default=50)
    p.add_argument("--scope", choices=SCOPES, default="statement")
    p.add_argument("--context-tokens", type=int, default=None,
                   help="cap the prompt window (default: the model's window)")
    p.add_argument("--left-share", type=float, default=0.75,
                   help="share of a cut prompt given to the left context (default 0.75)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="seam", description="Fill-in-the-middle Python completion that always parses.")
    sub = parser.add_subparsers(dest="command", required=True)

    c = sub.add_parser("complete", help="complete at FILE:LINE:COL, or a JSONL batch")
    c.add_argument("position", nargs="?", help="FILE:LINE:COL (1-based line and column)")
    c.add_argument("--jsonl", type=Path, help="input JSONL with id, prefix, suffix")
    c.add_argument("--out", type=Path, help="output JSONL (with --jsonl; default stdout)")
    c.add_argument("--mode", choices=MODES, default="constrained")
    c.add_argument("--temperature", type=float, default=0.0)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--time-budget-ms", type=float, default=None)
    c.add_argument("--json", action="store_true", help="print the full result as JSON")
    _model_options(c)

    e = sub.add_parser("eval", help="the paper's experiment on Stack-Boundary/RandSpan cases")
    e.add_argument("--folder", type=Path, default=None,
                   help="folder of .py files (default: the standard library)")
    e.add_argument("--datasets", default="boundary,randspan")
    e.add_argument("--cases", type=int, default=100, help="cases per dataset")
    e.add_argument("--per-file", type=int, default=1,
                   help="cases per file (the paper used 10 over 9,539 files)")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--max-file-chars", type=int, default=None,
                   help="skip files longer than this")
    e.add_argument("--report", type=Path, default=Path("seam-eval.json"),
                   help="JSON report (summary and all records)")
    e.add_argument("--records", type=Path, default=None,
                   help="JSONL of per-case records; an existing file resumes the run")
    e.add_argument("--markdown", action="store_true",
                   help="print the tables as Markdown instead of text")
    e.add_argument("--report-only", action="store_true",
                   help="summarise the finished cases in --records without running anything")
    _model_options(e)
    e.set_defaults(scope="free")  # the paper's setting
    return parser


def parse_position(spec: str) -> tuple[Path, int, int]:
    """``FILE:LINE:COL`` (the file name may itself contain colons)."""
    parts = spec.rsplit(":", 2)
    if len(parts) != 3:
        raise UsageError(f"expected FILE:LINE:COL, got {spec!r}")
    try:
        line, col = int(parts[1]), int(parts[2])
    except ValueError:
        raise UsageError(f"LINE and COL must be integers in {spec!r}") from None
    return Path(parts[0]), line, col


def read_source(path: Path) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except OSError as err:
        raise UsageError(f"{path}: cannot read ({err.strerror})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UsageError(f"{path}: not UTF-8 text (invalid byte at offset {err.start})") from None
    if not text:
        raise UsageError(f"{path}: the file is empty; there is no context to complete in")
    return text.replace("\r\n", "\n")


def offset_of(text: str, line: int, col: int, path: Path | str = "<file>") -> int:
    """Character offset of 1-based ``line``/``col``; ``UsageError`` outside the file."""
    lines = text.split("\n")
    if not 1 <= line <= len(lines):
        raise UsageError(f"{path}: line {line} is outside the file (1..{len(lines)})")
    width = len(lines[line - 1])
    if not 1 <= col <= width + 1:
        raise UsageError(f"{path}:{line}: column {col} is outside the line (1..{width + 1})")
    return sum(len(x) + 1 for x in lines[: line - 1]) + col - 1


def _progress_bar(quiet: bool):
    """A ``progress(fraction, message)`` callback drawing a tqdm bar on stderr."""
    if quiet:
        return None, lambda: None
    from tqdm import tqdm

    bar = tqdm(total=100, desc="model", unit="%", file=sys.stderr, leave=False,
               bar_format="{desc}: {percentage:3.0f}%|{bar}| {postfix}")

    def progress(fraction: float, message: str) -> None:
        bar.n = int(100 * max(0.0, min(1.0, fraction)))
        bar.set_postfix_str(message)
        bar.refresh()

    return progress, bar.close


def load_engine(args) -> Engine:
    progress, close = _progress_bar(args.quiet)
    try:
        return Engine.load(args.model, device=args.device, dtype=args.dtype,
                           trust_remote_code=args.trust_remote_code, progress=progress,
                           engine=args.engine, slots=1,
                           template=args.template, window=args.context_tokens,
                           left_share=args.left_share)
    except (ValueError, RuntimeError) as err:
        raise UsageError(str(err)) from err
    finally:
        close()


def _request(args, left: str, right: str, mode: str | None = None) -> CompletionRequest:
    return CompletionRequest(
        left, right, mode=mode or args.mode, max_tokens=args.max_tokens, top_k=args.top_k,
        scope=args.scope, temperature=args.temperature, seed=args.seed,
        time_budget_ms=args.time_budget_ms,
    )


def _check_common(args) -> None:
    if args.max_tokens < 1:
        raise UsageError("--max-tokens must be at least 1")
    if args.top_k < 1:
        raise UsageError("--top-k must be at least 1")
    if args.context_tokens is not None and args.context_tokens < 16:
        raise UsageError("--context-tokens must be at least 16")
    if not 0.0 <= args.left_share <= 1.0:
        raise UsageError("--left-share must lie between 0 and 1")


def cmd_complete(args) -> int:
    _check_common(args)
    if args.temperature < 0:
        raise UsageError("--temperature must be >= 0")
    if args.jsonl is None and args.position is None:
        raise UsageError("give FILE:LINE:COL or --jsonl IN")
    if args.jsonl is not None and args.position is not None:
        raise UsageError("give either FILE:LINE:COL or --jsonl, not both")
    if args.jsonl is None:
        path, line, col = parse_position(args.position)
        text = read_source(path)
        offset = offset_of(text, line, col, path)
        engine = load_engine(args)
        res = engine.complete(_request(args, text[:offset], text[offset:]))
        if res.left_chars_dropped or res.right_chars_dropped:
            print(f"note: the prompt was cut to the model window ({res.left_chars_dropped} "
                  f"left and {res.right_chars_dropped} right characters left out)",
                  file=sys.stderr)
        if args.json:
            print(json.dumps(res.to_dict(), indent=2))
        elif res.middle is not None:
            sys.stdout.write(res.middle + ("" if res.middle.endswith("\n") else "\n"))
        if res.error:
            print(f"warning: {res.error}", file=sys.stderr)
        if res.middle is None:
            print(f"no completion (stop: {res.stop})", file=sys.stderr)
            return 1
        return 0
    return _complete_jsonl(args)


def _read_jsonl(path: Path) -> list[dict]:
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text") from None
    items = []
    for n, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as err:
            raise UsageError(f"{path}:{n}: not JSON ({err.msg})") from None
        if not isinstance(item, dict) or not isinstance(item.get("prefix"), str) or \
                not isinstance(item.get("suffix"), str):
            raise UsageError(f"{path}:{n}: needs string fields 'prefix' and 'suffix'")
        item.setdefault("id", n)
        items.append(item)
    return items


def _complete_jsonl(args) -> int:
    items = _read_jsonl(args.jsonl)
    engine = load_engine(args)
    out = open(args.out, "w", encoding="utf-8") if args.out else sys.stdout  # noqa: SIM115
    from tqdm import tqdm

    try:
        for item in tqdm(items, desc="complete", file=sys.stderr, disable=args.quiet):
            try:
                res = engine.complete(_request(args, item["prefix"], item["suffix"]))
            except (ValueError, ConstraintUnavailable) as err:
                # One bad item (e.g. a budget the window cannot hold) must not end the batch.
                out.write(json.dumps({"id": item["id"], "middle": None, "stop": "error",
                                      "error": str(err)}) + "\n")
                continue
            row = {
                "id": item["id"], "middle": res.middle, "stop": res.stop, "tokens": res.tokens,
                "setup_ms": round(res.setup_ms, 3), "model_ms": round(res.model_ms, 3),
                "constraint_ms": round(res.constraint_ms, 3), "mode": res.mode,
                "parses": res.parses,
            }
            if res.error:
                row["error"] = res.error
            out.write(json.dumps(row) + "\n")
            out.flush()
    finally:
        if out is not sys.stdout:
            out.close()
    return 0


def cmd_eval(args) -> int:
    from tqdm import tqdm

    from fim import evaluation

    _check_common(args)
    names = [d.strip() for d in args.datasets.split(",") if d.strip()]
    for d in names:
        if d not in datasets.DATASETS:
            raise UsageError(f"unknown dataset {d!r}; use {', '.join(datasets.DATASETS)}")
    if args.cases < 1 or args.per_file < 1:
        raise UsageError("--cases and --per-file must be at least 1")
    try:
        per_dataset = [datasets.build_cases(
            d, args.cases, args.folder, seed=args.seed, per_file=args.per_file,
            max_file_chars=args.max_file_chars) for d in names]
    except FileNotFoundError as err:
        raise UsageError(str(err)) from None
    # Interleave the datasets so that an interrupted run has cases of each.
    cases = [c for group in itertools.zip_longest(*per_dataset) for c in group if c]
    if not cases:
        raise UsageError("the folder yields no cases (no parseable .py files)")
    started = time.time()
    interrupted = False
    if args.report_only:
        if args.records is None:
            raise UsageError("--report-only needs --records FILE")
        records = evaluation.load_records(args.records)
        engine = None
    else:
        engine = load_engine(args)
        records = []
        bar = tqdm(total=len(cases), desc="eval", file=sys.stderr, disable=args.quiet)
        try:
            records = evaluation.run(
                engine, cases, max_tokens=args.max_tokens, top_k=args.top_k,
                scope=args.scope, records_path=args.records,
                progress=lambda _case: bar.update(1))
        except KeyboardInterrupt:
            # Report what finished: every finished case is already in the records file.
            interrupted = True
            records = evaluation.load_records(args.records) if args.records else []
        finally:
            bar.close()
    ids = {c["id"] for c in cases}
    records = [r for r in records if r["id"] in ids]
    summary = evaluation.summarize(records)
    report = {
        "config": {
            "model": args.model, "max_tokens": args.max_tokens,
            "top_k": args.top_k, "scope": args.scope, "seed": args.seed,
            "per_file": args.per_file, "cases_per_dataset": args.cases,
            "left_share": args.left_share,
            "folder": str(args.folder or datasets.default_folder()),
            "seconds": round(time.time() - started, 1),
            "interrupted": interrupted,
        },
        "summary": summary,
        "records": records,
    }
    if engine is not None:
        report["config"].update({
            "engine": str(engine.backend.engine), "device": engine.backend.device,
            "runtime": engine.backend.description,
            "template": engine.template.name, "context_tokens": engine.window,
        })
    args.report.write_text(json.dumps(report, indent=1), encoding="utf-8")
    fmt = evaluation.format_markdown if args.markdown else evaluation.format_summary
    print(fmt(summary))
    print(f"report: {args.report}")
    if interrupted:
        print("seam: interrupted; the report covers the finished cases", file=sys.stderr)
        return 130
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the ``seam`` command line; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "complete":
            return cmd_complete(args)
        return cmd_eval(args)
    except (UsageError, PromptTooLong, ConstraintUnavailable) as err:
        print(f"seam: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("seam: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
