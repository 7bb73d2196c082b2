"""Seam's vLLM processor with a clock on it, for ``benchmarks/bench_vllm_step.py``.

Loaded into vLLM in place of ``fim.vllm.processor:SeamLogitsProcessor`` (``--logits-processors
benchmarks.vllm_step_timer:TimedSeamLogitsProcessor``); it *is* that processor (a subclass
that changes no decision) and, on every ``apply`` call, appends one JSON line to the file named
by ``SEAM_STEP_LOG``: when the call started, the batch's rows, the constrained rows, and the
seconds spent in the step's ``update_state`` (following the batch's changes; starting the
build of a joining request's language on the language workers), feeding the rows their new
tokens (``advance``) and masking (``mask``), and the rows that joined their language in the
step, with those that had to wait for its build and the seconds they waited (inside
``mask``).  vLLM
calls ``apply`` once per engine step, between the forward pass and sampling, so the time from
one call's start to the next one's is one engine step.

It also counts, per step, the rows masked, the ids left in them, and the viability checks
(calls of a row's ``RowConstraint.viable``) with the seconds they took: with sampled rows the
masking is partly constraint checks (a top-k row needs k viable ids) and partly
vocabulary-wide array work (scaling, ranking, Gumbel noise), and the two would move out of
Python differently.  The count costs a wrapper call and two clock reads per check (about
0.3 microseconds on this 2-core CPU, against tens of microseconds a check takes), and lives
here, not on the production path.

The phases are timed by wrapping the row set's own methods (and each new row's ``viable``),
so ``apply`` runs unchanged.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import time
from collections.abc import Callable

import torch

from fim.vllm.processor import SeamLogitsProcessor, SeamRows

LOG_ENV = "SEAM_STEP_LOG"
#: The counters ``count_checks`` keeps (reset by the caller after each step).
COUNTERS = ("checked", "check", "masked", "left", "added")


def count_checks(rows: SeamRows, tally: dict[str, float]) -> None:
    """Make ``rows`` count into ``tally`` (keys ``COUNTERS``): every viability check of a
    constrained row added from now on (``checked``) and the seconds it took (``check``), every
    row masked (``masked``) with the number of ids it left (``left``), and every constrained
    row admitted (``added``: its language's build is started then).  Decisions are
    unchanged: the wrappers call the originals and return what they return."""
    for key in COUNTERS:
        tally.setdefault(key, 0)
    add, keep = rows.add, rows._keep

    def counted_add(index, params, prompt, output) -> bool:
        constrained = add(index, params, prompt, output)
        if constrained:
            tally["added"] += 1
        return constrained

    def counted_join(constraint) -> None:
        # Wrapped when the row joins its language (not at admission: the build runs then).
        constraint.viable = _counted_viable(constraint.viable, tally)

    def counted_keep(row, line) -> list[int]:
        kept = keep(row, line)
        tally["masked"] += 1
        tally["left"] += len(kept)
        return kept

    rows.add = counted_add
    rows._keep = counted_keep
    rows.on_join = counted_join


def _counted_viable(viable: Callable[[int], bool], tally: dict[str, float]
                    ) -> Callable[[int], bool]:
    def run(tid: int) -> bool:
        t0 = time.perf_counter()
        try:
            return viable(tid)
        finally:
            tally["check"] += time.perf_counter() - t0
            tally["checked"] += 1
    return run


class TimedSeamLogitsProcessor(SeamLogitsProcessor):
    """``SeamLogitsProcessor``, logging each ``apply`` (one engine step) to ``SEAM_STEP_LOG``."""

    def __init__(self, vllm_config, device: torch.device, is_pin_memory: bool) -> None:
        super().__init__(vllm_config, device, is_pin_memory)
        path = os.environ.get(LOG_ENV)
        if not path:
            raise RuntimeError(f"{LOG_ENV} must name the file the step timings go to")
        self._out = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - lives with vLLM
        self._phase = {"update": 0.0, "advance": 0.0, "mask": 0.0}
        self._tally: dict[str, float] = {}
        rows = self.rows
        for name in ("advance", "mask"):
            setattr(rows, name, self._timed(name, getattr(rows, name)))
        count_checks(rows, self._tally)
        # The cyclic collector's pauses (any thread's: a collection holds the GIL), so a slow
        # step can be told apart from slow constraint work.
        self._gc = {"gc_s": 0.0, "gc_full": 0}
        self._gc_start = 0.0
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
            return
        self._gc["gc_s"] += time.perf_counter() - self._gc_start
        if info.get("generation") == 2:
            self._gc["gc_full"] += 1

    def _timed(self, name: str, method):
        def run(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self._phase[name] += time.perf_counter() - t0
        return run

    def update_state(self, batch_update) -> None:
        t0 = time.perf_counter()
        try:
            super().update_state(batch_update)
        finally:
            self._phase["update"] += time.perf_counter() - t0

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        start = time.perf_counter()
        before = dataclasses.replace(self.rows.counts)
        try:
            return super().apply(logits)
        finally:
            end = time.perf_counter()
            counts = self.rows.counts
            self._out.write(json.dumps({
                "t": start, "apply": end - start, "update": self._phase["update"],
                "advance": self._phase["advance"], "mask": self._phase["mask"],
                "batch": int(logits.shape[0]), "rows": len(self.rows.rows), **self._tally,
                "joined": counts.joined - before.joined,
                "blocked": counts.blocked - before.blocked,
                "blocked_s": counts.blocked_s - before.blocked_s, **self._gc})
                + "\n")
            self._gc = {"gc_s": 0.0, "gc_full": 0}
            self._phase = dict.fromkeys(self._phase, 0.0)
            for key in COUNTERS:
                self._tally[key] = 0
