"""The decoding loop with the random model: KV-cache correctness, modes, healing, stops."""

from __future__ import annotations

import math

import pytest
import torch

from fim.api import CompletionRequest, Engine
from fim.decoding import (
    FeedCache,
    _Step,
    best_stopping_point,
    checked_cut,
    longest_parsing_prefix,
    parses,
)
from fim.engines.transformers_engine import HFTokenizer, backend_from_loaded
from fim.options import StopReason
from fim.templates import PromptTooLong, build_prompt
from quotient.constraint import LanguageMode
from tests.support.reference_language import ReferenceLanguage, ReferenceState


class DigitsState:
    """Middles of digits only; complete once at least one digit was fed."""

    def __init__(self, lang: DigitsLanguage, text: str = "") -> None:
        self.lang, self.text = lang, text

    def feed(self, text: str):
        DigitsLanguage.feeds += 1
        if all(c in "0123456789" for c in text):
            return DigitsState(self.lang, self.text + text)
        return None

    def is_complete(self) -> bool:
        return bool(self.text)


class DigitsLanguage:
    # A toy, not exact ("0" then "1" is no Python number): a weak mode makes the decoder
    # check its middles with the parser, as it does for a real degraded constraint.
    mode = LanguageMode.PREFIX
    built = 0
    feeds = 0

    def __init__(self, *args) -> None:
        DigitsLanguage.built += 1

    def check_region(self) -> None:
        return None  # decide on the whole text

    def initial(self) -> DigitsState:
        return DigitsState(self)


def _engine(random_loaded, factory):
    return Engine(backend_from_loaded(random_loaded),
                  language_factory=lambda left, right, scope: factory())


def test_unconstrained_matches_generate(random_loaded, reference_engine):
    """Same greedy tokens as model.generate on the same prompt (specials masked in both)."""
    tok = random_loaded.tokenizer
    left, right = "import os\n\ndef main():\n    path = ", "\n    print(path)\n"
    p = build_prompt(HFTokenizer(tok), reference_engine.template, left, right, window=1024,
                     reserve=16, heal=False)
    bad = [[i] for i in sorted(reference_engine._setup.vocab.special_ids)]
    with torch.inference_mode():
        out = random_loaded.model.generate(
            torch.tensor([p.ids]), max_new_tokens=16, do_sample=False, bad_words_ids=bad,
            pad_token_id=tok.pad_token_id, eos_token_id=None)
    expected = tok.decode(out[0, len(p.ids):])
    engine = Engine(backend_from_loaded(random_loaded), heal=False)
    res = engine.complete(CompletionRequest(left, right, mode="unconstrained", max_tokens=16))
    assert res.tokens == 16 and res.stop == "budget"
    assert res.middle == expected
    assert res.mode == "none"


def test_constrained_respects_the_language(random_loaded):
    engine = _engine(random_loaded, DigitsLanguage)
    vocab = len(random_loaded.tokenizer)
    for k in (1, 5, 50, vocab):
        res = engine.complete(CompletionRequest("x = ", "\n", mode="constrained",
                                                max_tokens=6, top_k=k))
        assert res.mode is LanguageMode.PREFIX
        if res.middle is None:
            assert res.stop in ("no_candidate", "budget")
            # With every token tried, some digit token always fits: never empty-handed.
            assert k < vocab
        else:
            assert res.middle and res.middle.isdigit()
            assert res.stop in ("eos", "best_complete")
            assert res.parses is True


def test_constrained_eos_only_when_complete(random_loaded):
    """With a reference language, a returned middle always makes the file parse."""
    engine = Engine(backend_from_loaded(random_loaded),
                    language_factory=ReferenceLanguage.for_python)
    cases = [("def f(x):\n    return ", "\n"), ("items = [1, 2", "]\n"), ("if x:\n    y = ", "\n")]
    answered = 0
    for left, right in cases:
        res = engine.complete(CompletionRequest(left, right, max_tokens=8, top_k=50))
        assert isinstance(res.stop, StopReason), res.stop
        if res.middle is not None:
            answered += 1
            assert res.parses, (left, res.middle, right)
    assert answered, "no case returned a middle: the test would check nothing"


