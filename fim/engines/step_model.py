"""The step-model contract both engines implement: prefill with cached-prefix reuse, one step,
crop, retrace, cancel between chunks, and a few cached sequences ("slots").

A completion server asks the model the same questions again and again: the user types one
more character, moves to another line of the same file, switches back to the previous file, or
accepts a suggestion and wants the next one.  Each of those prompts shares a long beginning
with a prompt already run.  :class:`StepModel` keeps the keys and values of several recent
token sequences and runs the model only on what is new:

* ``prefill(ids)`` finds the slot whose tokens share the longest beginning with ``ids``.  When
  that slot holds more than the shared part and the shared part is only a small share of it
  (another file, another region), the shared part is *forked* into the least recently used
  slot, so the older sequence stays cached for when the user comes back; otherwise the slot is
  cropped to the shared part.  Either way only the rest of ``ids`` runs.
* The logits after each step are kept for the last ``MAX_SAVED`` positions, so a run that
  retraces an earlier one token for token (constrained decoding following the unconstrained
  path, the user typing the suggestion) reads them instead of running the model.
* Long prompts run in chunks; ``interrupt`` is asked between chunks (the llama.cpp engine also
  inside a chunk), and what already ran stays cached for the next request.
* Engines that can move cached keys to other positions (llama.cpp: RoPE is re-applied) also
  reuse *runs of tokens after* the point where the new prompt departs from the cache, the way
  llama.cpp's server reuses cache chunks, but with the new tokens placed *before* a reused run
  too.  A fill-in-the-middle prompt is ``<prefix> L <suffix> R <middle>``: when the user types,
  ``L`` grows and the whole ``<suffix> R <middle>`` block would be recomputed on every
  keystroke; instead the block's cells are shifted to their new positions and only the typed
  tokens (and the final token, whose logits are needed) run.  The block's keys and values were
  computed with the old end of ``L`` in view, so this is an approximation (a few characters
  of context missing); ``splice=False`` turns it off, and ``benchmarks/prompt_layouts.py``
  measures what it costs in quality.
* A prompt run with ``hold`` stays whole: the server runs a document's window *beyond* the
  cursor into the cache (its "base"), so that the first request at any place within it shares
  the window up to its cursor; a prompt that departs from a held slot forks it instead of
  cropping it, no slot is evicted for another while an unheld one can go, and a held slot
  never slides (its cells are the ones every fork shares).  One slot is held at a time.
* The same engines *slide* the left context (``slide_stop``, on by default for them): when the
  prompt's start moved down the file (its window was full and the cursor went further down),
  the cached cells of the lines it still holds are shifted down to their new positions and the
  cells of the lines it dropped are removed, as llama-server's ``--cache-reuse`` does; only
  runs *before* the FIM suffix sentinel move, so the right text is always computed after the
  left text it reads.  The moved cells saw the dropped lines before them (a wider view than a
  fresh run's, not a stale one).

Engines provide primitives over a slot: run tokens (``_forward``), cut to a length
(``_truncate``), copy a prefix into another slot (``_copy_prefix``), empty it (``_clear``)
and, optionally, rebuild it from moved runs and new tokens (``_apply_splice``).
Logits are float32 numpy vectors over the model's vocabulary, whatever the engine.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from fim.engines.prefill_speed import PrefillSpeed

Interrupt = Callable[[], bool]


class ForwardInterrupted(Exception):
    """An engine stopped a forward pass because ``interrupt`` said so.

    ``done`` tokens of the pass were run and stay in the slot (llama.cpp finishes whole
    micro-batches before it looks at the flag).
    """

    def __init__(self, done: int) -> None:
        super().__init__(f"interrupted after {done} tokens")
        self.done = done


@dataclass
class Slot:
    """One cached token sequence: the ids whose keys and values an engine holds."""

    index: int
    tokens: list[int] = field(default_factory=list)
    #: logits after a prefix of ``tokens``, by the prefix's length (for retracing)
    saved: dict[int, np.ndarray] = field(default_factory=dict)
    last_used: int = 0
    #: cells below this position may be shared with another slot (forked): never shifted
    shared_until: int = 0
    #: a held prompt (``prefill(hold=True)``): forked from, never cropped, evicted last
    held: bool = False


def common_prefix(a: list[int], b: list[int]) -> int:
    """The length of the longest common beginning of ``a`` and ``b``."""
    n = min(len(a), len(b))
    i = 0
    # Compare in blocks first: prompts share hundreds of tokens.
    while i + 64 <= n and a[i:i + 64] == b[i:i + 64]:
        i += 64
    while i < n and a[i] == b[i]:
        i += 1
    return i


class StepModel(ABC):
    """A causal LM driven one token at a time over KV caches it keeps between requests."""

    #: Logits kept per slot for retracing (one vocabulary row each: 0.6 MB for Qwen2.5).
    MAX_SAVED = 128
    #: A prompt that shares less than this share of a slot's tokens forks instead of cropping.
    FORK_BELOW = 0.5
    #: Shortest run of cached tokens worth moving rather than recomputing.
    MIN_REUSE = 8
    #: Fewest uncached prompt tokens for which a slide of the left context is looked for.
    SLIDE_ABOVE = 64

    def __init__(self, slots: int = 1, chunk: int = 64) -> None:
        if slots < 1:
            raise ValueError("a step model needs at least one slot")
        self.chunk = chunk
        self.slots = [Slot(i) for i in range(slots)]
        self.active = self.slots[0]
        self.pos = 0  # tokens of the active slot the current run has consumed
        self._tick = 0
        self.reused = 0  # prompt tokens served from a cache by the last prefill
        self.retraced = 0  # steps served from saved logits since the last prefill
        self.forked = False  # whether the last prefill forked a slot
        self.spliced = 0  # cached tokens the last prefill moved to new positions
        #: move cached runs to new positions when the engine can (see the module docstring);
        #: off by default: benchmarks/prompt_layouts.py measures what it costs
        self.splice = False
        #: the FIM suffix sentinel's id: cached runs before it may slide (see the module
        #: docstring); ``None``: no slide
        self.slide_stop: int | None = None
        #: cached tokens the last prefill slid to new positions
        self.slid = 0
        #: prompt tokens per second of the prefills run here (``fim.engines.prefill_speed``)
        self.speed = PrefillSpeed()
        self.clock: Callable[[], float] = time.perf_counter

    # ----- what engines provide ---------------------------------------------------------------

    @property
    @abstractmethod
    def vocab_size(self) -> int:
        """Length of a logits vector."""

    @abstractmethod
    def _forward(self, slot: Slot, ids: list[int], interrupt: Interrupt | None) -> np.ndarray:
        """Run ``ids`` after ``slot.tokens`` (positions ``len(slot.tokens)`` on); the logits
        after the last one.  May raise :class:`ForwardInterrupted`.  Does not touch
        ``slot.tokens``; the caller does."""

    @abstractmethod
    def _truncate(self, slot: Slot, keep: int) -> bool:
        """Drop every cached token of ``slot`` from position ``keep`` on; false if it cannot
        (the caller then clears the slot)."""

    @abstractmethod
    def _copy_prefix(self, src: Slot, dst: Slot, keep: int) -> bool:
        """Make ``dst`` hold the first ``keep`` cached tokens of ``src``; false if it cannot."""

    @abstractmethod
    def _clear(self, slot: Slot) -> None:
        """Drop everything ``slot`` holds."""

    #: whether the engine can move cached tokens to other positions (``_apply_splice``)
    can_shift = False

    # ----- the contract -----------------------------------------------------------------------

    @property
    def seq(self) -> list[int]:
        """The token ids cached in the active slot."""
        return self.active.tokens

    def _touch(self, slot: Slot) -> None:
        self._tick += 1
        slot.last_used = self._tick
        self.active = slot

    def _cut(self, slot: Slot, keep: int) -> int:
        """Cut ``slot`` to its first ``keep`` tokens; how many it holds afterwards."""
        if keep < len(slot.tokens):
            if keep == 0 or not self._truncate(slot, keep):
                self._clear(slot)
                keep = 0
            del slot.tokens[keep:]
            slot.saved = {n: v for n, v in slot.saved.items() if n <= keep}
            slot.shared_until = min(slot.shared_until, keep)
        return keep

    def cached_prefix(self, ids: list[int]) -> int:
        """The longest beginning of ``ids`` some slot holds (no model work, no change)."""
        return max((common_prefix(list(slot.tokens), ids) for slot in self.slots), default=0)

    def _choose(self, ids: list[int], fork: bool = False) -> tuple[Slot, int]:
        """The slot to run ``ids`` in and how many of its tokens it keeps (``fork``: never
        crop a slot that holds more than the shared part, fork it)."""
        best, best_len = self.slots[0], -1
        for slot in self.slots:
            n = common_prefix(slot.tokens, ids)
            if n > best_len or (n == best_len and slot.last_used > best.last_used):
                best, best_len = slot, n
        self.forked = False
        size = len(best.tokens)
        fork = fork or best.held
        if (len(self.slots) == 1 or size <= best_len
                or (best_len >= self.FORK_BELOW * size and not fork)):
            return best, best_len
        # The prompt shares only a small part of ``best`` (or ``best`` is to stay): keep
        # ``best`` for later and build this one in the least recently used other slot (an
        # empty one first), never the held one: with no other, ``best`` is cropped (it is
        # not held then, as one slot is held at a time).
        others = [s for s in self.slots if s is not best and not s.held]
        if not others:
            return best, best_len
        victim = min(others, key=lambda s: (len(s.tokens) > 0, s.last_used))
        common = common_prefix(victim.tokens, ids)
        if common >= best_len:
            return victim, common
        self._clear(victim)
        victim.tokens, victim.saved, victim.shared_until = [], {}, 0
        if best_len and self._copy_prefix(best, victim, best_len):
            victim.tokens = list(best.tokens[:best_len])
            victim.saved = {n: v for n, v in best.saved.items() if n <= best_len}
            victim.shared_until = best_len
            best.shared_until = max(best.shared_until, best_len)
            self.forked = True
            return victim, best_len
        return victim, 0

    def _run(self, ids: list[int], interrupt: Interrupt | None = None) -> np.ndarray:
        slot = self.active
        try:
            logits = self._forward(slot, ids, interrupt)
        except ForwardInterrupted as stop:
            slot.tokens.extend(ids[:stop.done])
            self.pos = len(slot.tokens)
            raise
        slot.tokens.extend(ids)
        self.pos = len(slot.tokens)
        slot.saved[self.pos] = logits
        if len(slot.saved) > self.MAX_SAVED:
            del slot.saved[min(slot.saved)]
        return logits

    def prefill(self, ids: list[int], interrupt: Interrupt | None = None,
                progress: Callable[[int, int], None] | None = None,
                keep_cached: bool = False, hold: bool = False) -> np.ndarray | None:
        """Run the prompt (reusing a cached common prefix); the next-token logits.

        ``keep_cached``: the sequence this prompt departs from stays cached whatever share
        of it the two have in common (its shared beginning is forked, never cropped): for a
        prompt run ahead of need while the one it departs from still serves requests.
        ``hold`` (implies ``keep_cached``): this prompt stays cached whole, in a slot later
        prompts fork from (see the module docstring); what an interrupt left of it stays held.

        Long prompts run in chunks of ``self.chunk`` tokens; ``interrupt`` is asked after each
        one (and by engines that can, during one), and a true answer stops the prefill and
        returns ``None``; ``progress(done, total)`` hears of each chunk.  What already ran
        stays cached, so a later prompt with the same beginning (the user typing on) resumes
        from there instead of starting over.
        """
        if not ids:
            raise ValueError("empty prompt")
        self.retraced = self.spliced = self.slid = 0
        keep_cached = keep_cached or hold
        slid = None if keep_cached else self._slide_source(ids)
        slot, keep = slid if slid is not None else self._choose(ids, fork=keep_cached)
        self._touch(slot)
        if hold:
            for other in self.slots:
                other.held = other is slot
        if keep == len(ids) and keep in slot.saved:
            self.pos = self.reused = keep  # the whole prompt, and its logits, are cached
            return slot.saved[keep]
        keep = min(keep, len(ids) - 1)  # always run at least the last token
        if (self.splice or slid is not None) and self.can_shift and keep < len(slot.tokens):
            try:
                logits = self._splice(slot, ids, keep, interrupt, left_only=not self.splice)
            except ForwardInterrupted:
                self._cut(slot, keep)
                self.pos = len(slot.tokens)
                return None
            if logits is not None:
                return logits
        keep = self._cut(slot, keep)
        self.reused = keep
        rest = ids[keep:]
        began = self.clock()
        try:
            while len(rest) > self.chunk:
                self._run(rest[:self.chunk], interrupt)
                rest = rest[self.chunk:]
                if progress is not None:
                    progress(len(ids) - len(rest), len(ids))
                if interrupt is not None and interrupt():
                    return None
            logits = self._run(rest, interrupt)
        except ForwardInterrupted:
            return None
        # Only whole prefills are measured: an interrupted one stopped at an unknown point.
        self.speed.record(len(ids) - keep, self.clock() - began)
        return logits

    def _left_end(self, ids: list[int]) -> int:
        """Where the left part of a prompt ends: at its first FIM suffix sentinel."""
        try:
            return ids.index(self.slide_stop)
        except ValueError:
            return len(ids)

    def _slide_source(self, ids: list[int]) -> tuple[Slot, int] | None:
        """The slot whose left part slides into ``ids``' and the prefix it keeps, when a slide
        saves at least ``SLIDE_ABOVE`` tokens over the longest cached prefix; else ``None``."""
        if self.slide_stop is None or not self.can_shift:
            return None
        cached = self.cached_prefix(ids)
        if len(ids) - cached < self.SLIDE_ABOVE:
            return None
        new = ids[:self._left_end(ids)]
        best: tuple[Slot, int] | None = None
        most = cached + self.SLIDE_ABOVE - 1
        for slot in self.slots:
            if slot.held:
                continue  # its cells are what forks share: they never move
            keep = common_prefix(slot.tokens, ids)
            base = max(keep, slot.shared_until)
            old = slot.tokens[:self._left_end(slot.tokens)]
            moved = sum(n for _, _, n in self._reusable_runs(old[base:], new[base:]))
            if keep + moved > most:
                best, most = (slot, keep), keep + moved
        if best is not None:
            self.forked = False
        return best

    def _reusable_runs(self, old: list[int], new: list[int]) -> list[tuple[int, int, int]]:
        """Runs ``(new_start, old_start, length)`` of ``new`` found in ``old``, in order in
        both, each at least ``MIN_REUSE`` long, never covering ``new``'s last token."""
        k = self.MIN_REUSE
        if len(new) <= k or len(old) < k:
            return []
        where: dict[tuple[int, ...], list[int]] = {}
        for j in range(len(old) - k + 1):
            where.setdefault(tuple(old[j:j + k]), []).append(j)
        runs: list[tuple[int, int, int]] = []
        i, j_min, limit = 0, 0, len(new) - 1  # the last token always runs
        while i + k <= limit:
            best_j, best_n = -1, 0
            for j in where.get(tuple(new[i:i + k]), ()):
                if j < j_min:
                    continue
                n = k
                while i + n < limit and j + n < len(old) and new[i + n] == old[j + n]:
                    n += 1
                if n > best_n:
                    best_j, best_n = j, n
            if best_n:
                runs.append((i, best_j, best_n))
                i, j_min = i + best_n, best_j + best_n
            else:
                i += 1
        return runs

    def _splice(self, slot: Slot, ids: list[int], keep: int,
                interrupt: Interrupt | None, left_only: bool = False) -> np.ndarray | None:
        """Reuse cached runs after position ``keep`` by moving them (``left_only``: only
        runs before the FIM suffix sentinel, a slide); ``None`` when there is nothing to
        reuse (the caller then crops and runs the rest)."""
        base = max(keep, slot.shared_until)  # shared cells must not move
        old, new = slot.tokens, ids
        if left_only:
            old, new = old[:self._left_end(old)], new[:self._left_end(new)]
        runs = [(base + i, base + j, n) for i, j, n in
                self._reusable_runs(old[base:], new[base:])]
        if not runs:
            return None
        try:
            logits = self._apply_splice(slot, keep, runs, ids, interrupt)
        except ForwardInterrupted:
            slot.tokens = slot.tokens[:keep]
            slot.saved = {n: v for n, v in slot.saved.items() if n <= keep}
            raise
        slot.tokens = list(ids)
        slot.saved = {n: v for n, v in slot.saved.items() if n <= keep}
        slot.saved[len(ids)] = logits
        self.reused = keep
        moved = sum(n for _, _, n in runs)
        if left_only:
            self.slid = moved
        else:
            self.spliced = moved
        self.pos = len(ids)
        return logits

    def _apply_splice(self, slot: Slot, keep: int, runs: list[tuple[int, int, int]],
                      ids: list[int], interrupt: Interrupt | None) -> np.ndarray:
        """Make ``slot`` hold ``ids``: keep its first ``keep`` tokens, move each run
        ``(new_start, old_start, length)`` of cached tokens to its new start, drop the other
        cached tokens and run the rest; the logits after the last token.  On
        :class:`ForwardInterrupted` the slot must hold only its first ``keep`` tokens."""
        raise NotImplementedError

    def step(self, token: int) -> np.ndarray:
        """Append one token to the active slot; the next-token logits."""
        slot = self.active
        nxt = self.pos + 1
        if self.pos < len(slot.tokens) and slot.tokens[self.pos] == token and nxt in slot.saved:
            self.pos = nxt
            self.retraced += 1
            return slot.saved[nxt]
        ids = [token]
        if self.pos < len(slot.tokens):
            lost = slot.tokens[:self.pos]
            kept = self._cut(slot, self.pos)
            ids = lost[kept:] + ids  # an engine that could not crop ran from scratch
        return self._run(ids)

    def reset(self) -> None:
        """Forget every cached sequence."""
        for slot in self.slots:
            self._clear(slot)
            slot.tokens, slot.saved, slot.held = [], {}, False
        self.active = self.slots[0]
        self.pos = 0
