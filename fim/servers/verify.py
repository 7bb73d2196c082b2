"""Verify-and-repair: a server's streamed greedy middle served to Seam's decoding loop as if
the model ran in process.

``fim.decoding`` drives a model one token at a time (``prefill``, then ``step(token)``), reading
a logits vector per position.  :class:`VerifyStepModel` answers it from a stream: the server
generates greedily and sends, per position, the token it chose and the top-N log-probabilities
(the raw model's, not the sampler's: stop tokens among them even though the request asks the
server not to stop, ``ignore_eos``, so that the *constraint* decides where the middle may end).

* ``prefill(prompt)`` opens a stream for the prompt and returns the first position's top-N as
  logits (``fim.servers.seen_vocab``: ``-inf`` outside the top-N);
* ``step(token)`` with the token the server chose there (the constraint accepted it) reads the
  next position from the same stream: no round trip;
* ``step(token)`` with another token (the constraint refused the server's, the loop took the
  likeliest viable one of the top-N, or healing, the right-context rule or a line stop chose)
  hangs up and opens a new stream whose prompt is the prompt plus the middle so far: a repair.
  The server's prompt cache holds all but the new tokens, so a repair costs a round trip and
  the prefill of a few tokens.

When no token of a position's top-N is viable, the loop ends the middle at its best complete
point or gives none (stop ``no_candidate``), as it does in process when its ``top_k`` run out.
A stream the server ended with a stop token of its own (a server that ignores ``ignore_eos``)
answers the next position with the stop ids only.  The counts of one request (round trips,
repairs) are in :class:`RunStats`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from fim.engines.prefill_speed import PrefillSpeed
from fim.servers.positions import End, Position, PositionStream
from fim.servers.seen_vocab import SeenVocabulary


class Route(Protocol):
    """How one kind of server is asked for a streamed greedy continuation."""

    name: str

    def open(self, prompt: list[int], taken: list[int], n_predict: int) -> PositionStream:
        """A stream of positions after ``prompt`` and the middle's ids so far (``taken``),
        at most ``n_predict`` of them."""


@dataclass
class RunStats:
    """What one request cost on the server."""

    round_trips: int = 0
    #: round trips after the first: the loop took a token other than the server's
    repairs: int = 0
    #: positions read from streams
    positions: int = 0
    #: prompt tokens the server said it took from its cache, on the first round trip
    cached_tokens: int | None = None


class VerifyStepModel:
    """The step model of a server engine (see the module docstring)."""

    #: A server's cache is the server's own: no cached cells are moved from here, so the
    #: engine's window never slides (``fim.engines.step_model.StepModel.can_shift``).
    can_shift = False
    slide_stop: int | None = None
    slid = 0  # cached cells moved by a slide: never, here

    def __init__(self, route: Route, vocab: SeenVocabulary) -> None:
        self.route, self.vocab = route, vocab
        self.stats = RunStats()
        #: the server's prefill speed is not measured here (its timings are the server's):
        #: the planner's first window stays at its floor (``lsp_server.request_plan``)
        self.speed = PrefillSpeed()
        #: tokens the loop may generate in this request (the engine sets it per request)
        self.budget = 64
        self.reused = 0
        self.retraced = 0
        self._stream: PositionStream | None = None
        self._prompt: list[int] = []
        self._taken: list[int] = []
        self._pending: Position | None = None  # the position last handed out
        self._interrupt: Callable[[], bool] | None = None
        self._sent: list[int] = []  # what the server's slot holds, as far as the client knows

    @property
    def vocab_size(self) -> int:
        return self.vocab.size

    def begin(self, budget: int) -> None:
        """A new request with ``budget`` tokens."""
        self.budget, self.stats = budget, RunStats()

    def cached_prefix(self, ids: list[int]) -> int:
        """The beginning of ``ids`` the server's cache probably holds: what it shares with the
        last prompt and middle sent."""
        n = 0
        for a, b in zip(self._sent, ids, strict=False):
            if a != b:
                break
            n += 1
        return n

    def prefill(self, ids: list[int], interrupt: Callable[[], bool] | None = None,
                progress: Callable[[int, int], None] | None = None,
                keep_cached: bool = False, hold: bool = False) -> np.ndarray | None:
        """Open a stream for ``ids``; the first position's logits, or ``None`` when
        ``interrupt`` said stop first (``keep_cached``, ``hold``: the server's cache keeps
        what its own rule keeps)."""
        if not ids:
            raise ValueError("empty prompt")
        self.finish()
        self._prompt, self._taken, self._interrupt = list(ids), [], interrupt
        self.reused = self.cached_prefix(ids)
        return self._open()

    def step(self, token: int) -> np.ndarray:
        """The next position's logits after ``token`` (see the module docstring); all
        ``-inf`` when the request was interrupted while waiting (the loop then ends)."""
        pending = self._pending
        self._taken.append(token)
        if pending is not None and self._stream is not None and token == pending.chosen:
            self.retraced += 1
            return self._read()
        self.stats.repairs += 1
        got = self._open()
        return got if got is not None else self._nothing()

    def finish(self) -> None:
        """Hang up the stream (the loop is done with it)."""
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        self._pending = None

    def reset(self) -> None:
        self.finish()
        self._sent = []

    # ----- streams ----------------------------------------------------------------------

    def _open(self) -> np.ndarray | None:
        self.finish()
        left = max(1, self.budget - len(self._taken) + 1)  # +1: the position after the last
        self.stats.round_trips += 1
        self._stream = self.route.open(self._prompt, self._taken, left)
        self._sent = self._prompt + self._taken
        return self._read(first=True)

    def _read(self, first: bool = False) -> np.ndarray | None:
        stream = self._stream
        assert stream is not None
        event = stream.next(self._interrupt)
        if event is None:  # interrupted: the loop sees cancel or the deadline next
            self.finish()
            return None if first else self._nothing()
        if isinstance(event, End):
            if first and self.stats.round_trips == 1 and event.cached_tokens is not None:
                self.stats.cached_tokens = event.cached_tokens
            self.finish()
            if event.reason == "limit":  # past the budget: the loop never reads this
                return self._nothing()
            # The server stopped on its own: the stop is the only candidate there.
            return self.vocab.logits((i, 0.0) for i in self.vocab.stop_ids)
        self.stats.positions += 1
        self._pending = event
        self._sent.append(event.chosen)
        return self.vocab.logits(event.top)

    def _nothing(self) -> np.ndarray:
        return np.full(self.vocab.size, -np.inf, dtype=np.float32)
