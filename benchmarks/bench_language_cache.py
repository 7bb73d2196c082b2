"""What the one language cache (``fim.language_cache``) saves a request typed on from another:
building the Python FIM language for the new left text against taking the kept one and feeding
it the typed characters.

Both constrained paths (the in-process engine and the vLLM server's rows) ask the cache once per
request.  For each standard-library file the script cuts ``--cursors`` places (seeded, at line
ends in the file's middle 80%), takes out the next ``--typed`` characters, and times, at each
place: a build for the text with the characters typed (what a cache that keeps languages by
exact text pays, as the vLLM rows' cache did), and ``LanguageCache.get`` for it on a cache that
holds the language of the text before them (what both paths pay now).  Wall and CPU time (the
machine is shared: wall time includes waiting for a core), median and p90 over all places, and
how many places were served by the kept language.

Usage: ``.venv/bin/python -m benchmarks.bench_language_cache [--cursors 8] [--typed 6] [FILE...]``
(``--figures PAGE`` writes the table and the run's provenance into the ``language-cache``
section of that page).
"""

from __future__ import annotations

import argparse
import random
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a file: the root

from benchmarks.report import RunRecord, command_line, publish  # noqa: E402
from benchmarks.stats import median_p90  # noqa: E402
from fim.language_cache import LanguageCache, python_language  # noqa: E402
from fim.options import Scope  # noqa: E402

DEFAULT_FILES = ("textwrap.py", "dataclasses.py", "argparse.py")


@dataclass(frozen=True)
class Place:
    """A cursor before and after typing: the left text grows by ``typed``, the right stays."""

    file: str
    left: str
    typed: str
    right: str


@dataclass
class Timing:
    """Seconds per place: wall and CPU, built anew and taken from the cache."""

    build_wall: list[float]
    build_cpu: list[float]
    cached_wall: list[float]
    cached_cpu: list[float]
    reused: int = 0


def places(name: str, text: str, count: int, typed: int, seed: int) -> list[Place]:
    """``count`` places in ``text`` (line ends in its middle 80%, the next ``typed``
    characters on the same line taken out as the characters the user types)."""
    rng = random.Random(f"{seed}:{name}")
    ends = [i for i, ch in enumerate(text) if ch == "\n"
            and 0.1 * len(text) < i < 0.9 * len(text)]
    out = []
    for end in sorted(rng.sample(ends, min(count * 4, len(ends)))):
        start = text.rfind("\n", 0, end) + 1
        cut = end - typed
        if cut <= start or not text[start:cut].strip():
            continue  # a line shorter than the typed characters, or a blank one
        out.append(Place(name, text[:cut], text[cut:end], text[end:]))
        if len(out) == count:
            break
    return out


def measure(found: list[Place], scope: Scope) -> Timing:
    timing = Timing([], [], [], [])
    for place in found:
        typed_left = place.left + place.typed
        w0, c0 = time.perf_counter(), time.process_time()
        python_language(typed_left, place.right, scope).initial()
        timing.build_cpu.append(time.process_time() - c0)
        timing.build_wall.append(time.perf_counter() - w0)
        cache = LanguageCache()
        cache.get(place.left, place.right, scope)  # the request before the typing
        w0, c0 = time.perf_counter(), time.process_time()
        hit = cache.get(typed_left, place.right, scope)
        timing.cached_cpu.append(time.process_time() - c0)
        timing.cached_wall.append(time.perf_counter() - w0)
        timing.reused += hit.reused
    return timing


def table(timing: Timing, count: int) -> str:
    rows = ["| language for the typed-on request | wall ms, median / p90 | CPU ms, median / p90 |",
            "|---|---:|---:|",
            f"| built anew | {median_p90(timing.build_wall, '.1f', 1e3)} | "
            f"{median_p90(timing.build_cpu, '.1f', 1e3)} |",
            f"| from the cache, fed the typed text | {median_p90(timing.cached_wall, '.2f', 1e3)}"
            f" | {median_p90(timing.cached_cpu, '.2f', 1e3)} |"]
    rest = count - timing.reused
    return ("\n".join(rows) + f"\n\nThe kept language served {timing.reused} of {count} "
            "places" + (f"; at {rest} the typed text could not be fed and the language was "
                        "built anew" if rest else "") + ".\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="*", default=list(DEFAULT_FILES),
                   help="standard-library files (default: " + ", ".join(DEFAULT_FILES) + ")")
    p.add_argument("--cursors", type=int, default=8, help="places per file (default: 8)")
    p.add_argument("--typed", type=int, default=6,
                   help="characters typed at each place (default: 6)")
    p.add_argument("--scope", default="statement", choices=[s.value for s in Scope])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--figures", type=Path, default=None)
    p.add_argument("--section", default="language-cache")
    args = p.parse_args(argv)
    if args.cursors < 1 or args.typed < 1:
        p.error("--cursors and --typed must be at least 1")
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    record = RunRecord(command_line())
    found = [place for name in args.files for place in places(
        name, (stdlib / name).read_text(encoding="utf-8"), args.cursors, args.typed,
        args.seed)]
    if not found:
        p.error("no place found in the files")
    python_language("x = 1\n", "\n", Scope.STATEMENT)  # the grammar's tables, built once
    timing = measure(found, Scope(args.scope))
    record.finish()
    body = (f"{len(found)} places in {', '.join(args.files)} (standard library, Python "
            f"{sys.version.split()[0]}), {args.typed} characters typed at each, scope "
            f"{args.scope}:\n\n" + table(timing, len(found)))
    publish(body, record, args.figures, args.section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
