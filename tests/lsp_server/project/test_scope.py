"""What leaves the project context at once when the user removes a folder, and text that
enters it with \\r line breaks."""

from __future__ import annotations

from pathlib import Path

import pytest

from fim import api
from lsp_server.project.context_source import ContextSource
from lsp_server.project.sources import SOURCES, ContextCollector, OpenDocument
from lsp_server.project.workspace import Workspace
from lsp_server.request_plan import Planned, RequestPlanner
from lsp_server.settings import Settings

LOOP = ("    for v in values:\n        total = total + scale(v, 2)\n"
        "        total = shift(total)\n        count = count + 1\n")
#: Few enough repeats of the loop that the document's own similar code above the prompt does
#: not crowd folder B's out of the context (the test model's window, 1,024 tokens, leaves the
#: context some 730).
REPEATS = 8
MAIN = ("from helpers import scale\nfrom bee import shift\n\n\ndef compute(values):\n"
        "    total = 0\n    count = 0\n" + LOOP * REPEATS + "    return total\n")
#: Folder B: a module main imports, code like main's loop, and a note the user has open.
BEE = ("def shift(x):\n    # BEE-SECRET-DEFINITION\n    return x + 1\n\n\n"
       "def bee_compute(values):\n    total = 0\n    count = 0\n"
       "    for v in values:\n        total = total + scale(v, 2)  # BEE-SECRET-SIMILAR\n"
       "        total = shift(total)\n        count = count + 1\n    return total\n")
NOTES = "BEE_NOTE = 'BEE-SECRET-OPEN'\n\n\ndef bee_note(x):\n    return x  # BEE-SECRET-OPEN\n"


@pytest.fixture(scope="module")
def engine():
    return api.Engine.load("random:santacoder")


def settings() -> Settings:
    return Settings(model="random:santacoder", context_tokens=4096, context_budget=1024)


@pytest.fixture
def two_folders(tmp_path: Path) -> dict:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "helpers.py").write_text("def scale(value, factor):\n    return value * factor\n")
    (a / "main.py").write_text(MAIN)
    (b / "bee.py").write_text(BEE)
    (b / "notes.py").write_text(NOTES)
    ws = Workspace()
    ws.add(a.as_uri(), "a")
    ws.add(b.as_uri(), "b")
    return {"a": a, "b": b, "ws": ws, "main": (a / "main.py").as_uri(),
            "notes": (b / "notes.py").as_uri()}


def plan(engine, planner: RequestPlanner, f: dict, text: str = MAIN) -> Planned:
    offset = text.index("    return total")
    docs = [OpenDocument(f["notes"], NOTES), OpenDocument(f["main"], text)]
    return planner.plan(engine, settings(), f["main"], text, offset, docs)


def secrets(planned: Planned) -> set[str]:
    """The sources of folder B whose code the request carries."""
    found = set()
    for file in planned.request.context_files:
        for kind in ("DEFINITION", "SIMILAR", "OPEN", "EDIT"):
            if f"BEE-SECRET-{kind}" in file.text:
                found.add(kind)
    return found


def test_a_removed_folder_leaves_every_source_at_once(engine, two_folders):
    f = two_folders
    collector = ContextCollector(f["ws"])
    planner = RequestPlanner(collector)
    collector.visit(f["notes"], 4)
    edited = NOTES + "# BEE-SECRET-EDIT\n"
    collector.ring.record(f["notes"], edited, 5, 6, 6)
    before = plan(engine, planner, f)
    assert secrets(before) == {"DEFINITION", "SIMILAR", "OPEN", "EDIT"}
    f["ws"].remove(f["b"].as_uri())
    # At once, before any request: the edits made in B are gone from the ring.
    assert [c.uri for c in collector.ring.chunks()] == []
    # The user goes on typing at the same place (the similar code's choice is cached there).
    after = plan(engine, planner, f)
    assert secrets(after) == set()
    assert not {"bee.py", "notes.py"} & {c.path for c in after.request.context_files}
    assert after.request.context_files  # the rest of the context is still there
    # Added again, it is back (but for the edits made before: they left with it).
    f["ws"].add(f["b"].as_uri(), "b")
    assert secrets(plan(engine, planner, f)) >= {"DEFINITION", "OPEN"}


def test_a_document_outside_every_folder_that_was_never_removed_still_counts(tmp_path):
    ws = Workspace()
    ws.add(tmp_path.as_uri())
    elsewhere = "file:///nowhere/scratch.py"
    assert ws.in_scope(elsewhere) and ws.in_scope("untitled:Untitled-1")
    inner = tmp_path / "inner"
    inner.mkdir()
    ws.add(inner.as_uri())
    ws.remove(inner.as_uri())
    # Removed, but still inside a folder the workspace holds: still in scope.
    assert ws.in_scope((inner / "x.py").as_uri())


def test_every_source_implements_the_one_interface(two_folders):
    collector = ContextCollector(two_folders["ws"])
    assert tuple(s.name for s in collector.sources) == SOURCES
    for source in collector.sources:
        assert isinstance(source, ContextSource)  # a runtime-checkable protocol
        for method in ("pick", "forget", "rescope"):
            assert callable(getattr(source, method))


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_no_carriage_return_reaches_the_prompt(engine, tmp_path, newline):
    root = tmp_path / "proj"
    root.mkdir()
    helpers = "def scale(value, factor):\n    total = value * factor\n    return total\n"
    (root / "helpers.py").write_bytes(helpers.replace("\n", newline).encode())
    (root / "bee.py").write_bytes(BEE.replace("\n", newline).encode())
    notes = NOTES.replace("\n", newline)
    # Long enough that the document's own code far above the cursor is similar code too.
    text = MAIN.replace(LOOP * REPEATS, LOOP * 200).replace("\n", newline)
    ws = Workspace()
    ws.add(root.as_uri())
    collector = ContextCollector(ws)
    main, notes_uri = (root / "main.py").as_uri(), (root / "notes.py").as_uri()
    collector.ring.record(notes_uri, notes, 1, 2, 2)
    offset = text.index("    return total")
    planned = RequestPlanner(collector).plan(
        engine, settings(), main, text, offset,
        [OpenDocument(notes_uri, notes), OpenDocument(main, text)])
    files = planned.request.context_files
    assert {"helpers.py", "bee.py", "notes.py", "main.py"} <= {f.path for f in files}
    assert not [f.path for f in files if "\r" in f.text]
