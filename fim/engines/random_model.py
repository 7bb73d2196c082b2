"""``random:santacoder``: a tiny randomly initialised GPTBigCode model for tests and CI.

The tokenizer is a byte-level BPE trained in-process (with the ``tokenizers`` library) on a few
standard-library modules, carrying SantaCoder's FIM tokens; the model is a two-layer
GPTBigCode with multi-query attention.  Both are deterministic for a given seed and Python
version, build in well under a second and need no download.  A random model proposes
arbitrary tokens, which makes it the harshest test of the constraint.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

import torch

SPECIAL_TOKENS = ["<|endoftext|>", "<fim-prefix>", "<fim-middle>", "<fim-suffix>", "<fim-pad>"]
_CORPUS_MODULES = ("textwrap.py", "string.py", "shlex.py", "bisect.py", "colorsys.py")
# Extra snippets so that common layout tokens exist even if a module is missing.
_SNIPPETS = """
def f(x, y=1, *args, **kwargs):
    if x:
        return [x for x in range(10)]
    elif y is not None:
        pass
    else:
        raise ValueError("bad")
class A(object):
    '''doc'''
    def __init__(self):
        self.a = {1: 2, 'b': (3, 4)}
        try:
            import os
        except ImportError as e:
            print(e)
        finally:
            del self.a
while True:
    break
with open(f) as g: g.read()
lambda: 0x1F + 1.5e3 - 2j
"""


def _corpus() -> list[str]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts = [_SNIPPETS]
    for name in _CORPUS_MODULES:
        try:
            texts.append((stdlib / name).read_text(encoding="utf-8"))
        except OSError:
            continue
    return texts


def parse_random_spec(spec: str) -> int:
    """The seed of a ``random:santacoder[@SEED]`` spec; ``ModelSpecError`` for other names."""
    from fim.engines.model_specs import ModelSpecError

    name, _, seed = spec[len("random:"):].partition("@")
    if name != "santacoder":
        raise ModelSpecError(f"unknown random model {name!r}; only random:santacoder exists")
    try:
        return int(seed) if seed else 0
    except ValueError:
        raise ModelSpecError(f"random model seed must be an integer, got {seed!r}") from None


def build_tokenizer(vocab_size: int = 1024):
    """A byte-level BPE tokenizer with SantaCoder's special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|endoftext|>",
        bos_token="<|endoftext|>",
        unk_token="<|endoftext|>",
        pad_token="<fim-pad>",
        additional_special_tokens=SPECIAL_TOKENS[1:],
        model_max_length=1024,
        clean_up_tokenization_spaces=False,
    )


def build_random_santacoder(seed: int = 0, n_positions: int = 1024):
    """``(model, tokenizer)``: the random GPTBigCode model and its tokenizer, in fp32 on CPU."""
    from transformers import GPTBigCodeConfig, GPTBigCodeForCausalLM

    tokenizer = build_tokenizer()
    config = GPTBigCodeConfig(
        vocab_size=len(tokenizer),
        n_positions=n_positions,
        n_embd=64,
        n_layer=2,
        n_head=4,
        multi_query=True,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        # Larger than the default 0.02 so the random logits are not all but flat.
        initializer_range=0.2,
    )
    # Seed a private RNG state so building the model never disturbs the caller's.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = GPTBigCodeForCausalLM(config)
    model.eval()
    return model, tokenizer
