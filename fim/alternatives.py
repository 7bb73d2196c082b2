"""Ranked alternatives: several complete constrained middles for one place, best first.

Greedy constrained decoding takes the model's best token when the constraint allows it and the
best allowed one when it does not; one early choice can walk it into a poor middle (issue 18).
This module looks further than the next token without a beam: the greedy run is traced
(``fim.trace.TraceStep``: each token's log-probability and the untried candidates after it),
and further runs branch off it where another choice was nearly as likely: the first token's
next choices, and the steps with the smallest margin between the taken token and the next one
(where the constraint masked the model's top token, that margin is to the next allowed
candidate), the end included (going on where greedy stopped). Each branch takes the greedy path
up to its step, the other token there, then goes on greedily under the same constraint and
stopping rules. The model's cache makes the shared path free (``StepModel`` retraces a run
token for token), and branches run from the latest step back to the earliest, so each one crops
only what it replaces.

Candidates are ranked by the model's log-probability of the middle with its end
(``Ranking.SUM``), by that per token (``Ranking.MEAN``), or greedy's first and the others by
their log-probability (``Ranking.GREEDY_FIRST``, the editors' order); an empty middle goes
after every other, and equal middles count once.  A search
that runs out of time or is cancelled returns the candidates it completed.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from collections.abc import Callable
from dataclasses import dataclass

from fim.decoding import Decoded
from fim.options import StopReason
from fim.trace import TraceStep


class Ranking(enum.StrEnum):
    """How candidates are ordered: the middle's log-probability, or that per token."""

    SUM = "sum"
    MEAN = "mean"
    #: greedy's middle first (what a single suggestion shows), the others by ``SUM``: the
    #: editors' order; on the fresh corpus the likeliest middle first was level with greedy's
    #: (docs/usefulness.md, "Seed 5"), and this way the suggestion shown at once stays first
    GREEDY_FIRST = "greedy_first"


@dataclass(frozen=True)
class Alternative:
    """One complete middle the constraint accepts, with the model's log-probability of it
    (its tokens and its end), the tokens it took and why it ended."""

    middle: str
    logprob: float
    tokens: int
    stop: StopReason
    greedy: bool = False  # the greedy decode's middle (what a single suggestion shows)

    def score(self, ranking: Ranking) -> float:
        return self.logprob / (self.tokens + 1) if ranking == Ranking.MEAN else self.logprob

    def rank_key(self, ranking: Ranking) -> tuple[bool, bool, float]:
        """Sort key, best first: a middle that writes something before an empty one (which
        shows nothing), then greedy's under ``GREEDY_FIRST``, then by score."""
        return (not self.middle.strip(), ranking == Ranking.GREEDY_FIRST and not self.greedy,
                -self.score(ranking))


@dataclass(frozen=True)
class Branch:
    """Take the traced path's first ``step`` tokens, then ``token``; ``margin`` is how much
    less likely ``token`` was than the token the path took there."""

    step: int
    token: int
    margin: float


def branch_points(trace: list[TraceStep], limit: int, copied_from: int | None = None
                  ) -> list[Branch]:
    """Up to ``limit`` branches off ``trace``, the most promising first: the untried
    candidates of the steps taken before the middle had text (so a suggestion's first word
    can differ), by smallest margin, then the rest by smallest margin.  ``copied_from``: the
    steps from there on wrote lines the right-context stop cut as a copy, and rank by margin
    alone (a middle cut to nothing so has no steps before its text)."""
    # Healing tokens write no middle, and which of them the model takes decides the first
    # word too: an empty line's indentation re-typed as three spaces ends at once where
    # eleven spaces are followed by `` return`` (cost_tracker.py:145, fresh2). Before, only
    # the last such step's candidates came first: its three whitespace candidates used the
    # search's runs there, each ending at once, and no branch wrote anything.
    # A copy's start is the model's choice of what kind of line comes (the one below, as
    # parallel lines go), and where it was least sure is what the line says: at
    # ``_pretty_print.py:66`` its first word's other candidates (``if``, ``for``) were three
    # times further from it than ``Turn`` after the copy's ``output += f"\n- ``.
    own = trace[:copied_from]
    first = max((i for i, t in enumerate(own) if t.chars == 0), default=0 if own else -1)
    branches = [Branch(i, tid, step.logp - lp) for i, step in enumerate(trace)
                for tid, lp in step.alts]
    branches.sort(key=lambda b: (b.step > first, b.margin, b.step))
    return branches[:limit]


