"""The windows a constrained request sends (``fim.vllm.context``) give the server the same
constraint as the whole file: at holes cut out of real modules, the language built from the
sent texts has the same left and right windows as the one built from the whole file, and
agrees with it on every prefix of the true middle (viable or not) and on whether the whole
middle completes the file.  No vLLM needed."""

from __future__ import annotations

import random
import sysconfig
from pathlib import Path

import pytest

from fim.vllm.context import constraint_texts
from python_language.language import FimLanguage

STDLIB = Path(sysconfig.get_paths()["stdlib"])
FILES = ["textwrap.py", "argparse.py", "json/decoder.py", "dataclasses.py", "string.py"]


def _holes(per_file: int = 6):
    rng = random.Random(0)
    for name in FILES:
        source = (STDLIB / name).read_text(encoding="utf-8")
        lines = source.splitlines(keepends=True)
        for _ in range(per_file):
            k = rng.randrange(len(lines) // 4, len(lines) - 2)  # far enough in to be cut
            at = sum(map(len, lines[:k])) + rng.randrange(max(1, len(lines[k]) - 1))
            yield pytest.param(source[:at], source[at:at + rng.randrange(3, 40)],
                               source[at:], id=f"{name}@{at}")


@pytest.mark.parametrize("left,middle,rest", list(_holes()))
def test_the_sent_windows_give_the_same_constraint(left, middle, rest):
    right = rest[len(middle):]
    sent = constraint_texts(left, right)
    assert left.endswith(sent.left) and right.startswith(sent.right)
    assert sent.left_dropped == len(left) - len(sent.left)
    assert sent.right_dropped == len(right) - len(sent.right)
    whole = FimLanguage.for_python(left, right, scope="free")
    part = FimLanguage.for_python(sent.left, sent.right, scope="free")
    assert (part.left_window, part.right_window) == (whole.left_window, whole.right_window)
    a, b = whole.initial(), part.initial()
    for ch in middle:
        a = a.feed(ch) if a is not None else None
        b = b.feed(ch) if b is not None else None
        assert (a is None) == (b is None)
    if a is not None:
        assert a.is_complete() == b.is_complete()


def test_the_cases_are_cut():
    """The holes above sit in large modules: the sent texts are far smaller than the file
    (else the comparison shows nothing)."""
    cut = [constraint_texts(left, rest[len(mid):]) for left, mid, rest in
           (p.values for p in _holes())]
    assert sum(c.left_dropped > 0 or c.right_dropped > 0 for c in cut) >= len(cut) * 2 // 3
    assert sum(c.left_dropped > 0 for c in cut) >= len(cut) // 2
    assert sum(c.right_dropped > 0 for c in cut) >= len(cut) // 4


def test_a_short_file_is_sent_whole():
    left, right = "import os\n\nx = os.", "\nprint(x)\n"
    assert constraint_texts(left, right) == (constraint_texts(left, right).__class__(
        left, right, 0, 0))


def test_the_client_sends_the_windows_and_checks_the_whole_file():
    """Against a real HTTP peer: a constrained request in a large module carries the windows,
    not the file; the middle the peer answers is still judged against the whole file."""
    from fim.api import CompletionRequest
    from fim.options import Mode
    from fim.vllm.client import VllmEngine
    from tests.support.vllm_peer import VllmPeer

    source = (STDLIB / "argparse.py").read_text(encoding="utf-8")
    at = source.index("\ndef _copy_items(") + 1
    left, right = source[:at] + "x = ", "\n" + source[at:]
    peer = VllmPeer(middle="1").start()
    try:
        engine = VllmEngine.connect(peer.url)
        res = engine.complete(CompletionRequest(left, right, mode=Mode.CONSTRAINED,
                                                max_tokens=4))
        sent = peer.log.completions[-1]["vllm_xargs"]
        want = constraint_texts(left, right)
        assert (sent["seam_left"], sent["seam_right"]) == (want.left, want.right)
        assert len(sent["seam_left"]) + len(sent["seam_right"]) < len(source) // 3
        assert res.middle == "1" and res.parses
        # A middle the windows accept but the whole file does not (a name bound twice is
        # fine; an unmatched bracket further down is not: the file after the windows is
        # broken here on purpose) is not shown as parsing.
        broken = right + "\n)\n"
        res = engine.complete(CompletionRequest(left, broken, mode=Mode.CONSTRAINED,
                                                max_tokens=4))
        assert constraint_texts(left, broken).right == want.right  # the break is not sent
        assert not res.parses and res.middle is None
    finally:
        peer.stop()
