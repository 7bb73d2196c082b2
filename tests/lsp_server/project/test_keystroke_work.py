"""The work a keystroke costs the project context does not grow with the number of workspace
folders, of open documents, or of import lines: counted in calls (disk calls, parses), never
in seconds.  (``benchmarks/bench_project_scale.py`` measures the same cases in seconds.)"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fim import api
from lsp_server.project.sources import ContextCollector, OpenDocument
from lsp_server.project.workspace import Workspace
from lsp_server.request_plan import RequestPlanner
from lsp_server.settings import Settings

HELPERS = '''def scale(value, factor):
    """Multiply ``value`` by ``factor``."""
    return value * factor
'''
#: Twenty modules that are in no folder, each used, as in the issue's profile.
MISSING = "".join(f"import missing_{i}\n" for i in range(20))
USES = "".join(f"    total = total + missing_{i}.value(v)\n" for i in range(20))
MAIN = ("from helpers import scale\n" + MISSING + "\n\ndef compute(values):\n"
        "    total = 0\n    for v in values:\n" + USES
        + "        total = total + scale(v, 2)\n    return total\n")


@dataclass
class Calls:
    """Real calls counted as they pass (a spy: each still runs)."""

    counts: dict[str, int] = field(default_factory=dict)

    def total(self) -> int:
        return sum(self.counts.values())


@contextmanager
def counting(monkeypatch: pytest.MonkeyPatch, *targets: tuple[object, str]) -> Iterator[Calls]:
    calls = Calls()
    for owner, name in targets:
        real = getattr(owner, name)
        key = f"{getattr(owner, '__name__', owner)}.{name}"
        calls.counts[key] = 0

        def spy(*args, _real=real, _key=key, **kwargs):
            calls.counts[_key] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(owner, name, spy)
    try:
        yield calls
    finally:
        monkeypatch.undo()


def disk(monkeypatch: pytest.MonkeyPatch):
    """Count what touches the disk: links resolved, stats, listings, opens."""
    return counting(monkeypatch, (os.path, "realpath"), (os, "stat"), (os, "scandir"),
                    (os, "open"))


@pytest.fixture(scope="module")
def engine():
    return api.Engine.load("random:santacoder")


def settings() -> Settings:
    return Settings(model="random:santacoder", context_tokens=2048, context_budget=256)


def project(tmp_path: Path, folders: int, documents: int = 0,
            main: str = MAIN) -> tuple[RequestPlanner, str, list[OpenDocument]]:
    """A workspace of ``folders`` folders (the first holds main.py and helpers.py; the others
    a module each) and ``documents`` other open documents; the planner, main's URI and the
    open documents (main's last)."""
    roots = [tmp_path / f"folder_{i}" for i in range(folders)]
    for i, root in enumerate(roots):
        root.mkdir(parents=True)
        (root / f"module_{i}.py").write_text(f"def f_{i}(x):\n    return x + {i}\n")
    (roots[0] / "helpers.py").write_text(HELPERS)
    (roots[0] / "main.py").write_text(main)
    ws = Workspace()
    for root in roots:
        assert ws.add(root.as_uri()) is not None
    docs = []
    for i in range(documents):
        path = roots[i % folders] / f"open_{i}.py"
        text = (f"class Thing{i}:\n    def method(self, a, b):\n        return a + b + {i}\n\n\n"
                f"def helper_{i}(x, y=1):\n    return x * y\n")
        path.write_text(text)
        docs.append(OpenDocument(path.as_uri(), text))
    collector = ContextCollector(ws)
    # Every keystroke looks at the disk again (the worst keystroke; by default once in 2 s),
    # while the folders' listing holds: what is counted is a keystroke's own work.
    collector.definitions.refresh_s = 0.0
    ws.listing_refresh_s = 1e9
    uri = (roots[0] / "main.py").as_uri()
    return RequestPlanner(collector), uri, docs


def keystrokes(engine, planner: RequestPlanner, uri: str, docs: list[OpenDocument],
               text: str, typed: str) -> Iterator[None]:
    """Type ``typed`` after ``return total`` in ``text``, one request per keystroke."""
    at = text.index("return total") + len("return total")
    for k in range(len(typed) + 1):
        now = text[:at] + typed[:k] + text[at:]
        planner.plan(engine, settings(), uri, now, at + k, [*docs, OpenDocument(uri, now)])
        yield


def work_per_keystroke(engine, monkeypatch, planner, uri, docs, text=MAIN,
                       what=disk) -> tuple[int, int]:
    """``(first request's work, the next keystrokes' work)``."""
    steps = keystrokes(engine, planner, uri, docs, text, " + 1")
    with what(monkeypatch) as first:
        next(steps)
    with what(monkeypatch) as rest:
        for _ in steps:
            pass
    return first.total(), rest.total()


def parses(monkeypatch: pytest.MonkeyPatch):
    return counting(monkeypatch, (ast, "parse"))


def test_a_keystrokes_disk_work_does_not_grow_with_the_folders(engine, tmp_path, monkeypatch):
    one = work_per_keystroke(engine, monkeypatch, *project(tmp_path / "one", 1))
    many = work_per_keystroke(engine, monkeypatch, *project(tmp_path / "many", 60))
    assert one[1] > 0  # the imports are checked on disk at every keystroke here
    assert many[1] == one[1]
    # The first request lists each folder once (where imports start): linear, not squared.
    assert many[0] <= one[0] + 3 * 60


def test_the_folders_are_listed_once_not_once_per_import(tmp_path, monkeypatch):
    roots = [tmp_path / f"folder_{i}" for i in range(60)]
    ws = Workspace()
    for root in roots:
        root.mkdir()
        ws.add(root.as_uri())
    (roots[7] / "src").mkdir()
    (roots[7] / "src" / "wanted.py").write_text("X = 1\n")
    with disk(monkeypatch) as calls:
        first = [ws.module_bases(f"missing_{i}") for i in range(20)]
    assert first == [()] * 20
    assert calls.counts["os.scandir"] == 61  # each folder once, and the one src/
    assert [b.directory for b in ws.module_bases("wanted")] == [roots[7].resolve() / "src"]
    with disk(monkeypatch) as calls:
        for i in range(20):
            ws.module_bases(f"missing_{i}")
    assert calls.total() == 0
    ws.listing_refresh_s = 0.0  # the listing's time is up: looked at again, once
    with disk(monkeypatch) as calls:
        ws.module_bases("wanted")
    assert calls.counts["os.scandir"] == 0 and calls.counts["os.stat"] == 61  # unchanged
    (roots[3] / "wanted.py").write_text("Y = 2\n")
    os.utime(roots[3], ns=(1, 1))  # an mtime that surely moved, however coarse the clock
    with disk(monkeypatch) as calls:
        found = ws.module_bases("wanted")
    assert calls.counts["os.scandir"] == 1  # the folder that changed
    assert [b.directory for b in found] == [roots[3].resolve(), roots[7].resolve() / "src"]


def test_a_keystrokes_work_does_not_grow_with_the_open_documents(engine, tmp_path,
                                                                   monkeypatch):
    one = project(tmp_path / "one", 1, documents=1)
    many = project(tmp_path / "many", 1, documents=80)
    for what in (parses, disk):
        assert work_per_keystroke(engine, monkeypatch, *many, what=what)[1] == \
            work_per_keystroke(engine, monkeypatch, *one, what=what)[1]
    # The outlines of the open documents were each parsed once, not at every keystroke.
    assert many[0].collector.open_files.parses <= 80


@pytest.mark.parametrize("block", ["from a import (\n", "import os\n"])
def test_a_keystroke_reads_a_huge_import_block_without_parsing_it_again(engine, tmp_path,
                                                                          monkeypatch, block):
    text = block * 10_000 + MAIN
    planner, uri, docs = project(tmp_path, 1, main=text)
    first, rest = work_per_keystroke(engine, monkeypatch, planner, uri, docs, text=text,
                                     what=parses)
    assert rest <= 4  # the typed statement at most, not the 10,000 import lines
    normal = project(tmp_path / "normal", 1)
    _, rest_normal = work_per_keystroke(engine, monkeypatch, *normal, what=parses)
    assert rest <= rest_normal + 4
