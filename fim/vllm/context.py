"""What of the file a constrained request sends the server for Seam's constraint.

The server's processor builds the constraint from ``seam_left`` and ``seam_right``, but the
Python language (``python_language``) reads only windows of them: the left context from one
of its ``MAX_LEFT_CANDIDATES`` nearest clean top-level boundaries (``left_boundaries``),
the right context up to one of its ``MAX_RIGHT_CANDIDATES`` nearest ones
(``right_boundaries``), each tried nearest first, with the file's start (end) as the last
resort; a block's own end lies before the next top-level boundary.  So the client sends the
left context from the boundary after those candidates and the right context up to the one
after those candidates: the server finds the same candidates at the same places, and only
its last resort changes (the cut instead of the file's start or end).

Trade-offs, stated so none is silent:

* Where every nearer candidate fails (the cursor inside a string, or code near the cursor
  that does not parse), the server parses from the cut rather than from the file's start
  (to its end): a different, often cheaper window.  Every middle is still checked by this
  client against the *whole* file (``fim.vllm.answers.finish``: a middle is kept only when
  ``left + middle + right`` parses, else cut back to its longest prefix that does), so no
  suggestion that breaks the file is shown.
* The language's "outside" check (does the text outside the windows parse: mode ``exact``
  versus ``window``) sees only the sent text on the server; the whole file's is the client's
  check above.
"""

from __future__ import annotations

from dataclasses import dataclass

from python_language.grammar import python_tokenizer
from python_language.left_window import MAX_LEFT_CANDIDATES
from python_language.right_window import MAX_RIGHT_CANDIDATES, clean_cut
from python_language.windows import left_boundaries, right_boundaries


@dataclass(frozen=True)
class ConstraintTexts:
    """The left and right contexts a request sends for the constraint, and how many
    characters each left out (from the file's start, and at its end)."""

    left: str
    right: str
    left_dropped: int = 0
    right_dropped: int = 0


def constraint_texts(left: str, right: str) -> ConstraintTexts:
    """The windows the server's constraint needs of ``left`` and ``right`` (see the module):
    ``left`` from its ``MAX_LEFT_CANDIDATES + 1``-th nearest top-level boundary, ``right`` up
    to its ``MAX_RIGHT_CANDIDATES + 1``-th; whole where there are not that many."""
    # left_boundaries appends 0 after the boundaries it found: one more than the candidates
    # the language tries, and the file's start after it.
    found = left_boundaries(left, limit=MAX_LEFT_CANDIDATES + 1)
    start = found[MAX_LEFT_CANDIDATES] if len(found) > MAX_LEFT_CANDIDATES + 1 else 0
    end = _right_end(right)
    return ConstraintTexts(left[start:], right[:end], start, len(right) - end)


def _right_end(right: str) -> int:
    """Where the sent right context ends: after the language's candidate cuts, or the whole
    right context when none of them is clean (the cursor in a string, mostly: the server then
    takes the whole right context, as with the whole file)."""
    ends = right_boundaries(right, limit=MAX_RIGHT_CANDIDATES + 1)
    if len(ends) <= MAX_RIGHT_CANDIDATES + 1:
        return len(right)
    tok = python_tokenizer()
    if not any(clean_cut(tok, right, end, after)
               for end, after in zip(ends[:MAX_RIGHT_CANDIDATES], ends[1:], strict=False)):
        return len(right)
    return ends[MAX_RIGHT_CANDIDATES]
