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
  Where the model's best token carries a re-write of the right context far enough to settle
  it and the middle is complete where the re-write began, the middle ends there
  (``right_context``, issues 18 and 29): the constraint would otherwise forbid the duplicate
  and force the model on until something connects.

For ranked alternatives (``fim.alternatives``) a decode can be told its first tokens
(``forced``: a run that follows an earlier one and branches off it) and keeps a trace: each
taken token's log-probability and the untried candidates after it, the branch points.

Token healing: the prompt's left context is backed off by its last token (see
``templates.heal_split``) and the first generated tokens must reproduce the removed characters
byte for byte; they are not part of the middle.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from fim import stopping
from fim.decode_options import DecodeHooks, DecodeOptions
from fim.engines.step_model import StepModel
from fim.engines.vocab import Vocabulary
from fim.healing import GeneratedBytes, HealIndex
from fim.options import MODES, Mode, StopReason
from fim.parse_check import checked_cut, longest_parsing_prefix, parses
from fim.stopping import (
    FeedCache,
    RightStop,
    Step,
    best_stopping_point,
    complete_line_end,
    copy_pending,
    pending_rewrite,
    refused_end_cut,
    rewrite_cut_after,
)
from fim.trace import TraceStep, line_steps, logsumexp, untried
from quotient.constraint import ConstraintState

# Re-exported: callers and tests reach these through the loop's module.
__all__ = ["Decoded", "DecodeHooks", "DecodeOptions", "DecodeSetup", "FeedCache", "HealIndex",
           "Step", "TraceStep", "_Step", "best_stopping_point", "checked_cut", "decode",
           "longest_parsing_prefix", "parses"]
_Step = Step


@dataclass
class Decoded:
    """What the loop produced, before the engine wraps it into a result."""

    middle: str | None
    stop: StopReason
    tokens: int
    model_ms: float = 0.0
    constraint_ms: float = 0.0
    raw: str = ""  # all generated characters after the healed prefix
    #: The taken tokens (``DecodeOptions.trace``), and the middle's log-probability: its
    #: tokens' and its end's (a stop token, the line's end, the right context's first token,
    #: or the stop-token estimate where a best complete point was cut); ``None`` untraced.
    trace: list[TraceStep] | None = None
    logprob: float | None = None
    #: Where the decode chose to end (a stop token, or the right context's first token)
    #: rather than take a token: its log-probability and the candidates that would go on.
    end_step: TraceStep | None = None
    #: Where the right-context stop cut lines written again: the steps that wrote the first
    #: of them (``fim.trace.line_steps``; the first is ``end_step``), more branch points.
    copied: tuple[TraceStep, ...] = ()


@dataclass
class DecodeSetup:
    """Everything the loop needs besides the request: model, vocabulary, stops, masks."""

    step_model: StepModel
    vocab: Vocabulary
    stop_ids: frozenset[int]
    disallowed: np.ndarray  # bool mask over the model's vocabulary
    heal_index: HealIndex | None = None


def _eos_logp(masked: np.ndarray, stop_list: list[int]) -> float:
    """Log-probability of stopping here (the likeliest stop token) under ``masked`` logits."""
    if not stop_list:
        return -math.inf
    return float(np.max(masked[stop_list])) - logsumexp(masked)


def _order(scores: np.ndarray, k: int) -> list[int]:
    """The ``k`` best ids, best first (ties: lower id first, as ``argmax``)."""
    k = max(1, min(k, scores.shape[0]))
    if k == 1:
        return [int(np.argmax(scores))]
    top = np.argpartition(-scores, k - 1)[:k]
    return top[np.lexsort((top, -scores[top]))].tolist()


