"""``random:santacoder`` as a GGUF file, so the llama.cpp engine runs the same tiny model.

The random test model is a GPTBigCode network (multi-query attention, learned positions,
GELU, tied embeddings), which llama.cpp runs as its ``starcoder`` architecture.  Writing the
very weights and byte-level BPE tokenizer of the transformers model into a GGUF file (in
float32, with the ``gguf`` package) lets one contract test suite run both engines on one model
and compare their logits and greedy output, with no download.

Only this model is exported; real models come as GGUF files already.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np

#: GGUF token types (``tokenizer.ggml.token_type``).
_NORMAL, _CONTROL = 1, 3


def _tokenizer_tables(tokenizer) -> tuple[list[str], list[int], list[str]]:
    """Tokens (byte-level strings, in id order), their GGUF types and the BPE merges."""
    size = len(tokenizer)
    tokens = tokenizer.convert_ids_to_tokens(list(range(size)))
    special = set(tokenizer.all_special_ids)
    types = [_CONTROL if i in special else _NORMAL for i in range(size)]
    model = json.loads(tokenizer.backend_tokenizer.to_str())["model"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return tokens, types, merges


def write_santacoder_gguf(model, tokenizer, path: Path,
                          token_types: dict[int, int] | None = None) -> Path:
    """Write a transformers GPTBigCode ``model`` and its tokenizer to ``path`` (float32).

    ``token_types`` overrides the GGUF type of some ids (tests mark ids unused or control).
    """
    import gguf

    config = model.config
    if config.model_type != "gpt_bigcode":
        raise ValueError(f"only GPTBigCode models are exported, not {config.model_type!r}")
    state = {k: v.detach().float().cpu().numpy() for k, v in model.state_dict().items()}
    writer = gguf.GGUFWriter(str(path), "starcoder")
    writer.add_name("seam-random-santacoder")
    writer.add_context_length(config.n_positions)
    writer.add_embedding_length(config.n_embd)
    writer.add_feed_forward_length(config.n_inner or 4 * config.n_embd)
    writer.add_block_count(config.n_layer)
    writer.add_head_count(config.n_head)
    writer.add_head_count_kv(1 if config.multi_query else config.n_head)
    writer.add_layer_norm_eps(config.layer_norm_epsilon)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)

    tokens, types, merges = _tokenizer_tables(tokenizer)
    for i, kind in (token_types or {}).items():
        types[i] = kind
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(tokenizer.bos_token_id)
    writer.add_eos_token_id(tokenizer.eos_token_id)
    writer.add_add_bos_token(False)

    names = {
        "transformer.wte.weight": "token_embd.weight",
        "transformer.wpe.weight": "position_embd.weight",
        "transformer.ln_f.weight": "output_norm.weight",
        "transformer.ln_f.bias": "output_norm.bias",
    }
    per_layer = {
        "ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output",
        "ln_2": "ffn_norm", "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down",
    }
    for layer in range(config.n_layer):
        for hf, gg in per_layer.items():
            for kind in ("weight", "bias"):
                names[f"transformer.h.{layer}.{hf}.{kind}"] = f"blk.{layer}.{gg}.{kind}"
    for hf, gg in names.items():
        writer.add_tensor(gg, np.ascontiguousarray(state[hf], dtype=np.float32))
    # lm_head is tied to the token embeddings; llama.cpp reuses token_embd when output is absent.
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def random_santacoder_gguf(spec: str) -> Path:
    """A temporary GGUF file of the ``random:santacoder[@SEED]`` model; the caller removes it."""
    from fim.engines.random_model import build_random_santacoder, parse_random_spec

    model, tokenizer = build_random_santacoder(seed=parse_random_spec(spec))
    folder = Path(tempfile.mkdtemp(prefix="seam-random-"))
    return write_santacoder_gguf(model, tokenizer, folder / "random-santacoder.gguf")
