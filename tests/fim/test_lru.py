"""The one bounded cache (``fim.lru.LRU``): what it keeps, in what order, what it tells."""

from __future__ import annotations

import pytest

from fim.lru import LRU


def test_the_least_recently_used_entry_goes_first() -> None:
    cache: LRU[str, int] = LRU(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a use: "b" is now the least recent
    cache.put("c", 3)
    assert "b" not in cache and list(cache) == ["a", "c"] and list(reversed(cache)) == ["c", "a"]


def test_peek_and_membership_are_not_uses() -> None:
    cache: LRU[str, int] = LRU(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.peek("a") == 1 and "a" in cache
    cache.put("c", 3)
    assert list(cache) == ["b", "c"]


def test_a_stored_none_is_told_apart_from_a_miss() -> None:
    cache: LRU[str, int | None] = LRU(4)
    cache.put("parsed-nothing", None)
    missing = object()
    assert cache.get("parsed-nothing", missing) is None
    assert cache.get("never", missing) is missing


def test_eviction_is_reported_but_pop_and_clear_are_not() -> None:
    gone: list[tuple[str, int]] = []
    cache: LRU[str, int] = LRU(1, on_evict=lambda k, v: gone.append((k, v)))
    cache.put("a", 1)
    cache.put("a", 10)  # a new value for the same key evicts nothing
    cache.put("b", 2)
    assert gone == [("a", 10)]
    assert cache.pop("b") == 2 and cache.pop("b", -1) == -1
    cache.put("c", 3)
    cache.clear()
    assert gone == [("a", 10)] and len(cache) == 0


def test_iteration_survives_changes_made_while_iterating() -> None:
    cache: LRU[int, int] = LRU(8)
    for i in range(4):
        cache.put(i, i)
    for key in reversed(cache):
        cache.get(key)
        if key % 2:
            cache.pop(key)
    assert list(cache) == [2, 0]


def test_capacity_must_hold_an_entry() -> None:
    with pytest.raises(ValueError):
        LRU(0)
