"""What the model sees of a document, and how its middle comes back."""

from __future__ import annotations

import pytest

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
