"""A small least-recently-used map: the one bounded cache of the upper packages.

The server and the prompt layer remember derived data keyed by text or path (token counts,
outlines, cut files, project-context ids, suggestions), each bounded so a long session's memory
stays flat; the same eviction was written by hand in ten places, some forgetting the oldest
entry and some the least recently used. ``functools.lru_cache`` fits pure functions; these
caches live on objects, are read before they are filled (a hit decides whether to do the
work), and some must be told what they drop.

It lives in ``fim``, the lowest package all its users (``fim`` itself and ``lsp_server``) may
import; ``quotient``, ``lexer`` and ``python_language`` need none (their caches are pure
functions under ``functools.lru_cache``). Not thread-safe: callers that share one across
threads hold their own lock.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar, overload

K = TypeVar("K")
V = TypeVar("V")
D = TypeVar("D")


class LRU(Generic[K, V]):
    """At most ``capacity`` entries; adding one more forgets the least recently used.

    :meth:`get` and :meth:`put` count as a use; :meth:`peek`, ``in`` and iteration do not.
    ``on_evict(key, value)`` is called for each entry the capacity pushes out (not for
    :meth:`pop` or :meth:`clear`, whose callers know what they drop).
    """

    __slots__ = ("capacity", "_items", "_on_evict")

    def __init__(self, capacity: int, on_evict: Callable[[K, V], None] | None = None) -> None:
        if capacity < 1:
            raise ValueError(f"an LRU holds at least one entry, not {capacity}")
        self.capacity = capacity
        self._items: OrderedDict[K, V] = OrderedDict()
        self._on_evict = on_evict

    @overload
    def get(self, key: K) -> V | None: ...
    @overload
    def get(self, key: K, default: D) -> V | D: ...

    def get(self, key: K, default: object = None) -> object:
        """The value of ``key`` (now the most recently used), or ``default``."""
        try:
            value = self._items[key]
        except KeyError:
            return default
        self._items.move_to_end(key)
        return value

    @overload
    def peek(self, key: K) -> V | None: ...
    @overload
    def peek(self, key: K, default: D) -> V | D: ...

    def peek(self, key: K, default: object = None) -> object:
        """The value of ``key`` without counting a use, or ``default``."""
        return self._items.get(key, default)

    def put(self, key: K, value: V) -> None:
        """Remember ``value`` under ``key`` as the most recently used; forget the least
        recently used entries beyond the capacity."""
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.capacity:
            gone, old = self._items.popitem(last=False)
            if self._on_evict is not None:
                self._on_evict(gone, old)

    @overload
    def pop(self, key: K) -> V | None: ...
    @overload
    def pop(self, key: K, default: D) -> V | D: ...

    def pop(self, key: K, default: object = None) -> object:
        """Forget ``key``; its value, or ``default`` when it was not there."""
        return self._items.pop(key, default)

    def clear(self) -> None:
        self._items.clear()

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[K]:
        """The keys, least recently used first."""
        return iter(list(self._items))

    def __reversed__(self) -> Iterator[K]:
        """The keys, most recently used first."""
        return iter(list(reversed(self._items)))
