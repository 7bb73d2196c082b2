"""The decoding loop: unconstrained, checked and constrained fill-in-the-middle generation.

One loop serves all three modes and both engines: the prompt is run once, then one token per
step through the engine's KV cache (``fim.engines.step_model``); logits are numpy vectors.
Generation works on token *bytes*; complete characters are fed to the constraint and an
incomplete UTF-8 tail waits for the next token.

* ``unconstrained``: greedy (or Gumbel-max sampling at ``temperature > 0``) until a stop token.
* ``checked``: unconstrained, then the longest prefix of the output, cut at any character, for
  which ``ast.parse(left + prefix + right)`` succeeds (paper section III-A).
* ``constrained`` (paper VII-B): candidates are tried in score order, up to ``top_k``; a text
  token is accepted when the recognizer state can take its characters, a stop token only where
  the state ``is_complete()``.  When the token budget runs out or no candidate survives, the
  answer is the stopping point with the best length-weighted EOS log-probability among the
  positions (any character, also inside a token) where the language is complete, or failure.

Token healing: the prompt's left context is backed off by its last token (see
``templates.heal_split``) and the first generated tokens must reproduce the removed characters
byte for byte; they are not part of the middle.
"""

from __future__ import annotations

import ast
import bisect
import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from fim.engines.step_model import StepModel
from fim.engines.vocab import Vocabulary, sorted_ids, split_utf8
from fim.options import MODES, Mode, StopReason
from quotient.constraint import ConstraintState

_FEED_CACHE_LIMIT = 200_000


