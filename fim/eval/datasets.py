"""Evaluation cases rebuilt from a folder of Python files, after the paper's section VII-A.

Two datasets, both seeded and reproducible:

* **Stack-Boundary**: run Python's tokenizer, pick two significant tokens at the same
  indentation level (the second later in the same block), cut inside the first at a random
  character and delete everything up to the start of the second.  Simulates
  complete-as-you-type.
* **Stack-RandSpan**: pick a random character position in the first 90% of the file and
  delete ``min(100 characters, 20% of the file, the rest of the file)``.  Exercises cuts in the
  middle of symbols, strings and comments.

Only files that ``ast.parse`` accepts are used (as in the paper).  A case is a plain dict
``{"id", "left", "right", "middle", "file"}`` with ``left + middle + right`` equal to the
file's text (read with universal newlines).

Randomness is derived per file from ``(seed, dataset, relative path)``, so a file's cases do
not change when other files are added to or removed from the folder.
"""

from __future__ import annotations

import ast
import bisect
import io
import random
import sysconfig
import tokenize
import warnings
from collections.abc import Iterator
from pathlib import Path

DATASETS = ("boundary", "randspan")

# Tokens that are not "symbols" in the paper's sense: layout and comments.
_LAYOUT = {
    tokenize.NEWLINE,
    tokenize.NL,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENDMARKER,
    tokenize.COMMENT,
}
# Directories under the stdlib that hold third-party code, not the standard library.
_SKIP_DIRS = {"site-packages", "dist-packages", "__pycache__"}


def default_folder() -> Path:
    """The running interpreter's standard library directory."""
    return Path(sysconfig.get_paths()["stdlib"])


def read_python(path: Path) -> str | None:
    """The file's text if it is UTF-8 and ``ast.parse`` accepts it, else ``None``."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if not text.strip():
        return None
    try:
        with warnings.catch_warnings():
            # Old stdlib test files trigger SyntaxWarning (invalid escapes); they still parse.
            warnings.simplefilter("ignore")
            ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return text


def python_files(folder: Path) -> list[Path]:
    """All ``.py`` files below ``folder`` (sorted, third-party package dirs skipped)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"dataset folder not found: {folder}")
    out = []
    for p in folder.rglob("*.py"):
        rel = p.relative_to(folder).parts
        if any(part in _SKIP_DIRS for part in rel) or not p.is_file():
            continue
        out.append(p)
    return sorted(out)


def _line_offsets(text: str) -> list[int]:
    """Offset of the start of each line (1-based rows, as tokenize counts), split on '\\n'."""
    offsets = [0, 0]
    pos = 0
    for line in io.StringIO(text, newline="\n"):
        pos += len(line)
        offsets.append(pos)
    return offsets


def _symbols(text: str) -> list[tuple[int, int, int]]:
    """Significant tokens as ``(start offset, end offset, indentation depth)``."""
    offsets = _line_offsets(text)
    depth = 0
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(text, newline="\n").readline):
        if tok.type == tokenize.INDENT:
            depth += 1
        elif tok.type == tokenize.DEDENT:
            depth -= 1
        if tok.type in _LAYOUT:
            continue
        start = offsets[tok.start[0]] + tok.start[1]
        end = offsets[tok.end[0]] + tok.end[1]
        if end > start:
            out.append((start, end, depth))
    return out


def _partner_ranges(symbols: list[tuple[int, int, int]]) -> tuple[dict, list[tuple[int, int]]]:
    """Index symbols by depth; for each symbol, the slice of its depth list it may pair with.

    Symbol ``i`` at depth ``d`` pairs with later symbols at depth ``d`` before its block ends
    (the first later symbol at a smaller depth).  Returns ``(by_depth, ranges)`` where the
    partners of ``i`` are ``by_depth[d][lo:hi]`` for ``(lo, hi) = ranges[i]``.
    """
    n = len(symbols)
    block_end = [n] * n
    stack: list[int] = []  # "next smaller depth" scan, right to left
    for i in range(n - 1, -1, -1):
        d = symbols[i][2]
        while stack and symbols[stack[-1]][2] >= d:
            stack.pop()
        block_end[i] = stack[-1] if stack else n
        stack.append(i)
    by_depth: dict[int, list[int]] = {}
    for i, (_, _, d) in enumerate(symbols):
        by_depth.setdefault(d, []).append(i)
    ranges = []
    for i, (_, _, d) in enumerate(symbols):
        same = by_depth[d]
        lo = bisect.bisect_right(same, i)
        hi = bisect.bisect_left(same, block_end[i])
        ranges.append((lo, hi))
    return by_depth, ranges


def boundary_cases(text: str, rng: random.Random, n: int) -> list[tuple[str, str, str]]:
    """Up to ``n`` Stack-Boundary cuts of ``text`` as ``(left, middle, right)``."""
    try:
        symbols = _symbols(text)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return []
    by_depth, ranges = _partner_ranges(symbols)
    firsts = [i for i, (lo, hi) in enumerate(ranges) if hi > lo]
    out = []
    for _ in range(min(n, len(firsts))):
        i = rng.choice(firsts)
        lo, hi = ranges[i]
        j = by_depth[symbols[i][2]][rng.randrange(lo, hi)]
        start, end, _ = symbols[i]
        # Keep 0 .. len-1 characters of the first symbol: at least one is removed.
        cut = start + rng.randrange(end - start)
        stop = symbols[j][0]
        out.append((text[:cut], text[cut:stop], text[stop:]))
    return out


def randspan_cases(text: str, rng: random.Random, n: int) -> list[tuple[str, str, str]]:
    """``n`` Stack-RandSpan cuts of ``text`` as ``(left, middle, right)``."""
    size = len(text)
    if size == 0:
        return []
    out = []
    for _ in range(n):
        cut = rng.randint(0, int(0.9 * size))
        length = max(1, min(100, int(0.2 * size), size - cut))
        out.append((text[:cut], text[cut : cut + length], text[cut + length :]))
    return out


def iter_cases(
    dataset: str,
    folder: Path | None = None,
    *,
    seed: int = 0,
    per_file: int = 10,
    max_file_chars: int | None = None,
) -> Iterator[dict]:
    """Cases of ``dataset`` ("boundary" | "randspan"), files visited in a seeded order."""
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; expected one of {', '.join(DATASETS)}")
    if per_file < 1:
        raise ValueError("per_file must be at least 1")
    folder = Path(folder) if folder is not None else default_folder()
    files = python_files(folder)
    random.Random(f"{seed}:files").shuffle(files)
    make = boundary_cases if dataset == "boundary" else randspan_cases
    for path in files:
        text = read_python(path)
        if text is None or (max_file_chars is not None and len(text) > max_file_chars):
            continue
        rel = path.relative_to(folder).as_posix()
        rng = random.Random(f"{seed}:{dataset}:{rel}")
        for k, (left, middle, right) in enumerate(make(text, rng, per_file)):
            yield {
                "id": f"{dataset}/{rel}#{k}",
                "left": left,
                "right": right,
                "middle": middle,
                "file": str(path),
            }


def build_cases(
    dataset: str,
    n_cases: int,
    folder: Path | None = None,
    *,
    seed: int = 0,
    per_file: int = 10,
    max_file_chars: int | None = None,
) -> list[dict]:
    """The first ``n_cases`` cases of ``dataset`` (fewer if the folder runs out)."""
    out = []
    if n_cases <= 0:
        return out
    for case in iter_cases(
        dataset, folder, seed=seed, per_file=per_file, max_file_chars=max_file_chars
    ):
        out.append(case)
        if len(out) >= n_cases:
            break
    return out
