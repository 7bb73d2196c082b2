"""The vLLM client goes back before a refused end as the in-process decoder does.

A greedy row's generated token differs from the raw model's likeliest one only where the
constraint refused it (``Streamed.refused``); where that was the stop token and the row went on
for more than ``REFUSED_END_SLACK`` tokens, the middle is the best-ranked complete boundary
before it (``fim.vllm.answers.refused_end``).  The answers are compared with the in-process
decoder's on the same model's ranking (``test_refused_end.Ranked``).
"""

from __future__ import annotations

import pytest
from test_refused_end import LEFT, RIGHT, SPLIT_LEFT, SPLIT_RIGHT, ranked_engine

from fim import stopping
from fim.api import CompletionRequest
from fim.options import StopReason
from fim.vllm.answers import finish
from fim.vllm.stream import Stream, Streamed

EOS = "<|endoftext|>"


def streamed(pieces: list[str], refused_at: int | None, *, finish_reason: str = "stop",
             wanted: str = EOS, stop_logp: dict[int, float] | None = None) -> Streamed:
    """What vLLM streams for a greedy row that generated ``pieces`` (then its stop token,
    when ``finish_reason`` is ``"stop"``); at step ``refused_at`` the raw model's likeliest
    token was ``wanted``, which the constraint refused."""
    stream = Stream(None, {}, None, None, stops=(EOS,))  # type: ignore[arg-type]
    out, offset = Streamed(), 0
    steps = pieces + ([EOS] if finish_reason == "stop" else [])
    for k, piece in enumerate(steps):
        top = {piece: -0.05, "#": -6.0}
        if k == refused_at:
            top = {wanted: -0.2, piece: -1.9}
        if stop_logp and k in stop_logp:
            top[EOS] = stop_logp[k]
        last = k == len(steps) - 1
        stream._take(out, {"choices": [{
            "text": "" if piece == EOS else piece,
            "finish_reason": finish_reason if last else None,
            "logprobs": {"text_offset": [offset], "tokens": [piece], "token_logprobs": [-0.05],
                         "top_logprobs": [top]}}]})
        offset += 0 if piece == EOS else len(piece)
    return out


def _pieces(engine, text: str) -> list[str]:
    return [engine.tokenizer.decode([t]) for t in engine.tokenizer.encode(text)]


@pytest.mark.parametrize(("left", "right", "said", "detour", "expected"), [
    (LEFT, RIGHT, 'lue"] = value', " or 1 or 2 or", ('lue"] =', StopReason.REFUSED_END)),
    # one forced token: kept, as in-process
    (LEFT, RIGHT, 'lue"] = value', " or 1 +", ('lue"] = value or 1 +', StopReason.EOS)),
    # the cursor splits a word: both cut inside the model's token where its word meets the
    # right context (``fim.stopping.word_meets_right``)
    (SPLIT_LEFT, SPLIT_RIGHT, 's += ["--", container, command]', " + [a, b, c, d, e, f,",
     ('s += ["--", contain', StopReason.REFUSED_END)),
])
def test_the_client_and_the_in_process_decoder_agree(random_loaded, left, right, said, detour,
                                                     expected):
    engine = ranked_engine(random_loaded, said, detour)
    req = CompletionRequest(left, right, max_tokens=40, scope="statement")
    res = engine.complete(req)
    assert (res.middle, res.stop) == expected
    said_pieces, detour_pieces = _pieces(engine, said), _pieces(engine, detour)
    got = streamed(said_pieces + detour_pieces, refused_at=len(said_pieces))
    middle, stop, parses = finish(req, got)
    assert (middle, stop) == expected and parses