def decode(setup: DecodeSetup, prompt_ids: list[int], healed: str, options: DecodeOptions,
           state: ConstraintState | None = None, cache: FeedCache | None = None,
           hooks: DecodeHooks | None = None) -> Decoded:
    """Generate a middle after ``prompt_ids`` (whose left context was backed off by
    ``healed``).  ``state``/``cache`` are required for ``constrained`` mode."""
    if options.mode not in MODES:
        raise ValueError(f"unknown mode {options.mode!r}; expected one of {', '.join(MODES)}")
    if options.mode == Mode.CONSTRAINED and (state is None or cache is None):
        raise ValueError("constrained decoding needs a recognizer state and a feed cache")
    run = _Decoder(setup, healed, options, state, cache, hooks or DecodeHooks())
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

    def __init__(self, setup: DecodeSetup, healed: str, options: DecodeOptions,
                 state: ConstraintState | None, cache: FeedCache | None,
                 hooks: DecodeHooks) -> None:
        self.setup = setup
        self.constrained = options.mode == Mode.CONSTRAINED
        self.max_tokens, self.top_k = options.max_tokens, options.top_k
        self.min_tokens, self.temperature = options.min_tokens, options.temperature
        self.generator = (np.random.default_rng(options.seed) if options.temperature > 0
                          else None)
        self.state, self.cache = state, cache
        self.cancel, self.deadline = hooks.cancel, options.deadline
        self.line_stop, self.on_line, self.progress = (options.line_stop, hooks.on_line,
                                                       hooks.progress)
        self.seq = GeneratedBytes(heal=healed.encode("utf-8"))
        self.right = RightStop.of(options.right_context if self.constrained else "",
                                  options.right_wraps, options.line_start)
        self.right_start = options.right_start
        self.steps: list[Step] = []
        self.stop_list = sorted(setup.stop_ids)
        self.tokens = 0
        self.last_eos_logp: float | None = None
        self.forced_refused = False
        self.masked = np.zeros(0, dtype=np.float32)
        self.model_s = self.constraint_s = 0.0
        self.forced = options.forced if self.constrained else ()
        self.trace: list[TraceStep] | None = [] if options.trace else None
        self.lse = 0.0  # log-normaliser of the current step's masked logits
        self.end_logp = 0.0  # the end's log-probability, for a traced decode
        self.end_step: TraceStep | None = None  # the end chosen instead of a token, traced
        self.copied: tuple[TraceStep, ...] = ()  # ``Decoded.copied``
        #: Where the model first chose to end and the file could not: (middle length, tokens)
        self.refused: tuple[int, int] | None = None
        # A ``line_stop`` line end held while the next line tells a copy (``_line_end``).
        self.held_line_end: int | None = None

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
            if self.refused and self.tokens - self.refused[1] == stopping.REFUSED_END_SLACK + 1:
                # However the forced run ends, the middle goes back before the refused end
                # when it can: the rest is not decoded.
                if (back := self._refused_end(StopReason.BUDGET)) is not None:
                    return self._back_before_refused(back)
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
            self.lse = logsumexp(masked)
            self.last_eos_logp = (float(np.max(masked[stop_list])) - self.lse if stop_list
                                  else -math.inf)
        scores = masked
        if self.generator is not None:  # Gumbel-max sampling
            u = np.maximum(self.generator.random(masked.shape[0]), 1e-20)
            scores = masked / self.temperature - np.log(-np.log(u))
        candidates = _order(scores, self.top_k if self.constrained else 1)
        self.masked = masked
        if self.tokens < len(self.forced):
            tid = self.forced[self.tokens]
            return [tid], [bool(np.isfinite(masked[tid]))]
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
        forced = self.tokens < len(self.forced)
        if self.right and finite[0] and candidates[0] not in setup.stop_ids and not forced:
            before, chars = self.tokens, seq.chars
            cut = self._rewrites_right(candidates[0])
            if cut is not None:
                self._took(candidates, 0, chars, taken=self.tokens > before)
                return _Choice(stop=StopReason.RIGHT_CONTEXT, line_cut=cut)
        elif (self.right and finite[0] and candidates[0] in setup.stop_ids and not forced
              and not seq.heal and not seq.pending and cache.is_complete(state)):
            # The model ends here: a re-write it wrote before the end is cut off.
            cut = rewrite_cut_after(cache, self.steps, state, seq.joined(), "", self.right,
                                    ending=True)
            if cut is not None:
                self._took(candidates, 0, seq.chars, taken=False)
                return _Choice(stop=StopReason.RIGHT_CONTEXT, line_cut=cut)
        for index, (tid, ok) in enumerate(zip(candidates, finite, strict=True)):
            if not ok:
                break  # only disallowed ids are left
            if tid in setup.stop_ids:
                if cache.is_complete(state):
                    self._took(candidates, index, seq.chars, taken=False)
                    return _Choice(stop=StopReason.EOS)
                if index == 0 and not forced:
                    self._refuse(seq.chars)
                continue
            moved = seq.advance(setup.vocab.token_bytes[tid])
            if moved is None:
                continue
            held = self.held_line_end
            if self.line_stop and "\n" in moved[2]:
                # The model wants the line to end: stop here if the middle is complete
                # (the newline itself may be one the constraint does not allow).
                k = moved[2].index("\n")
                before = cache.feed(state, moved[2][:k]) if k else state
                if before is not None and cache.is_complete(before) and (
                        line_cut := self._line_end(seq.chars + k, moved[2][:k])) is not None:
                    self._took(candidates, index, seq.chars)
                    seq.commit(*moved)
                    self.tokens += 1
                    return _Choice(stop=StopReason.LINE_END, line_cut=line_cut)
            nxt = cache.feed(state, moved[2]) if moved[2] else state
            if nxt is None:
                self.held_line_end = held  # (a line end held for a token not taken)
                if index == 0 and not forced and self.line_stop and "\n" in moved[2]:
                    # The model ends the line (its middle) where the file cannot.
                    self._refuse(seq.chars + moved[2].index("\n"))
                continue
            self.steps.append(Step(state, seq.chars, self.last_eos_logp, moved[2]))
            self._took(candidates, index, seq.chars)
            seq.commit(*moved)
            self.state = nxt
            return _Choice(tid, moved[2])
        if forced:
            self.forced_refused = True
        return _Choice(stop=StopReason.NO_CANDIDATE)

    def _refuse(self, chars: int) -> None:
        """The model's likeliest choice was to end the middle at ``chars`` characters, and
        the file is not complete there: the first such place is kept (``_refused_end``)."""
        if self.refused is None and not self.seq.heal and not self.seq.pending:
            self.refused = (chars, self.tokens)

    def _took(self, candidates: list[int], index: int, chars: int, taken: bool = True) -> None:
        """Trace the candidate at ``index``: a taken token (a ``TraceStep`` with the untried
        candidates after it), or the decode's end (``taken=False``: its log-probability)."""
        if self.trace is None:
            return
        masked, lse = self.masked, self.lse
        logp = float(masked[candidates[index]]) - lse
        alts = untried(candidates, index, masked, lse, self.setup.stop_ids, ended=not taken)
        step = TraceStep(candidates[index], logp, chars, alts)
        if taken:
            self.trace.append(step)
        else:  # the end: going on instead is a branch too
            self.end_logp, self.end_step = logp, step

    def _rewrites_right(self, tid: int) -> int | None:
        """Where the middle ends if the model's best token ``tid`` carries a re-write of the
        right context far enough to be sure of it, or ``None`` (``fim.stopping``'s
        ``right_rewrite_cut``).

        The model prefers to go on with text the file already has after the cursor: a tail
        of the middle, with ``tid``'s characters, that the right context starts with.  The
        earliest such tail, once settled, whose start is a complete point ends the middle
        there, so the duplicate is never kept and the constraint never has to force a
        detour around it.  A short agreement is not cut yet: the decode goes on, and the
        next tokens either settle it (the cut then goes back to where it started, dropping
        the tokens that confirmed it) or refute it.  A cut inside ``tid`` keeps the token's
        characters before the cut (``cannot`` + `` be`` against ``be None")``).
        """
        seq, cache = self.seq, self.cache
        moved = seq.advance(self.setup.vocab.token_bytes[tid])
        if moved is None or moved[0] or not moved[2]:
            return None  # healing not done, or no complete characters yet
        c = rewrite_cut_after(cache, self.steps, self.state, seq.joined(), moved[2],
                              self.right)
        if c is None:
            return None
        if c > seq.chars:  # the cut is inside this token: its first characters stay
            seq.commit(*moved)
            self.tokens += 1
        return c

    def _line_end(self, end: int, added: str = "") -> int | None:
        """Where a ``line_stop`` middle complete at ``end`` (``added``: the next token's text
        before it) ends: there, or if the line may start a copy (``copy_pending``) later."""
        if self.held_line_end is not None:  # (not the held one again, in ``_after_token``)
            return self.held_line_end if end > self.held_line_end else None
        if self.right and copy_pending((self.seq.joined() + added)[:end], self.right):
            self.held_line_end = end
            return None
        return end

    def _after_token(self, added: str) -> int | None:
        """After a token that added a newline: the middle's length at the first complete
        line end, when ``line_stop`` ends the decode there; ``on_line`` hears of it."""
        if not ((self.line_stop or self.on_line is not None) and "\n" in added):
            return None
        t0 = time.perf_counter()
        end = complete_line_end(self.steps[-1] if self.constrained else None, added,
                                 self.seq.chars, self.cache)
        self.constraint_s += time.perf_counter() - t0
        if end is None:
            return None
        if self.line_stop:
            return self._line_end(end)
        middle = self.seq.joined()[:end]
        if not (self.right and pending_rewrite(middle, self.right)):
            # (A line that may be the right context's start again is not shown until the
            # next tokens settle it or part from it.)
            self.on_line(middle)
        return None

    # ----- the answer -------------------------------------------------------------------

    def _decoded(self, middle: str | None, stop: StopReason, raw: str,
                 cut: int | None = None) -> Decoded:
        """The answer; ``cut``: the middle was cut at a best complete point there."""
        if self.forced_refused:
            middle = None
        logprob = None
        if self.trace is not None and middle is not None:
            if cut is None:
                logprob = sum(t.logp for t in self.trace) + self.end_logp
            else:  # the tokens before the cut, then the stop estimate there
                end = self.last_eos_logp if cut >= self.seq.chars else None
                if end is None:  # the last token boundary at or before the cut
                    for st in self.steps:
                        if st.chars <= cut:
                            end = st.eos_logp
                logprob = sum(t.logp for t in self.trace if t.chars < cut) + (
                    end if end is not None else 0.0)
        return Decoded(middle, stop, self.tokens, self.model_s * 1e3,
                       self.constraint_s * 1e3, raw, self.trace, logprob, self.end_step,
                       self.copied)

    def _refused_end(self, stop: StopReason) -> int | None:
        """The middle's length when it goes back before the model's refused end
        (``fim.stopping.refused_end_cut``: a forced run longer than the slack), or ``None``."""
        if (self.refused is None or stop == StopReason.CANCELLED
                or self.tokens - self.refused[1] <= stopping.REFUSED_END_SLACK):
            return None
        t0 = time.perf_counter()
        cut = refused_end_cut(self.steps, self.refused[0], self.cache, self.right_start)
        self.constraint_s += time.perf_counter() - t0
        return cut

    def _trace_until(self, cut: int) -> None:
        """The traced tokens from ``cut`` on are not the middle's: the first of them is where
        the decode chose to end."""
        after = [t for t in self.trace or () if t.chars >= cut]
        if after:
            self.trace = [t for t in self.trace if t.chars < cut]
            self.end_step, self.end_logp = after[0], after[0].logp

    def _back_before_refused(self, back: int) -> Decoded:
        """The middle cut ``back`` characters long, before the refused end."""
        self._trace_until(back)
        raw = self.seq.joined()
        return self._decoded(raw[:back], StopReason.REFUSED_END, raw, cut=back)

    def _result(self, stop: StopReason, line_cut: int | None = None) -> Decoded:
        """The middle for how the loop ended: cut at the line end, whole, back before a
        refused end (``_refused_end``), or (constrained, out of tokens, time or candidates)
        at the best complete stopping point."""
        raw = self.seq.joined()
        if self.held_line_end is not None and stop != StopReason.RIGHT_CONTEXT:
            # The line after a held line end was only looked at.
            return self._decoded(raw[:self.held_line_end], StopReason.LINE_END, raw)
        if self.constrained and (back := self._refused_end(stop)) is not None:
            return self._back_before_refused(back)
        if stop == StopReason.RIGHT_CONTEXT:
            if self.trace is not None and line_cut < len(raw) and self.right.whole_lines(
                    raw, line_cut):  # whole lines written again: where a branch may part
                ended = [self.end_step] if self.end_step is not None else []
                self.copied = line_steps(self.trace + ended, raw, line_cut)
            self._trace_until(line_cut)  # the tokens that confirmed the re-write
        if stop in (StopReason.LINE_END, StopReason.RIGHT_CONTEXT):
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
                             else StopReason.BEST_COMPLETE, raw, cut=best)


