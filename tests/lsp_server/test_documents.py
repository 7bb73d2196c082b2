"""The document store against a naive model of LSP text edits."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol import types

from lsp_server.documents import Document, PositionError

U16 = types.PositionEncodingKind.Utf16


def naive_lines(text: str) -> list[str]:
    """Lines without their breaks, splitting only on \\r\\n, \\r and \\n (as LSP does)."""
    return re.split(r"\r\n|\r|\n", text)


def naive_offset(text: str, line: int, char16: int) -> int:
    parts = re.split(r"(\r\n|\r|\n)", text)
    offset = 0
    for i in range(line):
        offset += len(parts[2 * i]) + len(parts[2 * i + 1])
    line_text = parts[2 * line]
    units = 0
    for i, ch in enumerate(line_text):
        if units >= char16:
            return offset + i
        units += 2 if ord(ch) > 0xFFFF else 1
    return offset + len(line_text)


def pos(line: int, character: int) -> types.Position:
    return types.Position(line=line, character=character)


def test_only_lsp_line_breaks_count() -> None:
    doc = Document("file:///a.py", "a\fb\x1cc\u2028d\ne\r\nf\rg", 1, "python")
    assert doc.line_count == 4
    assert doc.offset_at(pos(1, 0)) == len("a\fb\x1cc\u2028d\n")
    assert doc.offset_at(pos(3, 1)) == len(doc.text)


def test_utf16_positions_and_surrogates() -> None:
    doc = Document("file:///a.py", 'x = "😋"\n', 1, "python", U16)
    # The emoji takes two UTF-16 code units: the closing quote is at column 7.
    assert doc.text[doc.offset_at(pos(0, 7))] == '"'
    with pytest.raises(PositionError):
        doc.offset_at(pos(0, 6))  # between the two halves of the surrogate pair
    assert doc.position_at(doc.text.index('"', 5)) == pos(0, 7)


def test_utf8_and_utf32_encodings() -> None:
    text = "é😋z\n"
    d8 = Document("u", text, 1, "python", types.PositionEncodingKind.Utf8)
    d32 = Document("u", text, 1, "python", types.PositionEncodingKind.Utf32)
    assert d8.offset_at(pos(0, 6)) == 2 and d32.offset_at(pos(0, 2)) == 2
    assert d8.position_at(2) == pos(0, 6) and d32.position_at(2) == pos(0, 2)


def test_column_past_the_end_clamps_and_line_past_the_end_raises() -> None:
    doc = Document("u", "ab\ncd", 1, "python")
    assert doc.offset_at(pos(0, 99)) == 2
    with pytest.raises(PositionError):
        doc.offset_at(pos(2, 0))


def test_cursor_reports_line_bounds() -> None:
    doc = Document("u", "ab\r\ncd\n", 1, "python")
    cur = doc.cursor(pos(0, 1))
    assert (cur.offset, cur.line_start, cur.line_end) == (1, 0, 2)
    cur = doc.cursor(pos(1, 0))
    assert (cur.offset, cur.line_start, cur.line_end) == (4, 4, 6)


alphabet = st.sampled_from(list("ab \t\r\n\n😋é(:"))
text_st = st.text(alphabet, max_size=40)


@settings(max_examples=400, deadline=None)
@given(text_st, st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60), text_st),
                         max_size=6))
def test_incremental_edits_match_a_full_rebuild(start: str, edits: list) -> None:
    doc = Document("u", start, 1, "python", types.PositionEncodingKind.Utf32)
    model = start
    for a, b, new in edits:
        a, b = sorted((min(a, len(model)), min(b, len(model))))
        # No position lies between the \r and \n of one break: move such offsets before it.
        a -= model[a - 1:a + 1] == "\r\n"
        b -= model[b - 1:b + 1] == "\r\n"
        rng = types.Range(start=doc.position_at(a), end=doc.position_at(b))
        doc.apply_change(types.TextDocumentContentChangePartial(range=rng, text=new))
        model = model[:a] + new + model[b:]
        assert doc.text == model
        fresh = Document("u", model, 1, "python", types.PositionEncodingKind.Utf32)
        assert doc._starts == fresh._starts
        assert doc.line_count == len(naive_lines(model))


@settings(max_examples=300, deadline=None)
@given(text_st, st.integers(0, 10), st.integers(0, 12))
def test_utf16_offsets_match_naive(text: str, line: int, char16: int) -> None:
    doc = Document("u", text, 1, "python", U16)
    lines = naive_lines(text)
    if line >= len(lines):
        with pytest.raises(PositionError):
            doc.offset_at(pos(line, char16))
        return
    try:
        got = doc.offset_at(pos(line, char16))
    except PositionError:
        # Only a column inside a surrogate pair is refused.
        units = 0
        for ch in lines[line]:
            units += 2 if ord(ch) > 0xFFFF else 1
            if units == char16 + 1 and ord(ch) > 0xFFFF:
                return
        raise
    assert got == naive_offset(text, line, char16)


def test_full_change_replaces_text() -> None:
    doc = Document("u", "old\n", 1, "python")
    doc.apply_change(types.TextDocumentContentChangeWholeDocument(text="new\ntext"))
    assert doc.text == "new\ntext" and doc.line_count == 2


def _edit(doc: Document, start: tuple[int, int], end: tuple[int, int], new: str) -> None:
    rng = types.Range(start=pos(*start), end=pos(*end))
    doc.apply_change(types.TextDocumentContentChangePartial(range=rng, text=new))


@pytest.mark.parametrize("encoding", [U16, types.PositionEncodingKind.Utf8])
def test_an_edit_inside_a_character_moves_to_its_start_and_keeps_the_document(
        encoding, caplog) -> None:
    # "s = '😋'": the emoji is two UTF-16 units (four UTF-8 bytes) starting at unit 5.
    doc = Document("file:///e.py", "s = '😋'\nx = 1\n", 1, "python", encoding)
    _edit(doc, (0, 6), (0, 6), "A")  # inside the emoji: applied before it, as VS Code does
    assert doc.text == "s = 'A😋'\nx = 1\n"
    _edit(doc, (0, 7), (0, 7), "B")  # inside it again (it now starts at 6)
    assert doc.text == "s = 'AB😋'\nx = 1\n"
    warnings = [r for r in caplog.records if "inside a character" in r.getMessage()]
    assert len(warnings) == 1  # told once per document, not once per edit
    # A request's position inside a character is still refused (it names no place).
    with pytest.raises(PositionError):
        doc.offset_at(pos(0, 8))
