"""The vLLM step benchmark's records: the sampling modes a block of requests is sent with, and
the engine steps ``benchmarks.vllm_step_timer`` logs (one JSON line per ``apply``), read back
and filtered to the steady ones (``benchmarks/bench_vllm_step.py`` runs, ``vllm_step_report``
writes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SamplingMode:
    """The sampling settings every request of one block of the table is sent with (vLLM's
    ``temperature``, ``top_k``, ``top_p``; 0 and 1.0: off)."""

    name: str
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0

    @property
    def label(self) -> str:
        """How the table names it."""
        if self.temperature <= 0:
            return "greedy"
        parts = [f"temperature {self.temperature:g}"]
        if self.top_k:
            parts.append(f"top-k {self.top_k}")
        if self.top_p < 1.0:
            parts.append(f"top-p {self.top_p:g}")
        if len(parts) == 1:
            parts.append("drawn by Seam")
        return ", ".join(parts)

    def fields(self) -> dict[str, float | int]:
        """The settings as ``/v1/completions`` fields, beyond the temperature the client sends
        (settings left off are vLLM's defaults: off)."""
        out: dict[str, float | int] = {}
        if self.top_k:
            out["top_k"] = self.top_k
        if self.top_p < 1.0:
            out["top_p"] = self.top_p
        return out


#: The modes ``--sampling`` names: greedy (Seam's default), and the settings editors sample
#: with: a temperature alone (Seam draws the token itself), top-k and top-p with a temperature
#: (checked in logit order as far as they reach, ``fim/vllm/masking.py``), and llama.vim's
#: request to llama.cpp (top-k 40, top-p 0.90, the server's default temperature 0.8).
SAMPLING_MODES = {m.name: m for m in (
    SamplingMode("greedy"),
    SamplingMode("t0.8", temperature=0.8),
    SamplingMode("topk40", temperature=0.8, top_k=40),
    SamplingMode("topp0.95", temperature=0.8, top_p=0.95),
    SamplingMode("llamavim", temperature=0.8, top_k=40, top_p=0.9),
)}
DEFAULT_SAMPLING = "greedy,t0.8,topk40,topp0.95,llamavim"


def sampling_modes(spec: str) -> list[SamplingMode]:
    """The modes of a comma-separated ``--sampling`` value, in its order (each once);
    ``ValueError`` naming the known modes for an unknown or empty one."""
    names = [x.strip() for x in spec.split(",") if x.strip()]
    if not names:
        raise ValueError(f"no sampling mode given (known: {', '.join(SAMPLING_MODES)})")
    unknown = [x for x in names if x not in SAMPLING_MODES]
    if unknown:
        raise ValueError(f"unknown sampling mode {', '.join(unknown)} "
                         f"(known: {', '.join(SAMPLING_MODES)})")
    return [SAMPLING_MODES[x] for x in dict.fromkeys(names)]


@dataclass
class Step:
    """One logged ``apply``: seconds in the processor's phases, and the step's length."""

    t: float
    update: float
    advance: float
    mask: float
    apply: float
    rows: int
    batch: int
    # The timer's counts (0 in a log written before it counted): viability checks and their
    # seconds, rows masked and the ids they left.
    checked: int = 0
    check: float = 0.0
    masked: int = 0
    left: int = 0
    added: int = 0  # constrained rows admitted (their languages' builds started) in this step
    # Rows that joined their language in this step, those of them that had to wait for the
    # build, and the seconds they waited (inside ``apply``: the step waited with them).
    joined: int = 0
    blocked: int = 0
    blocked_s: float = 0.0
    # The cyclic collector's pauses in this step (any thread's), and its full collections.
    gc_s: float = 0.0
    gc_full: int = 0
    length: float = 0.0  # to the next apply's start

    @property
    def processor(self) -> float:
        return self.update + self.apply

    @property
    def admitting(self) -> float:
        """Seconds this step spent admitting rows: starting their builds and waiting for
        the ones not done when their first mask was due."""
        return self.update + self.blocked_s


_LOGGED = ("t", "update", "advance", "mask", "apply", "rows", "batch")
_COUNTED = ("checked", "check", "masked", "left", "added", "joined", "blocked", "blocked_s",
            "gc_s", "gc_full")


def read_steps(path: Path, first_line: int) -> list[Step]:
    lines = path.read_text(encoding="utf-8").splitlines()[first_line:]
    steps = []
    for line in lines:
        if line.strip():
            got = json.loads(line)
            steps.append(Step(**{k: got[k] for k in _LOGGED},
                              **{k: got[k] for k in _COUNTED if k in got}))
    for a, b in zip(steps, steps[1:], strict=False):
        a.length = b.t - a.t
    return steps


def pooled(phases: list[list[Step]], n: int) -> list[Step]:
    """The steady steps with ``n`` rows of every phase (a step with n constrained rows
    decoding is a batch-n step whichever burst it came from)."""
    return [s for steps in phases for s in steady(steps, n)]


def steady(steps: list[Step], n: int) -> list[Step]:
    """Steps with all ``n`` constrained rows decoding: this step, the one before and the one
    after it held ``n`` rows."""
    out = []
    for prev, cur, nxt in zip(steps, steps[1:], steps[2:], strict=False):
        if prev.rows == cur.rows == nxt.rows == n and cur.length > 0:
            out.append(cur)
    return out
