"""A streamed answer made into a middle, as the in-process engine makes one: kept whole after a
stop token when the file parses with it, cut at the right-context stop, back before the model's
refused end, at the best-ranked stop point when the budget or the clock cut it off, or back to
its longest parsing prefix.

A middle never holds more than the request's token budget allows, whatever the server sent
(one that ignores ``max_tokens`` must not turn a 10 MB line into a 10 MB suggestion): the
stream stops reading after ``max_tokens`` steps (``Streamed.overran``) and the text is cut at
``MAX_TOKEN_CHARS`` characters per token of the budget, then treated as cut by the budget.
"""

from __future__ import annotations

import math
from dataclasses import replace

from fim import decoding, stopping
from fim.api import CompletionRequest
from fim.options import Mode, StopReason
from fim.stopping import RightStop, at_line_start, right_rewrite_cut
from fim.vllm.stream import MAX_TOKEN_CHARS, Streamed


def capped(req: CompletionRequest, got: Streamed) -> Streamed:
    """``got`` with its text cut to what ``req.max_tokens`` tokens can hold, marked cut by the
    budget when that removed anything (see the module docstring)."""
    limit = max(1, req.max_tokens) * MAX_TOKEN_CHARS
    if len(got.text) <= limit and not got.overran:
        return got
    kept = [k for k, (at, _) in enumerate(got.stop_logps) if at <= limit]
    refused = [got.refused[k] for k in kept] if len(got.refused) == len(got.stop_logps) else []
    return replace(got, text=got.text[:limit], finish="length", overran=True,
                   stop_logps=[got.stop_logps[k] for k in kept], refused=refused)


#: The stop log-probability a boundary is ranked with when the stop was not among its step's
#: top ids (``refused_end``): below any listed one.
UNSEEN_STOP_LOGP = -100.0


def after_heal(text: str, healed: str) -> str | None:
    """The generated text after the characters token healing backed off (the processor
    makes the first tokens re-type them); ``None`` when the answer ended before it had."""
    return text[len(healed):] if text.startswith(healed) else None


def best_stop(req: CompletionRequest, text: str, stop_logps: list[tuple[int, float | None]],
               healed: int) -> str | None:
    """The middle a constrained answer cut off before its stop (by the budget or the clock)
    ends with, ranked as the in-process decoder ranks its complete points
    (``fim.stopping.best_stopping_point``): a token boundary scores the log-probability of a
    stop there plus ``log(1 + length)``, the end of the answer borrows the last step's, and
    the best boundary with which the file parses wins.  The server's log-probabilities are the
    raw model's, not renormalised over the viable ids as the in-process decoder's are, and a
    step whose top ids hold no stop token is not a candidate (its stop is less likely than
    all of them); ``None`` when no candidate parses (the caller then keeps the longest
    parsing prefix)."""
    if not stop_logps:
        return None
    points = [(at - healed, lp) for at, lp in stop_logps if at >= healed]
    points.append((len(text), stop_logps[-1][1]))
    return _first_parsing(req, text, points)


def _first_parsing(req: CompletionRequest, text: str, points: list[tuple[int, float | None]],
                   unseen: float | None = None) -> str | None:
    """``text`` cut at the best-ranked of ``points`` (``(length, stop log-probability)``)
    with which the file parses, or ``None``; a point whose stop was not among the step's top
    ids is ranked with ``unseen`` for its log-probability, or left out without one."""
    scored = [(lp if lp is not None else unseen, at) for at, lp in points]
    ranked = sorted(((lp + math.log1p(at), at) for lp, at in scored
                     if lp is not None and at <= len(text)), reverse=True)
    for _, at in ranked:
        if decoding.parses(req.left + text[:at] + req.right):
            return text[:at]
    return None


def refused_end(req: CompletionRequest, got: Streamed, text: str, healed: int,
                until: int | None = None) -> str | None:
    """The middle when the model chose to end where the file could not and the row was then
    forced on for more than ``fim.stopping.REFUSED_END_SLACK`` tokens: the in-process
    decoder's rule (``fim.stopping.refused_end_cut``) over what vLLM streamed, else ``None``.

    In a greedy row the generated token differs from the raw model's likeliest only where
    the constraint refused that one (``Streamed.refused``): a stop token, or at a mid-line
    cursor a token with a line break, is the model ending its middle.  The middle goes back
    to the best-ranked token boundary before that end with which the file parses
    (``best_stop``'s ranking).  ``until``: where the middle ends otherwise (its first
    complete line end, in ``text``): a refusal after it never happened in-process, and the
    forced run is counted up to the token holding it."""
    # A greedy constrained row, whether or not it asked for the right-context stop (the
    # in-process rule does not depend on it); a sampled row's token differs by chance.
    greedy = req.mode == Mode.CONSTRAINED and req.temperature <= 0
    if not greedy or len(got.refused) != len(got.stop_logps):
        return None
    steps = [(at - healed, lp, wanted) for (at, lp), wanted
             in zip(got.stop_logps, got.refused, strict=True) if at >= healed]
    if got.finish == "stop" and steps:
        steps = steps[:-1]  # the stop token's own step takes no text
    ends = [k for k, (_, _, wanted) in enumerate(steps)
            if wanted == "" or (wanted and req.line_stop and "\n" in wanted)]
    if not ends:
        return None
    k = ends[0]
    at, _, wanted = steps[k]
    chars = at + (wanted.index("\n") if wanted else 0)
    if until is not None and until < chars:
        return None
    forced = sum(1 for at, _, _ in steps[k:] if until is None or at <= until)
    if forced <= stopping.REFUSED_END_SLACK:
        return None
    for at in stopping.word_meets_right(text, req.right[:stopping.RIGHT_PROBE_CHARS], chars):
        if decoding.parses(req.left + text[:at] + req.right):
            return text[:at]  # where the model's word meets the right context, as in-process
    # (A boundary whose stop was not among the step's top ids is still a complete point to
    # go back to, as every boundary is in-process; it ranks below every one that was.)
    return _first_parsing(req, text, [(at, lp) for at, lp, _ in steps if 0 < at <= chars],
                          unseen=UNSEEN_STOP_LOGP)