def test_stop_reasons_are_typed_and_match_how_the_decode_ended(random_loaded):
    """Every way a decode ends reports its own ``StopReason`` member."""
    engine = _engine(random_loaded, DigitsLanguage)
    seen = {engine.complete(CompletionRequest("x = ", "\n", max_tokens=20),
                            cancel=lambda: True).stop}
    seen.add(engine.complete(CompletionRequest("x = ", "\n", mode="unconstrained",
                                               max_tokens=3)).stop)
    seen.add(engine.complete(CompletionRequest("x = ", "\n", max_tokens=3)).stop)
    assert all(type(s) is StopReason for s in seen), seen
    assert StopReason.CANCELLED in seen
    assert seen & {StopReason.BUDGET, StopReason.EOS}
    assert checked_cut("x = ", "1", "\n", StopReason.BUDGET) == ("1",
                                                                 StopReason.BEST_COMPLETE)


def test_checked_cut():
    assert longest_parsing_prefix("x = ", "1 + 2)", "\n") == "1 + 2"
    assert longest_parsing_prefix("x = (", "", "\n") is None
    assert checked_cut("x = ", "1", "\n", "eos") == ("1", "eos")
    assert checked_cut("x = ", "1", "\n", "budget") == ("1", "best_complete")
    assert checked_cut("x = ", "12 +", "\n", "eos") == ("12 ", "best_complete")
    assert checked_cut("x = (", "", "\n", "eos") == (None, "no_candidate")


def test_checked_mode_returns_a_parsing_prefix(reference_engine):
    left, right = "def f(a, b):\n    return a", "\n\nprint(f(1, 2))\n"
    res = reference_engine.complete(CompletionRequest(left, right, mode="checked",
                                                      max_tokens=12))
    unc = reference_engine.complete(CompletionRequest(left, right, mode="unconstrained",
                                                      max_tokens=12))
    assert res.raw == unc.raw  # the same generation underneath
    if res.middle is not None:
        assert unc.middle.startswith(res.middle)
        assert res.parses


def test_best_stopping_point_prefers_token_boundaries():
    lang = ReferenceLanguage("x = 1", "\n")
    s0 = lang.initial()
    cache = FeedCache()
    # Tokens "2+" and "3)": complete at the start (x = 1), inside the first token ("2"),
    # inside the second ("2+3"); only the start is a complete token boundary.
    steps = [_Step(s0, 0, -5.0, "2+"), _Step(s0.feed("2+"), 2, -1.0, "3)")]
    final = s0.feed("2+3)")
    assert best_stopping_point(steps, final, 4, -9.0, cache) == 0
    # Among boundaries the length-weighted EOS estimate decides: "2" + " " ends a token too.
    steps = [_Step(s0, 0, -3.0, "2"), _Step(s0.feed("2"), 1, -1.0, " +")]
    assert best_stopping_point(steps, s0.feed("2 +"), 3, -9.0, cache) == 1


def test_best_stopping_point_scans_inside_tokens_as_a_fallback():
    lang = ReferenceLanguage("x = 1 +", "\n")
    s0 = lang.initial()
    cache = FeedCache()
    # No boundary is complete ("", "2+", "2+3-"), but "2" and "2+3" inside tokens are.
    steps = [_Step(s0, 0, -5.0, "2+"), _Step(s0.feed("2+"), 2, -1.0, "3-")]
    final = s0.feed("2+3-")
    assert best_stopping_point(steps, final, 4, -2.0, cache) == 3  # -1 + log 4 > -5 + log 2
    dead = ReferenceLanguage("x = (", "\n").initial()
    assert best_stopping_point([_Step(dead, 0, 0.0, "")], dead, 0, math.inf, cache) is None


