"""The planner's measures of text: tokens counted with the engine's tokenizer (each text once,
remembered), and the line the widest prompt at a cursor would start at.

Callable objects of their own, not closures in the planner, so that the modules that measure
(``prompt_anchors``, the project context's sources) call forward into this one and never back
into the planner that called them: one request's path enters no module twice
(``tests/lsp_server/test_request_hops.py``).
"""

from __future__ import annotations

from collections.abc import Callable

from fim.lru import LRU
from fim.tokenizer import TextTokenizer

#: Token counts remembered (by text): the same texts come back with every request.
_COUNT_CACHE = 2048


class TokenCount:
    """``count(text)``: how many tokens ``tokenizer`` makes of ``text``."""

    def __init__(self, tokenizer: TextTokenizer) -> None:
        self.tokenizer = tokenizer

    def __call__(self, text: str) -> int:
        return len(self.tokenizer.encode(text))


class TokenCounter:
    """Token counts of texts, remembered (the same files come back with every request)."""

    def __init__(self, count: Callable[[str], int]) -> None:
        self._count = count
        self._cache: LRU[str, int] = LRU(_COUNT_CACHE)

    def __call__(self, text: str) -> int:
        n = self._cache.get(text)
        if n is None:
            n = self._count(text)
            self._cache.put(text, n)
        return n


class WidestLine:
    """``widest_line()`` for ``ContextCollector.collect``: the line the widest prompt at the
    cursor would start at, found only when a source asks (``fit`` is the prompt anchors'
    ``fit``, given the left text, the cursor and the widest budget; without it, line 0)."""

    def __init__(self, fit: Callable[[str, int, int], int] | None, left: str, budget: int
                 ) -> None:
        self.fit, self.left, self.budget = fit, left, budget

    def __call__(self) -> int:
        if self.fit is None:
            return 0
        return self.left.count("\n", 0, self.fit(self.left, len(self.left), self.budget))