def asks_right_stop(req: CompletionRequest) -> bool:
    """Whether the server's row ends at the right-context stop (``seam_right_stop``): a greedy
    constrained request that asked for it (see ``fim.vllm.processor``)."""
    return req.mode == Mode.CONSTRAINED and req.stop_at_right and req.temperature <= 0


def right_context_end(req: CompletionRequest, text: str, last: str, wanted: str,
                      ending: bool = False) -> str | None:
    """The middle when the server's row ended because the model's next token, ``wanted``,
    would re-write the right context (``None`` when it would not): the in-process decoder's
    rule (``fim.stopping.right_rewrite_cut``) over the middle, its last token (``last``,
    the end of ``text``) and ``wanted``, with a parse of the file as the complete point.  A
    cut inside the middle drops what follows it (the tokens that settled a short agreement
    too); one inside ``wanted`` keeps its first characters.  ``ending``: the row ended with
    the model's own stop (``wanted`` is ``""``), where a re-write written before it is cut
    off as the in-process decoder cuts it."""
    if (not wanted and not ending) or "\ufffd" in wanted:
        return None
    base = max(0, len(text) - len(last)) if text.endswith(last) else len(text)
    piece = text + wanted

    def complete_at(c: int) -> bool:
        return decoding.parses(req.left + piece[:c] + req.right)

    stop = RightStop.of(req.right, req.right_wraps, at_line_start(req.left))
    c = right_rewrite_cut(piece, len(text), base, stop, complete_at, ending)
    return None if c is None else piece[:c]


def finish(req: CompletionRequest, got: Streamed, healed: str = ""
            ) -> tuple[str | None, StopReason, bool | None]:
    """The middle, the stop reason and whether the file parses with it, as ``Engine`` does:
    kept whole after a stop token when it parses, else cut back to the longest prefix with
    which the file parses (``best_complete``), or none."""
    if got.stop is StopReason.CANCELLED:
        return None, StopReason.CANCELLED, None
    got = capped(req, got)
    stop = StopReason.EOS if got.finish == "stop" else (got.stop or StopReason.BUDGET)
    after = after_heal(got.text, healed)
    if after is None:  # ended while still re-typing the healed characters: no middle
        return None, stop, None
    text = after.replace("\ufffd", "") if got.finish != "stop" else after
    if req.mode == Mode.UNCONSTRAINED:
        return text, stop, decoding.parses(req.left + text + req.right)
    end = None  # the right-context stop's middle (the row was ended there)
    # Only a request that asked for the stop: a sampled row's last top token differs from the
    # token drawn there as a matter of course, and it was no reason the row ended.
    if asks_right_stop(req) and got.finish == "stop":
        # ``wanted`` is ``None`` where the model's own likeliest token ended the row.
        end = right_context_end(req, text, got.last_piece, got.wanted or "",
                                ending=got.wanted is None)
    if req.line_stop or req.mode == Mode.CONSTRAINED:
        line_end = None
        for k, ch in enumerate(text[:len(end)] if end is not None else text):
            if ch == "\n" and req.line_stop and decoding.parses(req.left + text[:k] + req.right):
                line_end = k
                break
        back = refused_end(req, got, text, len(healed), line_end)
        if back is not None:
            return back, StopReason.REFUSED_END, True
        if line_end is not None:
            return text[:line_end], StopReason.LINE_END, True  # a line end came first
        if end is not None:
            return end, StopReason.RIGHT_CONTEXT, True
        if stop == StopReason.EOS and decoding.parses(req.left + text + req.right):
            return text, stop, True
    if req.mode == Mode.CONSTRAINED and stop != StopReason.EOS and "\ufffd" not in after:
        # (An incomplete character was dropped from ``text``: the steps' places would not
        # match it.)
        best = best_stop(req, text, got.stop_logps, len(healed))
        if best is not None:
            return best, (StopReason.TIME if stop is StopReason.TIME
                          else StopReason.BEST_COMPLETE), True
    middle, cut_stop = decoding.checked_cut(req.left, text, req.right, stop)
    if stop is StopReason.TIME:  # out of time, not out of answers: asking again may help
        cut_stop = StopReason.TIME
    return middle, cut_stop, middle is not None
