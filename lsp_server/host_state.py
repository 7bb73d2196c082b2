"""The model host's state as the editors see it: the ``seam/status`` notification's record.

Kept apart from ``lsp_server.model_host`` (which changes the state as loads, server failures
and the local fallback come and go) so that the record, its JSON and the reconnect timer's
waits are in one small place the messages, the editors' tests and the doctor read.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

#: The reconnect timer's first wait and its longest (the waits double in between).
RECONNECT_FIRST_S, RECONNECT_MAX_S = 1.0, 60.0


class LoadState(enum.StrEnum):
    """Where the model's lifecycle is (``seam/status``'s ``state``)."""

    IDLE = "idle"  # nothing asked for yet
    LOADING = "loading"
    READY = "ready"
    ERROR = "error"  # the last load failed; ``HostState.message`` says what to change
    #: the model server is unreachable and ``fallback: "local"`` is set: the local model
    #: serves in its place (``serving: "local"``), or is loading to (``serving`` absent)
    FALLBACK = "fallback"


class Serving(enum.StrEnum):
    """Which engine answers completion requests now (``seam/status``'s ``serving``)."""

    SERVER = "server"  # the model server the settings name (vLLM, llama-server, OpenAI)
    LOCAL = "local"  # a model loaded in the language server's own process


@dataclass(frozen=True)
class HostState:
    """A snapshot of the model's lifecycle; ``serving`` is ``None`` while nothing answers."""

    state: LoadState
    model: str | None = None
    message: str = ""
    serving: Serving | None = None

    def as_json(self) -> dict[str, Any]:
        """The ``seam/status`` notification (see ``lsp_server.messages``)."""
        out: dict[str, Any] = {"state": self.state.value, "model": self.model,
                               "message": self.message}
        if self.serving is not None:  # left out while nothing answers
            out["serving"] = self.serving.value
        return out

    @classmethod
    def from_json(cls, data: Any) -> HostState:
        """The notification's record; ``ValueError`` when ``state`` is not a known one (an
        unknown ``serving``, from a newer server, reads as ``None``)."""
        if not isinstance(data, dict):
            raise ValueError("seam/status must be an object")
        model = data.get("model")
        serving = data.get("serving")
        return cls(LoadState(data.get("state")), model if isinstance(model, str) else None,
                   str(data.get("message", "")),
                   Serving(serving) if serving in tuple(Serving) else None)


def reconnect_delays(first: float = RECONNECT_FIRST_S,
                     longest: float = RECONNECT_MAX_S) -> Iterator[float]:
    """The reconnect timer's waits: ``first``, doubling up to ``longest``, then ``longest``
    for ever (a server that stays away costs one attempt a minute)."""
    delay = first
    while True:
        yield delay
        delay = min(delay * 2, longest)
