"""The ``seam`` command line: ``complete`` (one position or a JSONL batch) and ``eval``.

``seam complete FILE:LINE:COL`` prints the middle for the cursor at 1-based LINE and COL
(COL counts characters; ``len(line) + 1`` is the end of the line).  ``seam complete --jsonl IN
--out OUT`` reads ``{"id", "prefix", "suffix"}`` lines and writes one result line each; a line
that cannot be completed gets an error row and a line on stderr, and the batch goes on.
``seam eval`` rebuilds Stack-Boundary and Stack-RandSpan from a folder of Python files and runs
the paper's experiment (see ``fim.eval.evaluation``).

Exit codes: 0 success, 1 no completion, 2 bad input (one line on stderr; for a batch, any
refused line), 130 interrupted (Ctrl-C).  Results go to stdout on lines of their own, never
onto a progress bar's line.  The ``serve`` command belongs to the LSP server, whose console
script adds it to this parser (``build_parser(extra=...)``) and handles it itself.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from fim import cli_args
from fim.api import CompletionRequest, Engine
from fim.editor_policy import CPU_CONTEXT_TOKENS
from fim.engines.model_specs import ENGINE_NAMES, SPEC_FORMS, EngineKind
from fim.eval import datasets
from fim.options import DEFAULT_MODEL, DTYPE_CHOICES, MODES, SCOPES, Dtype, Mode, Scope
from fim.templates import PromptTooLong

#: Called with the subparsers action, to add subcommands defined elsewhere (``seam serve``).
ExtraCommands = Callable[[Any], None]


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit code 2."""


def _context_tokens(text: str) -> int:
    value = cli_args.positive_int(text)
    if value < 16:
        raise argparse.ArgumentTypeError(f"must be at least 16, not {value}")
    return value


def _model_options(p: argparse.ArgumentParser, scope: Scope = Scope.STATEMENT,
                   scope_note: str = "") -> None:
    p.add_argument("--model", type=cli_args.model, default=DEFAULT_MODEL,
                   help=f"model spec (default: {DEFAULT_MODEL}; \"bundled\" names it too); "
                        "forms: " + "; ".join(SPEC_FORMS))
    p.add_argument("--engine", default=EngineKind.AUTO, choices=ENGINE_NAMES,
                   help="model runtime (default: auto: llama.cpp for GGUF models such as the "
                        "bundled one on a CPU, transformers for hub ids, directories and CUDA)")
    p.add_argument("--server", default=None, metavar="URL",
                   help="with --engine vllm: the vLLM server running Seam's constraint "
                        "(seam team-server); its API key, if any, in SEAM_VLLM_API_KEY "
                        "(default: none)")
    p.add_argument("--device", type=cli_args.device, default="auto",
                   help="auto, cpu, cuda or cuda:N (default: auto, CUDA when present)")
    p.add_argument("--dtype", type=cli_args.dtype, default=Dtype.AUTO,
                   help=f"{', '.join(DTYPE_CHOICES)}; fp32, bf16 and fp16 are accepted too "
                        "(default: auto: float32 on a CPU, bfloat16 or float16 on a GPU)")
    p.add_argument("--trust-remote-code", action="store_true",
                   help="let a hub model run its own Python code when it loads "
                        "(default: off)")
    p.add_argument("--template", default=None,
                   help="FIM template override: santacoder, starcoder, qwen2.5-coder, ... "
                        "(default: detected from the tokenizer)")
    p.add_argument("--max-tokens", type=cli_args.positive_int, default=64,
                   help="most tokens generated per completion (default: 64)")
    p.add_argument("--top-k", type=cli_args.positive_int, default=50,
                   help="candidates tried per step of constrained decoding (default: 50)")
    p.add_argument("--scope", choices=SCOPES, default=scope,
                   help=f"how far a completion may reach (default: {scope}{scope_note})")
    p.add_argument("--context-tokens", type=_context_tokens, default=None,
                   help="cap on prompt plus completion in tokens, at least 16 "
                        "(default: the model's window)")
    p.add_argument("--left-share", type=cli_args.fraction, default=0.75,
                   help="share of a cut prompt given to the left context (default: 0.75)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bars (default: bars on stderr)")


