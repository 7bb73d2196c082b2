"""What the model sees of a document, and how its middle comes back."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol import types

from fim import lines
from lsp_server.documents import Document
from lsp_server.text import for_document, for_model, line_break_of


@pytest.mark.parametrize("text,expected", [
    ("a\ud800b", "a\ufffdb"),
    ("\udfff", "\ufffd"),
    ("😋 stays", "😋 stays"),  # a proper pair is one code point, not a surrogate
    ("x = 1\ry = 2\r", "x = 1\ny = 2\n"),
    ("x = 1\r\ny = 2\r\n", "x = 1\ny = 2\n"),
    ("mixed\r\nand\rand\n", "mixed\nand\nand\n"),
    ("plain\n", "plain\n"),
])
def test_for_model(text, expected) -> None:
    assert for_model(text) == expected


def test_lone_surrogates_are_replaced_without_moving_any_position() -> None:
    text = "s = '\ud800'\nx = 'é😋'\n"
    safe = for_model(text)
    for encoding in ("utf-16", "utf-8", "utf-32"):
        a, b = Document("u", text, 1, "python", encoding), Document("u", safe, 1, "python",
                                                                     encoding)
        for offset in range(len(text) + 1):
            assert a.position_at(offset) == b.position_at(offset)


@pytest.mark.parametrize("text,newline", [
    ("a\nb\r\n", "\n"), ("a\r\nb\n", "\r\n"), ("a\rb\n", "\r"), ("no break", "\n"),
    ("\r", "\r"), ("", "\n"),
])
def test_line_break_of(text, newline) -> None:
    assert line_break_of(text) == newline


def test_for_document() -> None:
    assert for_document("if x:\n    y\n", "\r\n") == "if x:\r\n    y\r\n"
    assert for_document("if x:\n    y\n", "\r") == "if x:\r    y\r"
    assert for_document("a\nb", "\n") == "a\nb"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab \r\n\t\x0c\u2028😋é", max_size=30))
def test_the_command_line_and_the_server_count_lines_and_columns_alike(text) -> None:
    # `seam complete FILE:LINE:COL` (1-based code points) and the server (0-based, here in
    # UTF-32 units, which are code points) name the same offset for every place in the text.
    doc = Document("u", text, 1, "python", types.PositionEncodingKind.Utf32)
    assert doc.line_count == len(lines.line_starts(text))
    for line in range(doc.line_count):
        start, end = doc._line_bounds(line)
        for col in range(end - start + 1):
            server = doc.offset_at(types.Position(line=line, character=col))
            assert lines.offset_of(text, line + 1, col + 1) == server
        with pytest.raises(lines.LineColumnError):
            lines.offset_of(text, line + 1, end - start + 2)
