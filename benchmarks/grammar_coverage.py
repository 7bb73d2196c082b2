"""Grammar coverage: the share of standard-library files Seam's Python grammar accepts whole.

Of the `.py` files under a Python installation's library directory (site-packages excluded)
that this interpreter's `ast.parse` accepts, count those whose whole terminal stream Seam's
grammar (`python_language/python.lark`) recognizes, and list the others with the first
terminal the recognizer refused. Terminal streams come from Seam's lexer
(`python_language.lex_python`, whole file, no windowing) or from CPython's `tokenize`
through the test adapter. A file Seam's lexer rejects is a failure of Seam's lexer and grammar
together and is counted as rejected; a file that 3.11's `tokenize` cannot handle (PEP 701
f-strings) is only skipped, with a count.

Run from the repository root:

    .venv/bin/python -m benchmarks.grammar_coverage                   # every stdlib file
    .venv/bin/python -m benchmarks.grammar_coverage --sample 200      # a seeded random sample
    .venv/bin/python -m benchmarks.grammar_coverage --lexer tokenize  # CPython's tokenizer
    .venv/bin/python -m benchmarks.grammar_coverage \
        --library /root/.pyenv/versions/3.12.1/lib/python3.12 \
        --python /root/.pyenv/versions/3.12.1/bin/python3.12    # 3.12's library, 3.12's parser

`--python` names the interpreter whose `ast.parse` decides which files are valid Python (one
subprocess for all files); by default it is this interpreter. With `--figures docs/figures.md`
the result (and the run's commit, package versions, machine and load) replaces the section
named by `--section` (default `coverage`) of that file.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import subprocess
import sys
import time
import tokenize
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.cpython_terminals import tokenize_terminals  # noqa: E402
from benchmarks.report import RunRecord, command_line, write_section  # noqa: E402
from lexer.cpython import parses  # noqa: E402
from lexer.tokenizer import LexError  # noqa: E402
from python_language.grammar import lex_python  # noqa: E402
from quotient import Grammar, recognizer  # noqa: E402

GRAMMAR_PATH = ROOT / "python_language" / "python.lark"
DEFAULT_LIBRARY = "/root/.pyenv/versions/3.11.7/lib/python3.11"


def library_files(library: Path) -> list[Path]:
    """Every `.py` file under `library`, site-packages excluded, in a stable order."""
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(library):
        dirnames[:] = sorted(d for d in dirnames if d != "site-packages")
        out.extend(Path(dirpath) / f for f in sorted(filenames) if f.endswith(".py"))
    return out


def read_source(path: Path) -> str | None:
    """The file's text decoded as Python decodes it (coding cookie, BOM), or None."""
    try:
        with tokenize.open(path) as f:
            return f.read()
    except (SyntaxError, UnicodeDecodeError, OSError):
        return None


class LexFailure(Exception):
    """Seam's lexer rejected a file that CPython accepts."""


def make_lexer(grammar: Grammar, which: str) -> tuple[str, Callable[[str], list[str]]]:
    """The named terminal-stream producer: ("seam", Seam's lexer) or ("tokenize", adapter)."""
    if which in ("auto", "seam"):
        def seam(text: str) -> list[str]:
            try:
                return lex_python(text)
            except LexError as exc:
                raise LexFailure(str(exc)) from exc

        return "seam", seam
    literals = {d.pattern: d.name for d in grammar.terminal_defs.values() if d.kind == "str"}
    return "tokenize", lambda text: [t.type for t in tokenize_terminals(text, literals)]


def first_refusal(grammar: Grammar, terminals: list[str]) -> int:
    """Index of the first terminal the recognizer refuses (len(terminals): end not accepted)."""
    state = recognizer(grammar)
    for i, term in enumerate(terminals):
        state = state.scan(term)
        if state is None:
            return i
    return len(terminals)


def run(files: list[Path], grammar: Grammar, lex: Callable[[str], list[str]],
        show: Callable[[str], None], verdicts: dict[str, bool] | None = None
        ) -> dict[str, object]:
    """Check each file; return the counts and the failures."""
    counts = {"files": len(files), "unreadable": 0, "ast_rejected": 0, "lex_skipped": 0,
              "checked": 0, "accepted": 0, "terminals": 0}
    failures: list[tuple[Path, int, int, list[str]]] = []
    lex_skips: list[tuple[Path, str]] = []
    recognize_seconds = 0.0
    for path, text in _sources(files, counts, verdicts):
        try:
            terminals = lex(text)
        except LexFailure as exc:
            counts["checked"] += 1
            failures.append((path, -1, 0, [f"lexer: {exc}"]))
            show(f"REJECTED {path} by the lexer: {exc}")
            continue
        except (SyntaxError, tokenize.TokenError, ValueError) as exc:
            counts["lex_skipped"] += 1
            lex_skips.append((path, f"{type(exc).__name__}: {exc}"))
            continue
        counts["checked"] += 1
        counts["terminals"] += len(terminals)
        started = time.perf_counter()
        state = recognizer(grammar).scan_many(terminals)
        ok = state is not None and state.is_complete()
        recognize_seconds += time.perf_counter() - started
        if ok:
            counts["accepted"] += 1
            continue
        at = first_refusal(grammar, terminals)
        failures.append((path, at, len(terminals), terminals[max(0, at - 8) : at + 1]))
        show(f"REJECTED {path} at terminal {at}/{len(terminals)}: {' '.join(failures[-1][3])}")
    return {"counts": counts, "failures": failures, "lex_skips": lex_skips,
            "recognize_seconds": recognize_seconds}


def local_ast_accepts(text: str) -> bool:
    """This interpreter's parser verdict."""
    return parses(text)


