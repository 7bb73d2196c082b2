"""The vocabulary of a model Seam cannot see: each token's bytes as the server's answers name
them, learned as they arrive.

The decoding loop (``fim.decoding``) reads a logits vector and ``vocab.token_bytes[id]`` for the
ids it tries.  Over a server it only ever tries the top-N ids of a position, and the server
names each of them (llama-server: id and bytes; an OpenAI-compatible answer: the token's text,
given an id here by :meth:`SeenVocabulary.learn_text`).  So the vocabulary is a table filled as
answers come, the logits are the top-N log-probabilities with ``-inf`` elsewhere
(:meth:`SeenVocabulary.logits`), and token healing picks among the ids seen so far
(:class:`SeenHealIndex`): the top-N of the position being healed are always among them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import numpy as np

#: Length of the logits vector when the server does not say its vocabulary size (larger than
#: any code model's vocabulary; ids of the OpenAI route are given here, from 1 up).
DEFAULT_CAPACITY = 1 << 18
#: How far below the N-th's log-probability a stop token outside the top-N is put (its own
#: is lower; ln 2: half the N-th's probability).
STOP_BELOW_N = 0.6931471805599453


class _Bytes(dict):
    """id -> bytes, ``None`` for an id not seen or not text (as ``Vocabulary.token_bytes``)."""

    def __missing__(self, key: int) -> None:
        return None


class SeenVocabulary:
    """Token bytes by id, as far as the server's answers named them (see the module)."""

    def __init__(self, size: int = DEFAULT_CAPACITY, stop_ids: Iterable[int] = ()) -> None:
        self.token_bytes: dict[int, bytes | None] = _Bytes()
        self.stop_ids = frozenset(stop_ids)
        self._size = size
        self._by_text: dict[bytes, int] = {}
        self._lock = threading.Lock()

    @property
    def size(self) -> int:
        return self._size

    @property
    def special_ids(self) -> frozenset[int]:
        return self.stop_ids

    def set_stops(self, ids: Iterable[int]) -> None:
        self.stop_ids = frozenset(ids)

    def disallowed_mask(self, allowed_specials: set[int]) -> np.ndarray:
        """No id is ruled out by the mask: :meth:`logits` gives the ids that are not text
        ``-inf`` itself (the table is not complete when the mask is made)."""
        return np.zeros(self._size, dtype=bool)

    def learn(self, tid: int, data: bytes) -> bool:
        """Record ``tid``'s bytes (empty: not text, e.g. a control token); whether ``tid``
        fits the logits vector."""
        if not 0 <= tid < self._size:
            return False
        if tid not in self.token_bytes:
            self.token_bytes[tid] = data or None
        return True

    def learn_text(self, data: bytes) -> int:
        """An id for a token known only by its bytes (the OpenAI route), the same one each
        time; ids count up from 1 (0 stays free for the route's stop token)."""
        with self._lock:
            tid = self._by_text.get(data)
            if tid is None:
                tid = len(self._by_text) + 1
                if tid >= self._size:
                    raise OverflowError("more distinct tokens than the vocabulary table holds")
                self._by_text[data] = tid
                self.token_bytes[tid] = data
            return tid

    def logits(self, top: Iterable[tuple[int, float]]) -> np.ndarray:
        """A logits vector holding the top-N log-probabilities of the text and stop ids among
        ``top``; ``-inf`` elsewhere (other control ids included: never generated).

        A stop token outside the top-N gets :data:`STOP_BELOW_N` below the N-th's
        log-probability: its own is lower, by how much the server does not say, and the
        loop needs a finite one to rank the places where the middle may end (a stop
        there is the last candidate, after every text token of the top-N)."""
        out = np.full(self._size, -np.inf, dtype=np.float32)
        floor = None
        for tid, logp in top:
            if 0 <= tid < self._size and (self.token_bytes[tid] is not None
                                          or tid in self.stop_ids):
                value = max(float(logp), -1e30)  # a -inf logprob is still a candidate
                out[tid] = value
                floor = value if floor is None else min(floor, value)
        if floor is not None:
            for tid in self.stop_ids:
                if 0 <= tid < self._size and not np.isfinite(out[tid]):
                    out[tid] = floor - STOP_BELOW_N
        return out


class SeenHealIndex:
    """``fim.decoding.HealIndex`` over the ids seen so far: the ids whose bytes start with the
    healing residue or are a non-empty prefix of it."""

    def __init__(self, vocab: SeenVocabulary) -> None:
        self.vocab = vocab

    def consistent(self, heal: bytes) -> list[int]:
        out = []
        for tid, data in list(self.vocab.token_bytes.items()):
            if data and (data.startswith(heal) or heal.startswith(data)):
                out.append(tid)
        return out
