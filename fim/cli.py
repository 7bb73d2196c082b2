"""The ``seam`` command line: ``complete`` (one position or a JSONL batch) and ``eval``.

``seam complete FILE:LINE:COL`` prints the middle for the cursor at 1-based LINE and COL
(``len(line) + 1`` is the end of the line).  ``seam complete --jsonl IN
--out OUT`` reads ``{"id", "left", "right"}`` lines and writes one result line each; a line
that cannot be completed gets an error row and a line on stderr, and the batch goes on.
``seam eval`` rebuilds Stack-Boundary and Stack-RandSpan from a folder of Python files and runs
the paper's experiment (see ``fim.eval.evaluation``).

Lines and columns are ``fim.lines``'s, the language server's too: a line ends at ``\n``,
``\r\n`` or a lone ``\r``, COL counts code points from 1, and a byte order mark is not a
column. FILE and IN must be regular files of bounded size (``fim.cli_files``): a FIFO, a device
or a directory is one line on stderr, never a hang. The batch is ``fim.cli_batch`` (OUT is
replaced only once there are rows for it), the experiment ``fim.cli_eval``.

A library's notice of its own future (transformers' ``FutureWarning`` about an argument it
will rename, say) is not the user's business and is not printed (``quiet_library_warnings``);
Seam's own warnings are.

Exit codes: 0 success, 1 no completion, 2 bad input (one line on stderr; for a batch, any
refused line), 130 interrupted (Ctrl-C).  Results go to stdout on lines of their own, never
onto a progress bar's line.  ``seam serve`` belongs to the language server: its console script
(``lsp_server.cli``) builds the ``seam`` parser from :func:`add_commands` and its own
``serve``, so nothing here knows of the package above.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from fim import cli_args, languages
from fim.cli_args import UsageError
from fim.cli_batch import complete_jsonl
from fim.cli_eval import cmd_eval
from fim.cli_files import offset_of, parse_position, read_source
from fim.engines.model_specs import ENGINE_NAMES, SPEC_FORMS, EngineKind
from fim.lines import for_model
from fim.options import DEFAULT_MODEL, DTYPE_CHOICES, MODES, SCOPES, Dtype, Mode, Scope
from fim.templates import PromptTooLong

if TYPE_CHECKING:
    # Imported where an engine is needed (numpy and the decoder take a second on a busy
    # machine): a bad path or position is refused before that.
    from fim.api import CompletionRequest
    from fim.engine_interface import CompletionEngine

__all__ = ["UsageError", "add_commands", "build_parser", "main", "offset_of",
           "parse_position", "read_source", "run"]


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
                        "(seam team-server); its API key, if any, in SEAM_VLLM_API_KEY; "
                        "with --engine llama-server or openai: the model server you run "
                        "(llama-server, vLLM, LM Studio, Ollama), its API key, if any, in "
                        "SEAM_SERVER_API_KEY (default: none)")
    p.add_argument("--server-model", default=None, metavar="NAME",
                   help="with --engine openai: the served model's name (default: the first "
                        "the server lists)")
    p.add_argument("--top-n", type=cli_args.positive_int, default=None,
                   help="with --engine llama-server or openai: alternatives per position "
                        "the server is asked for (default: 10)")
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


DESCRIPTION = "Fill-in-the-middle Python completion that always parses."


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m fim``: ``complete`` and ``eval`` (the console script's
    ``seam`` adds ``serve``, see ``lsp_server.cli``)."""
    parser = cli_args.OneLineParser(prog="seam", description=DESCRIPTION)
    add_commands(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    return parser


def add_commands(sub: Any) -> None:
    """Add ``complete`` and ``eval`` to the subparsers action ``sub``."""
    c = sub.add_parser("complete", help="complete at FILE:LINE:COL, or a JSONL batch",
                       description="Print the middle for a cursor, or complete a JSONL batch.")
    c.add_argument("position", nargs="?",
                   help="FILE:LINE:COL, 1-based line and column (default: none; "
                        "give this or --jsonl)")
    c.add_argument("--jsonl", type=cli_args.readable_file("JSONL file"),
                   help="input JSONL with id, left, right per line (the text left and right of "
                        "the cursor; prefix and suffix, their older names, are read too) "
                        "(default: none)")
    c.add_argument("--out", type=cli_args.writable_file("output file"),
                   help="output JSONL, with --jsonl (default: stdout)")
    c.add_argument("--mode", choices=MODES, default=Mode.CONSTRAINED,
                   help="decoding mode (default: constrained)")
    c.add_argument("--language", default=None, metavar="ID",
                   help="the file's language, e.g. python, go, javascript: only a language "
                        "Seam has a grammar for is constrained, any other is completed "
                        "unchecked (default: from FILE's extension; for --jsonl, each row's "
                        "\"language\" field, else python)")
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


#: Where ``--engine llama-server`` and ``openai`` read the server's API key (never a flag:
#: command lines are visible to every user of the machine).
SERVER_API_KEY_ENV = "SEAM_SERVER_API_KEY"


def load_engine(args: argparse.Namespace) -> CompletionEngine:
    """The engine the command line names: a model server's client, or a model loaded here."""
    from fim.api import Engine

    if EngineKind.parse(args.engine) is EngineKind.VLLM:
        import os

        from fim.vllm.client import VllmEngine

        return VllmEngine.connect(args.server, os.environ.get("SEAM_VLLM_API_KEY"),
                                  template=args.template, left_share=args.left_share)
    if EngineKind.parse(args.engine).remote:
        import os

        from fim.servers.engine import DEFAULT_TOP_N, ServerOptions, connect

        return connect(args.engine, ServerOptions(
            args.server or "", os.environ.get(SERVER_API_KEY_ENV) or None,
            model=args.server_model, template=args.template,
            top_n=args.top_n or DEFAULT_TOP_N))
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


def _request(args, left: str, right: str, mode: str | None = None,
             language: str = "python") -> CompletionRequest:
    from fim.api import CompletionRequest

    return CompletionRequest(
        left, right, mode=mode or args.mode, max_tokens=args.max_tokens, top_k=args.top_k,
        scope=args.scope, temperature=args.temperature, seed=args.seed,
        time_budget_ms=args.time_budget_ms, language=language,
    )


def unchecked_note(language: str) -> str | None:
    """The note for a language Seam has no grammar for (``None`` for one it has)."""
    if languages.by_id(language).checked:
        return None
    return (f"no grammar for {language!r}: the middle is unchecked (not constrained nor "
            "checked to parse)")


def cmd_complete(args) -> int:
    if args.jsonl is None and args.position is None:
        raise UsageError("give FILE:LINE:COL or --jsonl IN")
    if args.jsonl is not None and args.position is not None:
        raise UsageError("give either FILE:LINE:COL or --jsonl, not both")
    if args.jsonl is None:
        path, line, col = parse_position(args.position)
        text = read_source(path)
        offset = offset_of(text, line, col, path)
        language = (languages.by_id(args.language) if args.language
                    else languages.by_path(str(path))).id
        note = unchecked_note(language)
        if note and not args.quiet:
            print(f"note: {note}", file=sys.stderr)
        engine = load_engine(args)
        progress, close = _decode_progress(args.quiet or args.json)
        try:
            # The model sees \n line breaks whatever the file uses, as in the server.
            res = engine.complete(_request(args, for_model(text[:offset]),
                                           for_model(text[offset:]), language=language),
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
    default = languages.by_id(args.language).id if args.language else "python"
    return complete_jsonl(args, lambda: load_engine(args),
                          lambda left, right, language: _request(
                              args, left, right, language=language or default), emit)


#: Seam's packages: their warnings are printed; other modules' notices of change are not.
OWN_PACKAGES = ("fim", "lsp_server", "python_language", "quotient", "lexer", "benchmarks")


@contextlib.contextmanager
def quiet_library_warnings() -> Iterator[None]:
    """Within: a ``FutureWarning`` or ``DeprecationWarning`` raised by a library's module
    (anything outside ``OWN_PACKAGES``) is dropped."""
    others = "(?!(?:" + "|".join(OWN_PACKAGES) + r")(?:\.|$))"
    with warnings.catch_warnings():
        for category in (FutureWarning, DeprecationWarning):
            warnings.filterwarnings("ignore", category=category, module=others)
        yield


def run(args: argparse.Namespace) -> int:
    """Run a parsed ``complete`` or ``eval`` command; returns the exit code."""
    with quiet_library_warnings():
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    try:
        if args.command == "complete":
            return cmd_complete(args)
        return cmd_eval(args, lambda: load_engine(args))
    except (UsageError, PromptTooLong) as err:
        return cli_args.fail("seam", " ".join(str(err).split()))
    except OSError as err:  # an output that cannot be written, a full disk
        where = f"{err.filename}: " if getattr(err, "filename", None) else ""
        return cli_args.fail("seam", f"{where}{err.strerror or err}")
    except KeyboardInterrupt:
        print("seam: interrupted", file=sys.stderr)
        return 130


def main(argv: list[str] | None = None) -> int:
    """Run ``complete`` or ``eval``; returns the exit code (2 for bad arguments)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a one-line argument error
        return exc.code if isinstance(exc.code, int) else 2
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
