"""The decoding loop: unconstrained, checked and constrained fill-in-the-middle generation.

One loop serves all three modes.  The prompt is run once (``logits_to_keep=1``), then one token
per step through the KV cache.  Generation works on token *bytes*; complete characters are fed
to the constraint and an incomplete UTF-8 tail waits for the next token.

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

import torch

from fim.vocab import Vocabulary, split_utf8

MODES = ("unconstrained", "checked", "constrained")
_FEED_CACHE_LIMIT = 200_000


class StepModel:
    """A causal LM driven one token at a time over a KV cache.

    The cache is kept between requests: a new prompt that shares a prefix with the tokens
    already in the cache (the same prompt again, as when the evaluation runs two modes, or a
    left context the user keeps typing at) only runs the model on the part that differs.
    The logits after each generated token are kept too, so a later run that retraces an
    earlier one token for token (constrained decoding following the unconstrained path while
    the constraint accepts the model's first choice) reads them instead of recomputing them;
    the first token that differs crops the cache there.
    """

    #: Prompt tokens per forward pass when prefilling: small on CPU, where 64 tokens of a
    #: 1.5B model take about two seconds on two cores, so that cancellation and time budgets
    #: act within one chunk; large on a GPU, where each pass has a fixed cost.
    CPU_CHUNK = 64
    GPU_CHUNK = 1024
    #: Logits kept for retracing (one vocabulary-sized row each: 0.6 MB for Qwen2.5).
    MAX_SAVED = 128

    def __init__(self, model: torch.nn.Module, device: torch.device) -> None:
        self.model = model
        self.device = device
        self.chunk = self.CPU_CHUNK if device.type == "cpu" else self.GPU_CHUNK
        self.past = None
        self.seq: list[int] = []  # the token ids whose keys and values are in ``past``
        self.pos = 0  # how many of them the current run has consumed; the rest may be retraced
        self.saved: dict[int, torch.Tensor] = {}  # length of a prefix of seq -> logits after it
        self.reused = 0  # prompt tokens served from the cache by the last prefill
        self.retraced = 0  # steps served from saved logits since the last prefill

    def _run(self, ids: list[int], **kwargs) -> torch.Tensor:
        with torch.inference_mode():
            out = self.model(
                input_ids=torch.tensor([ids], device=self.device),
                past_key_values=self.past,
                use_cache=True,
                **kwargs,
            )
        self.past = out.past_key_values
        self.seq.extend(ids)
        self.pos = len(self.seq)
        logits = out.logits[0, -1].float()
        self.saved[self.pos] = logits
        if len(self.saved) > self.MAX_SAVED:
            del self.saved[min(self.saved)]
        return logits

    def _crop(self, keep: int) -> int:
        """Cut the cache back to its first ``keep`` tokens; how many it holds afterwards."""
        remove = len(self.seq) - keep
        if remove and keep and self.past is not None and getattr(self.past, "is_croppable",
                                                                 False):
            try:
                self.past.crop(-remove)  # transformers 5: a negative count removes tokens
                if self.past.get_seq_length() != keep:
                    keep = 0
            except (NotImplementedError, ValueError, AttributeError, TypeError):
                keep = 0
        elif remove:
            keep = 0
        if keep == 0:
            self.past = None
        self.seq = self.seq[:keep]
        self.saved = {n: v for n, v in self.saved.items() if n <= keep}
        self.pos = keep
        return keep

    def prefill(self, ids: list[int],
                interrupt: Callable[[], bool] | None = None) -> torch.Tensor | None:
        """Run the prompt (reusing a cached common prefix); the next-token logits.

        Long prompts run in chunks of ``self.chunk`` tokens; ``interrupt`` is asked after each
        one, and a true answer stops the prefill and returns ``None``.  The chunks already run
        stay in the cache, so a later prompt with the same beginning (the user typing on)
        resumes from there instead of starting over.
        """
        if not ids:
            raise ValueError("empty prompt")
        self.retraced = 0
        keep = 0
        limit = min(len(self.seq), len(ids))
        while keep < limit and self.seq[keep] == ids[keep]:
            keep += 1
        if keep == len(ids) and keep in self.saved:
            self.pos = self.reused = keep  # the whole prompt, and its logits, are cached
            return self.saved[keep]
        keep = self._crop(min(keep, len(ids) - 1))  # always run at least the last token
        self.reused = keep
        rest = ids[keep:]
        while len(rest) > self.chunk:
            self._run(rest[:self.chunk], logits_to_keep=1)
            rest = rest[self.chunk:]
            if interrupt is not None and interrupt():
                return None
        return self._run(rest, logits_to_keep=1)

    def step(self, token: int) -> torch.Tensor:
        """Append one token; the next-token logits."""
        nxt = self.pos + 1
        if self.pos < len(self.seq) and self.seq[self.pos] == token and nxt in self.saved:
            self.pos = nxt
            self.retraced += 1
            return self.saved[nxt]
        if self.pos < len(self.seq):
            self._crop(self.pos)
        return self._run([token])

    def reset(self) -> None:
        self.past, self.seq, self.pos, self.saved = None, [], 0, {}


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


def checked_cut(left: str, text: str, right: str, stop: str) -> tuple[str | None, str]:
    """Checked-unconstrained post-processing of an unconstrained output.

    Returns ``(middle, stop)``: the output itself when it parses after a stop token (``eos``),
    a shorter parsing prefix or a parsing output cut off by the budget (``best_complete``), or
    ``(None, "no_candidate")`` when no prefix parses.
    """
    kept = longest_parsing_prefix(left, text, right)
    if kept is None:
        return None, "no_candidate"
    if len(kept) < len(text) or stop != "eos":
        return kept, "best_complete"
    return kept, stop


class FeedCache:
    """Memoised ``feed`` and ``is_complete`` for persistent recognizer states.

    Keys use ``id(state)``; the cache keeps every keyed state alive, so ids cannot be reused
    while an entry exists.
    """

    def __init__(self) -> None:
        self._feed: dict[tuple[int, str], tuple[object, object]] = {}
        self._complete: dict[int, tuple[object, bool]] = {}

    def feed(self, state, text: str):
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

    def is_complete(self, state) -> bool:
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
    stop: str
    tokens: int
    model_ms: float = 0.0
    constraint_ms: float = 0.0
    raw: str = ""  # all generated characters after the healed prefix


@dataclass
class _Step:
    """A constrained step, kept for the best-stopping-point search."""

    state: object  # recognizer state before this step's token
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

    @staticmethod
    def sorted_ids(vocab: Vocabulary) -> list[int]:
        """Ids of the tokens with bytes, ordered by those bytes (what the index bisects)."""
        tb = vocab.token_bytes
        return sorted((i for i, b in enumerate(tb) if b), key=tb.__getitem__)

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
    disallowed: torch.Tensor  # bool mask over the model's vocabulary
    heal_index: HealIndex | None = None


def _eos_logp(masked: torch.Tensor, stop_list: list[int]) -> float:
    """Log-probability of stopping here (the likeliest stop token) under ``masked`` logits."""
    if not stop_list:
        return -math.inf
    return float(torch.max(masked[stop_list]) - torch.logsumexp(masked, 0))


def _order(scores: torch.Tensor, k: int) -> list[int]:
    k = max(1, min(k, scores.shape[0]))
    if k == 1:
        return [int(torch.argmax(scores))]
    return torch.topk(scores, k).indices.tolist()


def decode(
    setup: DecodeSetup,
    prompt_ids: list[int],
    healed: str,
    *,
    mode: str,
    max_tokens: int,
    top_k: int = 50,
    temperature: float = 0.0,
    seed: int = 0,
    state=None,
    cache: FeedCache | None = None,
    cancel: Callable[[], bool] | None = None,
    deadline: float | None = None,
    min_tokens: int = 0,
) -> Decoded:
    """Generate a middle.  ``state``/``cache`` are required for ``constrained`` mode.

    ``min_tokens`` forbids stop tokens before that many tokens (like ``generate``'s
    ``min_new_tokens``); benchmarks use it to compare equal lengths.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    constrained = mode == "constrained"
    if constrained and (state is None or cache is None):
        raise ValueError("constrained decoding needs a recognizer state and a feed cache")
    vocab = setup.vocab
    generator = None
    if temperature > 0:
        generator = torch.Generator(device="cpu").manual_seed(seed)
    seq = _Sequence(heal=healed.encode("utf-8"))
    steps: list[_Step] = []
    model_s = constraint_s = 0.0
    stop = "budget"
    tokens = 0
    last_eos_logp: float | None = None
    stop_list = sorted(setup.stop_ids)

    def interrupted() -> bool:
        return bool((cancel is not None and cancel())
                    or (deadline is not None and time.monotonic() > deadline))

    t0 = time.perf_counter()
    logits = setup.step_model.prefill(prompt_ids, interrupted)
    model_s += time.perf_counter() - t0
    if logits is None:  # cancelled or out of time before the first token
        stop = "cancelled" if cancel is not None and cancel() else "time"
        return Decoded(None, stop, 0, model_s * 1e3, constraint_s * 1e3, "")

    while True:
        if cancel is not None and cancel():
            return Decoded(None, "cancelled", tokens, model_s * 1e3, constraint_s * 1e3,
                           seq.joined())
        if (deadline is not None and time.monotonic() > deadline) or tokens >= max_tokens:
            stop = "budget" if tokens >= max_tokens else "time"
            if constrained:  # the EOS estimate at the final position, for the best stop
                masked = logits.masked_fill(setup.disallowed, float("-inf"))
                last_eos_logp = _eos_logp(masked, stop_list)
            break
        t0 = time.perf_counter()
        masked = logits.masked_fill(setup.disallowed, float("-inf"))
        if tokens < min_tokens and stop_list:
            masked[stop_list] = float("-inf")
        if seq.heal and setup.heal_index is not None:
            keep = torch.full_like(masked, float("-inf"))
            allowed = setup.heal_index.consistent(seq.heal) + stop_list
            idx = torch.tensor(allowed, dtype=torch.long, device=masked.device)
            keep[idx] = masked[idx]
            masked = keep
        if constrained:
            last_eos_logp = _eos_logp(masked, stop_list)
        scores = masked
        if generator is not None:
            u = torch.rand(masked.shape, generator=generator).to(masked.device)
            scores = masked / temperature - torch.log(-torch.log(u.clamp_min(1e-20)))
        candidates = _order(scores, top_k if constrained else 1)
        finite = torch.isfinite(masked[candidates]).tolist()
        model_s += time.perf_counter() - t0

        chosen = None
        if not constrained:
            tid = candidates[0]
            if tid in setup.stop_ids or not finite[0] or vocab.token_bytes[tid] is None:
                stop = "eos"
                break
            moved = seq.advance(vocab.token_bytes[tid])
            if moved is None:
                # Invalid UTF-8 from an unconstrained model: drop the bytes, keep going.
                moved = (seq.heal, b"", "")
            seq.commit(*moved)
            chosen = tid
        else:
            t0 = time.perf_counter()
            finished = False
            for tid, ok in zip(candidates, finite, strict=True):
                if not ok:
                    break  # only disallowed ids are left
                if tid in setup.stop_ids:
                    if cache.is_complete(state):
                        finished = True
                        break
                    continue
                moved = seq.advance(vocab.token_bytes[tid])
                if moved is None:
                    continue
                nxt = cache.feed(state, moved[2]) if moved[2] else state
                if nxt is None:
                    continue
                steps.append(_Step(state, seq.chars, last_eos_logp, moved[2]))
                seq.commit(*moved)
                state = nxt
                chosen = tid
                break
            constraint_s += time.perf_counter() - t0
            if finished:
                stop = "eos"
                break
            if chosen is None:
                stop = "no_candidate"
                break
        tokens += 1
        if tokens >= max_tokens and not constrained:
            stop = "budget"  # no forward pass for logits nobody will read
            break
        t0 = time.perf_counter()
        logits = setup.step_model.step(chosen)
        model_s += time.perf_counter() - t0

    raw = seq.joined()
    if not constrained:
        return Decoded(raw, stop, tokens, model_s * 1e3, constraint_s * 1e3, raw)
    if stop == "eos":
        return Decoded(raw, "eos", tokens, model_s * 1e3, constraint_s * 1e3, raw)
    # Budget, time or no candidate: the best complete stopping point, if any.
    t0 = time.perf_counter()
    best = best_stopping_point(steps, state, seq.chars, last_eos_logp, cache)
    constraint_s += time.perf_counter() - t0
    if best is None:
        return Decoded(None, stop, tokens, model_s * 1e3, constraint_s * 1e3, raw)
    return Decoded(raw[:best], "time" if stop == "time" else "best_complete", tokens,
                   model_s * 1e3, constraint_s * 1e3, raw)


def best_stopping_point(
    steps: list[_Step], final_state, final_chars: int, final_logp: float | None,
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
