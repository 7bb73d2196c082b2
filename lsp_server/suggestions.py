"""An LRU of recent completions, so that typing through a shown suggestion needs no model.

When the editor showed the middle ``M`` for the split ``(L, R)`` and the user then types the
first ``k`` characters of ``M``, the new split is ``(L + M[:k], R)`` and the answer is
``M[k:]``: the constraint held for ``L + M + R``, so it still holds. Entries store digests of
``L`` and ``R`` rather than the texts, so a 5 MB document costs a few bytes per entry.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from fim.lru import LRU


def digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


@dataclass(frozen=True)
class _Entry:
    left_len: int
    left_digest: bytes
    right_digest: bytes
    middle: str


class SuggestionCache:
    """Recent (left, right) -> middle answers, looked up by a left context that may have grown."""

    def __init__(self, capacity: int = 64) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._entries: LRU[tuple[str, bytes, int], _Entry] = LRU(capacity)

    def put(self, uri: str, left: str, right: str, middle: str) -> None:
        """Remember ``middle`` for the split ``(left, right)``; an empty middle records that
        there is no suggestion there (a prefetch found none: the request need not ask)."""
        entry = _Entry(len(left), digest(left), digest(right), middle)
        key = (uri, entry.left_digest, entry.left_len)
        self._entries.put(key, entry)

    def lookup(self, uri: str, left: str, right: str) -> str | None:
        """The rest of a cached middle that ``left`` has typed part of ("" where the cache
        knows there is no suggestion), or ``None`` when the cache does not know."""
        right_digest: bytes | None = None
        # Newest first: the suggestion most recently shown is the likeliest one being typed.
        for key in reversed(self._entries):
            entry_uri, _, entry_len = key
            if entry_uri != uri:
                continue
            entry = self._entries.peek(key)
            if entry is None:
                continue
            typed = len(left) - entry_len
            if typed < 0 or (typed >= len(entry.middle) and (typed or entry.middle)):
                continue
            if typed and not entry.middle.startswith(left[entry_len:]):
                continue
            if right_digest is None:
                right_digest = digest(right)
            if entry.right_digest != right_digest:
                continue
            if digest(left[:entry_len]) != entry.left_digest:
                continue
            self._entries.get(key)  # a use: the suggestion being typed stays
            return entry.middle[typed:]
        return None

    def forget(self, uri: str) -> None:
        for key in [k for k in self._entries if k[0] == uri]:
            self._entries.pop(key)

    def __len__(self) -> int:
        return len(self._entries)
