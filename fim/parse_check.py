"""Whether a middle makes the file parse, and the longest prefix of an output that does.

The parser is the final judge of every middle (``fim.api`` checks what the constraint let
through) and the whole of "checked" decoding (paper section III-A); kept apart from the
decoding loop so that evaluation code can use it without the loop.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Callable

from fim.options import StopReason


def parses(source: str) -> bool:
    """Whether ``source`` is a syntactically valid Python module."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes etc. still parse
            ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return False
    return True


def longest_parsing_prefix(left: str, text: str, right: str,
                           parser: Callable[[str], bool] = parses) -> str | None:
    """The longest ``p``, a prefix of ``text`` cut at any character, with ``left+p+right`` valid
    (``parser``: the file's language's, Python's by default)."""
    for end in range(len(text), -1, -1):
        if parser(left + text[:end] + right):
            return text[:end]
    return None


def checked_cut(left: str, text: str, right: str, stop: StopReason,
                parser: Callable[[str], bool] = parses) -> tuple[str | None, StopReason]:
    """Checked-unconstrained post-processing of an unconstrained output.

    Returns ``(middle, stop)``: the output itself when it parses after a stop token (``eos``),
    a shorter parsing prefix or a parsing output cut off by the budget (``best_complete``), or
    ``(None, "no_candidate")`` when no prefix parses.
    """
    kept = longest_parsing_prefix(left, text, right, parser)
    if kept is None:
        return None, StopReason.NO_CANDIDATE
    if len(kept) < len(text) or stop != StopReason.EOS:
        return kept, StopReason.BEST_COMPLETE
    return kept, stop
