"""The right-context stop through vLLM, the client's side (issue 19), against a real HTTP peer
on 127.0.0.1 (``tests/support/vllm_peer.py``): the client asks for the stop and for the raw
logprobs it reads it from; when the answer ended on a stop token that was not the model's
likeliest and that likeliest token would re-write the right context, the stop reason is
``right_context`` and the middle is cut where the in-process decoder cuts it.  (The processor's
side, and its parity with the in-process decoder, are in ``tests/team``.)"""

from __future__ import annotations

import pytest

from fim.api import CompletionRequest
from fim.options import Mode, Scope, StopReason
from fim.vllm.client import STOP_LOGPROBS, VllmEngine
from tests.support.vllm_peer import VllmPeer

LEFT, RIGHT = 'def f():\n    raise ValueError("Event ', 'be None")\n'


@pytest.fixture
def peer():
    running = VllmPeer(middle="cannot ").start()
    yield running
    running.stop()


def _request(**fields) -> CompletionRequest:
    base = {"mode": Mode.CONSTRAINED, "scope": Scope.STATEMENT, "max_tokens": 16}
    return CompletionRequest(fields.pop("left", LEFT), fields.pop("right", RIGHT),
                             **{**base, **fields})


def test_a_row_stopped_before_the_right_context_reports_it(peer):
    # The model went on with the text after the cursor ("be None"), and its likeliest next
    # token '")' settled the re-write: the middle ends where the re-write began.
    peer.middle, peer.wanted = "cannot be None", '")'
    res = VllmEngine.connect(peer.url).complete(_request())
    assert (res.middle, res.stop, res.parses) == ("cannot ", StopReason.RIGHT_CONTEXT, True)
    sent = peer.log.completions[-1]
    assert sent["logprobs"] == STOP_LOGPROBS
    assert sent["vllm_xargs"]["seam_right_stop"] == 1
    assert sent["vllm_xargs"]["seam_right_wraps"] == 1


def test_the_models_own_stop_is_an_end_of_sequence(peer):
    res = VllmEngine.connect(peer.url).complete(_request())
    assert (res.middle, res.stop) == ("cannot ", StopReason.EOS)
    # A likeliest token that re-writes nothing is no right-context stop either.
    peer.wanted = "Python"
    res = VllmEngine.connect(peer.url).complete(_request())
    assert (res.middle, res.stop) == ("cannot ", StopReason.EOS)


def test_a_cut_inside_the_last_token_drops_its_end(peer):
    # The peer streams two characters a chunk: "ab", ", ", "b"; the model wanted ")" next,
    # which settles the re-write of ", b)" begun inside an earlier token: the middle ends
    # before it.
    peer.middle, peer.wanted = "ab, b", ")"
    res = VllmEngine.connect(peer.url).complete(
        _request(left="def f(a, b):\n    return g(", right=", b)\n"))
    assert (res.middle, res.stop) == ("ab", StopReason.RIGHT_CONTEXT)


def test_a_short_agreement_is_no_stop(peer):
    # "be" alone is not yet a re-write of 'be None")': a row the server ended there did not
    # end for the right context (issue 29).
    peer.wanted = "be"
    res = VllmEngine.connect(peer.url).complete(_request())
    assert (res.middle, res.stop) == ("cannot ", StopReason.EOS)


def test_a_rewrite_before_the_models_own_stop_is_cut(peer):
    # The model wrote its line and the right context's next line, then stopped by itself:
    # the duplicate line is cut off as the in-process decoder cuts it (issue 29).
    peer.middle = "a += 1\n    a *= 2\n"
    res = VllmEngine.connect(peer.url).complete(
        _request(left="def f(a):\n    ", right="\n    a *= 2\n    return a\n",
                 scope=Scope.BLOCK, max_tokens=24))
    assert (res.middle, res.stop) == ("a += 1", StopReason.RIGHT_CONTEXT)


def test_off_and_sampled_requests_do_not_ask_for_it(peer):
    peer.wanted = "be"
    engine = VllmEngine.connect(peer.url)
    res = engine.complete(_request(stop_at_right=False))
    assert res.stop == StopReason.EOS
    engine.complete(_request(temperature=0.7))
    for sent in peer.log.completions:
        # (Every constrained request asks for the top ids: they rank a budget's cut.)
        assert "seam_right_stop" not in sent["vllm_xargs"]
        assert sent["logprobs"] == STOP_LOGPROBS


def test_a_sampled_answer_is_not_cut_where_its_last_top_token_would_re_write(peer):
    # A drawn stop's step has another likeliest token as a matter of course; the row did not
    # end for it, so the middle stays whole: "a, b" then the stop, though ")" was likelier
    # (the re-write "b)" would begin inside the last token, " b", and drop its "b").
    peer.middle, peer.wanted = "a, b", ")"
    res = VllmEngine.connect(peer.url).complete(
        _request(left="x = g(", right="b)\n", temperature=0.7, seed=1))
    assert (res.middle, res.stop) == ("a, b", StopReason.EOS)


def test_a_warm_up_asks_for_no_log_probabilities(peer):
    engine = VllmEngine.connect(peer.url)
    assert engine.warm(_request())
    sent = peer.log.completions[-1]
    assert "logprobs" not in sent and sent["max_tokens"] == 1
    assert sent["vllm_xargs"]["seam_warm"] == 1  # the server builds the language, no more


def test_a_file_without_a_grammar_is_sent_unconstrained_and_labelled_unchecked(peer):
    """The server's processor has Python's grammar only: a JavaScript row must not be
    constrained by it, and nothing parses the JavaScript middle as Python."""
    peer.middle = "x => x * 2"
    res = VllmEngine.connect(peer.url).complete(
        _request(left="const double = ", right=";\n", language="javascript"))
    sent = peer.log.completions[-1]
    assert "vllm_xargs" not in sent
    assert res.middle == "x => x * 2" and res.parses is None
    assert res.mode == "unchecked"