def build_parser(extra: ExtraCommands | None = None) -> argparse.ArgumentParser:
    """The ``seam`` parser; ``extra`` adds subcommands that live elsewhere (``serve``)."""
    parser = cli_args.OneLineParser(
        prog="seam", description="Fill-in-the-middle Python completion that always parses.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    c = sub.add_parser("complete", help="complete at FILE:LINE:COL, or a JSONL batch",
                       description="Print the middle for a cursor, or complete a JSONL batch.")
    c.add_argument("position", nargs="?",
                   help="FILE:LINE:COL, 1-based line and column (default: none; "
                        "give this or --jsonl)")
    c.add_argument("--jsonl", type=cli_args.readable_file("JSONL file"),
                   help="input JSONL with id, prefix, suffix per line (default: none)")
    c.add_argument("--out", type=cli_args.writable_file("output file"),
                   help="output JSONL, with --jsonl (default: stdout)")
    c.add_argument("--mode", choices=MODES, default=Mode.CONSTRAINED,
                   help="decoding mode (default: constrained)")
    c.add_argument("--temperature", type=cli_args.non_negative_float, default=0.0,
                   help="sampling temperature, 0 for greedy (default: 0)")
    c.add_argument("--seed", type=int, default=0, help="sampling seed (default: 0)")
    c.add_argument("--time-budget-ms", type=cli_args.positive_float, default=None,
                   help="stop decoding after this many milliseconds (default: no limit)")
    c.add_argument("--json", action="store_true",
                   help="print the full result as JSON (default: only the middle)")
    _model_options(c)

    e = sub.add_parser("eval", help="the paper's experiment on Stack-Boundary/RandSpan cases",
                       description="Run the paper's experiment and print its tables.")
    e.add_argument("--folder", type=_folder, default=None,
                   help="folder of .py files (default: the standard library)")
    e.add_argument("--datasets", default="boundary,randspan",
                   help="comma-separated datasets (default: boundary,randspan)")
    e.add_argument("--cases", type=cli_args.positive_int, default=100,
                   help="cases per dataset (default: 100)")
    e.add_argument("--per-file", type=cli_args.positive_int, default=1,
                   help="cases per file; the paper used 10 over 9,539 files (default: 1)")
    e.add_argument("--seed", type=int, default=0, help="case sampling seed (default: 0)")
    e.add_argument("--policy", choices=("paper", "ide"), default="paper",
                   help="paper: --max-tokens and --scope for every case; ide: what the editor "
                        "asks at each cursor (mid-line: a statement that ends with its line; "
                        "empty line: a block), with --context-tokens or 2048 (default: paper)")
    e.add_argument("--max-file-chars", type=cli_args.positive_int, default=None,
                   help="skip files longer than this (default: no limit)")
    e.add_argument("--report", type=cli_args.writable_file("report file"),
                   default=Path("seam-eval.json"),
                   help="JSON report with the summary and all records (default: seam-eval.json)")
    e.add_argument("--records", type=cli_args.writable_file("records file"), default=None,
                   help="JSONL of per-case records; an existing file resumes the run "
                        "(default: none)")
    e.add_argument("--markdown", action="store_true",
                   help="print the tables as Markdown (default: text)")
    e.add_argument("--report-only", action="store_true",
                   help="summarise the finished cases in --records without running anything "
                        "(default: off)")
    _model_options(e, scope=Scope.FREE, scope_note=", the paper's setting")
    if extra is not None:
        extra(sub)
    return parser


def _folder(text: str) -> Path:
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is not a directory")
    return path


def emit(line: str, stream: TextIO) -> None:
    """Write ``line`` on a line of its own, clear of any progress bar drawn on the terminal."""
    from tqdm import tqdm

    with tqdm.external_write_mode(file=stream):
        stream.write(line + "\n")
        stream.flush()


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


def _decode_progress(quiet: bool):
    """A ``progress(phase, done, total)`` callback showing the prompt being read and the
    middle being written on stderr, when stderr is a terminal; and its closer."""
    if quiet or not sys.stderr.isatty():
        return None, lambda: None
    from tqdm import tqdm

    bar = tqdm(total=1, file=sys.stderr, leave=False, unit="tok",
               bar_format="{desc}: {n_fmt}/{total_fmt} tokens |{bar}| {elapsed}")
    names = {"prefill": "reading the prompt", "decode": "writing the middle"}

    def progress(phase: str, done: int, total: int) -> None:
        desc = names.get(phase, phase)
        if bar.desc != desc:
            bar.set_description_str(desc, refresh=False)
        bar.total, bar.n = max(1, total), done
        bar.refresh()

    return progress, bar.close


