"""What the engine-neutral part of ``fim`` needs from a model runtime, as typed records.

A :class:`Backend` is a loaded model seen through four things: a :class:`StepModel` (the KV
cached forward passes), a :class:`TextTokenizer` (text to ids and back, special tokens by
name), the :class:`~fim.vocab.Vocabulary` (the bytes of every id that is text, ``None`` for
the rest) and the window.  Prompt building, decoding and the constraint work on these alone,
so the llama.cpp and transformers engines are interchangeable behind them.  The engines build
these records; ``fim.loading`` chooses and imports the one engine a model needs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from fim.model_specs import EngineKind
from fim.step_model import StepModel
from fim.vocab import Vocabulary

Progress = Callable[[float, str], None]


class TextTokenizer(Protocol):
    """Text to token ids and back, as the prompt builder needs it."""

    bos_token_id: int | None
    eos_token_id: int | None

    def encode(self, text: str) -> list[int]:
        """Ids of ``text`` as plain text: no BOS added, and special-token names in the text
        are text, never control tokens (a file that mentions ``<|endoftext|>`` must not end
        its own prompt)."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids``."""
        ...

    def token_id(self, piece: str) -> int | None:
        """The id of ``piece`` as one vocabulary entry (special tokens included), or ``None``."""
        ...


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
