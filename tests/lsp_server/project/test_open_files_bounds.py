"""What the open-files source shows of a document is bounded, whatever its size (issue 28,
findings 4 and 5): it runs on the event loop, and a document with a 5 MB line was parsed for
its outline and tokenized whole for every request in another document (32 s)."""

from __future__ import annotations

from lsp_server.project import open_files
from lsp_server.project.context_source import OpenDocument
from lsp_server.project.open_files import MAX_SHOWN_CHARS, OpenFiles
from lsp_server.project.workspace import Workspace


def test_a_huge_document_is_neither_parsed_nor_shown_whole(monkeypatch) -> None:
    parsed: list[int] = []
    real = open_files.signatures_of
    monkeypatch.setattr(open_files, "signatures_of",
                        lambda text: parsed.append(len(text)) or real(text))
    source = OpenFiles(Workspace())
    doc = OpenDocument("file:///big.py", "import os\nDATA = [" + "1, " * 1_700_000 + "]\n")
    shown = source._shown(doc)
    assert parsed == [] and len(shown) <= MAX_SHOWN_CHARS and shown.startswith("import os")
    source.visit(doc.uri, 1)  # the user was on the long line
    assert len(source._shown(doc)) <= MAX_SHOWN_CHARS


def test_a_small_document_is_still_outlined() -> None:
    source = OpenFiles(Workspace())
    doc = OpenDocument("file:///small.py", "def f(x):\n    return x\n\n\nclass A:\n    pass\n")
    shown = source._shown(doc)
    assert "def f(x)" in shown and "class A" in shown