def load_engine(args) -> Engine:
    if EngineKind.parse(args.engine) is EngineKind.VLLM:
        import os

        from fim.engines.vllm_engine import VllmEngine

        return VllmEngine.connect(args.server, os.environ.get("SEAM_VLLM_API_KEY"),
                                  template=args.template, left_share=args.left_share)
    progress, close = _progress_bar(args.quiet or getattr(args, "json", False))
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


def cmd_complete(args) -> int:
    if args.jsonl is None and args.position is None:
        raise UsageError("give FILE:LINE:COL or --jsonl IN")
    if args.jsonl is not None and args.position is not None:
        raise UsageError("give either FILE:LINE:COL or --jsonl, not both")
    if args.jsonl is None:
        path, line, col = parse_position(args.position)
        text = read_source(path)
        offset = offset_of(text, line, col, path)
        engine = load_engine(args)
        progress, close = _decode_progress(args.quiet or args.json)
        try:
            res = engine.complete(_request(args, text[:offset], text[offset:]),
                                  progress=progress)
        finally:
            close()
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


@dataclass(frozen=True)
class BatchItem:
    """One input line of ``--jsonl``: what to complete, or why it cannot be."""

    line: int
    id: Any
    prefix: str = ""
    suffix: str = ""
    problem: str | None = None


_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _text_problem(name: str, value: Any) -> str | None:
    if not isinstance(value, str):
        return f"needs a string field {name!r}"
    m = _LONE_SURROGATE.search(value)
    if m:
        return (f"{name!r} holds a lone surrogate (\\u{ord(m.group()):04x}) at character "
                f"{m.start()}: not Unicode text")
    return None


def _read_jsonl(path: Path) -> list[BatchItem]:
    """Every non-blank line of ``path``; a line that cannot be completed carries its problem."""
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise UsageError(f"{path}: cannot read ({err.strerror or err})") from None
    items = []
    for n, data in enumerate(raw.split(b"\n"), 1):
        if not data.strip():
            continue
        try:
            item = json.loads(data.decode("utf-8"))
        except UnicodeDecodeError as err:
            items.append(BatchItem(n, n, problem=f"not UTF-8 (byte {err.start})"))
            continue
        except ValueError as err:
            items.append(BatchItem(n, n, problem=f"not JSON ({str(err).splitlines()[0]})"))
            continue
        if not isinstance(item, dict):
            items.append(BatchItem(n, n, problem="not a JSON object"))
            continue
        ident = item.get("id", n)
        problem = _text_problem("prefix", item.get("prefix")) or \
            _text_problem("suffix", item.get("suffix"))
        if problem:
            items.append(BatchItem(n, ident, problem=problem))
        else:
            items.append(BatchItem(n, ident, item["prefix"], item["suffix"]))
    return items


def _complete_jsonl(args) -> int:
    """Complete every line; a bad line gets an error row and a line on stderr, and the batch
    goes on. Exit code 2 if any line was refused, else 0."""
    items = _read_jsonl(args.jsonl)
    try:
        out = open(args.out, "w", encoding="utf-8") if args.out else sys.stdout  # noqa: SIM115
    except OSError as err:
        raise UsageError(f"cannot write {args.out}: {err.strerror or err}") from None
    from tqdm import tqdm

    refused = 0
    try:
        engine = load_engine(args)
        for item in tqdm(items, desc="complete", file=sys.stderr, disable=args.quiet):
            problem = item.problem
            if problem is None:
                try:
                    res = engine.complete(_request(args, item.prefix, item.suffix))
                except Exception as err:  # one bad item must not end the batch
                    problem = str(err).splitlines()[0] if str(err) else type(err).__name__
            if problem is not None:
                refused += 1
                emit(f"seam: {args.jsonl}:{item.line}: {problem}", sys.stderr)
                emit(json.dumps({"id": item.id, "middle": None, "stop": "error",
                                 "error": problem}), out)
                continue
            row = {
                "id": item.id, "middle": res.middle, "stop": res.stop, "tokens": res.tokens,
                "setup_ms": round(res.setup_ms, 3), "model_ms": round(res.model_ms, 3),
                "constraint_ms": round(res.constraint_ms, 3), "mode": res.mode,
                "parses": res.parses,
            }
            if res.error:
                row["error"] = res.error
            emit(json.dumps(row), out)
    finally:
        if out is not sys.stdout:
            out.close()
    return 2 if refused else 0


