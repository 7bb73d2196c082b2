"""The ring of recently edited chunks."""

from __future__ import annotations

from lsp_server.project.recent_edits import (
    CONTEXT_LINES,
    MAX_CHUNK_LINES,
    EditRing,
    changed_lines,
)

TEXT = "\n".join(f"line {i}" for i in range(100))


def test_an_edit_keeps_its_lines_and_a_few_around():
    ring = EditRing()
    ring.record("a", TEXT, 50, 51, 51)
    (chunk,) = ring.chunks()
    assert (chunk.start, chunk.end) == (50 - CONTEXT_LINES, 51 + CONTEXT_LINES)
    assert chunk.text.split("\n")[CONTEXT_LINES] == "line 50"


def test_edits_in_one_place_merge_and_the_ring_drops_the_oldest():
    ring = EditRing(capacity=3)
    ring.record("a", TEXT, 50, 51, 51)
    ring.record("a", TEXT, 52, 53, 53)  # overlaps: one chunk
    assert len(ring.chunks()) == 1
    for uri in ("b", "c", "d"):
        ring.record(uri, TEXT, 10, 11, 11)
    assert [c.uri for c in ring.chunks()] == ["b", "c", "d"]


def test_chunks_below_an_edit_move_with_it_and_stay_bounded():
    ring = EditRing()
    ring.record("a", TEXT, 80, 81, 81)
    inserted = TEXT.replace("line 10\n", "line 10\nnew 1\nnew 2\n")
    ring.record("a", inserted, 11, 11, 13)  # two lines inserted above
    moved = [c for c in ring.chunks() if "line 80" in c.text][0]
    assert moved.start == 80 - CONTEXT_LINES + 2
    ring.record("a", TEXT, 0, 60, 60)  # a huge edit
    assert all(c.end - c.start <= MAX_CHUNK_LINES for c in ring.chunks())


def test_whole_text_changes_find_the_changed_lines():
    new = TEXT.replace("line 42", "line forty-two")
    assert changed_lines(TEXT, new) == (42, 43, 43)
    assert changed_lines(TEXT, TEXT) is None
    ring = EditRing()
    ring.record_text_change("a", TEXT, new)
    assert "line forty-two" in ring.chunks()[0].text
    ring.forget("a")
    assert ring.chunks() == ()
