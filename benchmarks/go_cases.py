"""Go fill-in-the-middle cases cut as the paper cuts Python's (section VII-A), for bench_go.

* **Boundary**: split the file into Go tokens, give each its bracket depth (Go's blocks are
  braces, as Python's are indentation), pick two significant tokens at the same depth with
  the second before the enclosing bracket closes, cut inside the first at a random character
  and delete everything up to the start of the second.  Simulates complete-as-you-type.
* **RandSpan**: `fim.eval.datasets.randspan_cases` — random character spans are
  language-neutral, so the Python code is used as it is.
* **Prefix-only holes** (SynCode's setting): the left context is the file up to a Boundary
  cut and nothing on the right; the middle runs to the end of the file.

The tokenizer here is deliberately not Seam's Go lexer: the cases must not depend on the
system under test.  It only needs token extents and bracket depth, so it knows Go's comments,
interpreted and raw strings and runes, and treats everything else as words or punctuation.
Randomness is per file from ``(seed, dataset, path)``, as in `fim.eval.datasets`.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable

from benchmarks.go_corpus import GoFile
from fim.eval.datasets import _partner_ranges, randspan_cases

DATASETS = ("boundary", "randspan")

_TOKEN = re.compile(
    r"""(?P<space>[ \t\r\n]+)
      | (?P<comment>//[^\n]*|/\*.*?\*/)
      | (?P<string>"(?:[^"\\\n]|\\.)*"|`[^`]*`|'(?:[^'\\\n]|\\.)*')
      | (?P<word>[A-Za-z0-9_.]*[A-Za-z0-9_]|\.\.\.|\.)
      | (?P<open>[({\[])
      | (?P<close>[)}\]])
      | (?P<op>[-+*/%&|^<>=!:;,~]+)
      | (?P<other>.)""",
    re.VERBOSE | re.DOTALL,
)


def go_symbols(text: str) -> list[tuple[int, int, int]]:
    """Significant Go tokens (no comments, no space) as ``(start, end, bracket depth)``.

    An opening bracket sits at the depth outside it, its contents one deeper, and its closing
    bracket back at the outer depth, so a token's partners end where its bracket closes.
    """
    out = []
    depth = 0
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        if kind in ("space", "comment"):
            continue
        if kind == "close":
            depth = max(0, depth - 1)
        out.append((m.start(), m.end(), depth))
        if kind == "open":
            depth += 1
    return out


def boundary_cases(text: str, rng: random.Random, n: int) -> list[tuple[str, str, str]]:
    """Up to ``n`` Boundary cuts of the Go source ``text`` as ``(left, middle, right)``."""
    symbols = go_symbols(text)
    by_depth, ranges = _partner_ranges(symbols)
    firsts = [i for i, (lo, hi) in enumerate(ranges) if hi > lo]
    out = []
    for _ in range(min(n, len(firsts))):
        i = rng.choice(firsts)
        lo, hi = ranges[i]
        j = by_depth[symbols[i][2]][rng.randrange(lo, hi)]
        start, end, _ = symbols[i]
        cut = start + rng.randrange(end - start)  # at least one character of it is removed
        stop = symbols[j][0]
        out.append((text[:cut], text[cut:stop], text[stop:]))
    return out


def file_cases(dataset: str, files: Iterable[GoFile], *, seed: int = 0,
               per_file: int = 2) -> list[dict]:
    """``per_file`` cases of ``dataset`` from each file, as ``{id, left, middle, right, file}``."""
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; expected one of {', '.join(DATASETS)}")
    make = boundary_cases if dataset == "boundary" else randspan_cases
    out = []
    for f in files:
        rng = random.Random(f"{seed}:{dataset}:{f.path}")
        for k, (left, middle, right) in enumerate(make(f.text, rng, per_file)):
            out.append({"id": f"{dataset}/{f.path}#{k}", "left": left, "middle": middle,
                        "right": right, "file": f.path})
    return out


def prefix_only(case: dict, cap: int | None = None) -> dict:
    """The case as a prefix-only hole: no right context, the middle runs to the file's end.

    ``hole`` is the length of the case's own middle (at most ``cap``): acceptance is checked
    step by step within it, and completeness at the end of the file.
    """
    hole = len(case["middle"]) if cap is None else min(cap, len(case["middle"]))
    return {"id": f"prefix/{case['id']}", "left": case["left"],
            "middle": case["middle"] + case["right"], "right": "", "hole": hole,
            "file": case["file"]}


def sample(cases: list[dict], n: int, seed: int) -> list[dict]:
    """``n`` of ``cases`` (all when fewer), chosen reproducibly, in their original order."""
    if n >= len(cases):
        return list(cases)
    keep = sorted(random.Random(f"{seed}:sample").sample(range(len(cases)), n))
    return [cases[i] for i in keep]
