"""The prompt-window benchmark's parts that need no model: the windows it reads from the
command line, the right budget of a window counted in lines, and its table."""

from __future__ import annotations

import pytest

from benchmarks.prompt_windows import Window, table


def test_windows_are_read_as_left_x_right_tokens_or_lines() -> None:
    assert Window.parse("128x64") == Window(128, 64)
    assert Window.parse("128x16l") == Window(128, 16, lines=True)
    assert Window.parse("128x16l").name == "128x16l"
    assert Window.parse("128x64+o") == Window(128, 64, outline=True)
    assert Window.parse("128x64+o").name == "128x64+o"
    with pytest.raises(ValueError):
        Window.parse("0x64")
    with pytest.raises(ValueError):
        Window.parse("128")


def test_a_lines_window_reads_that_many_lines_within_its_cap() -> None:
    chars = len  # one token per character
    right = "a = 1\nbb = 22\nccc = 333\n"
    assert Window(128, 2, lines=True).right_tokens(chars, right, 512) == len("a = 1\nbb = 22\n") + 2
    assert Window(128, 9, lines=True).right_tokens(chars, right, 512) == len(right) + 2
    assert Window(128, 2, lines=True).right_tokens(chars, right, 5) == 5
    assert Window(128, 64).right_tokens(chars, right, 5) == 64  # tokens: as given


def test_the_table_has_a_column_per_window_and_a_row_per_corpus_and_kind() -> None:
    rows = [{"corpus": "fresh", "window": w, "place": "empty_line", "exact": e,
             "edit_similarity": s}
            for w, e, s in (("128x64", True, 1.0), ("128x64", False, 0.5),
                            ("512x64", True, 1.0), ("512x64", True, 1.0))]
    text = table(rows, [Window(128, 64), Window(512, 64)])
    assert "| corpus | cursors | n | 128x64 | 512x64 |" in text
    assert "| fresh | empty line | 2 | 50% / 0.750 | 100% / 1.000 |" in text
    assert "mid-line" not in text  # no mid-line rows asked
