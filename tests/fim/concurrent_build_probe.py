"""Builds Python FIM languages, from one thread or from several at once, in a fresh process,
and prints what the test compares (``tests/fim/test_concurrent_languages.py``).

Run as ``python -m tests.fim.concurrent_build_probe threads|single``: each language's answers
on fixed probe texts (refused, or accepted and complete or not), and how many states of the
shared LR(0) automata are held twice (two objects for one interned item set: what concurrent
writers to the automata's memo tables leave behind without their locks).  A fresh process,
because the automata are shared by every language built in it: one built earlier would hide
the race.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

#: (file, cursor as a fraction of its length): different languages over one grammar.
FILES = ("ast.py", "textwrap.py", "shlex.py", "fractions.py", "argparse.py", "typing.py")
#: Texts fed from each language's initial state.
PROBES = ("", "x", " = 1", "(", ")", "\n", "return x\n", "def f(a):\n    pass\n", "'", "if x:",
          "]", " + b", "import os\n", "class C:\n    y = 2\n")
THREADS = 6


def _places() -> list[tuple[str, str]]:
    lib = Path(json.__file__).resolve().parent.parent
    out = []
    for k, name in enumerate(FILES):
        text = (lib / name).read_text(encoding="utf-8")[:20_000]
        cut = text.find("\n", len(text) * (k + 2) // (len(FILES) + 3)) + 1
        out.append((text[:cut], text[cut:]))
    return out


def _answers(language) -> list[int]:
    """Per probe: 0 refused, 1 accepted, 2 accepted and complete."""
    initial = language.initial()
    got = []
    for text in PROBES:
        state = initial.feed(text) if text else initial
        got.append(0 if state is None else 2 if state.is_complete() else 1)
    return got


def _duplicates() -> int:
    """Kernel states (every goto target is one) that are not the object their automaton
    interned for their items, over every live automaton."""
    from quotient import lr0

    seen: set[int] = set()
    count = 0
    work = [s for auto in list(lr0._automata.values())
            for table in (auto._kernels, auto._predictions) for s in table.values()]
    while work:
        s = work.pop()
        if id(s) in seen:
            continue
        seen.add(id(s))
        for t in list(s.goto.values()):
            if t:
                count += t.auto._kernels.get(t.items) is not t
                work.append(t)
    return count


def main(mode: str) -> None:
    from fim.language_cache import python_language

    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    places = _places()
    # Every place twice: the same language built concurrently, and different ones.
    jobs = [(i, place) for i, place in enumerate(places)] * 2
    results: dict[int, list[list[int]]] = {}
    lock = threading.Lock()
    errors: list[str] = []

    def run(batch: list[tuple[int, tuple[str, str]]], start: threading.Barrier | None) -> None:
        if start is not None:
            start.wait()
        for i, (left, right) in batch:
            try:
                got = _answers(python_language(left, right, "free"))
            except Exception as err:  # noqa: BLE001 - reported to the test
                with lock:
                    errors.append(f"{type(err).__name__}: {err}")
                continue
            with lock:
                results.setdefault(i, []).append(got)

    if mode == "single":
        run(jobs, None)
    else:
        start = threading.Barrier(THREADS)
        threads = [threading.Thread(target=run, args=(jobs[k::THREADS], start))
                   for k in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    print(json.dumps({"answers": {str(k): v for k, v in sorted(results.items())},
                      "duplicates": _duplicates(), "errors": errors}))


if __name__ == "__main__":
    main(sys.argv[1])