#: Runs one decode with the given first tokens (traced); ``None`` means it was not run.
Runner = Callable[[tuple[int, ...]], Decoded | None]
#: Accepts a middle (the engine's final parse check) or ``None`` to drop it.
Check = Callable[[str, StopReason], tuple[str, StopReason] | None]


def search(run: Runner, first: Decoded, n: int, check: Check, ranking: Ranking = Ranking.SUM,
           deadline: float | None = None, cancel: Callable[[], bool] | None = None,
           max_runs: int | None = None) -> tuple[list[Alternative], int]:
    """Up to ``n`` distinct middles, best first, from the traced greedy decode ``first`` and
    branches off it, and the tokens all runs took.  ``deadline`` (``time.monotonic()``) and
    ``cancel`` end the search between runs (a run itself is bounded by the same deadline)."""
    found: dict[str, Alternative] = {}
    tokens = first.tokens

    def keep(out: Decoded, greedy: bool = False) -> None:
        if out.middle is None or out.logprob is None:
            return
        checked = check(out.middle, out.stop)
        if checked is None:
            return
        middle, stop = checked
        alt = Alternative(middle, out.logprob, out.tokens, stop, greedy)
        old = found.get(middle)
        if old is None or alt.score(ranking) > old.score(ranking):
            found[middle] = dataclasses.replace(alt, greedy=greedy or bool(old and old.greedy))

    keep(first, greedy=True)
    # The end is a branch point too (going on where greedy stopped); its branches take the
    # whole traced path first.  Where the right-context stop cut lines written again, so is
    # every step of the first of them (``Decoded.copied``, which starts at the end): a run
    # that parts from the copy inside its line writes a line like it that is not one, as
    # the next of several parallel lines often is (``_pretty_print.py:66``, issue 29:
    # ``output += f"\n- Current turn: …"`` copied from below, the author's
    # ``output += f"\n- Current agent: …"``).
    points = (first.trace or []) + (list(first.copied) if first.copied else
                                    [first.end_step] if first.end_step is not None else [])
    # Two branches per middle missing; twice that in reserve, for branches that find nothing
    # to count (another end token after greedy's end, a space: a run of a token or two).
    runs = max_runs if max_runs is not None else 4 * max(0, n - 1)
    copied_from = len(first.trace or []) if first.copied else None
    pending = branch_points(points, runs, copied_from) if n > 1 else []

    def missing() -> int:
        # A branch's middle that shows nothing (empty, or only spaces and line breaks) ranks
        # after every other and is not what the search is for: it does not count.
        return n - sum(1 for a in found.values() if a.greedy or a.middle.strip())

    while pending and missing() > 0:
        # A batch of as many branches as middles are missing, latest step first: each run
        # crops the cached path only where it departs from it.
        batch, pending = pending[:missing()], pending[missing():]
        for branch in sorted(batch, key=lambda b: -b.step):
            if (cancel is not None and cancel()) or (
                    deadline is not None and time.monotonic() > deadline):
                pending = []
                break
            forced = tuple(t.token for t in points[:branch.step]) + (branch.token,)
            out = run(forced)
            if out is None:
                continue
            tokens += out.tokens
            if out.stop not in (StopReason.CANCELLED, StopReason.TIME):
                keep(out)
    # An empty middle shows nothing in an editor: however likely, it goes after every
    # middle that writes something (the model's wish to end at once is often its strongest
    # and would otherwise hide the suggestions it ranked next).
    ranked = sorted(found.values(), key=lambda a: a.rank_key(ranking))
    return ranked[:n], tokens
