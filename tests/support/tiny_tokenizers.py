"""A tiny byte-level BPE tokenizer trained in memory, with the special tokens a test names: the
FIM templates' detection and the prompt layout are tested on real tokenizers without a download.
"""

from __future__ import annotations

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast


def bpe_tokenizer(specials: list[str], eos: str) -> PreTrainedTokenizerFast:
    """A BPE tokenizer of ~400 tokens over a line of Python, ``specials`` as its special
    tokens and ``eos`` its end of sequence."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(["def f(x):\n    return x + 1\n"] * 3, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=eos,
                                   additional_special_tokens=specials)
