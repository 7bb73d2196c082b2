"""The per-request constraint of the vLLM plugin, without vLLM: arguments, token bytes, healing,
UTF-8 tails, completeness and the masks."""

from __future__ import annotations

import ast

import numpy as np
import pytest

from fim.language_cache import LanguageCache
from fim.vllm.rows import (
    RowConstraint,
    SeamArgs,
    SeamArgsError,
    completions_of,
)


def _row(table, left, right, scope="statement", heal=""):
    args = SeamArgs(left, right, scope, heal)
    return RowConstraint(args, LanguageCache().get(left, right, scope), table)


def _ids(tokenizer, text):
    return tokenizer.encode(text, add_special_tokens=False)


def test_args_absent_and_present():
    assert SeamArgs.from_extra_args(None) is None
    assert SeamArgs.from_extra_args({"other": 1}) is None
    args = SeamArgs.from_extra_args({"seam_left": "x = ", "seam_right": "\n",
                                     "seam_scope": "line", "seam_heal": " "})
    assert args == SeamArgs("x = ", "\n", "line", " ")
    assert SeamArgs.from_extra_args(args.to_extra_args()) == args


@pytest.mark.parametrize("extra", [
    {"seam_left": 3},
    {"seam_left": "x", "seam_scope": "bogus"},
    {"seam_left": "x = 1", "seam_heal": "2"},
    {"seam_right": ["no"]},
])
def test_bad_args_are_refused(extra):
    with pytest.raises(SeamArgsError):
        SeamArgs.from_extra_args(extra)


def test_stop_ids_are_the_templates(table, random_tokenizer):
    assert table.stop_ids == {random_tokenizer.eos_token_id}
    assert table.vocab.token_bytes[random_tokenizer.eos_token_id] is None


def test_a_tokenizer_without_fim_sentinels_stops_at_its_eos():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from fim.vllm.rows import TokenTable

    raw = Tokenizer(models.WordLevel({"a": 0, "b": 1, "</s>": 2}, unk_token="a"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="</s>", unk_token="a")
    assert TokenTable.from_tokenizer(tok, len(tok)).stop_ids == {2}


def test_advance_feeds_only_new_tokens_and_completes(table, random_tokenizer):
    row = _row(table, "x = (", "\n")
    eos = random_tokenizer.eos_token_id
    assert not row.complete() and not row.viable(eos)
    out = _ids(random_tokenizer, "1 + 2")
    row.advance(out)
    assert row.seen == len(out) and not row.complete()
    out += _ids(random_tokenizer, ")")
    row.advance(out)  # the same list, grown: only the new token is fed
    assert row.seen == len(out) and row.complete() and row.viable(eos)


def test_unviable_tokens_are_refused_and_a_forced_one_kills_the_row(table, random_tokenizer):
    row = _row(table, "x = 1\n", "\n")
    close = _ids(random_tokenizer, ")")[0]
    assert not row.viable(close)  # ")" can never be completed after "x = 1"
    row.advance([close])  # generated despite the mask: the row is dead, only stops remain
    assert row.dead and row.viable(random_tokenizer.eos_token_id) and not row.viable(close)


def test_healing_and_partial_utf8(table, random_tokenizer):
    row = _row(table, "name = 'caf", "'\n", heal="caf")
    assert not row.complete()  # the healed characters are not rewritten yet
    other = _ids(random_tokenizer, "x")[0]
    assert not row.viable(other)  # healing: only tokens that rewrite "caf" first
    tokens = _ids(random_tokenizer, "caf")
    row.advance(tokens)
    assert row.complete() and row.seq.joined() == ""
    e_acute = "\u00e9".encode()
    first = table.vocab.token_bytes.index(e_acute[:1])
    tokens = tokens + [first]
    row.advance(tokens)
    assert not row.complete()  # half a character: the file is not complete yet
    tokens = tokens + [table.vocab.token_bytes.index(e_acute[1:])]
    row.advance(tokens)
    assert row.complete() and row.seq.joined() == "\u00e9"


def test_a_partial_character_is_viable_only_if_some_character_fits(table):
    lead = table.vocab.token_bytes.index(b"\xc3")  # the first byte of "\u00e0".."\u00ff"
    assert not _row(table, "x = 1 ", "\n").viable(lead)  # "x = 1 \u00e0" can never parse
    assert _row(table, "s = '", "'\n").viable(lead)  # any character goes in a string
    assert _row(table, "x = ", "\n").viable(lead)  # an identifier may start with one
    assert completions_of(b"\xe2\x80")  # U+2000..U+203F: spaces, dashes, quotes, "\u203f"
    assert all(ch.encode().startswith(b"\xf0\x9f") for ch in completions_of(b"\xf0\x9f"))
    assert completions_of(b"\x80") == () and completions_of(b"\xc3\xa9") == ()


def test_viable_mask_matches_single_checks(table, random_tokenizer):
    row = _row(table, "def f(a):\n    return a +", "\n")
    mask = row.viable_mask(table.size + 3)
    assert mask.shape == (table.size + 3,) and not mask[table.size:].any()
    for tid in range(table.size):
        assert mask[tid] == row.viable(tid)
    assert 0 < mask.sum() < table.size


def _run(table, left, right, logits_of, pick, steps=40):
    """A decode loop over a row: ``logits_of(step)`` gives scores, ``pick`` chooses from the
    viable mask; returns the middle."""
    row = _row(table, left, right)
    out: list[int] = []
    stop = next(iter(table.stop_ids))
    for step in range(steps):
        row.advance(out)
        scores = logits_of(step)
        mask = row.viable_mask(table.size)
        if not mask.any():
            break
        tid = pick(np.where(mask, scores, -np.inf))
        if tid == stop:
            return row.seq.joined(), True
        out.append(tid)
    return row.seq.joined(), False


@pytest.mark.parametrize("seed", range(4))
def test_random_scores_always_give_a_parsing_file(table, seed):
    rng = np.random.default_rng(seed)
    left, right = "def f(a, b):\n    total = a +", "\n    return total\n"
    stop = next(iter(table.stop_ids))

    def logits_of(step):
        scores = rng.normal(size=table.size) * 3
        scores[stop] += step / 4  # stopping grows likelier, so decodes end
        return scores

    middle, stopped = _run(table, left, right, logits_of, lambda s: int(np.argmax(s)))
    if stopped:
        ast.parse(left + middle + right)
