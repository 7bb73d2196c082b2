"""Where a constrained middle may end: the recognizer states the loop walked through, memoised,
and the search for the best complete stopping point among them, and the right-context stop.

The decoding loop (``fim.decoding``) records one :class:`Step` per accepted token; when it runs
out of tokens, time or candidates, :func:`best_stopping_point` picks the middle among the
positions where the language is complete, and :func:`complete_line_end` finds line ends where
the middle may stop early.  :func:`right_rewrite_cut` decides where the middle ends because
the model is re-writing the text after the cursor (a short agreement waits for the next tokens
to settle it, issue 29); it is the one rule for the in-process loop, the vLLM processor
(``fim.vllm``) and the vLLM client, which differ only in how they tell a complete point (the
constraint's state, or a parse).
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from quotient.constraint import ConstraintState

_FEED_CACHE_LIMIT = 200_000
#: How much of the right context the right-context stop compares (a re-write shows in its
#: first line or two; comparing all of a long file would cost for nothing).
RIGHT_PROBE_CHARS = 256


class FeedCache:
    """Memoised ``feed`` and ``is_complete`` for persistent recognizer states.

    Keys use ``id(state)``; the cache keeps every keyed state alive, so ids cannot be reused
    while an entry exists.
    """

    def __init__(self) -> None:
        self._feed: dict[tuple[int, str],
                         tuple[ConstraintState, ConstraintState | None]] = {}
        self._complete: dict[int, tuple[ConstraintState, bool]] = {}

    def feed(self, state: ConstraintState, text: str) -> ConstraintState | None:
        if not text:
            return state
        key = (id(state), text)
        hit = self._feed.get(key)
        if hit is not None:
            return hit[1]
        if len(self._feed) > _FEED_CACHE_LIMIT:
            self._feed.clear()
            self._complete.clear()
        result = state.feed(text)
        self._feed[key] = (state, result)
        return result

    def is_complete(self, state: ConstraintState) -> bool:
        hit = self._complete.get(id(state))
        if hit is not None:
            return hit[1]
        result = bool(state.is_complete())
        self._complete[id(state)] = (state, result)
        return result


@dataclass
class Step:
    """A constrained step, kept for the best-stopping-point search."""

    state: ConstraintState  # the constraint's state before this step's token
    chars: int  # middle length before this step's token
    eos_logp: float  # log-probability of stopping before this step's token
    text: str = ""  # characters this step's token added to the middle


def complete_line_end(step: Step | None, text: str, chars: int, cache: FeedCache | None
                       ) -> int | None:
    """The middle length up to the first newline in ``text`` (what the last token added, the
    middle now being ``chars`` long) where the middle is complete; with no constraint
    (``step`` is ``None``) the first newline; ``None`` when there is none."""
    before = chars - len(text)
    k = text.find("\n")
    while k >= 0:
        if step is None:
            return before + k
        state = cache.feed(step.state, text[:k])
        if state is not None and cache.is_complete(state):
            return before + k
        k = text.find("\n", k + 1)
    return None


def best_stopping_point(
    steps: list[Step], final_state: ConstraintState, final_chars: int,
    final_logp: float | None,
    cache: FeedCache,
    within: int | None = None,
) -> int | None:
    """The middle length (in characters) of the best complete stopping point, or ``None``.

    Token boundaries come first: each boundary where the language is complete scores
    ``log P(EOS) + log(1 + chars)``, the paper's "EOS probability weighted by generation
    length", with the model's own EOS estimate there.  Only when no boundary is complete are
    positions inside tokens considered; they have no EOS estimate of their own and borrow the
    one from the start of their token (so they rank by that and by length), and none past
    ``within`` characters when it is given.
    """
    if final_logp is None and steps:
        final_logp = steps[-1].eos_logp
    best, best_score = None, -math.inf
    boundaries = [(st.state, st.chars, st.eos_logp) for st in steps]
    if final_logp is not None:
        boundaries.append((final_state, final_chars, final_logp))
    for state, chars, logp in boundaries:
        if cache.is_complete(state):
            score = logp + math.log1p(chars)
            if score > best_score:
                best, best_score = chars, score
    if best is not None:
        return best
    for st in steps:
        state = st.state
        for j in range(1, len(st.text)):
            if within is not None and st.chars + j > within:
                break
            state = cache.feed(state, st.text[j - 1])
            if state is None:
                break
            if cache.is_complete(state):
                score = st.eos_logp + math.log1p(st.chars + j)
                if score > best_score:
                    best, best_score = st.chars + j, score
    return best


#: Tokens the constraint may force after the model chose to end where the file could not,
#: and still keep what they wrote (a closing bracket, a quote, a short name): a longer run
#: goes back before that end (``refused_end_cut``).
REFUSED_END_SLACK = 4


_LEAD_WORD = re.compile(r"\w+")


def word_meets_right(middle: str, right: str, end: int) -> list[int]:
    """Where the model's own word meets the right context, latest first: positions inside a
    word of ``middle[:end]`` from which it reads the rest of the word the cursor splits and
    the character after it (``arg|`` before ``er, "sh"]``: the middle ``s += [container,
    command]`` meets it at ``contain|er,``).  Cut there, the file holds the model's word,
    completed by the right context, and goes on as the author's line does."""
    word = _LEAD_WORD.match(right)
    if word is None or word.end() >= len(right):
        return []  # the cursor splits no word, or nothing follows the word to agree on
    lead = right[:word.end() + 1]
    found, at = [], middle.find(lead, 1)
    while 0 < at and at + len(lead) <= end:
        if _LEAD_WORD.match(middle[at - 1]):
            found.append(at)
        at = middle.find(lead, at + 1)
    return found[::-1]


