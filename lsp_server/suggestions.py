"""An LRU of recent completions, so that typing through a shown suggestion needs no model.

When the editor showed the middle ``M`` for the split ``(L, R)`` and the user then types the
first ``k`` characters of ``M``, the new split is ``(L + M[:k], R)`` and the answer is
``M[k:]``: the constraint held for ``L + M + R``, so it still holds. Entries store digests of
``L`` and ``R`` rather than the texts, so a 5 MB document costs a few bytes per entry.

A place may have several suggestions (the server's ``suggestions`` setting, ranked by
``fim.alternatives``): an entry keeps them all, best first, and typing through answers with
those the typed text agrees with, so typing the second suggestion after cycling to it needs no
model either.
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
    middles: tuple[str, ...]
    ranked: bool


@dataclass(frozen=True)
class Cached:
    """What the cache holds for a place: the rest of each suggestion the typed text agrees
    with, best first (``("",)`` where it knows there is none), and whether they are the
    ranked alternatives (else only the first answer is known)."""

    middles: tuple[str, ...]
    ranked: bool


class SuggestionCache:
    """Recent (left, right) -> middle answers, looked up by a left text that may have grown."""

    def __init__(self, capacity: int = 64) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._entries: LRU[tuple[str, bytes, int], _Entry] = LRU(capacity)

    def put(self, uri: str, left: str, right: str, middle: str,
            alternatives: tuple[str, ...] | None = None) -> None:
        """Remember ``middle`` for the split ``(left, right)``; an empty middle records that
        there is no suggestion there (a prefetch found none: the request need not ask).

        ``alternatives``: the place's ranked suggestions after ``middle`` (``()``: it has
        no other). Without them, ranked ones already kept for this place stay when
        ``middle`` is among them (a decode's final answer arriving after them)."""
        key = (uri, digest(left), len(left))
        old = self._entries.peek(key)
        if alternatives is None:
            if old is not None and old.ranked and old.right_digest == digest(right) \
                    and middle in old.middles:
                self._entries.get(key)
                return
            middles, ranked = (middle,), False
        else:
            middles = (middle, *(m for m in alternatives if m != middle))
            ranked = True
        self._entries.put(key, _Entry(len(left), key[1], digest(right), middles, ranked))

    def lookup(self, uri: str, left: str, right: str) -> str | None:
        """The rest of a cached middle that ``left`` has typed part of ("" where the cache
        knows there is no suggestion), or ``None`` when the cache does not know."""
        found = self.lookup_all(uri, left, right)
        return None if found is None else found.middles[0]

    def lookup_all(self, uri: str, left: str, right: str) -> Cached | None:
        """Every cached suggestion ``left`` has typed part of (their rests, best first), or
        ``None`` when the cache does not know."""
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
            if typed < 0:
                continue
            text = left[entry_len:]
            rests = tuple(m[typed:] for m in entry.middles
                          if (typed < len(m) or not (typed or m)) and m.startswith(text))
            if not rests:
                continue
            if right_digest is None:
                right_digest = digest(right)
            if entry.right_digest != right_digest:
                continue
            if digest(left[:entry_len]) != entry.left_digest:
                continue
            self._entries.get(key)  # a use: the suggestion being typed stays
            return Cached(rests, entry.ranked)
        return None

    def forget(self, uri: str) -> None:
        for key in [k for k in self._entries if k[0] == uri]:
            self._entries.pop(key)

    def forget_empty(self, uri: str) -> None:
        """Forget the places of ``uri`` known to have no suggestion (a wider prompt there
        may find one), keeping those with a suggestion (typing through them)."""
        for key in [k for k in self._entries if k[0] == uri]:
            entry = self._entries.peek(key)
            if entry is not None and not any(entry.middles):
                self._entries.pop(key)

    def __len__(self) -> int:
        return len(self._entries)
