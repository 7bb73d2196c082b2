"""Tests for the Stack-Boundary / Stack-RandSpan case builders."""

from __future__ import annotations

import io
import random
import tokenize

import pytest

from fim.eval.datasets import boundary_cases, build_cases, iter_cases, randspan_cases

SOURCE = '''import os


def walk(root):
    """Yield files."""
    for name in os.listdir(root):
        path = os.path.join(root, name)
        if os.path.isdir(path):
            yield from walk(path)
        else:
            yield path


class Box:
    def __init__(self, value):
        self.value = value

    def get(self):
        return self.value
'''


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "a.py").write_text(SOURCE)
    (tmp_path / "b.py").write_text("x = [1,\n     2]\nprint(x)\n")
    (tmp_path / "broken.py").write_text("def f(:\n")
    (tmp_path / "py2.py").write_text("print 'hi'\n")
    (tmp_path / "latin1.py").write_bytes(b"s = '\xe9'\n")
    (tmp_path / "empty.py").write_text("")
    sub = tmp_path / "site-packages"
    sub.mkdir()
    (sub / "third.py").write_text("y = 2\n")
    return tmp_path


def test_cases_reassemble_the_file(folder):
    for ds in ("boundary", "randspan"):
        cases = list(iter_cases(ds, folder, seed=3, per_file=10))
        assert cases
        for c in cases:
            text = open(c["file"]).read()
            assert c["left"] + c["middle"] + c["right"] == text
            assert c["middle"]
            assert set(c) == {"id", "left", "right", "middle", "file"}


def test_only_parseable_utf8_files_outside_site_packages(folder):
    files = {c["file"].rsplit("/", 1)[1] for ds in ("boundary", "randspan")
             for c in iter_cases(ds, folder)}
    assert files == {"a.py", "b.py"}


def test_seeded_and_stable(folder):
    a = build_cases("boundary", 7, folder, seed=1)
    b = build_cases("boundary", 7, folder, seed=1)
    c = build_cases("boundary", 7, folder, seed=2)
    assert a == b
    assert [x["middle"] for x in a] != [x["middle"] for x in c]
    # A file's cases do not depend on the other files in the folder.
    (folder / "zzz.py").write_text("z = 3\nw = 4\n")
    after = {x["id"]: x for x in iter_cases("boundary", folder, seed=1)}
    for x in a:
        assert after[x["id"]] == x


def _symbol_spans(text):
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT,
                        tokenize.ENDMARKER, tokenize.COMMENT):
            continue
        out.append(tok)
    return out


def test_boundary_cuts_inside_a_token_and_stops_at_a_token_start():
    lines = SOURCE.splitlines(keepends=True)

    def offset(row, col):
        return sum(len(x) for x in lines[: row - 1]) + col

    toks = _symbol_spans(SOURCE)
    starts = {offset(*t.start) for t in toks}
    spans = [(offset(*t.start), offset(*t.end)) for t in toks]
    for left, middle, _ in boundary_cases(SOURCE, random.Random(0), 50):
        cut, stop = len(left), len(left) + len(middle)
        assert stop in starts
        assert any(s <= cut < e for s, e in spans)


def test_randspan_lengths():
    text = "a = 1\n" * 200  # 1200 characters: the 100-character cap applies
    for left, middle, _ in randspan_cases(text, random.Random(0), 50):
        assert len(left) <= 0.9 * len(text)
        assert len(middle) == min(100, len(text) - len(left))
    small = "b = 2\n" * 5  # 30 characters: 20% of the file is 6
    for _, middle, _ in randspan_cases(small, random.Random(0), 20):
        assert 1 <= len(middle) <= 6


def test_bad_arguments(folder, tmp_path):
    with pytest.raises(ValueError, match="unknown dataset"):
        build_cases("nope", 3, folder)
    with pytest.raises(FileNotFoundError):
        build_cases("boundary", 3, tmp_path / "missing")
    assert build_cases("boundary", 0, folder) == []
