"""Ids that are not text (control, unused, padding) can never be generated, in either engine.

A GGUF file marks such ids by type; the bundled Qwen2.5 model has 271 padding ids
(151665-151935) and ``</s>`` (128247) among them.  If the vocabulary took them for text, the
decoder could emit ``[PAD151665]``-like strings or the bytes of a control token.
"""

from __future__ import annotations

import numpy as np
import pytest

from fim.api import CompletionRequest, Engine
from fim.engines import bundled
from fim.engines.model_specs import llama_cpp_available
from fim.engines.step_model import StepModel

needs_llama = pytest.mark.skipif(not llama_cpp_available(),
                                 reason="llama-cpp-python is not installed")
UNUSED, CONTROL = 5, 3


class Favouring(StepModel):
    """Another step model's logits with some ids pushed far above everything else."""

    def __init__(self, inner: StepModel, favoured: list[int]) -> None:
        super().__init__()
        self.inner, self.favoured = inner, favoured

    @property
    def vocab_size(self) -> int:
        return self.inner.vocab_size

    def prefill(self, ids, interrupt=None, progress=None, keep_cached=False, hold=False):
        return self._boost(self.inner.prefill(ids, interrupt, progress, keep_cached, hold))

    def step(self, token):
        return self._boost(self.inner.step(token))

    def _boost(self, logits):
        if logits is None:
            return None
        out = logits.copy()
        out[self.favoured] = np.max(out) + 100.0
        return out

    def _forward(self, slot, ids, interrupt):  # pragma: no cover - prefill/step delegate
        raise NotImplementedError

    _truncate = _copy_prefix = _clear = _forward


def _llama_backend_with_marked_ids(tmp_path, marked: dict[int, int]):
    from fim.engines.gguf_export import write_santacoder_gguf
    from fim.engines.llama_engine import load_llama_backend
    from fim.engines.model_specs import ModelKind
    from fim.engines.random_model import build_random_santacoder

    model, tokenizer = build_random_santacoder()
    path = write_santacoder_gguf(model, tokenizer, tmp_path / "marked.gguf", marked)
    return load_llama_backend(str(path), ModelKind.GGUF, slots=1, window=512), tokenizer


@needs_llama
def test_llama_vocabulary_takes_control_and_unused_ids_for_non_text(tmp_path):
    backend, tok = _llama_backend_with_marked_ids(tmp_path, {})
    plain = backend.vocab
    word, other = tok.convert_tokens_to_ids("Ġreturn"), tok.convert_tokens_to_ids("Ġself")
    assert plain.token_bytes[word] == b" return" and plain.token_bytes[other] == b" self"
    marked, _ = _llama_backend_with_marked_ids(tmp_path, {word: UNUSED, other: CONTROL})
    assert marked.vocab.token_bytes[word] is None and marked.vocab.token_bytes[other] is None
    mask = marked.vocab.disallowed_mask(set())
    assert mask[word] and mask[other] and not mask[tok.convert_tokens_to_ids("Ġif")]
    # The special tokens of the template are control tokens: never text either.
    assert marked.vocab.token_bytes[tok.convert_tokens_to_ids("<fim-middle>")] is None


@needs_llama
@pytest.mark.parametrize("mode", ["unconstrained", "checked", "constrained"])
def test_the_decoder_never_picks_a_non_text_id_however_likely(tmp_path, mode):
    backend, tok = _llama_backend_with_marked_ids(tmp_path, {})
    word = tok.convert_tokens_to_ids("Ġreturn")
    marked, _ = _llama_backend_with_marked_ids(tmp_path, {word: UNUSED})
    # The model now prefers the unused id (and a control sentinel) at every step.
    sentinel = tok.convert_tokens_to_ids("<fim-prefix>")
    marked.step_model = Favouring(marked.step_model, [word, sentinel])
    engine = Engine(marked)
    res = engine.complete(CompletionRequest("def f(x):\n    ", "\n", mode=mode, max_tokens=8,
                                            scope="free"))
    assert res.tokens > 0
    assert "return" not in res.raw and "<fim" not in res.raw


def test_the_transformers_vocabulary_reads_non_text_ids_from_a_gguf(tmp_path):
    pytest.importorskip("gguf")
    from fim.engines.gguf_export import write_santacoder_gguf
    from fim.engines.random_model import build_random_santacoder
    from fim.engines.transformers_engine import _gguf_non_text_ids

    model, tokenizer = build_random_santacoder()
    word = tokenizer.convert_tokens_to_ids("Ġreturn")
    path = write_santacoder_gguf(model, tokenizer, tmp_path / "m.gguf", {word: UNUSED})
    ids = _gguf_non_text_ids(path)
    assert word in ids
    assert set(tokenizer.all_special_ids) <= ids  # written as control tokens
    assert tokenizer.convert_tokens_to_ids("Ġif") not in ids


@pytest.mark.bundled
@pytest.mark.skipif(not bundled.installed(), reason="the bundled model is not installed")
@needs_llama
def test_bundled_padding_ids_and_control_tokens_are_never_text():
    from fim.engines.loading import load_backend

    backend = load_backend("bundled", "llama.cpp", slots=1, window=512)
    table = backend.vocab.token_bytes
    assert all(table[i] is None for i in range(151665, 151936))
    assert table[128247] is None  # "</s>", a control token in the GGUF
    # <|endoftext|>, the chat and FIM sentinels are control tokens; <tool_call> and
    # </tool_call> (151657-8) are user-defined text in Qwen's tokenizer and stay text.
    assert all(table[i] is None for i in range(151643, 151665) if i not in (151657, 151658))
    assert table[151657] == b"<tool_call>"
    assert table[backend.tokenizer.encode("\n")[0]] == b"\n"
