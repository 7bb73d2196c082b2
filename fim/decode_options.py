"""How one decode runs (``DecodeOptions``: mode, budgets, stopping rules) and who hears of it
while it runs (``DecodeHooks``).

They live apart from the decoding loop (``fim.decoding``) because the request records
(``fim.request``) and every caller build them without needing the loop itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fim.options import Mode


@dataclass(frozen=True)
class DecodeOptions:
    """How one decode runs: the mode, budgets and stopping rules (``CompletionRequest``'s
    decoding fields, see ``fim.api``).

    ``min_tokens`` forbids stop tokens before that many tokens (like ``generate``'s
    ``min_new_tokens``); benchmarks use it to compare equal lengths.  ``deadline`` is a
    ``time.monotonic()`` instant.

    Line ends: where the text gains a newline and (in constrained mode) the middle up to that
    newline is complete, ``line_stop`` ends the decode there (stop ``line_end``; the middle
    excludes the newline: a mid-line suggestion that stays on its line).  Unconstrained modes
    treat every newline as such a point.

    The right context: see ``right_context`` below and ``_Decoder._rewrites_right``.
    """

    mode: Mode | str
    max_tokens: int
    top_k: int = 50
    temperature: float = 0.0
    seed: int = 0
    min_tokens: int = 0
    line_stop: bool = False
    deadline: float | None = None
    #: The start of the text after the cursor (constrained mode; empty: off).  Where the
    #: model's best next token would begin re-writing it and the middle is complete at that
    #: point, the middle ends there (stop ``right_context``) instead of being forced on.
    right_context: str = ""
    #: Also where the model writes the next line's text on to the cursor's line (a comment,
    #: docstring or call wrapped by its author): the right context compared with line
    #: breaks, their indentation and a comment's ``#`` read as one space.
    right_wraps: bool = False
    #: The start of the text after the cursor, whether or not ``right_context`` is on: where
    #: the cursor splits a word, a refused end goes back to where the model's own word meets
    #: it (``fim.stopping.word_meets_right``).
    right_start: str = ""
    #: The cursor has only blanks before it on its line (the right context's first line is
    #: a whole line, whose re-write needs more agreement: ``fim.stopping.RightStop``).
    line_start: bool = False
    #: Constrained mode: the first tokens to take (an earlier run's path and a branch off
    #: it, ``fim.alternatives``); a forced token the constraint refuses ends the decode
    #: with no middle (stop ``no_candidate``).
    forced: tuple[int, ...] = ()
    #: Keep a ``TraceStep`` per token and the middle's log-probability (``Decoded.trace``).
    trace: bool = False


@dataclass(frozen=True)
class DecodeHooks:
    """Who hears of a decode while it runs.

    ``cancel`` is polled before every model step.  ``on_line`` is told each middle that ends
    at a complete line end while decoding goes on (an editor can show the first line while
    the rest is still being written).  ``progress(phase, done, total)`` hears of the prompt
    (``prefill``, in tokens) and of the middle (``decode``, tokens out of ``max_tokens``).
    """

    cancel: Callable[[], bool] | None = None
    on_line: Callable[[str], None] | None = None
    progress: Callable[[str, int, int], None] | None = None
