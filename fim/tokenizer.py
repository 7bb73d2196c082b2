"""The tokenizer protocol the prompt builder and the decoder work against.

It lives beside the templates, which are its main user, rather than with the engines: both
engines' tokenizers implement it structurally, and nothing above the engines needs to import an
engine module to name it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


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
