"""Where each document's prompt starts, chosen so that the model's cache keeps serving it.

The model caches the prompts it ran and reruns only what differs from the cached beginning.
A prompt starts ``<prefix>`` followed by the left context from some line on; if that line
moved with every request (the last N tokens before the cursor), no two requests would share
a beginning and every one would pay the whole left context again (about ten seconds for 1,000
tokens on a two-core laptop).  So each document keeps an *anchor*, a line start, and prompts
at any cursor below it begin there, for as long as the text from the anchor to the cursor
fits ``left_max`` tokens: moving the cursor down or typing only adds tokens at the end of
what is cached.

A new anchor is placed ``left_first`` tokens above the cursor (the planner sets it from the
prefill speed the engine measured: ``request_plan.first_window``): few enough that the first
request in a region answers quickly.  The same happens when the cursor jumps down further
than that below the furthest point served from the anchor (its *reach*): the tokens between
are not cached, and running more of them than a fresh start holds would only make the
answer slower.  Once it has answered, the server may *widen* the
context in the background (``wider``): an anchor up to ``left_max`` tokens above, run into the
cache while the user reads; the wider anchor takes over once it is cached.

A widening that the next request interrupts leaves what it ran in the cache, so the next
widening of the document keeps the same start for as long as the cursor's text from it holds
between half and all of ``left_max`` tokens: the idle gaps between a user's requests add up
until the widened prompt is whole.  A start placed afresh above each cursor moved down a line
with every line the user typed or went down, and its prompt shared no beginning with the
interrupted one (a slide could move those cells, but a slide that is itself interrupted drops
them), so each gap's work was thrown away.  A new widening start is placed ``left_max`` less a
quarter (``SLIDE_SLACK``) above the cursor, leaving the cursor that quarter to move down in.

On an engine whose cache can slide (``slides``: llama.cpp moves cached cells, see
``fim.engines.step_model``), a cursor that goes below a *full* window (its text from the anchor
holds more than ``left_max`` tokens) but stays within ``left_first`` tokens of the reach does
not fall back to a narrow new anchor: the window slides down, to a line ``left_max`` less a
quarter (``SLIDE_SLACK``) above the cursor, and the engine moves the cached lines it still holds
instead of running them again; the slack lets the cursor move on a while before the next
slide.  So a widened window stays wide as the cursor moves down the file.

Once a widened start is adopted, the server runs the document's window on *below* the cursor,
as far as ``left_max`` tokens from the start allow (``base_end``), into a slot the model's
cache holds (``fim.engines.step_model``'s held slot), and tells the planner (``hold``): the
document's *base*.  A cursor anywhere between the start and the base's end whose text from the
start is still the base's (``_within_base``) keeps the start however far it moved from the
reach: its prompt shares the base up to the cursor and runs only the right text, so moving
within the window (down as well as up) does not pay for the left text again.  One base is
kept, as the cache holds one.

Anchors are remembered with the text that follows them, so an edit above the anchor (which
moves its offset) does not lose it.

The planner runs on the editor's event loop, so what it tokenizes is bounded by the token
budgets, never by the document: a text longer than ``MAX_CHARS_PER_TOKEN`` characters per token
of a budget is taken as over that budget without being tokenized (a 5 MB line once blocked
every request for seconds here).  No code tokenizer packs that many characters into each of a
thousand tokens; the only cost of the rule is a prompt start placed later than it could be on
such a text, which the prompt builder cuts to the window anyway.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

#: characters of the anchored line remembered to find it again after edits above it
_SIGNATURE = 80
#: more characters per token than source code has: where the search for a start begins
_CHARS_PER_TOKEN = 8
_NEWLINE = re.compile("\n")
#: characters per token above which a text is over budget without tokenizing it (see above)
MAX_CHARS_PER_TOKEN = 32
#: A slid window holds ``left_max`` less this share of it (room to move on before the next).
SLIDE_SLACK = 4
#: Tokens a base leaves unused of ``left_max`` (a prompt's lead text and token healing may
#: count a few more than the planner did): a base cut at its front would share nothing.
BASE_MARGIN = 16


@dataclass(frozen=True)
class Base:
    """A document's window held in the model's cache: where it starts and the text it holds
    (from that start to a line end below the cursor it was run for)."""

    uri: str
    offset: int
    text: str


@dataclass(frozen=True)
class Anchor:
    """A remembered prompt start: its offset and the text that followed it."""

    offset: int
    signature: str
    #: tokens from the anchor to the furthest cursor served from it
    reach: int = 0
    #: characters from the anchor to that cursor
    reach_chars: int = 0


class AnchorPlanner:
    """Per-document prompt starts (see the module docstring)."""

    def __init__(self, count_tokens: Callable[[str], int], left_max: int,
                 left_first: int, *, slides: bool = False) -> None:
        if not 0 < left_first <= left_max:
            raise ValueError("need 0 < left_first <= left_max")
        self.count = count_tokens
        self.left_max = left_max
        self.left_first = left_first
        self.slides = slides
        self._anchors: dict[str, Anchor] = {}
        #: the start each document's last widening was offered (see the module docstring)
        self._widenings: dict[str, Anchor] = {}
        #: the one document window held in the model's cache (see the module docstring)
        self.base: Base | None = None

    def forget(self, uri: str) -> None:
        self._anchors.pop(uri, None)
        self._widenings.pop(uri, None)
        if self.base is not None and self.base.uri == uri:
            self.base = None

    def _find(self, uri: str, text: str, kept: dict[str, Anchor] | None = None) -> int | None:
        """The remembered anchor's offset in ``text`` (or the start remembered in ``kept``),
        if its line is still there."""
        anchor = (self._anchors if kept is None else kept).get(uri)
        if anchor is None:
            return None
        sig = anchor.signature
        if text.startswith(sig, anchor.offset) and _line_start(text, anchor.offset):
            return anchor.offset
        # An edit above moved it: look for the same text nearest the old offset.
        hits = [m.start() for m in re.finditer(re.escape(sig), text)
                if _line_start(text, m.start())] if sig else []
        if not hits:
            return None
        return min(hits, key=lambda p: abs(p - anchor.offset))

    def _remember(self, uri: str, text: str, offset: int, reach: int, reach_chars: int = 0
                  ) -> int:
        self._anchors[uri] = Anchor(offset, text[offset:offset + _SIGNATURE], reach,
                                    max(0, reach_chars))
        return offset

    def left_start(self, uri: str, text: str, cursor: int) -> int:
        """Where the prompt for ``cursor`` starts: the anchor if it still fits and the cursor
        is not more than ``left_first`` tokens beyond its reach, else a new one ``left_first``
        tokens above the cursor."""
        found = self._find(uri, text)
        if found is not None and found <= cursor:
            tokens = self._count(text, found, cursor, self.left_max)
            anchor = self._anchors[uri]
            if tokens <= self.left_max and (tokens - anchor.reach <= self.left_first
                                            or self.within_base(uri, text, found, cursor)):
                return self._remember(uri, text, found, max(anchor.reach, tokens),
                                      max(anchor.reach_chars, cursor - found))
            slid = self._slide(text, cursor, found, anchor) if tokens > self.left_max else None
            if slid is not None:
                return self._remember(uri, text, slid,
                                      self._count(text, slid, cursor, self.left_max),
                                      cursor - slid)
        start = self.fit(text, cursor, self.left_first)
        return self._remember(uri, text, start,
                              self._count(text, start, cursor, self.left_max), cursor - start)

    def _slide(self, text: str, cursor: int, found: int, anchor: Anchor) -> int | None:
        """Where a full window slides to for ``cursor`` (see the module docstring), or
        ``None`` when it cannot: no sliding engine, or the cursor more than ``left_first``
        tokens beyond the reach (those tokens would all run: a narrow start is quicker)."""
        reach_end = found + anchor.reach_chars
        if not self.slides or not found < reach_end <= cursor:
            return None
        if self._count(text, reach_end, cursor, self.left_first) > self.left_first:
            return None
        return self.fit(text, cursor, self.left_max - self.left_max // SLIDE_SLACK)

    def within_base(self, uri: str, text: str, start: int, cursor: int) -> bool:
        """Whether the held base of ``uri`` starts at ``start`` and holds ``text`` from there
        to ``cursor`` as it is now."""
        base = self.base
        return (base is not None and base.uri == uri and base.offset == start
                and cursor - start <= len(base.text)
                and base.text.startswith(text[start:cursor]))

    def base_end(self, text: str, start: int) -> int:
        """Where a base from ``start`` ends: the latest line end (the next line's start, or
        the end of ``text``) whose text from ``start`` holds at most ``left_max`` less
        ``BASE_MARGIN`` tokens; ``start`` when not even one line fits."""
        budget = max(1, self.left_max - BASE_MARGIN)
        limit = min(len(text), start + budget * MAX_CHARS_PER_TOKEN)
        ends = [m.end() for m in _NEWLINE.finditer(text, start, limit)]
        if limit == len(text) and (not ends or ends[-1] != len(text)):
            ends.append(len(text))
        # A longer text never has fewer tokens: binary search the latest fitting end.
        lo, hi, best = 0, len(ends) - 1, start
        while lo <= hi:
            mid = (lo + hi) // 2
            if self._count(text, start, ends[mid], budget) <= budget:
                best, lo = ends[mid], mid + 1
            else:
                hi = mid - 1
        return best

    def hold(self, uri: str, text: str, start: int, end: int) -> None:
        """``text[start:end]`` of ``uri`` is held in the model's cache as its base (it
        replaces any other: the cache holds one)."""
        self.base = Base(uri, start, text[start:end])

    def wider(self, uri: str, text: str, cursor: int, above: int | None = None) -> int | None:
        """A start up to ``left_max`` tokens above ``cursor`` if that is earlier than the
        current anchor and than ``above`` (the start of the request it widens, planned when
        the worker gets to it: the anchor may have moved on meanwhile) (worth running into the
        cache while the user is idle), else ``None``: the last one offered while it still
        holds half to all of ``left_max``, else one a quarter less than ``left_max`` above."""
        current = self._find(uri, text)
        if (self.slides and current is not None and current <= cursor
                and self._count(text, current, cursor, self.left_max // 2) > self.left_max // 2):
            return None  # wide already (a slid window): not worth a whole prompt's run
        start = self._last_widening(uri, text, cursor)
        if start is None:
            start = self.fit(text, cursor, self.left_max - self.left_max // SLIDE_SLACK)
        bound = min((b for b in (current, above) if b is not None), default=None)
        if bound is None or start < bound:
            self._widenings[uri] = Anchor(start, text[start:start + _SIGNATURE])
            return start
        return None

    def _last_widening(self, uri: str, text: str, cursor: int) -> int | None:
        """The document's last widening start, while the text from it to ``cursor`` holds
        between half and all of ``left_max`` tokens (see the module docstring)."""
        start = self._find(uri, text, self._widenings)
        if start is None or start > cursor:
            return None
        tokens = self._count(text, start, cursor, self.left_max)
        return start if self.left_max // 2 <= tokens <= self.left_max else None

    def adopt(self, uri: str, text: str, offset: int) -> None:
        """Make ``offset`` the anchor (its prompt up to the end of ``text`` is now cached)."""
        self._widenings.pop(uri, None)
        self._remember(uri, text, offset, self._count(text, offset, len(text), self.left_max),
                       len(text) - offset)

    def _count(self, text: str, start: int, end: int, budget: int) -> int:
        """Tokens of ``text[start:end]``, or ``budget + 1`` without tokenizing when it is longer
        than ``MAX_CHARS_PER_TOKEN`` characters per token of ``budget`` (see the module)."""
        if end - start > max(1, budget) * MAX_CHARS_PER_TOKEN:
            return budget + 1
        return self.count(text[start:end])

    def fit(self, text: str, cursor: int, budget: int) -> int:
        """The earliest line start whose text up to ``cursor`` holds at most ``budget``
        tokens (the cursor's own line start when even that line holds more).

        Only the last ``budget * 8`` characters are searched at first (doubled while all of
        them fit), so a 5 MB file is not tokenized to place a 1,000-token window.
        """
        reach = max(1, budget) * _CHARS_PER_TOKEN
        while True:
            floor = max(0, cursor - reach)
            starts = [m.end() for m in _NEWLINE.finditer(text, floor, cursor)]
            if floor == 0:
                starts.insert(0, 0)
            if not starts:  # one long line
                return text.rfind("\n", 0, cursor) + 1
            if floor == 0 or self._count(text, starts[0], cursor, budget) > budget:
                break
            reach *= 2
        # A shorter text never has more tokens: binary search the earliest fitting start.
        lo, hi, best = 0, len(starts) - 1, len(starts) - 1
        while lo <= hi:
            mid = (lo + hi) // 2
            if self._count(text, starts[mid], cursor, budget) <= budget:
                best, hi = mid, mid - 1
            else:
                lo = mid + 1
        return starts[best]


def _line_start(text: str, offset: int) -> bool:
    return offset == 0 or (0 < offset <= len(text) and text[offset - 1] == "\n")

