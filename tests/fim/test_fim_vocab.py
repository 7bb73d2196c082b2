"""Token bytes and incremental UTF-8 splitting."""

from __future__ import annotations

from fim.vocab import build_vocabulary, split_utf8


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