def parses(source: str) -> bool:
    """Whether ``source`` is a syntactically valid Python module."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes etc. still parse
            ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return False
    return True


def longest_parsing_prefix(left: str, text: str, right: str) -> str | None:
    """The longest ``p``, a prefix of ``text`` cut at any character, with ``left+p+right`` valid."""
    for end in range(len(text), -1, -1):
        if parses(left + text[:end] + right):
            return text[:end]
    return None


def checked_cut(left: str, text: str, right: str, stop: StopReason
                ) -> tuple[str | None, StopReason]:
    """Checked-unconstrained post-processing of an unconstrained output.

    Returns ``(middle, stop)``: the output itself when it parses after a stop token (``eos``),
    a shorter parsing prefix or a parsing output cut off by the budget (``best_complete``), or
    ``(None, "no_candidate")`` when no prefix parses.
    """
    kept = longest_parsing_prefix(left, text, right)
    if kept is None:
        return None, StopReason.NO_CANDIDATE
    if len(kept) < len(text) or stop != StopReason.EOS:
        return kept, StopReason.BEST_COMPLETE
    return kept, stop


class FeedCache:
    """Memoised ``feed`` and ``is_complete`` for persistent recognizer states.

    Keys use ``id(state)``; the cache keeps every keyed state alive, so ids cannot be reused
    while an entry exists.
    """

    def __init__(self) -> None:
        self._feed: dict[tuple[int, str],
                         tuple[ConstraintState, ConstraintState | None]] = {}
        self._complete: dict[int, tuple[ConstraintState, bool]] = {}

    def feed(self, state: ConstraintState, text: str) -> ConstraintState | None:
        if not text:
            return state
        key = (id(state), text)
        hit = self._feed.get(key)
        if hit is not None:
            return hit[1]
        if len(self._feed) > _FEED_CACHE_LIMIT:
            self._feed.clear()
            self._complete.clear()
        result = state.feed(text)
        self._feed[key] = (state, result)
        return result

    def is_complete(self, state: ConstraintState) -> bool:
        hit = self._complete.get(id(state))
        if hit is not None:
            return hit[1]
        result = bool(state.is_complete())
        self._complete[id(state)] = (state, result)
        return result


@dataclass
class Decoded:
    """What the loop produced, before the engine wraps it into a result."""

    middle: str | None
    stop: StopReason
    tokens: int
    model_ms: float = 0.0
    constraint_ms: float = 0.0
    raw: str = ""  # all generated characters after the healed prefix


@dataclass
class _Step:
    """A constrained step, kept for the best-stopping-point search."""

    state: ConstraintState  # the constraint's state before this step's token
    chars: int  # middle length before this step's token
    eos_logp: float  # log-probability of stopping before this step's token
    text: str = ""  # characters this step's token added to the middle


@dataclass
class _Sequence:
    """The generated bytes: healing residue, complete text and an incomplete UTF-8 tail."""

    heal: bytes
    pending: bytes = b""
    text: list[str] = field(default_factory=list)
    chars: int = 0

    def advance(self, data: bytes) -> tuple[bytes, bytes, str] | None:
        """``(heal, pending, new_text)`` after appending ``data``, or ``None`` if impossible."""
        heal = self.heal
        if heal:
            if data.startswith(heal):
                data = data[len(heal):]
                heal = b""
            elif heal.startswith(data):
                return heal[len(data):], self.pending, ""
            else:
                return None
        split = split_utf8(self.pending + data)
        if split is None:
            return None
        return heal, split[1], split[0]

    def commit(self, heal: bytes, pending: bytes, text: str) -> None:
        self.heal, self.pending = heal, pending
        if text:
            self.text.append(text)
            self.chars += len(text)

    def joined(self) -> str:
        return "".join(self.text)


class HealIndex:
    """Token ids whose bytes are consistent with a healing residue, found by bisection."""

    def __init__(self, vocab: Vocabulary, order: list[int] | None = None) -> None:
        tb = vocab.token_bytes
        self._ids = order if order is not None else self.sorted_ids(vocab)
        self._keys = [tb[i] for i in self._ids]

    sorted_ids = staticmethod(sorted_ids)

    @property
    def order(self) -> list[int]:
        return self._ids

    def consistent(self, heal: bytes) -> list[int]:
        """Ids whose bytes start with ``heal`` or are a non-empty prefix of it."""
        lo = bisect.bisect_left(self._keys, heal)
        out = []
        for k in range(lo, len(self._keys)):
            if not self._keys[k].startswith(heal):
                break
            out.append(self._ids[k])
        for n in range(1, len(heal)):
            lo = bisect.bisect_left(self._keys, heal[:n])
            hi = bisect.bisect_right(self._keys, heal[:n], lo)
            out.extend(self._ids[lo:hi])
        return out


@dataclass
class DecodeSetup:
    """Everything the loop needs besides the request: model, vocabulary, stops, masks."""

    step_model: StepModel
    vocab: Vocabulary
    stop_ids: frozenset[int]
    disallowed: np.ndarray  # bool mask over the model's vocabulary
    heal_index: HealIndex | None = None


def _logsumexp(x: np.ndarray) -> float:
    top = float(np.max(x))
    if not math.isfinite(top):
        return top
    return top + math.log(float(np.sum(np.exp(x - top, dtype=np.float64))))


def _eos_logp(masked: np.ndarray, stop_list: list[int]) -> float:
    """Log-probability of stopping here (the likeliest stop token) under ``masked`` logits."""
    if not stop_list:
        return -math.inf
    return float(np.max(masked[stop_list])) - _logsumexp(masked)


def _order(scores: np.ndarray, k: int) -> list[int]:
    """The ``k`` best ids, best first (ties: lower id first, as ``argmax``)."""
    k = max(1, min(k, scores.shape[0]))
    if k == 1:
        return [int(np.argmax(scores))]
    top = np.argpartition(-scores, k - 1)[:k]
    return top[np.lexsort((top, -scores[top]))].tolist()


def decode(
    setup: DecodeSetup,
    prompt_ids: list[int],
    healed: str,
    *,
    mode: Mode | str,
    max_tokens: int,
    top_k: int = 50,
    temperature: float = 0.0,
    seed: int = 0,
    state: ConstraintState | None = None,
    cache: FeedCache | None = None,
    cancel: Callable[[], bool] | None = None,
    deadline: float | None = None,
    min_tokens: int = 0,
    line_stop: bool = False,
    on_line: Callable[[str], None] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> Decoded:
    """Generate a middle.  ``state``/``cache`` are required for ``constrained`` mode.

    ``min_tokens`` forbids stop tokens before that many tokens (like ``generate``'s
    ``min_new_tokens``); benchmarks use it to compare equal lengths.

    Line ends: where the text gains a newline and (in constrained mode) the middle up to that
    newline is complete, ``line_stop`` ends the decode there (stop ``line_end``; the middle
    excludes the newline: a mid-line suggestion that stays on its line), and ``on_line`` is
    told that middle and decoding goes on (an editor can show the first line while the rest
    is still being written).  Unconstrained modes treat every newline as such a point.

    ``progress(phase, done, total)`` hears of the prompt (``prefill``, in tokens) and of the
    middle (``decode``, tokens out of ``max_tokens``), for a command line's progress display.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    if mode == Mode.CONSTRAINED and (state is None or cache is None):
        raise ValueError("constrained decoding needs a recognizer state and a feed cache")
    run = _Decoder(setup, healed, Mode(mode), max_tokens, top_k, temperature, seed, state,
                   cache, cancel, deadline, min_tokens, line_stop, on_line, progress)
    return run.run(prompt_ids)


