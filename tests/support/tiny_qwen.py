"""A tiny random Qwen2 model saved as a Hugging Face directory, for running a real vLLM in tests.

vLLM loads models from directories, and its CPU backend runs the Qwen2 architecture; the
project's own random test model is a GPTBigCode network, so this builds a Qwen2 of the same
spirit (two layers, random weights, deterministic for a seed) around the same in-process
byte-level BPE tokenizer with SantaCoder's FIM sentinels (``fim.engines.random_model``), so
Seam detects the santacoder template for it.  Random weights propose arbitrary tokens: the
harshest test of the constraint.
"""

from __future__ import annotations

from pathlib import Path


def write_tiny_qwen(folder: Path, seed: int = 0) -> Path:
    """Build the model and write it (safetensors, config, tokenizer) into ``folder``."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from fim.engines.random_model import build_tokenizer

    tokenizer = build_tokenizer()
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=128, intermediate_size=256,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
        max_position_embeddings=1024, tie_word_embeddings=False,
        bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, torch_dtype="float32",
        # Larger than the default 0.02 so the random logits are not all but flat.
        initializer_range=0.2,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.eval()
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