def refused_end_cut(steps: list[Step], refused: int, cache: FeedCache, right: str = ""
                    ) -> int | None:
    """The middle's length back before the model's refused end, at ``refused`` characters,
    or ``None`` when no complete point with text comes before it.

    The model chose to end where the file could not (``x["va|`` before `` repr(value)``,
    the middle ``lue"] = value``): what it wrote after the last complete point is its own
    version of what the right context already holds, and the run the constraint forced after
    it is a detour that only connects with the right context.  The middle is the best
    complete point before that end, ranked as ``best_stopping_point`` ranks them; first,
    where the cursor splits a word, the latest complete point where the model's own word
    meets the ``right`` context (``word_meets_right``), inside a token as it may be."""
    before = [st for st in steps if 0 < st.chars <= refused]
    if not before:
        return None
    middle = "".join(st.text for st in steps)
    for at in word_meets_right(middle, right, refused):
        st = next(st for st in reversed(steps) if st.chars <= at)
        state = cache.feed(st.state, middle[st.chars:at])
        if state is not None and cache.is_complete(state):
            return at
    last = before[-1]
    cut = best_stopping_point(before, last.state, last.chars, last.eos_logp, cache,
                              within=refused)
    return cut or None


_WRAP = re.compile(r"[ \t]*\n[ \t]*(?:#[ \t]*)?|[ \t]+")


def unwrap(text: str) -> str:
    """``text`` with each line break (its indentation and a comment's ``#`` included) and
    each run of blanks read as one space."""
    return _WRAP.sub(" ", text)


def wrapped_right(right: str, wraps: bool) -> str:
    """The right context as a line wrap reads (``unwrap``), when ``wraps`` and it starts on a
    new line with something to say; else ``""`` (no wrapped re-write is looked for)."""
    lead = right[:len(right) - len(right.lstrip())]
    return unwrap(right) if wraps and "\n" in lead and right.strip() else ""


#: An agreement with the right context this long (characters besides blanks) is a re-write
#: without looking further; a shorter one only once it reaches the end of the right
#: context's first line with text (issue 29: `` is`` against ``istributed``, ``    return``
#: against ``    return True`` are coincidences the next tokens refute).  An agreement of
#: whole lines needs twice as much, or the end of the second line with text: a short line
#: (``continue``, ``return True``) is often the model's own next line too.
STRONG_AGREEMENT = 8
#: A middle that writes this many whole lines of the right context again, one after the
#: other, copies the code below the cursor (at a point past the right context's start: the
#: model copying the loop a few lines down, issue 29's ``strikelist.py:552``), and is cut
#: where the copy starts.
COPIED_LINES = 2


