"""Seam's Go constraint on held-out holes, judged by ``gofmt -e`` (for bench_go).

For each hole (``left``, ``middle``, ``right``; a prefix-only hole has ``right == ""`` and a
``hole`` length): build `go_language.FimLanguage.for_go` and its initial state (setup time),
feed the true middle one character at a time with an ``is_complete`` after each (feed cost;
the middle must stay viable at every character), and ask ``is_complete`` at its end.  Then
the complete verdict on the true middle and on random non-true middles (a character inserted,
deleted or replaced, an extra closing bracket) is compared with ``gofmt -e`` on the whole
file: a middle called complete whose file gofmt rejects is an unsound verdict.

Feed cost per model token: the true middle cut into the bundled model's tokens (its
``tokenizer.json``), each token's text fed as one piece with an ``is_complete`` after it.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.fim_language_dev import corrupt as corrupt_with
from benchmarks.go_corpus import gofmt_accepts
from quotient.constraint import Constraint

#: Characters a corruption inserts or substitutes: Go's brackets, operators, quotes, space.
ALPHABET = "abcxyz_019 ()[]{}:;.,=+-*&|!<>'\"`\n\t/\\"
TOKENIZER_JSON = Path.home() / ".cache" / "seam" / "qwen2.5-coder-1.5b-v1" / "tokenizer.json"


def corrupt(middle: str, rng: random.Random) -> str:
    """A random non-true middle (the Python benchmark's corruption, with Go's characters)."""
    return corrupt_with(middle, rng, ALPHABET)


def complete_verdict(language: Constraint, middle: str) -> bool:
    """Whether the constraint calls ``middle`` a complete fill of its hole."""
    state = language.initial().feed(middle)
    return state is not None and state.is_complete()


@dataclass
class SeamRun:
    """What one set of holes gave: counts, misses and the timings behind the figures."""

    cases: int = 0
    accepted: int = 0  # true middle viable at every character and complete at its end
    misses: list[str] = field(default_factory=list)
    checked: int = 0  # middles whose complete verdict was compared with gofmt
    unsound: list[str] = field(default_factory=list)  # complete, gofmt rejects
    missed_complete: list[str] = field(default_factory=list)  # gofmt accepts, not complete
    invalid: int = 0  # non-true middles gofmt rejects
    invalid_rejected: int = 0
    setup_ms: list[float] = field(default_factory=list)
    char_ms: list[float] = field(default_factory=list)
    token_ms: list[float] = field(default_factory=list)
    modes: dict[str, int] = field(default_factory=dict)


def _feed_chars(run: SeamRun, case: dict, state, limit: int):  # type: ignore[no-untyped-def]
    """Feed ``middle[:limit]`` a character at a time; the state after it, or None."""
    middle = case["middle"]
    for k, ch in enumerate(middle[:limit]):
        t0 = time.perf_counter()
        nxt = state.feed(ch)
        if nxt is not None:
            nxt.is_complete()
        run.char_ms.append((time.perf_counter() - t0) * 1000)
        if nxt is None:
            run.misses.append(f"{case['id']}: rejected at {k} {middle[:k + 1][-60:]!r}")
            return None
        state = nxt
    return state


def _feed_tokens(run: SeamRun, language: Constraint, pieces: list[str]) -> None:
    state = language.initial()
    for piece in pieces:
        t0 = time.perf_counter()
        state = state.feed(piece)
        if state is not None:
            state.is_complete()
        run.token_ms.append((time.perf_counter() - t0) * 1000)
        if state is None:
            return


def measure(cases: list[dict], build, *, corruptions: int, seed: int,  # type: ignore[no-untyped-def]
            tokenize=None, gofmt: str | None = None) -> SeamRun:
    """Run ``build(left, right)`` (the Go constraint) over ``cases``; see the module doc."""
    rng = random.Random(f"{seed}:corrupt")
    run = SeamRun()
    for case in cases:
        left, middle, right = case["left"], case["middle"], case["right"]
        hole = case.get("hole", len(middle))
        t0 = time.perf_counter()
        language = build(left, right)
        state = language.initial()
        run.setup_ms.append((time.perf_counter() - t0) * 1000)
        mode = str(language.mode)
        run.modes[mode] = run.modes.get(mode, 0) + 1
        run.cases += 1
        state = _feed_chars(run, case, state, hole)
        if state is not None and hole < len(middle):
            state = state.feed(middle[hole:])  # the rest of the file, one piece
            if state is None:
                run.misses.append(f"{case['id']}: rejected after the hole")
        ok = state is not None and state.is_complete()
        if state is not None and not ok:
            run.misses.append(f"{case['id']}: not complete at the end")
        run.accepted += ok
        if tokenize is not None:
            _feed_tokens(run, language, tokenize(middle[:hole]))
        others = [corrupt(middle[:hole], rng) + middle[hole:] for _ in range(corruptions)]
        for k, m in enumerate([middle] + others):
            got = ok if k == 0 else complete_verdict(language, m)
            truth = gofmt_accepts(left + m + right, gofmt)
            run.checked += 1
            where = f"{case['id']} ({'true' if k == 0 else 'corrupted'} middle {m[:80]!r})"
            if got and not truth:
                run.unsound.append(where)
            elif truth and not got:
                run.missed_complete.append(where)
            if k and not truth:
                run.invalid += 1
                run.invalid_rejected += not got
    return run


def model_tokenizer(path: Path = TOKENIZER_JSON):  # type: ignore[no-untyped-def]
    """The bundled model's tokenizer as ``text -> token texts``, or None when absent."""
    if not path.exists():
        return None
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path))

    def pieces(text: str) -> list[str]:
        enc = tok.encode(text, add_special_tokens=False)
        return [text[a:b] for a, b in enc.offsets if b > a]

    return pieces