_ORACLE_SCRIPT = """
import ast, json, sys, tokenize, warnings
warnings.simplefilter("ignore")
out = {}
for path in json.load(sys.stdin):
    try:
        with tokenize.open(path) as f:
            ast.parse(f.read())
        out[path] = True
    except (SyntaxError, ValueError, UnicodeDecodeError, OSError):
        out[path] = False
json.dump(out, sys.stdout)
"""


def oracle_verdicts(python: str, files: list[Path]) -> dict[str, bool]:
    """`python`'s `ast.parse` verdict on each file, from one subprocess."""
    proc = subprocess.run([python, "-c", _ORACLE_SCRIPT], input=json.dumps([str(f) for f in files]),
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def _sources(files: list[Path], counts: dict[str, int],
             verdicts: dict[str, bool] | None) -> Iterator[tuple[Path, str]]:
    for path in files:
        text = read_source(path)
        if text is None:
            counts["unreadable"] += 1
            continue
        valid = verdicts[str(path)] if verdicts is not None else local_ast_accepts(text)
        if not valid:
            counts["ast_rejected"] += 1
            continue
        yield path, text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", default=DEFAULT_LIBRARY, help="library directory to scan")
    parser.add_argument("--sample", type=int, default=0, help="check N random files (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lexer", choices=("auto", "seam", "tokenize"), default="auto")
    parser.add_argument("--python", default=None,
                        help="interpreter whose ast.parse is the oracle (default: this one)")
    parser.add_argument("--figures", type=Path, help="write the figures into this file")
    parser.add_argument("--section", default="coverage", help="the section of --figures")
    args = parser.parse_args(argv)
    record = RunRecord(command_line())

    grammar = Grammar.from_lark(GRAMMAR_PATH.read_text(encoding="utf-8"), start="file_input")
    lexer_name, lex = make_lexer(grammar, args.lexer)
    files = library_files(Path(args.library))
    if args.sample and args.sample < len(files):
        files = sorted(random.Random(args.seed).sample(files, args.sample))

    verdicts = oracle_verdicts(args.python, files) if args.python else None
    started = time.perf_counter()
    result = run(files, grammar, lex, print, verdicts)
    elapsed = time.perf_counter() - started
    c = result["counts"]
    for path, reason in result["lex_skips"]:
        print(f"LEX-SKIPPED {path}: {reason}")
    share = c["accepted"] / c["checked"] if c["checked"] else 0.0
    print(f"library: {args.library}  ({'sample of ' + str(args.sample) if args.sample else 'all'}"
          f" files, lexer: {lexer_name}, oracle: {args.python or sys.executable})")
    print(f"files {c['files']}, unreadable {c['unreadable']}, rejected by ast.parse "
          f"{c['ast_rejected']}, skipped by the lexer {c['lex_skipped']}")
    print(f"accepted {c['accepted']} of {c['checked']} checked = {100 * share:.3f}%")
    rate = c["terminals"] / result["recognize_seconds"] if result["recognize_seconds"] else 0.0
    print(f"{c['terminals']} terminals recognized in {result['recognize_seconds']:.1f} s "
          f"({rate:,.0f} terminals/s); wall time {elapsed:.1f} s")
    record.finish()
    if args.figures:
        oracle = _version(args.python or sys.executable)
        write_section(args.figures, args.section, coverage_markdown(
            c, args.library, oracle, lexer_name, args.sample, record))
    return 0 if not result["failures"] else 1


def _version(python: str) -> str:
    proc = subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                          capture_output=True, text=True, check=True)
    return proc.stdout.strip()


CONSTRUCTS_FILE = ROOT / "tests/python_language/grammar/constructs.py"


def _constructs() -> dict[str, tuple[list[str], list[str]]]:
    """The grammar tests' table of constructs, read as data (benchmarks import no tests)."""
    tree = ast.parse(CONSTRUCTS_FILE.read_text(encoding="utf-8"))
    for node in tree.body:
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and node.target.id == "CONSTRUCTS" and node.value is not None):
            return ast.literal_eval(node.value)
    raise SystemExit(f"no CONSTRUCTS table in {CONSTRUCTS_FILE}")


def coverage_markdown(c: dict, library: str, oracle: str, lexer_name: str, sample: int,
                      record: RunRecord) -> str:
    constructs = _constructs()
    share = c["accepted"] / c["checked"] if c["checked"] else 0.0
    accepted = sum(len(ok) for ok, _ in constructs.values())
    rejected = sum(len(bad) for _, bad in constructs.values())
    scope = f"a seeded sample of {sample}" if sample else "all"
    return "\n".join([
        f"`{library}` ({scope} files, site-packages excluded), terminal streams from the "
        f"{lexer_name} lexer, CPython {oracle}'s `ast.parse` as the oracle:",
        "",
        "| figure | measured | target |",
        "| --- | --- | --- |",
        f"| files `ast.parse` accepts that the grammar accepts whole | {c['accepted']:,} of "
        f"{c['checked']:,} ({100 * share:.3f}%) | ≥ 99.9% |",
        f"| files skipped (unreadable / rejected by `ast.parse` / not lexable by the chosen "
        f"lexer) | {c['unreadable']} / {c['ast_rejected']} / {c['lex_skipped']} | — |",
        "",
        f"At this commit `tests/python_language/grammar/constructs.py` holds {len(constructs)} "
        f"constructs with {accepted} programs that must parse and {rejected} that must not "
        "(each verdict also checked against CPython 3.12 when it is installed).",
        "",
        record.markdown(),
    ])


if __name__ == "__main__":
    sys.exit(main())