@dataclass
class _Choice:
    """What one step picked: the token and the characters it added, or why the decode ends
    here (``stop``, with ``line_cut`` for a line end inside the token)."""

    token: int | None = None
    added: str = ""
    stop: StopReason | None = None
    line_cut: int | None = None


class _Decoder:
    """One decode, as named steps: run the prompt; per token, score the logits
    (``_scores``: non-text ids, early stops and token healing masked, like a chain of logits
    processors), choose (``_choose_free`` or ``_choose_constrained``), watch for line ends
    (``_after_token``) and step the model; at the end, pick the middle (``_result``)."""

    def __init__(self, setup: DecodeSetup, healed: str, mode: Mode, max_tokens: int,
                 top_k: int, temperature: float, seed: int, state: ConstraintState | None,
                 cache: FeedCache | None,
                 cancel: Callable[[], bool] | None, deadline: float | None, min_tokens: int,
                 line_stop: bool, on_line: Callable[[str], None] | None,
                 progress: Callable[[str, int, int], None] | None) -> None:
        self.setup = setup
        self.constrained = mode == Mode.CONSTRAINED
        self.max_tokens, self.top_k, self.min_tokens = max_tokens, top_k, min_tokens
        self.temperature = temperature
        self.generator = np.random.default_rng(seed) if temperature > 0 else None
        self.state, self.cache = state, cache
        self.cancel, self.deadline = cancel, deadline
        self.line_stop, self.on_line, self.progress = line_stop, on_line, progress
        self.seq = _Sequence(heal=healed.encode("utf-8"))
        self.steps: list[_Step] = []
        self.stop_list = sorted(setup.stop_ids)
        self.tokens = 0
        self.last_eos_logp: float | None = None
        self.model_s = self.constraint_s = 0.0

    # ----- the loop ---------------------------------------------------------------------

    def run(self, prompt_ids: list[int]) -> Decoded:
        t0 = time.perf_counter()
        logits = self.setup.step_model.prefill(
            prompt_ids, self._interrupted,
            (lambda done, total: self.progress("prefill", done, total))
            if self.progress else None)
        self.model_s += time.perf_counter() - t0
        if logits is None:  # cancelled or out of time before the first token
            return self._decoded(None, StopReason.CANCELLED if self._cancelled()
                                 else StopReason.TIME, "")
        while True:
            if self._cancelled():
                return self._decoded(None, StopReason.CANCELLED, self.seq.joined())
            out_of_time = self.deadline is not None and time.monotonic() > self.deadline
            if out_of_time or self.tokens >= self.max_tokens:
                if self.constrained:  # the EOS estimate at the final position, for the best stop
                    masked = np.where(self.setup.disallowed, -np.inf, logits)
                    self.last_eos_logp = _eos_logp(masked, self.stop_list)
                return self._result(StopReason.BUDGET if self.tokens >= self.max_tokens
                                    else StopReason.TIME)
            t0 = time.perf_counter()
            candidates, finite = self._scores(logits)
            self.model_s += time.perf_counter() - t0
            if self.constrained:
                t0 = time.perf_counter()
                choice = self._choose_constrained(candidates, finite)
                self.constraint_s += time.perf_counter() - t0
            else:
                choice = self._choose_free(candidates[0], finite[0])
            if choice.stop is not None:
                return self._result(choice.stop, choice.line_cut)
            self.tokens += 1
            line_cut = self._after_token(choice.added)
            if line_cut is not None:
                return self._result(StopReason.LINE_END, line_cut)
            if self.tokens >= self.max_tokens and not self.constrained:
                # No forward pass for logits nobody will read.
                return self._result(StopReason.BUDGET)
            if self.progress is not None:
                self.progress("decode", self.tokens, self.max_tokens)
            t0 = time.perf_counter()
            logits = self.setup.step_model.step(choice.token)
            self.model_s += time.perf_counter() - t0

    def _cancelled(self) -> bool:
        return self.cancel is not None and bool(self.cancel())

    def _interrupted(self) -> bool:
        return self._cancelled() or (self.deadline is not None
                                     and time.monotonic() > self.deadline)

    # ----- scoring ----------------------------------------------------------------------

    def _scores(self, logits: np.ndarray) -> tuple[list[int], list[bool]]:
        """The candidates in the order they are tried (one unless constrained) and whether
        each is allowed at all."""
        setup, stop_list = self.setup, self.stop_list
        # Ids that are not text (control, unused, padding) can never be generated.
        masked = np.where(setup.disallowed, -np.inf, logits).astype(np.float32, copy=False)
        if self.tokens < self.min_tokens and stop_list:
            masked[stop_list] = -np.inf
        if self.seq.heal and setup.heal_index is not None:
            # Token healing: only tokens that reproduce the backed-off characters.
            keep = np.full_like(masked, -np.inf)
            allowed = setup.heal_index.consistent(self.seq.heal) + stop_list
            keep[allowed] = masked[allowed]
            masked = keep
        if self.constrained:
            self.last_eos_logp = _eos_logp(masked, stop_list)
        scores = masked
        if self.generator is not None:  # Gumbel-max sampling
            u = np.maximum(self.generator.random(masked.shape[0]), 1e-20)
            scores = masked / self.temperature - np.log(-np.log(u))
        candidates = _order(scores, self.top_k if self.constrained else 1)
        return candidates, np.isfinite(masked[candidates]).tolist()

    # ----- choosing ---------------------------------------------------------------------

    def _choose_free(self, tid: int, allowed: bool) -> _Choice:
        """Unconstrained: the best token, whatever it makes of the text."""
        token_bytes = self.setup.vocab.token_bytes[tid]
        if tid in self.setup.stop_ids or not allowed or token_bytes is None:
            return _Choice(stop=StopReason.EOS)
        moved = self.seq.advance(token_bytes)
        if moved is None:
            # Invalid UTF-8 from an unconstrained model: drop the bytes, keep going.
            moved = (self.seq.heal, b"", "")
        self.seq.commit(*moved)
        return _Choice(tid, moved[2])

    def _choose_constrained(self, candidates: list[int], finite: list[bool]) -> _Choice:
        """The first candidate the constraint accepts: a stop token only where the file is
        complete, a text token when the state can take its characters."""
        setup, cache, seq, state = self.setup, self.cache, self.seq, self.state
        for tid, ok in zip(candidates, finite, strict=True):
            if not ok:
                break  # only disallowed ids are left
            if tid in setup.stop_ids:
                if cache.is_complete(state):
                    return _Choice(stop=StopReason.EOS)
                continue
            moved = seq.advance(setup.vocab.token_bytes[tid])
            if moved is None:
                continue
            if self.line_stop and "\n" in moved[2]:
                # The model wants the line to end: stop here if the middle is complete
                # (the newline itself may be one the constraint does not allow).
                k = moved[2].index("\n")
                before = cache.feed(state, moved[2][:k]) if k else state
                if before is not None and cache.is_complete(before):
                    line_cut = seq.chars + k
                    seq.commit(*moved)
                    self.tokens += 1
                    return _Choice(stop=StopReason.LINE_END, line_cut=line_cut)
            nxt = cache.feed(state, moved[2]) if moved[2] else state
            if nxt is None:
                continue
            self.steps.append(_Step(state, seq.chars, self.last_eos_logp, moved[2]))
            seq.commit(*moved)
            self.state = nxt
            return _Choice(tid, moved[2])
        return _Choice(stop=StopReason.NO_CANDIDATE)

    def _after_token(self, added: str) -> int | None:
        """After a token that added a newline: the middle's length at the first complete
        line end, when ``line_stop`` ends the decode there; ``on_line`` hears of it."""
        if not ((self.line_stop or self.on_line is not None) and "\n" in added):
            return None
        t0 = time.perf_counter()
        end = _complete_line_end(self.steps[-1] if self.constrained else None, added,
                                 self.seq.chars, self.cache)
        self.constraint_s += time.perf_counter() - t0
        if end is None:
            return None
        if self.line_stop:
            return end
        self.on_line(self.seq.joined()[:end])
        return None

    # ----- the answer -------------------------------------------------------------------

    def _decoded(self, middle: str | None, stop: StopReason, raw: str) -> Decoded:
        return Decoded(middle, stop, self.tokens, self.model_s * 1e3,
                       self.constraint_s * 1e3, raw)

    def _result(self, stop: StopReason, line_cut: int | None = None) -> Decoded:
        """The middle for how the loop ended: cut at the line end, whole, or (constrained,
        out of tokens, time or candidates) at the best complete stopping point."""
        raw = self.seq.joined()
        if stop == StopReason.LINE_END:
            return self._decoded(raw[:line_cut], stop, raw)
        if not self.constrained or stop == StopReason.EOS:
            return self._decoded(raw, stop, raw)
        t0 = time.perf_counter()
        best = best_stopping_point(self.steps, self.state, self.seq.chars, self.last_eos_logp,
                                   self.cache)
        self.constraint_s += time.perf_counter() - t0
        if best is None:
            return self._decoded(None, stop, raw)
        return self._decoded(raw[:best], StopReason.TIME if stop == StopReason.TIME
                             else StopReason.BEST_COMPLETE, raw)


