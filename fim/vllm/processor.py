"""Seam's constraint as a vLLM logits processor: one GPU (or CPU) server, many editors.

Load it into vLLM's OpenAI-compatible server with
``--logits-processors fim.vllm.processor:SeamLogitsProcessor``.  A request opts in with Seam's
arguments in its extra arguments (``vllm_xargs`` over HTTP; see ``fim.vllm.rows.SeamArgs``);
every other request is left alone and costs one dictionary lookup per batch change.

This class implements ``vllm.v1.sample.logits_processor.LogitsProcessor``, the interface of
vLLM's V1 model runner, the runner vLLM 0.32 uses on a CPU (its Model Runner V2 needs Triton
with a CPU backend) and with ``VLLM_USE_V2_MODEL_RUNNER=0`` anywhere.  vLLM keeps a persistent
batch: requests are added at a row, removed, moved and swapped between rows; each added request
comes with a live reference to its list of generated token ids, which the engine appends to.
The processor keeps one :class:`~fim.vllm.rows.RowConstraint` per constrained row, follows
those changes, and before each sample advances each row by the tokens it has not seen.

Masking, per constrained row:

* greedy (temperature 0, no penalties): the candidates are tried best first, as Seam's own
  decoder does, and every logit but the first viable one becomes ``-inf``: exact for argmax,
  and cheap (usually the first candidate or two);
* plain sampling (a temperature, nothing else): the processor draws the token itself, as Seam's
  own decoder does: candidates in the order of Gumbel-perturbed scores, the first viable one
  kept.  That is an exact draw from the model's distribution restricted to the viable tokens,
  at the cost of a greedy step plus the noise;
* anything else (top-k, top-p, min-p, penalties): every token of the vocabulary is checked and
  the unviable ones become ``-inf`` before vLLM's sampler runs, so no unviable token can be
  drawn whatever the sampling settings.  This costs one constraint check per vocabulary entry
  per step (memoised per state: seconds per token for a 150k vocabulary in Python);
  rejection and resampling is not possible from inside a logits processor, which cannot see
  the sampled token.

When no token is viable (the constraint's dead end, or a token the row had not allowed), only
the stop tokens are left: the request ends and the client cuts the middle back to its last
complete point.  Each finished row logs how many steps it masked the likeliest token.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import torch
from vllm import SamplingParams
from vllm.v1.sample.logits_processor import (
    BatchUpdate,
    LogitsProcessor,
    MoveDirectionality,
)

from fim.vllm.rows import LanguageCache, RowConstraint, SeamArgs, TokenTable, warm_completions

# A child of vLLM's logger, so lines reach the server's log in the engine process too.
log = logging.getLogger("vllm.seam")
#: vLLM treats a temperature below this as greedy.
GREEDY_EPS = 1e-5
#: Candidates read per batch when checking in logit order; more are read if all are refused.
FIRST_CANDIDATES = 16


def is_greedy(params: SamplingParams) -> bool:
    """Whether argmax of the processed logits picks the token (so one survivor suffices)."""
    return (params.temperature < GREEDY_EPS and params.repetition_penalty == 1.0
            and params.presence_penalty == 0.0 and params.frequency_penalty == 0.0)


def plain_sampling(params: SamplingParams) -> bool:
    """Whether the row draws from ``softmax(logits / temperature)`` and nothing else (no top-k,
    top-p, min-p or penalties): then the processor can draw the token itself (Gumbel-max over
    the viable tokens), which is the same distribution as masking the whole vocabulary."""
    return (params.temperature >= GREEDY_EPS and params.top_k in (0, -1)
            and params.top_p >= 1.0 and params.min_p <= 0.0
            and params.repetition_penalty == 1.0 and params.presence_penalty == 0.0
            and params.frequency_penalty == 0.0)


class _Row:
    """A constrained row: the constraint, the engine's live output list, and how to mask:
    greedy, drawn here (``sampler``, with the temperature) or the full mask."""

    __slots__ = ("constraint", "output", "greedy", "sampler", "temperature")

    def __init__(self, constraint: RowConstraint, output: list[int],
                 params: SamplingParams) -> None:
        self.constraint, self.output = constraint, output
        self.greedy = is_greedy(params)
        self.temperature = params.temperature
        # Seeded like the request (vLLM's own draws differ: a seeded request is reproducible
        # against itself, not against an unconstrained one).
        self.sampler = np.random.default_rng(params.seed) if plain_sampling(params) else None


class SeamRows:
    """The persistent batch's constrained rows, following vLLM's ``BatchUpdate`` records.

    Kept apart from the processor (which needs a model config and a tokenizer) so the row
    bookkeeping is tested on its own against vLLM's own batch-update types.
    """

    def __init__(self, table: TokenTable, languages: LanguageCache | None = None) -> None:
        self.table = table
        self.languages = languages or LanguageCache()
        self.rows: dict[int, _Row] = {}
        self.finished: list[RowConstraint] = []  # rows removed since the last drain

    def update(self, batch_update: BatchUpdate | None) -> None:
        """Apply vLLM's changes, in its order: removed, added, moved."""
        if batch_update is None:
            return
        for index in batch_update.removed:
            self._drop(index)
        for index, params, _prompt, output in batch_update.added:
            self._drop(index)  # an added request may replace the row's previous one
            args = SeamArgs.from_extra_args(params.extra_args) if params else None
            if args is not None:
                constraint = RowConstraint(args, self.languages.get(args), self.table)
                self.rows[index] = _Row(constraint, output, params)
        for a, b, direction in batch_update.moved:
            row_a, row_b = self.rows.pop(a, None), self.rows.pop(b, None)
            if row_a is not None:
                self.rows[b] = row_a
            if direction == MoveDirectionality.SWAP and row_b is not None:
                self.rows[a] = row_b
            elif direction != MoveDirectionality.SWAP and row_b is not None:
                self._finish(row_b)  # a one-way move overwrites the destination

    def _drop(self, index: int) -> None:
        row = self.rows.pop(index, None)
        if row is not None:
            self._finish(row)

    def _finish(self, row: _Row) -> None:
        self.finished.append(row.constraint)

    def drain_finished(self) -> list[RowConstraint]:
        done, self.finished = self.finished, []
        return done

    def advance(self) -> None:
        """Feed every row the tokens the engine generated since the last step."""
        for row in self.rows.values():
            out = row.output
            known = len(out)
            for k in range(row.constraint.seen, len(out)):
                if out[k] < 0:  # a placeholder the engine fills in later (async scheduling)
                    known = k
                    break
            row.constraint.advance(out[:known] if known < len(out) else out)

    def mask(self, logits: torch.Tensor) -> torch.Tensor:
        """Mask each constrained row of ``logits`` in place (see the module docstring).

        The rows are read and written as numpy arrays when the logits are on the CPU: torch's
        element-wise kernels there are parallel, and on a busy machine waking their threads
        for a 150k-entry row costs milliseconds (measured: 10 ms against 0.1 ms for a fill).
        """
        width = logits.shape[1]
        host = (logits.detach().numpy()
                if logits.device.type == "cpu" and logits.dtype == torch.float32 else None)
        for index, row in self.rows.items():
            if index >= logits.shape[0]:
                continue
            line = host[index] if host is not None else logits[index].float().cpu().numpy()
            if row.greedy or row.sampler is not None:
                scores = line if row.sampler is None else _gumbel(line, row)
                keep = _first_viable(row.constraint, scores)
                if keep is not None and host is not None:
                    value = line[keep]
                    line.fill(-math.inf)  # one survivor: argmax picks it
                    line[keep] = value
                    continue
                allowed = np.zeros(width, dtype=bool)
                if keep is not None:
                    allowed[keep] = True
            else:
                allowed = row.constraint.viable_mask(width)
                row.constraint.steps += 1
                if not allowed[int(np.argmax(line))]:
                    row.constraint.masked_top += 1
            if not allowed.any():
                row.constraint.forced += 1
                allowed[row.constraint.fallback_stops(width)] = True
            if host is not None:
                line[~allowed] = -math.inf
            else:
                logits[index].masked_fill_(torch.from_numpy(~allowed).to(logits.device),
                                           -math.inf)
        return logits


