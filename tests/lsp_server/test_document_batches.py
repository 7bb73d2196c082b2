"""A ``didChange`` with many ranged changes (an editor's "Replace All") is applied in time
linear in the edit (issue 28, finding 3): the text and its line starts are rebuilt once per
``didChange``, not once per change, and the result is exactly that of applying the changes
one by one."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol import types

import lsp_server.documents as documents
from lsp_server.documents import Document, DocumentStore

U16 = types.PositionEncodingKind.Utf16
alphabet = st.sampled_from(["a", "b", " ", "\n", "\r", "\r\n", "é", "😀", "\x0c"])
text_st = st.lists(alphabet, max_size=30).map("".join)


def _partial(l1: int, c1: int, l2: int, c2: int,
             text: str) -> types.TextDocumentContentChangePartial:
    return types.TextDocumentContentChangePartial(
        range=types.Range(start=types.Position(line=l1, character=c1),
                          end=types.Position(line=l2, character=c2)), text=text)


def _params(uri: str, changes: list) -> types.DidChangeTextDocumentParams:
    return types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=changes)


@settings(max_examples=500, deadline=None)
@given(text_st, st.lists(st.tuples(st.integers(0, 8), st.integers(0, 8), st.integers(0, 8),
                                   st.integers(0, 8), text_st), min_size=2, max_size=6))
def test_a_batch_gives_the_text_of_its_changes_one_by_one(start: str, edits: list) -> None:
    """Positions past a line's end, lines past the text's end, reversed ranges, columns inside
    a surrogate pair, and breaks that join ("\\r" then "\\n") all resolve as one by one."""
    changes = [_partial(*edit) for edit in edits]
    one_by_one = Document("u", start, 1, "python", U16)
    for change in changes:
        one_by_one.apply_change(change)
    batch = Document("u", start, 1, "python", U16)
    batch.apply_changes(changes)
    assert batch.text == one_by_one.text
    assert batch._starts == one_by_one._starts == Document("u", batch.text, 1, "p")._starts


def test_a_whole_text_inside_a_batch_replaces_what_came_before() -> None:
    doc = Document("u", "a\nb\n", 1, "python", U16)
    doc.apply_changes([_partial(0, 0, 0, 1, "x"),
                       types.TextDocumentContentChangeWholeDocument(text="new\ntext"),
                       _partial(1, 0, 1, 4, "line")])
    assert doc.text == "new\nline" and doc.line_count == 2


@pytest.mark.parametrize("n", [2_000, 40_000])
def test_replace_all_rebuilds_the_text_once(monkeypatch, n: int) -> None:
    """Finding 3: N changes, one per line of an N-line file, as "Replace All" sends them
    (last match first).  The text and line starts are built once; before, every change
    rebuilt both (18.9 s at N = 40,000): quadratic."""
    store = DocumentStore()
    text = "".join(f"value_{i} = old_name(x)\n" for i in range(n))
    store.open(types.TextDocumentItem(uri="file:///r.py", language_id="python", version=1,
                                      text=text))
    rebuilt = []
    real = documents.line_starts
    monkeypatch.setattr(documents, "line_starts", lambda t: rebuilt.append(len(t)) or real(t))
    spliced = []
    monkeypatch.setattr(Document, "_splice", lambda self, *a: spliced.append(a))
    col = len("value_0 = ")
    changes = [_partial(i, col + len(str(i)) - 1, i, col + len(str(i)) - 1 + len("old_name"),
                        "new_name") for i in reversed(range(n))]
    doc = store.change(_params("file:///r.py", changes))
    assert doc is not None and doc.text == text.replace("old_name", "new_name")
    assert spliced == [] and len(rebuilt) == 1
