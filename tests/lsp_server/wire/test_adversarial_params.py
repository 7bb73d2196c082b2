"""Params that break LSP's schema, from a raw client: refused, never coerced.

cattrs, under pygls, structures a scalar by calling the schema's type on it: ``int("1")``,
``int(1.9)``, ``str(None)``, ``str(12345)``. A request whose params break the schema must get
``InvalidParams`` (-32602) instead of an answer at a place the client never named; a
notification must be dropped with a warning (``window/logMessage``) and nothing stored. Valid
traffic, with integers where LSP says integer and text where it says string, is unchanged.
"""

from __future__ import annotations

import re

import pytest

from tests.support.raw_client import SeamProcess, no_traceback

pytestmark = pytest.mark.timeout(300)

URI = "file:///p.py"
TEXT = "def f(x):\n    return x\n\nprint(f(1))\n"  # 5 lines


def _log_messages(srv: SeamProcess) -> list[str]:
    return [m["params"]["message"] for m in srv.notifications("window/logMessage")]


def _line_count(srv: SeamProcess, uri: str) -> int:
    """The server's line count of ``uri``: asked for a line far past the end, it says how
    many lines the document has (``... beyond the end of the document (N lines)``)."""
    seen = len(_log_messages(srv))
    reply = srv.inline(uri, 999, 0)
    assert "result" in reply, reply
    found = srv.wait_for(
        lambda _: [m for m in _log_messages(srv)[seen:] if "beyond the end" in m],
        what="the position warning")
    return int(re.search(r"\((\d+) lines\)", found[0]).group(1))


@pytest.mark.parametrize("position", [
    {"line": "1", "character": 1},
    {"line": 1, "character": 1.9},
    {"line": 1.0, "character": 1},
    {"line": True, "character": 1},
    {"line": 1, "character": None},
    {"line": 1, "character": [1]},
])
def test_a_position_of_the_wrong_kind_gets_invalid_params(tmp_path, position) -> None:
    with SeamProcess(tmp_path) as srv:
        srv.initialize({"seam": {"model": "random:santacoder"}})
        srv.open(URI, TEXT)
        for method in ("textDocument/inlineCompletion", "textDocument/completion"):
            reply = srv.call(method, {"textDocument": {"uri": URI}, "position": position,
                                      "context": {"triggerKind": 1}})
            assert reply.get("error", {}).get("code") == -32602, (method, reply)
            assert "position" in reply["error"]["message"], reply
        assert srv.alive()
        assert srv.shutdown_and_exit() == 0
        no_traceback(srv.stderr, srv.log_text())


def test_a_change_with_null_text_is_dropped_and_the_document_kept(tmp_path) -> None:
    with SeamProcess(tmp_path) as srv:
        srv.initialize({"seam": {"model": "random:santacoder"}})
        srv.open(URI, TEXT)
        srv.notify("textDocument/didChange", {
            "textDocument": {"uri": URI, "version": 2}, "contentChanges": [{"text": None}]})
        srv.notify("textDocument/didChange", {
            "textDocument": {"uri": URI, "version": 3},
            "contentChanges": [{"range": {"start": {"line": 0, "character": 0},
                                          "end": {"line": 0, "character": 0}}, "text": 7}]})
        assert _line_count(srv, URI) == 5  # the text is TEXT, not 'None' (1 line)
        srv.wait_for(lambda _: any("invalid params for textDocument/didChange" in m
                                   for m in _log_messages(srv)), what="the warning")
        # A good edit afterwards still applies: the document was never dropped.
        srv.notify("textDocument/didChange", {
            "textDocument": {"uri": URI, "version": 4}, "contentChanges": [{"text": "x = 1"}]})
        assert _line_count(srv, URI) == 1
        assert srv.shutdown_and_exit() == 0
        no_traceback(srv.stderr, srv.log_text())


@pytest.mark.parametrize("item", [
    {"uri": URI, "languageId": 7, "version": 1, "text": "x = 1\n"},
    {"uri": URI, "languageId": "python", "version": 1, "text": 12345},
    {"uri": URI, "languageId": "python", "version": "1", "text": "x = 1\n"},
    {"uri": 5, "languageId": "python", "version": 1, "text": "x = 1\n"},
])
def test_an_open_of_the_wrong_kind_stores_nothing(tmp_path, item) -> None:
    with SeamProcess(tmp_path) as srv:
        srv.initialize()
        srv.notify("textDocument/didOpen", {"textDocument": item})
        assert srv.status()["documents"] == 0
        srv.wait_for(lambda _: any("invalid params for textDocument/didOpen" in m
                                   for m in _log_messages(srv)), what="the warning")
        assert not any("12345" in m or "x = 1" in m for m in _log_messages(srv))
        assert srv.shutdown_and_exit() == 0
        no_traceback(srv.stderr, srv.log_text())


def test_valid_traffic_is_unchanged(tmp_path) -> None:
    with SeamProcess(tmp_path) as srv:
        srv.initialize({"seam": {"model": "random:santacoder"}},
                       capabilities={"general": {"positionEncodings": ["utf-16"]}},
                       workspaceFolders=None)
        srv.open(URI, TEXT)
        assert srv.status()["documents"] == 1
        srv.notify("textDocument/didChange", {
            "textDocument": {"uri": URI, "version": 2},
            "contentChanges": [{"range": {"start": {"line": 4, "character": 0},
                                          "end": {"line": 4, "character": 0}},
                                "text": "y = 2\n"}]})
        assert _line_count(srv, URI) == 6
        reply = srv.inline(URI, 1, 11)
        assert "result" in reply, reply
        srv.notify("$/cancelRequest", {"id": "not-pending"})
        srv.notify("workspace/didChangeConfiguration", {"settings": {"seam": {}}})
        assert srv.alive()
        assert not any("invalid params" in m for m in _log_messages(srv)), _log_messages(srv)
        assert srv.shutdown_and_exit() == 0
        no_traceback(srv.stderr, srv.log_text())
