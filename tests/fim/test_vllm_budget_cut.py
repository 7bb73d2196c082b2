"""Where the vLLM client ends a constrained middle the budget cut off: at the token boundary
the in-process decoder would rank first (a stop's log-probability there plus log(1 +
length)), read from the stream's per-step top log-probabilities, not at the longest prefix
that parses."""

from __future__ import annotations

import pytest

from fim.api import CompletionRequest
from fim.options import Mode, Scope, StopReason
from fim.vllm.answers import finish as finish_answer
from fim.vllm.stream import Stream, Streamed

STOPS = ("<|endoftext|>", "<|file_sep|>")
LEFT, RIGHT = "x = 1 + 2", "\n"


def _streamed(tokens: list[str], stop_at: dict[int, float], finish: str = "length",
              stop_name: str = "<|endoftext|>") -> Streamed:
    """An answer read the way vLLM streams it: one chunk per token with its ``text_offset``
    and top log-probabilities; ``stop_at`` maps a step to its stop token's log-probability."""
    stream = Stream(None, {}, None, None, stops=STOPS)  # type: ignore[arg-type]
    out, offset = Streamed(), 0
    for k, token in enumerate(tokens):
        top = {token: -0.05, "#": -6.0}
        if k in stop_at:
            top[stop_name] = stop_at[k]
        last = k == len(tokens) - 1
        stream._take(out, {"choices": [{
            "text": token, "finish_reason": finish if last else None,
            "logprobs": {"text_offset": [offset], "tokens": [token], "token_logprobs": [-0.05],
                         "top_logprobs": [top]}}]})
        offset += len(token)
    return out


def _req() -> CompletionRequest:
    return CompletionRequest(LEFT, RIGHT, mode=Mode.CONSTRAINED, scope=Scope.FREE,
                             max_tokens=6)


TOKENS = [" + ", "3", " + ", "4", " + ", "5"]


def test_the_likeliest_stop_wins_over_the_longest_parsing_prefix():
    # A stop was likely after " + 3" (step 2 starts there), unlikely elsewhere.
    got = _streamed(TOKENS, {2: -0.5, 4: -7.0})
    assert finish_answer(_req(), got) == (" + 3", StopReason.BEST_COMPLETE, True)


def test_a_stop_token_of_the_template_other_than_eos_counts():
    got = _streamed(TOKENS, {2: -0.5}, stop_name="<|file_sep|>")
    assert finish_answer(_req(), got)[0] == " + 3"


def test_length_weighs_against_a_slightly_likelier_early_stop():
    # log(1 + 4) - 1.0 < log(1 + 8) - 1.2: the longer middle, as the in-process ranking has it.
    got = _streamed(TOKENS, {2: -1.0, 4: -1.2})
    assert finish_answer(_req(), got)[0] == " + 3 + 4"


def test_a_boundary_that_does_not_parse_gives_way_to_the_next():
    # After " + " (step 1 starts there) the file does not parse, however likely the stop.
    got = _streamed(TOKENS, {1: -0.1, 4: -2.0})
    assert finish_answer(_req(), got)[0] == " + 3 + 4"


def test_without_stop_log_probabilities_the_longest_parsing_prefix_stays():
    got = _streamed(TOKENS, {})
    assert finish_answer(_req(), got) == (" + 3 + 4 + 5", StopReason.BEST_COMPLETE, True)


def test_healed_characters_are_counted_off_the_steps_places():
    # The first token re-types "2" the prompt backed off; the places move with it.
    got = _streamed(["2 + ", "3", " + ", "4"], {2: -0.5})
    req = CompletionRequest(LEFT, RIGHT, mode=Mode.CONSTRAINED, scope=Scope.FREE,
                            max_tokens=4)
    assert finish_answer(req, got, healed="2")[0] == " + 3"


@pytest.mark.parametrize("finish", ["stop"])
def test_a_middle_ended_by_its_stop_token_is_kept_whole(finish):
    got = _streamed(TOKENS, {2: -0.1}, finish=finish)
    assert finish_answer(_req(), got) == (" + 3 + 4 + 5", StopReason.EOS, True)
