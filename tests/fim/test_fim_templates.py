"""FIM templates: detection, stop tokens, context budget and token healing."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from fim.engines.transformers_engine import HFTokenizer
from fim.templates import (
    TEMPLATES,
    PromptTooLong,
    build_prompt,
    detect_template,
    heal_split,
    stop_ids,
)
from tests.support.tiny_tokenizers import bpe_tokenizer


def test_detects_santacoder_on_the_random_tokenizer(random_loaded):
    assert detect_template(HFTokenizer(random_loaded.tokenizer)).name == "santacoder"


def test_detects_qwen_and_its_stop_tokens():
    specials = ["<|endoftext|>", "<|im_end|>", "<|fim_prefix|>", "<|fim_middle|>",
                "<|fim_suffix|>", "<|fim_pad|>"]
    tok = bpe_tokenizer(specials, eos="<|im_end|>")
    template = detect_template(HFTokenizer(tok))
    assert template.name == "qwen2.5-coder"
    vocab = tok.get_vocab()
    stops = stop_ids(HFTokenizer(tok), template)
    # Qwen2.5-Coder ends a middle with <|endoftext|>, which its config does not name.
    assert vocab["<|endoftext|>"] in stops
    assert vocab["<|im_end|>"] in stops
    assert vocab["<|fim_middle|>"] not in stops


def test_detects_starcoder_and_override():
    tok = bpe_tokenizer(["<|endoftext|>", "<fim_prefix>", "<fim_middle>", "<fim_suffix>"],
                     eos="<|endoftext|>")
    assert detect_template(HFTokenizer(tok)).name == "starcoder"
    assert detect_template(HFTokenizer(tok), "santacoder").name == "santacoder"
    with pytest.raises(ValueError, match="unknown FIM template"):
        detect_template(HFTokenizer(tok), "gpt")


def test_no_fim_tokens_is_a_clear_error():
    tok = bpe_tokenizer(["<|endoftext|>"], eos="<|endoftext|>")
    with pytest.raises(ValueError, match="no known fill-in-the-middle tokens"):
        detect_template(HFTokenizer(tok))


def test_all_templates_have_distinct_sentinels():
    for t in TEMPLATES.values():
        assert len({t.prefix, t.suffix, t.middle}) == 3
        assert t.stops


def test_prompt_layout(random_loaded):
    tok = random_loaded.tokenizer
    t = TEMPLATES["santacoder"]
    p = build_prompt(HFTokenizer(tok), t, "x = 1\n", "\ny = 2\n", window=1024, reserve=64,
                     heal=False)
    vocab = tok.get_vocab()
    assert p.ids[0] == vocab["<fim-prefix>"]
    assert p.ids[-1] == vocab["<fim-middle>"]
    k = p.ids.index(vocab["<fim-suffix>"])
    assert tok.decode(p.ids[1:k]) == "x = 1\n"
    assert tok.decode(p.ids[k + 1 : -1]) == "\ny = 2\n"
    assert (p.left_chars_dropped, p.right_chars_dropped, p.healed) == (0, 0, "")


def test_context_budget_cuts_at_line_boundaries(random_loaded):
    tok = random_loaded.tokenizer
    t = TEMPLATES["santacoder"]
    left = "".join(f"value_{i} = compute({i}, 'text')\n" for i in range(300))
    right = "".join(f"other_{i} = transform({i})\n" for i in range(300))
    for share in (0.25, 0.5, 0.9):
        p = build_prompt(HFTokenizer(tok), t, left, right, window=300, reserve=40, left_share=share,
                         heal=False)
        assert len(p.ids) <= 300 - 40
        assert p.left_chars_dropped > 0 and p.right_chars_dropped > 0
        assert left[p.left_chars_dropped - 1] == "\n"  # cut at a line start
        kept_right = right[: len(right) - p.right_chars_dropped]
        assert kept_right.endswith("\n")  # cut at a line end
        vocab = tok.get_vocab()
        k = p.ids.index(vocab["<fim-suffix>"])
        assert tok.decode(p.ids[1:k]) == left[p.left_chars_dropped:]
        assert tok.decode(p.ids[k + 1 : -1]) == kept_right
        # The longest cut that fits: one more line on either side would not fit its share.
        room = 300 - 40 - 3  # the window minus the budget and the three sentinels
        left_budget = int(room * share)
        earlier = left.rfind("\n", 0, p.left_chars_dropped - 1) + 1
        assert len(tok.encode(left[earlier:], add_special_tokens=False)) > left_budget
        later = right.find("\n", len(kept_right)) + 1
        assert len(tok.encode(right[:later], add_special_tokens=False)) > room - left_budget
    # A small right context leaves its share to the left.
    p = build_prompt(HFTokenizer(tok), t, left, "\n", window=300, reserve=40, left_share=0.5,
                     heal=False)
    assert len(p.ids) > 200


def test_window_too_small_for_the_budget(random_loaded):
    with pytest.raises(PromptTooLong, match="lower --max-tokens"):
        build_prompt(HFTokenizer(random_loaded.tokenizer), TEMPLATES["santacoder"], "x", "y",
                     window=64, reserve=64)


def test_token_healing_backs_off_the_last_token(random_loaded):
    tok = random_loaded.tokenizer
    left = "def f(self):\n    return self.val"
    ids = tok.encode(left, add_special_tokens=False)
    kept, healed = heal_split(HFTokenizer(tok), ids, left)
    assert healed and left.endswith(healed)
    assert tok.decode(kept) + healed == left
    p = build_prompt(HFTokenizer(tok), TEMPLATES["santacoder"], left, "\n", window=1024, reserve=8)
    assert p.healed == healed
    assert heal_split(HFTokenizer(tok), [], "") == ([], "")


def test_huge_contexts_are_cut_before_tokenizing(random_loaded):
    tok = random_loaded.tokenizer
    t = TEMPLATES["santacoder"]
    left = "".join(f"value_{i} = compute({i}, 'text')\n" for i in range(60_000))
    right = "".join(f"other_{i} = transform({i})\n" for i in range(60_000))
    p = build_prompt(HFTokenizer(tok), t, left, right, window=300, reserve=40, heal=False)
    assert len(p.ids) <= 300 - 40
    k = p.ids.index(tok.convert_tokens_to_ids("<fim-suffix>"))
    assert left[p.left_chars_dropped - 1] == "\n"
    assert tok.decode(p.ids[1:k]) == left[p.left_chars_dropped:]
    assert tok.decode(p.ids[k + 1 : -1]) == right[: len(right) - p.right_chars_dropped]
    # The cut keeps as much as the uncut search would: the prompt is (nearly) full.
    assert len(p.ids) > 300 - 40 - 2 * 16


@pytest.mark.parametrize("budget", [1, 5, 20, 80])
def test_precut_never_costs_context(budget):
    from fim.templates import _encode_head, _encode_tail

    # Long runs the tokenizer learned as single tokens: far more than 8 characters per token,
    # so the first cut fits the budget and must be widened.
    line = "#" + " " * 60 + "pad\n"
    tok = PreTrainedTokenizerFast(tokenizer_object=_trained_on(line * 50), eos_token="<eos>")
    text = line * 400
    assert len(text) / len(tok.encode(text, add_special_tokens=False)) > 8
    ids, cut = _encode_tail(HFTokenizer(tok), text, budget)
    assert ids == tok.encode(text[cut:], add_special_tokens=False)
    # A cut lies at a line start, unless no line starts within reach.
    assert cut == 0 or (len(ids) > budget and (text[cut - 1] == "\n" or "\n" not in text[cut:]))
    ids, cut = _encode_head(HFTokenizer(tok), text, budget)
    kept = text[: len(text) - cut]
    assert ids == tok.encode(kept, add_special_tokens=False)
    assert cut == 0 or (len(ids) > budget and (kept.endswith("\n") or "\n" not in kept))


def _trained_on(text: str) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<eos>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([text] * 3, trainer=trainer)
    return tok


def test_cut_keeps_the_longest_context_when_density_varies(random_loaded):
    # Dense code far from the cursor, sparse comments next to it: an estimate from the average
    # characters per token cuts too late and wastes budget; the cut must not.
    tok = random_loaded.tokenizer
    head = "".join(f"v{i} = [{i}, {i + 1}, {i + 2}, ({i}), {{{i}: {i}}}]\n" for i in range(400))
    tail = "".join(f"# {'description ' * 6}{i}\n" for i in range(25))
    left = head + tail
    right = "".join(f"w{i} = f(g(h({i}), {i}), [{i}])\n" for i in range(300))
    p = build_prompt(HFTokenizer(tok), TEMPLATES["santacoder"], left, right, window=600, reserve=40,
                     heal=False)
    room = 600 - 40 - 3
    left_budget = int(room * 0.75)
    k = p.ids.index(tok.convert_tokens_to_ids("<fim-suffix>"))
    assert k - 1 <= left_budget
    earlier = left.rfind("\n", 0, p.left_chars_dropped - 1) + 1
    assert len(tok.encode(left[earlier:], add_special_tokens=False)) > left_budget
