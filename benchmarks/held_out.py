"""Held-out cursors of issue 29's paired run: a span of a statement line taken out (mid-line,
with the line's own text left after the cursor) or a statement line's text removed (empty
line), spread over the finer places of ``cursor_kinds.Place``.

A mid-line hole starts at a seeded column of the line and ends where the place still wanted
most can be had: inside a word (``class Config(BaseM|odel):``), before punctuation, before a
space, or at the line's end (before nothing).  An empty line keeps its indentation and the
cursor sits after it.  The truth is what the author wrote in the hole.

The pick is a pure function of the corpus's files and the seed: files in a seeded order
(``usefulness_cases.project_files``), lines from a sorted list, every draw from a
``random.Random`` seeded with a string (string seeds are hashed with SHA-512, not with
Python's randomised ``hash``), so two processes pick the same cursors whatever their
``PYTHONHASHSEED`` (``tests/benchmarks/test_held_out.py`` runs it in two).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from benchmarks.cursor_kinds import MID_LINE_PLACES, Place, place_of
from benchmarks.usefulness_cases import project_files, statement_lines

#: The paired run's cursors per corpus: this many of each mid-line place and of empty lines
#: (the stored llama.vim rows are for these; a machine shared by several agents made 40 + 20
#: per corpus at 17 to 150 s a llama-server request too slow for one session).  Empty lines
#: went from 8 to 16 once a quiet machine asked llama-server at about 10 s a row: the
#: first eight are the same cursors (the picker takes files in the same order).
MID_PER_PLACE = 4
EMPTY = 16

#: Longest span a mid-line hole takes out (a whole-line rest is allowed at the line's end).
MAX_SPAN = 60


@dataclass(frozen=True)
class HeldOut:
    """One cursor: the file with its hole, where the cursor is, and the author's text."""

    id: str  # ``project/relative/path.py:line:place``
    corpus: str
    project: str
    path: Path
    place: Place
    source: str  # the file as written
    start: int  # the hole ``[start, end)`` of ``source``; the cursor is at ``start``
    end: int
    line: int  # 0-based

    @property
    def text(self) -> str:
        """The file with the hole."""
        return self.source[:self.start] + self.source[self.end:]

    @property
    def truth(self) -> str:
        return self.source[self.start:self.end]

    @property
    def rel(self) -> str:
        """The path inside its project (as an editor names the buffer)."""
        return self.id.rsplit(":", 2)[0].split("/", 1)[1]


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _ends(line: str, a: int) -> dict[Place, list[int]]:
    """Where a hole starting at column ``a`` of ``line`` may end, by the place it leaves."""
    body = len(line.rstrip())
    out: dict[Place, list[int]] = {p: [] for p in MID_LINE_PLACES}
    for b in range(a + 1, min(body, a + MAX_SPAN) + 1):
        place = place_of(line[:a], line[a:b], line[b:])
        if place in out:
            out[place].append(b)
    if body not in out[Place.BEFORE_NOTHING] and body > a:
        out[Place.BEFORE_NOTHING].append(body)
    return out


def file_cursors(text: str, seed: str, wanted: dict[Place, int], per_file: int = 2
                 ) -> list[tuple[Place, int, int, int]]:
    """``(place, start, end, line)`` of at most ``per_file`` cursors in ``text``, at most one
    of each place, the place still wanted most first; ``wanted`` is lowered by the pick."""
    rng = random.Random(seed)
    lines = text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    candidates = statement_lines(text)
    rng.shuffle(candidates)
    out: list[tuple[Place, int, int, int]] = []
    taken: set[Place] = set()
    for n in candidates:
        if len(out) >= per_file:
            break
        line = lines[n]
        indent = len(line) - len(line.lstrip())
        if wanted.get(Place.EMPTY_LINE, 0) > 0 and Place.EMPTY_LINE not in taken and \
                rng.random() < 0.34:
            out.append((Place.EMPTY_LINE, starts[n] + indent, starts[n] + len(line), n))
            taken.add(Place.EMPTY_LINE)
            wanted[Place.EMPTY_LINE] -= 1
            continue
        if len(line.rstrip()) - indent < 6:
            continue
        a = rng.randrange(indent + 1, len(line.rstrip()) - 1)
        ends = _ends(line, a)
        open_places = sorted((p for p in MID_LINE_PLACES if ends[p] and p not in taken
                              and wanted.get(p, 0) > 0),
                             key=lambda p: (-wanted[p], MID_LINE_PLACES.index(p)))
        if not open_places:
            continue
        place = open_places[0]
        b = rng.choice(ends[place])
        out.append((place, starts[n] + a, starts[n] + b, n))
        taken.add(place)
        wanted[place] -= 1
    return sorted(out, key=lambda c: c[1])


def corpus_held_out(corpus: str, projects: list[tuple[str, Path]], mid_per_place: int,
                    empty: int, seed: int, per_file: int = 2
                    ) -> list[tuple[Path, list[tuple[Path, str]], list[HeldOut]]]:
    """Cursors of ``corpus``: ``mid_per_place`` of each mid-line place and ``empty`` empty
    lines, files taken from the projects in turn.  Each entry is a file, its project's files
    (for the documents an editor has open) and its cursors, in file order."""
    wanted = {p: mid_per_place for p in MID_LINE_PLACES}
    wanted[Place.EMPTY_LINE] = empty
    queues = []
    for name, folder in projects:
        files = project_files(folder, seed)
        queues.append((name, folder, list(files), files))
    out = []
    turn = 0
    while any(v > 0 for v in wanted.values()) and any(q[2] for q in queues):
        name, folder, todo, every = queues[turn % len(queues)]
        turn += 1
        if not todo:
            continue
        path, text = todo.pop(0)
        rel = path.relative_to(folder).as_posix()
        picked = file_cursors(text, f"{seed}:{corpus}:{name}/{rel}", wanted, per_file)
        if picked:
            out.append((path, every, [
                HeldOut(f"{name}/{rel}:{n + 1}:{place}", corpus, name, path, place, text,
                        start, end, n) for place, start, end, n in picked]))
    return out


def judged(cursor: HeldOut, middle: str | None) -> str | None:
    """The part of a suggestion judged against the truth: on an empty line its first line
    (Seam's early answer is that line; the truth is one line), elsewhere all of it."""
    if middle is None or cursor.place != Place.EMPTY_LINE:
        return middle
    return middle.split("\n", 1)[0]