def _blank(char: str) -> bool:
    return char in " \t"


def _nonblank(text: str) -> int:
    return len(text) - text.count(" ") - text.count("\t") - text.count("\n")


def at_line_start(left: str) -> bool:
    """Whether a cursor after ``left`` has nothing but blanks before it on its line."""
    return not left[left.rfind("\n") + 1:].strip()


def _text_line_ends(right: str, count: int) -> list[int]:
    """Where the first ``count`` lines of ``right`` with text end (after their last character
    besides blanks); the end of its text for those it lacks."""
    ends, at = [], 0
    for line in right.split("\n"):
        if len(ends) == count:
            break
        if line.strip():
            ends.append(at + len(line.rstrip(" \t\r")))
        at += len(line) + 1
    last = len(right.rstrip())
    return ends + [last] * (count - len(ends))


@dataclass(frozen=True)
class RightStop:
    """What the right-context stop compares the model's text with: the start of the text
    after the cursor (``RIGHT_PROBE_CHARS``), that text as a line wrap reads
    (``wrapped_right``; ``""``: not looked for), whether the cursor has only blanks before it
    on its line (``line_start``: the right context's first line is a whole line), and where
    its first two lines with text end (after their last character besides blanks), as
    written and (the first) as the wrap reads it: the points an agreement must reach to be
    taken as a re-write before it is long enough (``STRONG_AGREEMENT``)."""

    right: str
    wrapped: str = ""
    line_start: bool = False
    line_end: int = 0
    next_line_end: int = 0
    wrapped_line_end: int = 0
    wrapped_next_line_end: int = 0
    #: the whole lines of ``right`` (the last, perhaps cut by the probe, left out), without
    #: their trailing blanks: what a copy of lines below the cursor is compared with
    lines: tuple[str, ...] = ()
    #: the same lines without their indentation (a middle's first line is compared so)
    bare: tuple[str, ...] = ()

    @classmethod
    def of(cls, right: str, wraps: bool, line_start: bool = False) -> RightStop:
        right = right[:RIGHT_PROBE_CHARS]
        first, second = _text_line_ends(right, 2)
        wrapped = wrapped_right(right, wraps)
        lines = tuple(line.rstrip(" \t\r") for line in right.split("\n")[:-1])
        return cls(right, wrapped, line_start, first, second,
                   len(unwrap(right[:first])) if wrapped else 0,
                   len(unwrap(right[:second])) if wrapped else 0, lines,
                   tuple(line.strip() for line in lines))

    def line_places(self, line: str, loose: bool) -> list[int]:
        """Where ``line`` (without trailing blanks) is a whole line of the right context, as
        written or (``loose``) without indentation on either side."""
        lines, line = (self.bare, line.strip()) if loose else (self.lines, line)
        return [j for j, own in enumerate(lines) if own == line]

    def __bool__(self) -> bool:
        return bool(self.right.strip())

    def settled(self, agreement: str, whole_lines: bool = False, ending: bool = False
                ) -> bool:
        """Whether ``agreement`` (a prefix of the right context, or text that starts with all
        of it) is evidence enough of a re-write: all of the right context, as far as the end
        of its first line with text, or ``STRONG_AGREEMENT`` characters besides blanks; for
        an agreement of ``whole_lines``, as far as the end of the second line with text, or
        twice as many characters.  Where the model ends its middle (``ending``), a re-write
        it wrote as far as the end of the first line with text is one."""
        if agreement.startswith(self.right):
            return True
        if ending:
            return len(agreement) >= self.line_end
        if whole_lines:
            return (len(agreement) >= self.next_line_end
                    or _nonblank(agreement) >= 2 * STRONG_AGREEMENT)
        return len(agreement) >= self.line_end or _nonblank(agreement) >= STRONG_AGREEMENT

    def wrapped_agreement(self, tail: str) -> str:
        """``tail`` as a line wrap reads it, when that is how the right context's next line
        goes on (at least three characters besides whitespace), written on the cursor's
        line; else ``""``."""
        if not self.wrapped:
            return ""
        flat = unwrap(tail)
        if len(flat.strip()) >= 3 and (self.wrapped.startswith(flat)
                                       or flat.startswith(self.wrapped)):
            return flat
        return ""

    def settled_wrapped(self, flat: str, whole_lines: bool = False) -> bool:
        """:meth:`settled` for an agreement with the wrapped right context."""
        if flat.startswith(self.wrapped):
            return True
        if whole_lines:
            return (len(flat) >= self.wrapped_next_line_end
                    or _nonblank(flat) >= 2 * STRONG_AGREEMENT)
        return len(flat) >= self.wrapped_line_end or _nonblank(flat) >= STRONG_AGREEMENT

    def copies_lines(self, text: str, c: int, ending: bool = False) -> bool:
        """Whether ``text[c:]`` (``text`` the middle, ``c`` the start of one of its lines)
        is a copy of lines below the cursor: ``COPIED_LINES`` or more whole lines equal, one
        after the other and with their indentation, to lines of the right context, with
        twice ``STRONG_AGREEMENT`` characters besides blanks among them.  The middle's first
        line (``c`` 0, the cursor after nothing but blanks) is compared without its
        indentation, which stands before the cursor.  Its last line counts once a line
        break ends it, or where the model ends the middle (``ending``)."""
        pieces = text[c:].split("\n")
        done = [p.rstrip(" \t\r") for p in (pieces if ending else pieces[:-1])]
        if len(done) < COPIED_LINES or not done[0].strip():
            return False
        for j in self.line_places(done[0], loose=c == 0):
            n = 1
            while (n < len(done) and j + n < len(self.lines)
                   and self.lines[j + n] == done[n]):
                n += 1
            if n >= COPIED_LINES and sum(map(_nonblank, done[:n])) >= 2 * STRONG_AGREEMENT:
                return True
        return False

    def whole_lines(self, text: str, c: int) -> bool:
        """Whether a re-write starting at ``text[c]`` (``text`` the middle) starts a line of
        the file: after a line break, or after nothing but blanks on a line that has
        nothing else before them."""
        if text[c] == "\n":
            return True
        start = text.rfind("\n", 0, c) + 1
        return not text[start:c].strip() and (start > 0 or self.line_start)