def test_token_healing_reproduces_the_cut(random_loaded):
    """The model regenerates the healed characters and the middle is what follows them: the
    same text as greedy `generate` from the healed prompt with its first tokens held to the
    healed characters (Hugging Face's own prefix constraint)."""
    engine = Engine(backend_from_loaded(random_loaded))
    tok = random_loaded.tokenizer
    left, right = "def f(self):\n    return self.val", "\n"
    res = engine.complete(CompletionRequest(left, right, mode="unconstrained", max_tokens=4))
    assert res.healed and left.endswith(res.healed)
    assert res.stop == "budget" and res.middle is not None
    prompt = build_prompt(HFTokenizer(tok), engine.template, left, right, window=engine.window,
                          reserve=4, heal=True)
    assert prompt.healed == res.healed
    special = set(tok.all_special_ids)
    texts = [tok.decode([i]) if i < len(tok) and i not in special else ""
             for i in range(random_loaded.model.config.vocab_size)]
    n = len(prompt.ids)

    def heal_first(_batch: int, ids: torch.Tensor) -> list[int]:
        so_far = tok.decode(ids[n:].tolist())
        rest = prompt.healed[len(so_far):] if prompt.healed.startswith(so_far) else ""
        return [i for i, t in enumerate(texts) if t and (t.startswith(rest) or rest.startswith(t))]

    with torch.inference_mode():
        out = random_loaded.model.generate(
            torch.tensor([prompt.ids]), max_new_tokens=4, do_sample=False,
            prefix_allowed_tokens_fn=heal_first, pad_token_id=tok.pad_token_id,
            eos_token_id=None)
    generated = tok.decode(out[0, n:])
    # The engine holds back an incomplete UTF-8 tail (decoded here as U+FFFD).
    assert generated.rstrip("\ufffd") == res.healed + res.middle


def test_cancel_and_time_budget(random_loaded):
    engine = _engine(random_loaded, DigitsLanguage)
    res = engine.complete(CompletionRequest("x = ", "\n", max_tokens=20), cancel=lambda: True)
    assert (res.middle, res.stop) == (None, "cancelled")
    res = engine.complete(CompletionRequest("x = ", "\n", mode="unconstrained", max_tokens=500,
                                            time_budget_ms=1e-3))
    assert res.stop == "time" and res.tokens < 500


def test_language_reuse_when_typing(random_loaded):
    DigitsLanguage.built = 0
    engine = _engine(random_loaded, DigitsLanguage)
    engine.complete(CompletionRequest("x = ", "\n", max_tokens=2))
    engine.complete(CompletionRequest("x = 1", "\n", max_tokens=2))
    engine.complete(CompletionRequest("x = 12", "\n", max_tokens=2))
    assert DigitsLanguage.built == 1
    engine.complete(CompletionRequest("x = 12", "\n\n", max_tokens=2))  # right changed
    assert DigitsLanguage.built == 2
    engine.complete(CompletionRequest("x = 12a", "\n", max_tokens=2))  # typed text rejected
    assert DigitsLanguage.built == 3


def test_feed_results_are_memoised():
    lang = DigitsLanguage()
    cache = FeedCache()
    s = lang.initial()
    before = DigitsLanguage.feeds
    a = cache.feed(s, "12")
    b = cache.feed(s, "12")
    assert a is b and DigitsLanguage.feeds == before + 1
    assert cache.feed(s, "") is s


@pytest.mark.parametrize("field,value", [("mode", "greedy"), ("scope", "file"),
                                         ("max_tokens", -1), ("top_k", 0),
                                         ("temperature", -1.0), ("time_budget_ms", 0)])
def test_bad_requests(reference_engine, field, value):
    req = CompletionRequest("x = ", "\n")
    setattr(req, field, value)
    with pytest.raises(ValueError):
        reference_engine.complete(req)


def test_sampling_is_seeded(reference_engine):
    def run(seed):
        return reference_engine.complete(CompletionRequest(
            "x = ", "\n", mode="unconstrained", max_tokens=8, temperature=1.0, seed=seed)).raw
    assert run(1) == run(1)
    assert len({run(s) for s in range(4)}) > 1