def _complete_line_end(step: _Step | None, text: str, chars: int, cache: FeedCache | None
                       ) -> int | None:
    """The middle length up to the first newline in ``text`` (what the last token added, the
    middle now being ``chars`` long) where the middle is complete; with no constraint
    (``step`` is ``None``) the first newline; ``None`` when there is none."""
    before = chars - len(text)
    k = text.find("\n")
    while k >= 0:
        if step is None:
            return before + k
        state = cache.feed(step.state, text[:k])
        if state is not None and cache.is_complete(state):
            return before + k
        k = text.find("\n", k + 1)
    return None


def best_stopping_point(
    steps: list[_Step], final_state: ConstraintState, final_chars: int,
    final_logp: float | None,
    cache: FeedCache,
) -> int | None:
    """The middle length (in characters) of the best complete stopping point, or ``None``.

    Token boundaries come first: each boundary where the language is complete scores
    ``log P(EOS) + log(1 + chars)``, the paper's "EOS probability weighted by generation
    length", with the model's own EOS estimate there.  Only when no boundary is complete are
    positions inside tokens considered; they have no EOS estimate of their own and borrow the
    one from the start of their token (so they rank by that and by length).
    """
    if final_logp is None and steps:
        final_logp = steps[-1].eos_logp
    best, best_score = None, -math.inf
    boundaries = [(st.state, st.chars, st.eos_logp) for st in steps]
    if final_logp is not None:
        boundaries.append((final_state, final_chars, final_logp))
    for state, chars, logp in boundaries:
        if cache.is_complete(state):
            score = logp + math.log1p(chars)
            if score > best_score:
                best, best_score = chars, score
    if best is not None:
        return best
    for st in steps:
        state = st.state
        for j in range(1, len(st.text)):
            state = cache.feed(state, st.text[j - 1])
            if state is None:
                break
            if cache.is_complete(state):
                score = st.eos_logp + math.log1p(st.chars + j)
                if score > best_score:
                    best, best_score = st.chars + j, score
    return best
