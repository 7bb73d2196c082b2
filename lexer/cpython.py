"""CPython's own parser as the judge of what Seam's lexer cannot decide by itself.

Escape sequences in string literals, bytes contents and f-string expressions are checked by
CPython's parser once a lexeme is complete, and the FIM language falls back on it where no
precomputed branch applies. Warnings (invalid escapes are only deprecated) are silenced.
"""

from __future__ import annotations

import ast
import warnings


def parses(text: str, mode: str = "exec") -> bool:
    """Whether `ast.parse(text, mode=mode)` succeeds; never raises."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text, mode=mode)
        return True
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