def test_the_likeliest_listed_stop_before_the_end_wins():
    """Of the complete boundaries before the refused end (``lue"] =`` and ``lue"] = value +``),
    one whose stop was among its step's top ids ranks first; among unlisted ones, the
    longer."""
    pieces = ["lue", '"]', " =", " value", " +", " value", " or", " 1", " or", " 2", " or"]
    req = CompletionRequest(LEFT, RIGHT, max_tokens=32, scope="statement")
    listed = streamed(pieces, refused_at=6, stop_logp={3: -3.0})
    assert finish(req, listed)[:2] == ('lue"] =', StopReason.REFUSED_END)
    unlisted = streamed(pieces, refused_at=6)
    assert finish(req, unlisted)[:2] == ('lue"] = value +', StopReason.REFUSED_END)


def test_a_line_break_refused_at_a_mid_line_cursor():
    pieces = ["lue", '"]', " =", " value", " or", " 1", " or", " 2", " or"]
    req = CompletionRequest(LEFT, RIGHT, max_tokens=32, scope="statement", line_stop=True)
    got = streamed(pieces, refused_at=4, wanted="\n")
    assert finish(req, got)[:2] == ('lue"] =', StopReason.REFUSED_END)
    # Without line_stop a line break is no end of the middle: the row's text stays.
    whole = CompletionRequest(LEFT, RIGHT, max_tokens=32, scope="statement")
    assert finish(whole, got)[:2] == ('lue"] = value or 1 or 2 or', StopReason.EOS)


def test_without_the_right_context_stop_the_rule_holds():
    """The in-process decoder goes back before a refused end whatever ``stop_at_right``
    says; so does the client."""
    pieces = ["lue", '"]', " =", " value", " or", " 1", " or", " 2", " or"]
    req = CompletionRequest(LEFT, RIGHT, max_tokens=32, scope="statement", stop_at_right=False)
    assert finish(req, streamed(pieces, refused_at=4))[:2] == ('lue"] =', StopReason.REFUSED_END)


def test_a_sampled_row_is_not_read_for_refusals():
    """In a sampled row the generated token differs from the likeliest one by chance."""
    pieces = ["lue", '"]', " =", " value", " or", " 1", " or", " 2", " or"]
    req = CompletionRequest(LEFT, RIGHT, max_tokens=32, scope="statement", temperature=0.7,
                            seed=1)
    got = streamed(pieces, refused_at=4)
    assert finish(req, got)[:2] == ('lue"] = value or 1 or 2 or', StopReason.EOS)


def test_the_slack_is_the_decoder_s(monkeypatch):
    pieces = ["lue", '"]', " =", " value", " or", " 1", " or", " 2", " or"]
    req = CompletionRequest(LEFT, RIGHT, max_tokens=32, scope="statement")
    monkeypatch.setattr(stopping, "REFUSED_END_SLACK", len(pieces))
    assert finish(req, streamed(pieces, refused_at=4))[1] == StopReason.EOS


@pytest.mark.parametrize("logprobs", [
    {"text_offset": [0], "top_logprobs": [{EOS: -0.1, "x": -2.0}]},  # no tokens
    {"text_offset": [0], "tokens": "x", "top_logprobs": [{EOS: -0.1}]},  # not a list
    {"text_offset": [0], "tokens": ["x", "y"], "top_logprobs": [{EOS: -0.1}]},  # lengths
    {"text_offset": [0], "tokens": ["x"], "top_logprobs": ["not a dict"]},
    {"text_offset": [0], "tokens": ["x"], "top_logprobs": [{EOS: "high", 3: -1.0}]},
    "garbage",
])
def test_a_malformed_chunk_marks_no_refusal(logprobs):
    """What a misbehaving server sends in ``logprobs`` never crashes the reader nor reads as
    a refused end: each step gets ``None``, aligned with its stop log-probabilities."""
    stream = Stream(None, {}, None, None, stops=(EOS,))  # type: ignore[arg-type]
    got = Streamed()
    for _ in range(8):
        stream._take(got, {"choices": [{"text": "x", "logprobs": logprobs}]})
    assert len(got.refused) == len(got.stop_logps)
    assert not any(got.refused)
    req = CompletionRequest("x = ", "\n", max_tokens=32, scope="statement")
    assert finish(req, got)[1] != StopReason.REFUSED_END

