"""What the engine-neutral part of ``fim`` needs from a model runtime, as typed records.

A :class:`Backend` is a loaded model seen through four things: a :class:`StepModel` (the KV
cached forward passes), a :class:`~fim.tokenizer.TextTokenizer` (text to ids and back, special
tokens by name), the :class:`~fim.engines.vocab.Vocabulary` (the bytes of every id that is text,
``None`` for the rest) and the window. Prompt building, decoding and the constraint work on
these alone, so the llama.cpp and transformers engines are interchangeable behind them. The
engines build these records; ``fim.engines.loading`` chooses and imports the one engine a model
needs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fim.engines.cpu_load import ThreadGovernor
from fim.engines.model_specs import EngineKind
from fim.engines.step_model import StepModel
from fim.engines.vocab import Vocabulary
from fim.tokenizer import TextTokenizer

Progress = Callable[[float, str], None]


@dataclass
class Backend:
    """A loaded model, whichever engine runs it."""

    engine: EngineKind
    spec: str
    step_model: StepModel
    tokenizer: TextTokenizer
    vocab: Vocabulary
    heal_order: list[int]
    #: positions the model attends over (capped by what the engine allocated)
    window: int
    #: ``cpu``, ``cuda`` or ``metal``: where the forward passes run
    device: str
    #: one line for logs and reports, e.g. "llama.cpp 0.3.36, 2 threads, Q4_K_M"
    description: str = ""
    #: Seam's own cache directory of this model, for derived tables (may be ``None``)
    cache_dir: Path | None = None
    #: the transformers model and tokenizer, for benchmarks comparing with ``generate``
    native: object = None
    #: llama.cpp: what chooses its thread count before each request (pin a count with it);
    #: ``None`` for engines that do not run CPU threads of their own
    threads: ThreadGovernor | None = None
