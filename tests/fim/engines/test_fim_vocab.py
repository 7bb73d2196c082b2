"""Token bytes and incremental UTF-8 splitting."""

from __future__ import annotations

from fim.engines.vocab import build_vocabulary, split_utf8


def test_token_bytes_reassemble_encoded_text(random_loaded):
    tok = random_loaded.tokenizer
    vocab = build_vocabulary(tok, random_loaded.model.config.vocab_size)
    for text in ["def f(x):\n\treturn x  # ok\n", "s = 'héllo wörld ✓ 𝔘'\n", "   \n\n  x"]:
        ids = tok.encode(text, add_special_tokens=False)
        assert b"".join(vocab.token_bytes[i] for i in ids) == text.encode("utf-8")
    for special in ("<fim-prefix>", "<|endoftext|>"):
        sid = tok.get_vocab()[special]
        assert vocab.token_bytes[sid] is None and sid in vocab.special_ids


def test_split_utf8():
    assert split_utf8(b"abc") == ("abc", b"")
    e_acute = "é".encode()
    assert split_utf8(b"x" + e_acute[:1]) == ("x", e_acute[:1])
    check = "✓".encode()
    assert split_utf8(check[:2]) == ("", check[:2])
    assert split_utf8(b"\xff") is None
    assert split_utf8(b"\xc3(") is None
    assert split_utf8(b"") == ("", b"")


def test_vocabulary_file_round_trip_and_rejects_stale_or_damaged(random_loaded, tmp_path):
    from fim.engines.vocab import load_vocabulary, save_vocabulary
    from fim.healing import HealIndex

    size = random_loaded.model.config.vocab_size + 2  # ids past the tokenizer: None
    vocab = build_vocabulary(random_loaded.tokenizer, size)
    order = HealIndex.sorted_ids(vocab)
    path = tmp_path / "v.bin"
    save_vocabulary(vocab, order, path, "k1")
    assert load_vocabulary(path, "k1", size) == (vocab, order)
    assert load_vocabulary(path, "k2", size) is None  # another tokenizer.json
    assert load_vocabulary(path, "k1", size + 1) is None  # another model vocabulary
    assert load_vocabulary(path, "k1", None) == (vocab, order)  # size checked later
    path.write_bytes(path.read_bytes()[:-5])  # cut short
    assert load_vocabulary(path, "k1", size) is None
    assert load_vocabulary(tmp_path / "absent.bin", "k1", size) is None


def test_engine_reads_and_writes_the_vocabulary_file(random_loaded, tmp_path):
    import dataclasses

    from fim.api import Engine
    from fim.engines.transformers_engine import backend_from_loaded
    from fim.engines.vocab import VOCABULARY_FILE

    random_loaded.tokenizer.save_pretrained(str(tmp_path))
    loaded = dataclasses.replace(random_loaded, cache_dir=tmp_path)
    first = Engine(backend_from_loaded(loaded))
    assert (tmp_path / VOCABULARY_FILE).is_file()
    second = Engine(backend_from_loaded(loaded))  # from the file
    assert second._setup.vocab == first._setup.vocab
    assert second._setup.heal_index.order == first._setup.heal_index.order
    (tmp_path / VOCABULARY_FILE).write_bytes(b"garbage")
    assert Engine(backend_from_loaded(loaded))._setup.vocab == first._setup.vocab  # rebuilt


def test_a_vocabulary_read_before_the_model_is_used_only_if_its_size_matches(random_loaded,
                                                                            tmp_path):
    # The llama.cpp engine reads the file while the model loads, before it knows the size.
    from fim.engines.vocab import (
        VOCABULARY_FILE,
        cached_vocabulary,
        read_cached_vocabulary,
        save_vocabulary,
    )
    from fim.healing import HealIndex

    size = random_loaded.model.config.vocab_size
    vocab = build_vocabulary(random_loaded.tokenizer, size)
    order = HealIndex.sorted_ids(vocab)
    key_file = tmp_path / "model.gguf"
    key_file.write_bytes(b"weights")
    st = key_file.stat()
    save_vocabulary(vocab, order, tmp_path / VOCABULARY_FILE, f"{st.st_size}:{st.st_mtime_ns}")
    read = read_cached_vocabulary(tmp_path, key_file)
    assert read == (vocab, order)
    built = []

    def build():
        built.append(1)
        return build_vocabulary(random_loaded.tokenizer, size + 3)

    assert cached_vocabulary(build, size, None, None, read) == (vocab, order) and not built
    other, _ = cached_vocabulary(build, size + 3, None, None, read)  # another model
    assert built and other.size == size + 3
    assert read_cached_vocabulary(tmp_path / "absent", key_file) is None