def complete_at_marks(cache: FeedCache, marks: Sequence[Step], state: ConstraintState,
                      text: str, done: int) -> Callable[[int], bool]:
    """``complete_at`` for :func:`right_rewrite_cut` over a decode's states: ``marks`` are
    its steps in order (the state and middle length before each token), ``state`` the state
    after the middle ``text[:done]``; a cut is fed from the last state at or before it."""

    def complete_at(c: int) -> bool:
        if c >= done:
            at, start = done, state
        else:
            k = bisect.bisect_right(marks, c, key=lambda st: st.chars) - 1
            if k < 0:
                return False
            at, start = marks[k].chars, marks[k].state
        fed = cache.feed(start, text[at:c])
        return fed is not None and cache.is_complete(fed)

    return complete_at


def rewrite_cut_after(cache: FeedCache, marks: Sequence[Step], state: ConstraintState,
                      joined: str, added: str, stop: RightStop, ending: bool = False
                      ) -> int | None:
    """:func:`right_rewrite_cut` over a decode's states, as the in-process decoder and vLLM's
    rows both ask it: ``joined`` is the middle so far, ``marks`` its steps (the state and
    length before each token, ``Step.text`` what the token added), ``state`` the state after
    it, ``added`` the characters of the token the model wants next (``""`` where it wants
    to stop: ``ending``); the cut (a middle length), or ``None``."""
    text = joined + added
    base = marks[-1].chars if marks else 0
    return right_rewrite_cut(text, len(joined), base, stop,
                             complete_at_marks(cache, marks, state, text, len(joined)), ending)


