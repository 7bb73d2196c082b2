"""Seam's own messages (``lsp_server.messages``) against their documentation and their readers.

docs/INTERFACES.md shows each message; the editors (VS Code, Neovim) and the benchmarks read
or send them by field name. A field renamed on one side only would break an editor silently:
these tests tie the records, the documented examples and the clients together, and check that
a malformed ``seam/cursor`` is refused with a reason (it used to be dropped without one)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from lsp_server.jobs import DecodeRecord
from lsp_server.messages import (
    CompletionRecord,
    CursorMessage,
    MessageError,
    StatusReply,
)
from lsp_server.model_host import HostState
from tests.support.seam_lsp_client import REPO, documented_examples

DOCS = documented_examples()


def field_names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


@pytest.mark.parametrize(("heading", "record"), [
    ("seam/status notification", HostState),
    ("seam/status request", StatusReply),
    ("completion record", CompletionRecord),
    ("decode record", DecodeRecord),
    ("seam/cursor notification", CursorMessage),
])
def test_each_documented_example_reads_and_writes_back_unchanged(heading, record) -> None:
    example = DOCS[heading]
    written = record.from_json(example)
    again = written.as_json() if record is HostState else written.to_json()
    assert again == example


@pytest.mark.parametrize("record", [CompletionRecord, DecodeRecord])
def test_the_documented_records_show_every_field(record) -> None:
    heading = {CompletionRecord: "completion record", DecodeRecord: "decode record"}[record]
    assert set(DOCS[heading]) == field_names(record)


def test_the_status_answer_is_the_notification_and_the_rest() -> None:
    reply = set(DOCS["seam/status request"])
    assert set(DOCS["seam/status notification"]) <= reply
    assert reply == set(DOCS["seam/status notification"]) | field_names(StatusReply) - {"state"}


@pytest.mark.parametrize(("params", "reason"), [
    (None, "params must be an object"),
    ([], "params must be an object"),
    ({"position": {"line": 0, "character": 0}}, "textDocument.uri"),
    ({"textDocument": {"uri": 3}, "position": {"line": 0, "character": 0}}, "textDocument.uri"),
    ({"textDocument": {"uri": "file:///a.py"}}, "position"),
    ({"textDocument": {"uri": "file:///a.py"}, "position": {"line": True, "character": 0}},
     "position.line"),
    ({"textDocument": {"uri": "file:///a.py"}, "position": {"line": 0, "character": -1}},
     "position.character"),
    ({"textDocument": {"uri": "file:///a.py"}, "position": {"line": 0, "character": 1.5}},
     "position.character"),
])
def test_a_malformed_cursor_message_is_refused_with_its_reason(params, reason) -> None:
    with pytest.raises(MessageError, match=re.escape(reason)):
        CursorMessage.from_json(params)


def test_a_completion_record_of_another_kind_is_refused() -> None:
    with pytest.raises(MessageError):
        CompletionRecord.from_json({"uri": "u", "source": "oracle", "stop": "eos",
                                    "total_ms": 1.0, "overhead_ms": 1.0})


def _braced(text: str, start: int) -> str:
    """The text of the ``{...}`` that opens at or after ``start``."""
    i = text.index("{", start)
    depth = 0
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i:j + 1]
    raise AssertionError("unbalanced braces")


def test_the_vscode_client_reads_and_sends_the_documented_fields() -> None:
    source = (REPO / "editors" / "vscode" / "src" / "client.ts").read_text(encoding="utf-8")
    status = _braced(source, source.index("interface SeamStatus"))
    assert set(re.findall(r"(\w+)\??:", status)) <= set(DOCS["seam/status notification"])
    reply = _braced(source, source.index("interface SeamStatusReply"))
    assert set(re.findall(r"(\w+)\??:", reply)) <= set(DOCS["seam/status request"])
    cursor = _braced(source, source.index('sendNotification("seam/cursor"'))
    assert set(re.findall(r"(\w+):", cursor)) == {"textDocument", "uri", "position", "line",
                                                  "character"}


def test_the_neovim_plugin_sends_the_documented_cursor_fields() -> None:
    source = (REPO / "editors" / "nvim" / "lua" / "seam" / "init.lua").read_text(
        encoding="utf-8")
    cursor = _braced(source, source.index('notify("seam/cursor"'))
    assert set(re.findall(r"(\w+)\s*=", cursor)) == set(DOCS["seam/cursor notification"]) | {
        "uri"}


def test_the_benchmark_session_sends_the_documented_cursor_fields() -> None:
    source = (REPO / "benchmarks" / "lsp_session.py").read_text(encoding="utf-8")
    cursor = _braced(source, source.index('notify("seam/cursor"'))
    assert set(re.findall(r'"(\w+)":', cursor)) == set(DOCS["seam/cursor notification"]) | {
        "uri"}
