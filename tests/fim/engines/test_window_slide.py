"""The left context slides in llama.cpp's cache (``StepModel.slide_stop``, issue 29 item 2):
a prompt whose start moved down the file reuses the cached cells of the lines it still holds,
moved to their new positions, and runs only what is new; the right text after the suffix
sentinel is never moved (it would read a stale end of the left text). Run on the tiny random
model exported to GGUF, as the step-model contract is."""

from __future__ import annotations

import pytest

from fim.engines.loading import load_backend
from fim.engines.model_specs import llama_cpp_available

pytestmark = pytest.mark.skipif(
    not llama_cpp_available(),
    reason="llama-cpp-python is not installed (bash scripts/install_llama_cpp.sh)")

LINES = [f"value_{i} = compute({i}, offset={i * 7})\n" for i in range(40)]
RIGHT = "\nresult = finish(value_39)\nprint(result)\n"


def model(slots: int = 2):
    b = load_backend("random:santacoder", "llama.cpp", device="cpu", slots=slots)
    return b.tokenizer, b.step_model


def prompt(tok, first: int, last: int, prefix: int, suffix: int, middle: int) -> list[int]:
    """``<prefix> lines[first:last] <suffix> RIGHT <middle>`` as a FIM prompt is laid out."""
    return ([prefix] + tok.encode("".join(LINES[first:last])) + [suffix] + tok.encode(RIGHT)
            + [middle])


def counting(step) -> list[int]:
    """The tokens each llama.cpp batch runs (a slide runs them in a scratch sequence)."""
    calls: list[int] = []
    real = step.llama.forward

    def forward(seq, positions, ids, interrupt):
        calls.append(len(ids))
        return real(seq, positions, ids, interrupt)

    step.llama.forward = forward
    return calls


def sentinels(tok) -> tuple[int, int, int]:
    # Three ids the line texts never produce stand for the FIM sentinels.
    used = set(tok.encode("".join(LINES) + RIGHT))
    free = [i for i in range(3, 400) if i not in used][:3]
    return free[0], free[1], free[2]


def test_a_window_that_moved_down_runs_only_its_new_lines_and_the_right_text() -> None:
    tok, step = model()
    assert step.can_shift
    prefix, suffix, middle = sentinels(tok)
    step.slide_stop = suffix
    old = prompt(tok, 0, 30, prefix, suffix, middle)
    step.prefill(old)
    calls = counting(step)
    new = prompt(tok, 10, 33, prefix, suffix, middle)  # ten lines dropped, three added
    assert step.prefill(new) is not None
    kept = len(tok.encode("".join(LINES[10:30])))
    assert step.slid >= kept - 8  # the lines both hold (but a token at the seams) moved
    right = len(tok.encode(RIGHT)) + 2
    assert sum(calls) == len(new) - step.reused - step.slid  # only the rest ran
    assert sum(calls) >= right  # the right text ran again, after the new left text
    assert step.seq == new and step.cached_prefix(new) == len(new)
    # The slid sequence serves the next request as any cached one does: typing on reuses it.
    split = new.index(suffix)
    step.prefill(new[:split] + tok.encode("x") + new[split:])
    assert step.reused == split


def test_without_a_slide_stop_or_with_a_window_above_the_whole_prompt_runs() -> None:
    tok, step = model()
    prefix, suffix, middle = sentinels(tok)
    old = prompt(tok, 0, 30, prefix, suffix, middle)
    step.prefill(old)
    calls = counting(step)
    new = prompt(tok, 10, 33, prefix, suffix, middle)
    step.prefill(new)
    assert step.slid == 0 and sum(calls) == len(new) - step.reused
    assert step.reused < 8  # the sentinel and the lines' common "value_1" at most
    # A slide never takes over a slot whose cached prefix already serves the prompt: the
    # cursor moved up within the window.
    step.slide_stop = suffix
    step.prefill(old)
    up = prompt(tok, 0, 20, prefix, suffix, middle)
    step.prefill(up)
    assert step.slid == 0 and step.reused >= len(tok.encode("".join(LINES[0:20])))