def test_reference_state_is_persistent():
    s = ReferenceLanguage("a = ", "\n").initial()
    t = s.feed("1")
    assert isinstance(t, ReferenceState) and s.text == "" and t.is_complete()


class AnythingState:
    """Accepts every text and calls everything complete: a constraint that checks nothing."""

    def feed(self, text: str) -> AnythingState:
        return self

    def is_complete(self) -> bool:
        return True


class AnythingLanguage:
    def __init__(self, mode: str) -> None:
        self.mode = mode

    def check_region(self) -> None:
        return None  # decide on the whole text

    def initial(self) -> AnythingState:
        return AnythingState()


def test_degraded_language_modes_fall_back_to_the_checked_cut(random_loaded):
    engine = Engine(backend_from_loaded(random_loaded),
                    language_factory=lambda *a: AnythingLanguage("none"))
    for left, right in [("x = (", ")\n"), ("def f(:\n", "\n"), ("y = [1, ", "]\n")]:
        res = engine.complete(CompletionRequest(left, right, max_tokens=4))
        assert res.middle is None or res.parses
        assert res.error is None


def test_exact_mode_parse_failures_are_flagged_and_never_returned(random_loaded):
    engine = Engine(backend_from_loaded(random_loaded),
                    language_factory=lambda *a: AnythingLanguage("exact"))
    # Nothing two random tokens add after "x = (" closes it before a bare newline.
    res = engine.complete(CompletionRequest("x = (", "\n", max_tokens=2))
    assert "does not parse" in res.error  # the constraint's bug is reported ...
    assert res.middle is None or res.parses  # ... and only a middle that parses is returned
    assert res.raw and not parses("x = (" + res.raw + "\n")


def test_constrained_after_unconstrained_decodes_as_from_scratch(random_loaded):
    engine = Engine(backend_from_loaded(random_loaded),
                    language_factory=ReferenceLanguage.for_python)
    left, right = "def f(x):\n    return ", "\n\nprint(f(2))\n"
    for mode in ("unconstrained", "constrained"):
        warm = engine.complete(CompletionRequest(left, right, mode=mode, max_tokens=12))
        cold_engine = Engine(backend_from_loaded(random_loaded),
                             language_factory=ReferenceLanguage.for_python)
        cold = cold_engine.complete(CompletionRequest(left, right, mode=mode, max_tokens=12))
        assert (warm.middle, warm.raw, warm.stop, warm.tokens) == \
            (cold.middle, cold.raw, cold.stop, cold.tokens)


def test_cancel_during_prefill_stops_before_the_first_token(random_loaded):
    engine = _engine(random_loaded, DigitsLanguage)
    engine.step_model.chunk = 8
    engine.step_model.reset()
    polls = []
    res = engine.complete(CompletionRequest("# " + "words and more words " * 20 + "\nx = ", "\n",
                                            mode="unconstrained", max_tokens=20),
                          cancel=lambda: polls.append(1) or len(polls) > 1)
    assert (res.middle, res.stop, res.tokens) == (None, "cancelled", 0)
    assert 0 < len(engine.step_model.seq) < res.prompt_tokens


def test_context_tokens_caps_the_prompt(random_loaded):
    engine = _engine(random_loaded, DigitsLanguage)
    left = "# " + "words and more words " * 60 + "\nx = "
    wide = engine.complete(CompletionRequest(left, "\n", mode="unconstrained", max_tokens=4))
    narrow = engine.complete(CompletionRequest(left, "\n", mode="unconstrained", max_tokens=4,
                                               context_tokens=64))
    assert narrow.prompt_tokens <= 64 - 4 < wide.prompt_tokens
    with pytest.raises(PromptTooLong):
        engine.complete(CompletionRequest(left, "\n", max_tokens=8, context_tokens=10))
    with pytest.raises(ValueError, match="context_tokens"):
        engine.complete(CompletionRequest(left, "\n", context_tokens=0))
