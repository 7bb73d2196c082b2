"""Seam's constraint as a vLLM logits processor: one GPU (or CPU) server, many editors.

Load it into vLLM's OpenAI-compatible server with
``--logits-processors fim.vllm.processor:SeamLogitsProcessor``.  A request opts in with Seam's
arguments in its extra arguments (``vllm_xargs`` over HTTP; see ``fim.vllm.rows.SeamArgs``);
every other request is left alone.

vLLM 0.32 has two model runners with two logits-processor interfaces, and picks the runner
itself (Model Runner V2 by default where Triton runs, so on CUDA; the V1 runner on a CPU, or
with ``VLLM_USE_V2_MODEL_RUNNER=0``).  ``SeamLogitsProcessor`` implements both, so the one
``--logits-processors`` argument works under either; its constructor tells which runner built
it and it keeps that runner's bookkeeping:

* V1 (``vllm.v1.sample.logits_processor.LogitsProcessor``): a persistent batch whose rows are
  added, removed, moved and swapped (``update_state`` gets vLLM's ``BatchUpdate``); each added
  request comes with a live reference to its list of generated ids, which the engine appends
  to.  The sampler applies repetition/frequency/presence penalties *after* the processors, so a
  row with penalties is ranked as vLLM will penalise it (``fim.vllm.masking.penalised``).
* V2 (``vllm.v1.worker.gpu.sample.logits_processor.LogitsProcessor``): per-request state keyed
  by a slot (``add_request``; a slot is reused without notice, so it is reset there); each
  step's ``LogitsContext`` maps logits rows to slots; generated ids are read from the runner's
  token table (``all_token_ids[slot, prompt_len:total_len]``).  Penalties, bias and bad words
  come before the processor there, so the row is already in its sampled order.  Speculative
  decoding (one row per draft token) is refused at load.

A row is masked by ``fim.vllm.masking`` (checked in score order only as far as its sampling
settings reach; see there why that is exact): greedy leaves its first viable id, plain
temperature a viable id Seam draws itself, top-k/top-p/min-p the viable ids those settings can
still keep.  Every id not checked and found viable becomes ``-inf``, so no unviable token is
ever sampled, whatever the settings.  A greedy row whose request asked for the right-context
stop (``seam_right_stop``) ends where its likeliest id would carry a re-write of the text after
the cursor far enough to settle it and the middle is complete where the re-write began, the
rule of the in-process decoder (``fim.stopping.right_rewrite_cut``): only the stop ids are left
at that step (a short agreement is left to the next steps, which the row takes as usual; the
client cuts what they wrote).  Sampled rows
do not take it: their "next token" is a draw (vLLM's, for top-k/top-p) the client cannot see
again, so the client could not report the stop; there the constraint refuses the duplicate and
the draw goes on.  When no id is viable (the constraint's dead end, or a
token the row had not allowed), only the stop ids are left: the request ends and the client
cuts the middle back to its last complete point.  Each finished row logs how often its
likeliest id was masked.

A request's language (built from the whole file: milliseconds to a second) is not built in the
engine step that admits it: the admission starts the build on the language workers (on a
GPU server child processes that hold none of the engine's GIL, on a CPU one threads:
``fim.vllm.row_languages``) and the row joins it when its first mask is due, after the forward
pass it overlapped; ``JoinCounts`` counts the joins that still had to wait.  A warm-up request
(``seam_warm``) only starts the build, for the request that follows, and is not constrained.

Settings that mask or force tokens outside the processor (``min_tokens``, ``bad_words``,
``allowed_token_ids``, structured outputs, a thinking budget, trace replay, a non-finite
``logit_bias``) could leave a constrained row with nothing finite or overwrite its mask; a
request with Seam's arguments and one of them is refused at admission (``validate_params``,
an HTTP 400 naming it; ``fighting_setting`` says why each).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import vllm
from vllm import SamplingParams

from fim.language_cache import LanguageCache, PendingLanguage
from fim.vllm import runner_compat
from fim.vllm.masking import (
    Mode,
    Sampling,
    bounded_support,
    first_viable,
    gumbel_scores,
    penalised,
)
from fim.vllm.row_languages import server_languages, thread_languages
from fim.vllm.rows import (
    RowConstraint,
    SeamArgs,
    SeamArgsError,
    TokenTable,
    warm_completions,
)

# Each runner's interface apart (``fim.vllm.runner_compat``): a vLLM without one still serves
# the other.  The version is checked when the plugin loads, in every vLLM process.
from fim.vllm.runner_compat import (
    BatchUpdate,
    LogitsContext,
    LogitsProcRequestState,
    MoveDirectionality,
    V1LogitsProcessor,
    V2LogitsProcessor,
)

runner_compat.check_version(vllm.__version__)
runner_compat.log_load()

# A child of vLLM's logger, so lines reach the server's log in the engine process too.
log = logging.getLogger("vllm.seam")

_NO_IDS = np.zeros(0, dtype=np.int64)


@dataclass
class JoinCounts:
    """How rows met their languages (``fim.language_cache``: built by its workers from the
    row's admission): ``joined`` rows took theirs, ``blocked`` of them had to wait for the
    build, for ``blocked_s`` seconds in all (the engine step waited with them)."""

    joined: int = 0
    blocked: int = 0
    blocked_s: float = 0.0


class _Row:
    """A constrained row: its language (maybe still being built), the request's generated ids
    (the engine's live list under V1, a list this module fills under V2), its sampling settings
    and, for a row Seam draws itself, the random generator.  The constraint is made when first
    asked for (``constraint``), joining the language's build."""

    __slots__ = ("args", "pending", "owner", "_constraint", "output", "sampling", "mode",
                 "prompt_ids", "sampler")

    def __init__(self, args: SeamArgs, pending: PendingLanguage, owner: SeamRows,
                 output: list[int], params: SamplingParams, prompt_ids: np.ndarray) -> None:
        self.args, self.pending, self.owner = args, pending, owner
        self._constraint: RowConstraint | None = None
        self.output = output
        self.sampling = Sampling.from_params(params)
        self.mode = self.sampling.mode
        self.prompt_ids = prompt_ids  # unique prompt ids (repetition penalty, V1 only)
        # Seeded like the request (vLLM's own draws differ: a seeded request is reproducible
        # against itself, not against an unconstrained one).
        self.sampler = (np.random.default_rng(params.seed) if self.mode is Mode.DRAWN
                        else None)

    @property
    def ready(self) -> bool:
        """Whether the constraint is there without waiting for a build."""
        return self._constraint is not None or self.pending.done()

    @property
    def joined(self) -> RowConstraint | None:
        """The constraint if it was made already (``None``: the row never needed it)."""
        return self._constraint

    @property
    def constraint(self) -> RowConstraint:
        """The row's constraint, joining its language's build (waiting if it is not done)."""
        if self._constraint is None:
            counts = self.owner.counts
            waits = not self.pending.done()
            t0 = time.perf_counter()
            hit = self.pending.join()
            if waits or self.pending.built_here:  # a build the step waited for
                counts.blocked += 1
                counts.blocked_s += time.perf_counter() - t0
            counts.joined += 1
            self._constraint = RowConstraint(self.args, hit, self.owner.table)
            if self.owner.on_join is not None:
                self.owner.on_join(self._constraint)
            _feed_known(self._constraint, self.output)  # ids generated while it was built
        return self._constraint


class SeamRows:
    """The batch's constrained rows by index (a V1 batch row or a V2 slot), and their masks.

    Kept apart from the processor (which needs a model config and a tokenizer) so the row
    bookkeeping is tested on its own against vLLM's own batch-update types.
    ``penalties_after``: the sampler penalises the logits after the processor (V1), so the
    order of a row with penalties is computed here.
    """

    def __init__(self, table: TokenTable, languages: LanguageCache | None = None,
                 penalties_after: bool = True) -> None:
        self.table = table
        # (``is None``: an empty cache is falsy, and one passed in must be the one used)
        self.languages = (languages if languages is not None
                          else thread_languages())
        self.penalties_after = penalties_after
        self.rows: dict[int, _Row] = {}
        self.finished: list[RowConstraint] = []  # rows removed since the last drain
        self.counts = JoinCounts()
        #: called with each row's constraint when it is made (the step benchmark's counters)
        self.on_join: Callable[[RowConstraint], None] | None = None

    def add(self, index: int, params: SamplingParams | None, prompt: Sequence[int] | None,
            output: list[int]) -> bool:
        """A request takes row ``index`` (replacing its previous one): kept when it has Seam's
        arguments.  Returns whether it is constrained.

        Its language's build is started here (on the cache's workers) and joined when the
        row's first mask is due (``_Row.constraint``), not here: this runs inside the engine
        step, before the forward pass the build can overlap."""
        self.drop(index)
        args = SeamArgs.from_extra_args(params.extra_args) if params else None
        if args is None:
            return False
        pending = self.languages.begin(args.left, args.right, args.scope)
        if args.warm:  # an editor's warm-up: the build is for its next request; no row
            return False
        penalties = self.penalties_after and Sampling.from_params(params).penalties
        prompt_ids = (np.unique(np.asarray(prompt, dtype=np.int64))
                      if penalties and prompt is not None else _NO_IDS)
        self.rows[index] = _Row(args, pending, self, output, params, prompt_ids)
        return True

    def update(self, batch_update: BatchUpdate | None) -> None:
        """Apply vLLM's (V1) changes, in its order: removed, added, moved."""
        if batch_update is None:
            return
        for index in batch_update.removed:
            self.drop(index)
        for index, params, prompt, output in batch_update.added:
            self.add(index, params, prompt, output)
        for a, b, direction in batch_update.moved:
            row_a, row_b = self.rows.pop(a, None), self.rows.pop(b, None)
            if row_a is not None:
                self.rows[b] = row_a
            if direction == MoveDirectionality.SWAP and row_b is not None:
                self.rows[a] = row_b
            elif direction != MoveDirectionality.SWAP and row_b is not None:
                self._finish(row_b)  # a one-way move overwrites the destination

    def drop(self, index: int) -> None:
        row = self.rows.pop(index, None)
        if row is not None:
            self._finish(row)

    def _finish(self, row: _Row) -> None:
        if row.joined is not None:  # a row gone before its first mask has nothing to log
            self.finished.append(row.joined)

    def drain_finished(self) -> list[RowConstraint]:
        done, self.finished = self.finished, []
        return done

    def advance(self, indices: Iterable[int] | None = None) -> None:
        """Feed the rows (all, or those of ``indices``) the ids generated since the last step."""
        for index in self.rows if indices is None else indices:
            row = self.rows.get(index)
            if row is not None and row.ready:  # else its ids are fed when it joins
                _feed_known(row.constraint, row.output)

    def mask(self, logits: torch.Tensor,
             pairs: Iterable[tuple[int, int]] | None = None) -> torch.Tensor:
        """Mask the constrained rows of ``logits`` in place: ``pairs`` of (logits row, row
        index), by default each row index at its own logits row (V1).

        The rows are read and written as numpy arrays when the logits are on the CPU: torch's
        element-wise kernels there are parallel, and on a busy machine waking their threads
        for a 150k-entry row costs milliseconds (measured: 10 ms against 0.1 ms for a fill).
        """
        host = (logits.detach().numpy()
                if logits.device.type == "cpu" and logits.dtype == torch.float32 else None)
        if pairs is None:
            pairs = ((index, index) for index in self.rows)
        for at, index in pairs:
            row = self.rows.get(index)
            if row is None or at >= logits.shape[0]:
                continue
            line = host[at] if host is not None else logits[at].float().cpu().numpy()
            keep = self._keep(row, line)
            if host is not None:
                _leave(line, keep)
            else:
                line = line.copy()
                _leave(line, keep)
                logits[at].copy_(torch.from_numpy(line).to(logits.device, logits.dtype))
        return logits

    def _keep(self, row: _Row, line: np.ndarray) -> list[int]:
        """The ids row ``row`` leaves in ``line`` (stop ids when nothing is viable)."""
        scores = line
        if self.penalties_after and row.sampling.penalties:
            scores = penalised(line, row.sampling, row.prompt_ids, row.output)
        if row.mode is Mode.GREEDY and row.constraint.right:
            # The right-context stop (as ``fim.decoding``): the row's likeliest id would start
            # re-writing the text after the cursor where the middle is complete: end here.
            if row.constraint.right_cut(int(np.argmax(scores))) is not None:
                row.constraint.right_stops += 1
                return row.constraint.fallback_stops(line.shape[0])
        candidates = row.constraint.candidates()
        if row.mode is Mode.BOUNDED:
            keep = bounded_support(row.constraint, scores, row.sampling, candidates)
        else:
            if row.mode is Mode.DRAWN:
                scores = gumbel_scores(scores, row.sampling.temperature, row.sampler)
            found = first_viable(row.constraint, scores, candidates)
            keep = [] if found is None else [found]
        if not keep:
            row.constraint.forced += 1
            keep = row.constraint.fallback_stops(line.shape[0])
        return keep


def _feed_known(constraint: RowConstraint, out: list[int]) -> None:
    """Feed ``constraint`` the ids of ``out`` it has not seen, up to the first placeholder (an
    id the engine fills in later, under async scheduling)."""
    known = len(out)
    for k in range(constraint.seen, len(out)):
        if out[k] < 0:
            known = k
            break
    constraint.advance(out[:known] if known < len(out) else out)


def _leave(line: np.ndarray, keep: list[int]) -> None:
    """Every entry of ``line`` but those of ``keep`` becomes ``-inf``.

    When every kept entry is already ``-inf`` (only the stop ids are kept, and something
    before the processor masked them), they are made ``0.0``: a row of ``-inf`` has no defined
    draw (vLLM's V1 sampler then takes id 0, greedy or drawn, on this CPU), so the request ends
    rather than the sampler picking an id nobody checked.  The settings that can do that are
    refused at admission (``fighting_setting``); this is the last line behind them."""
    values = line[keep]
    if not np.isfinite(values).any():
        values = np.zeros_like(values)
    line.fill(-math.inf)
    line[keep] = values


def fighting_setting(params: SamplingParams) -> str | None:
    """The first of a request's settings that can fight Seam's mask, named as vLLM's API
    names it, or ``None``.  Read from vLLM 0.32's samplers (both runners):

    * ``min_tokens``, ``bad_words``, ``allowed_token_ids`` and structured outputs mask ids
      *before* the processor; the processor only leaves ids that are still finite, but where
      the only viable ids are the stop ids and those are masked (``min_tokens`` masks exactly
      them) the row would be all ``-inf``;
    * ``thinking_token_budget`` (with a reasoning parser) and ``trace_decode_token_ids``
      (trace replay) force a token *after* the processor, whatever it masked;
    * a non-finite ``logit_bias`` (the HTTP API clamps a bias to +-100, ``SamplingParams``
      built in Python does not) turns an id into ``-inf`` or NaN before the processor.

    A finite ``logit_bias`` is accepted: both runners add it before the processor, which then
    masks the biased row (ranking it as the sampler will).  Penalties, temperature, top-k/p,
    min-p, seeds and logprobs are the processor's own business (``fim.vllm.masking``)."""
    if params.min_tokens:
        return "min_tokens"
    if params.bad_words:
        return "bad_words"
    if params.allowed_token_ids is not None:
        return "allowed_token_ids"
    if params.structured_outputs is not None:
        return "structured_outputs (guided decoding, response_format)"
    if getattr(params, "thinking_token_budget", None) is not None:
        return "thinking_token_budget"
    if getattr(params, "trace_decode_token_ids", None):
        return "trace_decode_token_ids"
    if params.logit_bias and not all(math.isfinite(b) for b in params.logit_bias.values()):
        return "logit_bias (a value that is not finite)"
    return None


def _log_finished(rows: SeamRows) -> None:
    for done in rows.drain_finished():
        log.info("seam row done: tokens=%d steps=%d masked_top=%d forced_stop=%d "
                 "right_stop=%d dead=%s", done.seen, done.steps, done.masked_top, done.forced,
                 done.right_stops, done.dead)


def _device(vllm_config) -> str:
    """The device type the server's model runs on ("cuda", "cpu", ...)."""
    device = getattr(getattr(vllm_config, "device_config", None), "device_type", None)
    return str(device or "cuda")


def _token_table(vllm_config, runner: str) -> TokenTable:
    from transformers import AutoTokenizer

    model_config = vllm_config.model_config
    tokenizer = AutoTokenizer.from_pretrained(
        model_config.tokenizer, trust_remote_code=model_config.trust_remote_code)
    table = TokenTable.from_tokenizer(tokenizer, model_config.get_vocab_size())
    table.build_heal_index()
    warm_completions()
    # The runner is named so that a server's log says which interface is in use (vLLM picks
    # the runner itself; see the module docstring).
    log.info("Seam constraint loaded for %s: %d token ids, stop ids %s", runner, table.size,
             sorted(table.stop_ids))
    return table


class SeamV2Rows:
    """Model Runner V2's side: requests by slot, their generated ids read from the runner's
    token table each step (only the ids not read yet)."""

    def __init__(self, rows: SeamRows, req_states: LogitsProcRequestState) -> None:
        self.rows, self.state = rows, req_states

    def add_request(self, slot: int, params: SamplingParams) -> bool:
        # No prompt ids: V2 penalises before the processor, so none are needed.
        return self.rows.add(slot, params, None, [])

    def apply(self, logits: torch.Tensor, ctx: LogitsContext) -> torch.Tensor:
        if not self.rows.rows:
            return logits
        slots = ctx.expanded_idx_mapping.tolist()
        mine = sorted({s for s in slots if s in self.rows.rows})
        if not mine:
            return logits
        self._read_outputs(mine)
        self.rows.advance(mine)
        return self.rows.mask(logits, ((at, s) for at, s in enumerate(slots)
                                       if s in self.rows.rows))

    def _read_outputs(self, slots: list[int]) -> None:
        """Append to each slot's list the ids the runner committed since the last step."""
        total = self.state.total_len.gpu[slots].tolist()
        for slot, end in zip(slots, total, strict=True):
            row = self.rows.rows[slot]
            start = int(self.state.prompt_len.np[slot]) + len(row.output)
            if end > start:
                row.output.extend(self.state.all_token_ids.gpu[slot, start:end].tolist())


class SeamLogitsProcessor(V1LogitsProcessor, V2LogitsProcessor):
    """vLLM logits processor enforcing Seam's Python FIM constraint, under either model runner
    (see the module docstring)."""

    def __init__(self, vllm_config, *runner_args) -> None:
        if len(runner_args) == 1 and isinstance(runner_args[0], LogitsProcRequestState):
            if getattr(vllm_config, "speculative_config", None) is not None:
                raise ValueError("Seam's logits processor does not support speculative "
                                 "decoding (a row per draft token); start vLLM without it")
            self.rows = SeamRows(_token_table(vllm_config, "Model Runner V2"),
                                 languages=server_languages(_device(vllm_config)),
                                 penalties_after=False)
            self.v2: SeamV2Rows | None = SeamV2Rows(self.rows, runner_args[0])
        elif len(runner_args) == 2:  # V1: (device, is_pin_memory)
            self.rows = SeamRows(_token_table(vllm_config, "the V1 model runner"),
                                 languages=server_languages(_device(vllm_config)),
                                 penalties_after=True)
            self.v2 = None
        else:
            raise TypeError("SeamLogitsProcessor was built by neither of vLLM's model runners "
                            f"(arguments {[type(a).__name__ for a in runner_args]}); this "
                            "vLLM is not one Seam supports")

    @classmethod
    def over(cls, rows: SeamRows, v2_state: LogitsProcRequestState | None = None
             ) -> SeamLogitsProcessor:
        """A processor over rows already made (tests and benchmarks drive it inside vLLM's
        own sampler without a model config): V2's when ``v2_state`` is given."""
        self = cls.__new__(cls)
        self.rows = rows
        self.v2 = SeamV2Rows(rows, v2_state) if v2_state is not None else None
        return self

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams) -> None:
        """Run by vLLM at admission (a ``ValueError`` is an HTTP 400): Seam's arguments must
        be well formed, and a constrained request must carry none of the settings that mask
        or force tokens on their own (``fighting_setting``)."""
        if SeamArgs.from_extra_args(sampling_params.extra_args) is None:  # SeamArgsError
            return
        fight = fighting_setting(sampling_params)
        if fight is not None:
            raise SeamArgsError(f"{fight} cannot be combined with Seam's constraint "
                                "(seam_left/seam_right): no unviable token may be sampled")

    # The V1 interface.

    def is_argmax_invariant(self) -> bool:
        return False  # it changes which token is likeliest: that is its purpose

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        self.rows.update(batch_update)
        _log_finished(self.rows)

    # The V2 interface (``apply`` serves both).

    def add_request(self, req_idx: int, sampling_params: SamplingParams) -> bool:
        if self.v2 is None:
            raise RuntimeError("add_request is Model Runner V2's; this processor was built "
                               "by the V1 runner")
        constrained = self.v2.add_request(req_idx, sampling_params)
        _log_finished(self.rows)  # the slot's previous occupant, if it was Seam's
        return constrained

    def apply(self, logits: torch.Tensor, ctx: LogitsContext | None = None) -> torch.Tensor:
        if self.v2 is not None:
            if ctx is None:
                raise RuntimeError("Model Runner V2 calls apply with its LogitsContext")
            return self.v2.apply(logits, ctx)
        if not self.rows.rows:
            return logits
        self.rows.advance()
        return self.rows.mask(logits)