def cmd_eval(args) -> int:
    """``seam eval``: build the cases, run them (or read ``--records``), write the report and
    print the tables; 130 when interrupted (the report covers the finished cases)."""
    from fim.eval import evaluation

    cases = _eval_cases(args)
    started = time.time()
    records, engine, interrupted = _eval_records(args, cases)
    ids = {c["id"] for c in cases}
    records = [r for r in records if r["id"] in ids]
    summary = evaluation.summarize(records)
    report = _eval_report(args, summary, records, engine, time.time() - started, interrupted)
    args.report.write_text(json.dumps(report, indent=1), encoding="utf-8")
    fmt = evaluation.format_markdown if args.markdown else evaluation.format_summary
    print(fmt(summary))
    print(f"report: {args.report}")
    if interrupted:
        print("seam: interrupted; the report covers the finished cases", file=sys.stderr)
        return 130
    return 0


def _eval_cases(args) -> list[dict]:
    """The cases of ``--datasets``, interleaved so that an interrupted run has cases of
    each."""
    names = [d.strip() for d in args.datasets.split(",") if d.strip()]
    for d in names:
        if d not in datasets.DATASETS:
            raise UsageError(f"unknown dataset {d!r}; use {', '.join(datasets.DATASETS)}")
    try:
        per_dataset = [datasets.build_cases(
            d, args.cases, args.folder, seed=args.seed, per_file=args.per_file,
            max_file_chars=args.max_file_chars) for d in names]
    except FileNotFoundError as err:
        raise UsageError(str(err)) from None
    cases = [c for group in itertools.zip_longest(*per_dataset) for c in group if c]
    if not cases:
        raise UsageError("the folder yields no cases (no parseable .py files)")
    return cases


def _eval_records(args, cases: list[dict]) -> tuple[list[dict], Engine | None, bool]:
    """``(records, engine, interrupted)``: the records of ``--records`` alone
    (``--report-only``: no engine), or of running the cases with a loaded engine."""
    from tqdm import tqdm

    from fim.eval import evaluation

    if args.report_only:
        if args.records is None:
            raise UsageError("--report-only needs --records FILE")
        return evaluation.load_records(args.records), None, False
    engine = load_engine(args)
    bar = tqdm(total=len(cases), desc="eval", file=sys.stderr, disable=args.quiet)
    try:
        records = evaluation.run(
            engine, cases, max_tokens=args.max_tokens, top_k=args.top_k,
            scope=args.scope, records_path=args.records,
            progress=lambda _case: bar.update(1), policy=args.policy,
            context_tokens=args.context_tokens or CPU_CONTEXT_TOKENS)
    except KeyboardInterrupt:
        # Report what finished: every finished case is already in the records file.
        return (evaluation.load_records(args.records) if args.records else []), engine, True
    finally:
        bar.close()
    return records, engine, False


def _eval_report(args, summary: dict, records: list[dict], engine: Engine | None,
                 seconds: float, interrupted: bool) -> dict:
    """The JSON report: the run's configuration and provenance, the summary, the records."""
    from fim.eval import evaluation

    config = {
        "model": args.model, "engine": args.engine, "policy": args.policy,
        "max_tokens": args.max_tokens,
        "top_k": args.top_k, "scope": args.scope, "seed": args.seed,
        "per_file": args.per_file, "cases_per_dataset": args.cases,
        "left_share": args.left_share,
        "folder": str(args.folder or datasets.default_folder()),
        "seconds": round(seconds, 1),
        "interrupted": interrupted,
        **evaluation.provenance(),
    }
    if engine is not None:
        config.update({
            "engine": str(engine.backend.engine), "device": engine.backend.device,
            "runtime": engine.backend.description,
            "template": engine.template.name, "context_tokens": engine.window,
        })
    return {"config": config, "summary": summary, "records": records}


def run(args: argparse.Namespace) -> int:
    """Run a parsed ``complete`` or ``eval`` command; returns the exit code."""
    try:
        if args.command == "complete":
            return cmd_complete(args)
        return cmd_eval(args)
    except (UsageError, PromptTooLong) as err:
        return cli_args.fail("seam", " ".join(str(err).split()))
    except OSError as err:  # an output that cannot be written, a full disk
        where = f"{err.filename}: " if getattr(err, "filename", None) else ""
        return cli_args.fail("seam", f"{where}{err.strerror or err}")
    except KeyboardInterrupt:
        print("seam: interrupted", file=sys.stderr)
        return 130


def main(argv: list[str] | None = None, extra: ExtraCommands | None = None) -> int:
    """Run the ``seam`` command line; returns the exit code (2 for bad arguments)."""
    try:
        args = build_parser(extra).parse_args(argv)
    except SystemExit as exc:  # --help, or a one-line argument error
        return exc.code if isinstance(exc.code, int) else 2
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