def _gumbel(line: np.ndarray, row: _Row) -> np.ndarray:
    """Gumbel-perturbed scores: the first viable id in their order is a draw from
    ``softmax(line / temperature)`` restricted to the viable ids (the Gumbel-max trick)."""
    u = np.maximum(row.sampler.random(line.shape[0], dtype=np.float32), 1e-20)
    return line / np.float32(row.temperature) - np.log(-np.log(u))


def _first_viable(constraint: RowConstraint, line: np.ndarray) -> int | None:
    """The best viable id of a greedy row, reading candidates in logit order: the first
    ``FIRST_CANDIDATES``, then eight times as many each time all were refused (never ids whose
    logit is already ``-inf``); counts a masked likeliest token."""
    constraint.steps += 1
    best = int(np.argmax(line))
    if line[best] > -math.inf and constraint.viable(best):
        return best  # the common case with a trained model: no sorting at all
    width = line.shape[0]
    k, tried = min(FIRST_CANDIDATES, width), 0
    while True:
        top = np.argpartition(-line, k - 1)[:k] if k < width else np.arange(width)
        order = top[np.lexsort((top, -line[top]))]  # best first; ties: lower id, as argmax
        fresh = [int(i) for i in order[tried:] if line[i] > -math.inf]
        found = constraint.first_viable(fresh)
        if found is not None or k == width or len(fresh) < k - tried:
            break
        tried, k = k, min(width, k * 8)
    if found is not None and found != best:
        constraint.masked_top += 1
    return found


class SeamLogitsProcessor(LogitsProcessor):
    """vLLM (V1 model runner) logits processor enforcing Seam's Python FIM constraint."""

    def __init__(self, vllm_config, device: torch.device, is_pin_memory: bool) -> None:
        from transformers import AutoTokenizer

        model_config = vllm_config.model_config
        tokenizer = AutoTokenizer.from_pretrained(
            model_config.tokenizer, trust_remote_code=model_config.trust_remote_code)
        table = TokenTable.from_tokenizer(tokenizer, model_config.get_vocab_size())
        self.rows = SeamRows(table)
        warm_completions()
        log.info("Seam constraint loaded: %d token ids, stop ids %s", table.size,
                 sorted(table.stop_ids))

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams) -> None:
        SeamArgs.from_extra_args(sampling_params.extra_args)  # raises SeamArgsError

    def is_argmax_invariant(self) -> bool:
        return False  # it changes which token is likeliest: that is its purpose

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        self.rows.update(batch_update)
        for done in self.rows.drain_finished():
            log.info("seam row done: tokens=%d steps=%d masked_top=%d forced_stop=%d dead=%s",
                     done.seen, done.steps, done.masked_top, done.forced, done.dead)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self.rows.rows:
            return logits
        self.rows.advance()
        return self.rows.mask(logits)
