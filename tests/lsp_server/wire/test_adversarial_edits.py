"""An edit whose column falls inside a character, from a raw client: the server keeps the
document (the edit lands at the character's start, as VS Code places such a position) and
says so once, instead of dropping the document until the editor reopens it."""

from __future__ import annotations

import re

import pytest

from tests.support.raw_client import SeamProcess, no_traceback

pytestmark = pytest.mark.timeout(300)

URI = "file:///e.py"


def _log_messages(srv: SeamProcess) -> list[str]:
    return [m["params"]["message"] for m in srv.notifications("window/logMessage")]


def _edit(srv: SeamProcess, version: int, line: int, character: int, text: str) -> None:
    at = {"line": line, "character": character}
    srv.notify("textDocument/didChange", {
        "textDocument": {"uri": URI, "version": version},
        "contentChanges": [{"range": {"start": at, "end": at}, "text": text}]})


def _line_count(srv: SeamProcess) -> int:
    seen = len(_log_messages(srv))
    assert "result" in srv.inline(URI, 999, 0)
    found = srv.wait_for(
        lambda _: [m for m in _log_messages(srv)[seen:] if "beyond the end" in m],
        what="the position warning (the document is open)")
    return int(re.search(r"\((\d+) lines\)", found[0]).group(1))


def test_an_edit_inside_a_surrogate_pair_keeps_the_document(tmp_path) -> None:
    with SeamProcess(tmp_path) as srv:
        srv.initialize({"seam": {"model": "random:santacoder"}})
        srv.open(URI, "s = '😋'\nx = 1\n")  # the emoji is UTF-16 units 5 and 6
        _edit(srv, 2, 0, 6, "\n")  # between its two halves: lands before it
        _edit(srv, 3, 1, 1, "")    # a second split edit: told only once
        _edit(srv, 4, 1, 1, "y")
        assert srv.status()["documents"] == 1
        assert _line_count(srv) == 4  # "s = '" / "y😋'" / "x = 1" / ""
        split = [m for m in _log_messages(srv) if "inside a character" in m]
        assert len(split) == 1, _log_messages(srv)
        assert srv.shutdown_and_exit() == 0
        no_traceback(srv.stderr, srv.log_text())
