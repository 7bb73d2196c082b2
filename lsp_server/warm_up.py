"""The one-time costs a model's first request would pay, paid while it loads instead.

Before the model host (``lsp_server.model_host``) reports a model ready, it builds the Python
language's grammar tables (in a thread beside the load: they do not depend on the model) and
runs one tiny constrained completion (the first forward pass, the constraint's per-engine
tables); the local fallback's engine is warmed the same way.  ``benchmarks/bench_ready.py``
reads the two log lines written here to report the phases.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from fim.options import Mode, Scope

if TYPE_CHECKING:
    from fim.engine_interface import CompletionEngine

log = logging.getLogger(__name__)

WARM_LEFT = "def total(values):\n    result = 0\n    for value in values:\n        result += "
WARM_RIGHT = "\n    return result\n"
#: The model's warm-up prompt: as short as can be, since what it pays for once (llama.cpp's
#: compute graph and threads, the decoder's vocabulary tables) does not grow with the prompt,
#: and every token of it is time before "ready" (the four-line prompt above took 0.6 s).
WARM_MODEL_LEFT, WARM_MODEL_RIGHT = "x = ", "\n"


def build_language() -> None:
    """Build the Python language's tables once (the first constrained request would)."""
    t0 = time.perf_counter()
    try:
        from fim.language_cache import python_language

        python_language(WARM_LEFT, WARM_RIGHT, Scope.STATEMENT)
    except Exception:  # only a speed-up: the warm-up and requests report real failures
        log.debug("building the grammar tables ahead failed", exc_info=True)
    log.info("grammar tables built in %.2f s", time.perf_counter() - t0)


def warm_up(engine: CompletionEngine, cancel: Callable[[], bool],
            progress: Callable[[float, str], None], budget: float | None) -> None:
    """One one-token completion, so the user's first request runs at steady-state speed
    (``budget``: its time in milliseconds, ``None`` for no limit)."""
    progress(0.99, "warming up")
    # One constrained completion runs the model once (llama.cpp's graph and threads) and the
    # constraint's per-engine tables; an unconstrained one before it only added 0.25 s.
    t0 = time.perf_counter()
    try:
        from fim.api import CompletionRequest

        engine.complete(CompletionRequest(WARM_MODEL_LEFT, WARM_MODEL_RIGHT,
                                          mode=Mode.CONSTRAINED, max_tokens=1,
                                          scope=Scope.STATEMENT, time_budget_ms=budget),
                        cancel=cancel)
    except Exception:  # the model loaded; a failed warm-up only costs speed
        log.warning("constrained warm-up failed", exc_info=True)
    log.info("constrained warm-up took %.2f s", time.perf_counter() - t0)
