"""How fast this machine runs prompts into the model: prompt tokens per second, measured from
the engine's own prefills.

The first request at a new place waits for its whole prompt, so how wide that prompt can be
for a given wait depends on the machine: a two-core laptop CPU runs a few hundred prompt
tokens a second, a recent laptop with a GPU ten times that.  A constant window is either too
narrow for the fast machine (it loses the wide window's quality) or too slow on the slow one.
The step model records each prefill it runs here (tokens and seconds, when it ran enough
tokens to say something), and the server picks the first window from the running figure
(``lsp_server.request_plan.first_window``).

The record is a moving average (recent prefills weigh most: the machine's load changes), read
from another thread than the one that writes it; a float is replaced whole, so a reader sees
an old figure or a new one, never a torn one.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Fewer prompt tokens than this say more about the per-call overhead than about the speed.
MIN_MEASURED_TOKENS = 32
#: Weight of the newest prefill in the moving average.
NEWEST_WEIGHT = 0.3


@dataclass
class PrefillSpeed:
    """Prompt tokens per second of the engine's recent prefills (``None`` until one ran)."""

    tokens_per_s: float | None = None
    #: prefills measured so far
    samples: int = 0

    def record(self, tokens: int, seconds: float) -> None:
        """A prefill ran ``tokens`` prompt tokens in ``seconds``; too short ones are ignored."""
        if tokens < MIN_MEASURED_TOKENS or seconds <= 0:
            return
        speed = tokens / seconds
        old = self.tokens_per_s
        self.tokens_per_s = speed if old is None else (
            NEWEST_WEIGHT * speed + (1 - NEWEST_WEIGHT) * old)
        self.samples += 1

    def tokens_within(self, seconds: float) -> int | None:
        """Prompt tokens a prefill runs in ``seconds`` at the recorded speed (``None`` until
        something was measured)."""
        if self.tokens_per_s is None:
            return None
        return max(0, int(self.tokens_per_s * seconds))
