"""CPython's parser as the last word: where the exact machinery has no precomputed answer.

Three places ask it: a FIM state whose real layout at the end of the middle matches no
precomputed right-context branch (the answer is then still exact), `is_complete` in mode
"none" (no constraint was built, but the end can still be judged), and the check whether the
text outside the windows parses on its own (mode "exact" versus "window").
"""

from __future__ import annotations

import functools

from lexer.cpython import parses


def file_parses(text: str) -> bool:
    """Whether `text` is a valid Python file (blank text is)."""
    return not text.strip() or parses(text)


#: The text outside the windows stays the same while the user edits near the cursor, but each
#: new right context builds a new language; on a large file the parse is the costly part
#: (~0.4 s per MB), so the answers are remembered by content.
outside_parses = functools.lru_cache(maxsize=8)(file_parses)
