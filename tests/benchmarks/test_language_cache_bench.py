"""The language cache benchmark's places and table (``benchmarks/bench_language_cache.py``)."""

from __future__ import annotations

from benchmarks.bench_language_cache import Timing, measure, places, table
from fim.options import Scope

TEXT = "".join(f"value_{k} = compute(value_{k - 1}, {k})\n" for k in range(40))


def test_a_place_is_the_file_with_the_typed_characters_taken_out() -> None:
    found = places("f.py", TEXT, 5, 4, seed=1)
    assert len(found) == 5
    for place in found:
        assert place.left + place.typed + place.right == TEXT
        assert len(place.typed) == 4 and place.right.startswith("\n")
    assert found == places("f.py", TEXT, 5, 4, seed=1)  # seeded


def test_typed_on_places_are_served_by_the_kept_language() -> None:
    found = places("f.py", TEXT, 3, 2, seed=0)
    timing = measure(found, Scope.STATEMENT)
    assert timing.reused == 3 and len(timing.build_wall) == len(timing.cached_cpu) == 3
    text = table(timing, 3)
    assert "served 3 of 3 places." in text and "built anew |" in text


def test_the_table_says_where_the_language_was_built_anew() -> None:
    timing = Timing([0.1, 0.2], [0.1, 0.2], [0.001, 0.1], [0.001, 0.1], reused=1)
    assert "at 1 the typed text could not be fed" in table(timing, 2)