def right_rewrite_cut(text: str, done: int, base: int, stop: RightStop,
                      complete_at: Callable[[int], bool], ending: bool = False) -> int | None:
    """Where in ``text`` the middle ends because the model would re-write the right context,
    or ``None``.

    ``text`` is the middle so far (its first ``done`` characters; its last token starts at
    ``base``) followed by the characters of the token the model wants next;
    ``complete_at(c)`` tells whether the middle ending at ``text[:c]`` is complete.  A tail
    of ``text`` (with something besides whitespace) is an agreement when the right context
    starts with it, or it starts with the whole right context; it may start anywhere the
    right context could begin again, inside a word of the middle too (the cursor may split
    a word: ``BaseM|odel`` re-written as ``BaseModel):``), but not inside a run of blanks
    (``    `` + ``    return`` is a line indented deeper than the right context's
    ``    return``).  The right context's next line written on this one (``stop.wrapped``,
    compared as a line wrap reads) agrees too, from three characters.  An agreement is a
    re-write once :meth:`RightStop.settled`; a shorter one is left to the next tokens, which
    the decode takes as usual (the look-ahead costs decode steps, not a new prompt): they
    either carry it on until it is settled, and the cut goes back to where it started, or
    part from the right context (`` is`` then `` the`` against ``istributed``;
    ``    return`` then ``False`` against ``    return True``).  An agreement of whole lines
    needs more (a short line like ``continue`` is often the model's own next line too), except
    where the model ends the middle after it (``ending``: ``text`` is the middle, and the
    model's likeliest token a stop where the middle is complete), when it reaches the end of
    the first line with text.  A middle that copies whole lines from further down the right
    context (:meth:`RightStop.copies_lines`) is a re-write too, from the line the copy
    starts at.  The earliest re-write that starts at a complete point is the cut.
    """
    right = stop.right
    if not stop:
        return None
    # An agreement lies within about the right context's length of the middle's end, or
    # starts in the last token (all of the right context written again).
    for c in range(max(0, min(base, done - len(right))), len(text)):
        first = text[c]
        if ((c == 0 and stop.line_start or c and text[c - 1] == "\n")
                and stop.copies_lines(text, c, ending)):
            # A copy of lines further down: cut where it starts (or before the line break
            # that leads to it, where only that is complete).
            for cut in (c, c - 1) if c else (c,):
                if complete_at(cut):
                    return cut
        if c < base and first != right[0] and not (stop.wrapped and first in " \t\n"):
            continue
        tail = text[c:]
        if not tail.strip():
            return None
        if c and _blank(text[c - 1]) and _blank(first):
            continue  # inside a run of blanks
        if right.startswith(tail) or tail.startswith(right):
            settled = stop.settled(tail, stop.whole_lines(text, c), ending)
        elif flat := stop.wrapped_agreement(tail):
            settled = stop.settled_wrapped(flat, stop.whole_lines(text, c))
        else:
            continue
        if settled and complete_at(c):
            return c
    return None


def copy_pending(text: str, stop: RightStop) -> bool:
    """Whether the last line of ``text`` (a middle that ends where a line ends) is a whole
    line of the right context (its first line compared without the indentation before the
    cursor): the start of a copy of the code below, which the next line settles
    (:meth:`RightStop.copies_lines`) or refutes."""
    start = text.rfind("\n") + 1
    line = text[start:].rstrip(" \t\r")
    if not line.strip() or not (start or stop.line_start):
        return False
    return bool(stop.line_places(line, loose=not start))


def pending_rewrite(text: str, stop: RightStop) -> bool:
    """Whether the end of ``text`` (a middle) agrees with the start of the right context so
    far (a tail with something besides blanks, not starting inside a run of blanks, that the
    right context starts with), or its last line (``text`` ending where a line ends) is a
    whole line of the right context, the start of a copy of the code below: a re-write the
    next tokens may still settle, so the middle is not yet worth showing as it is."""
    right = stop.right
    if not stop:
        return False
    if copy_pending(text, stop):
        return True
    for c in range(max(0, len(text) - len(right)), len(text)):
        tail = text[c:]
        if not tail.strip():
            return False
        if c and _blank(text[c - 1]) and _blank(tail[0]):
            continue
        if right.startswith(tail):
            return True
    return False
