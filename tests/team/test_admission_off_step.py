"""A request admitted mid-decode with a large file: its language is built on the language
workers, not in the engine step, and the running request's steps neither wait for that build
nor change (``fim.vllm.processor``: ``SeamRows.add`` starts the build, a row joins it when its
first mask is due, ``JoinCounts`` counts the joins that waited).

Structural, not timed: the newcomer's build is held at a gate the test opens, so a step that
built or waited for it inline would fail (a build on the step's thread never reaches the
gate's release; a step that joined it would stop at the gate).  The timing itself is the step
benchmark's (``benchmarks/bench_vllm_step.py``: the step time while requests are admitted).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from tests.support.team import need_vllm

need_vllm()

import torch  # noqa: E402
from vllm import SamplingParams  # noqa: E402
from vllm.v1.sample.logits_processor import BatchUpdate  # noqa: E402

from fim.language_cache import LanguageCache, python_language  # noqa: E402
from fim.options import Scope  # noqa: E402
from fim.vllm.processor import SeamRows  # noqa: E402
from fim.vllm.row_languages import ROW_LANGUAGES  # noqa: E402
from fim.vllm.rows import SeamArgs  # noqa: E402

LEFT, RIGHT = "def f(a, b):\n    total = a +", "\n    return total\n"


def _large_file() -> tuple[str, str]:
    """The standard library's argparse (about 100 kB), cut at a line in its middle."""
    text = (Path(json.__file__).resolve().parent.parent / "argparse.py").read_text("utf-8")
    cut = text.index("\n", len(text) // 2) + 1
    return text[:cut] + "    x = ", "\n" + text[cut:]


class _Gate:
    """A language factory that holds the large file's build until ``open`` (other files are
    built at once), recording the threads builds ran on."""

    def __init__(self, left: str) -> None:
        self.left, self.opened, self.threads = left, threading.Event(), []

    def __call__(self, left: str, right: str, scope: Scope):
        if left == self.left:
            self.threads.append(threading.get_ident())
            if not self.opened.wait(timeout=60):
                raise TimeoutError("the large file's build waited for a gate nobody opened")
        return python_language(left, right, scope)


def _params(left: str, right: str) -> SamplingParams:
    return SamplingParams(temperature=0.0, extra_args=SeamArgs(left, right).to_extra_args())


def _add(rows: SeamRows, index: int, params: SamplingParams, out: list[int]) -> None:
    rows.update(BatchUpdate(batch_size=index + 1, removed=[], moved=[],
                            added=[(index, params, [1], out)]))


def test_a_large_file_admitted_mid_decode_never_stalls_the_running_row(table,
                                                                       random_tokenizer):
    big_left, big_right = _large_file()
    gate = _Gate(big_left)
    rows = SeamRows(table, LanguageCache(ROW_LANGUAGES, factory=gate, workers=2))
    alone = SeamRows(table, LanguageCache(ROW_LANGUAGES, workers=0))  # the reference
    running, reference, newcomer = [], [], []
    try:
        _add(rows, 0, _params(LEFT, RIGHT), running)
        _add(alone, 0, _params(LEFT, RIGHT), reference)
        rows.rows[0].pending.join()  # the running row's language is built: it is decoding
        _add(rows, 1, _params(big_left, big_right), newcomer)  # returns: the build waits
        assert not rows.rows[1].ready
        generator = torch.Generator().manual_seed(7)
        for token in random_tokenizer.encode(" b * 2", add_special_tokens=False):
            logits = torch.randn(1, table.size, generator=generator) * 4
            mine, theirs = logits.clone(), logits.clone()
            # a step of the running row while the newcomer builds (Model Runner V2 masks the
            # rows of the step by slot)
            rows.advance([0])
            rows.mask(mine, [(0, 0)])
            alone.advance()
            alone.mask(theirs)
            assert torch.equal(mine, theirs)  # the same mask as with no newcomer at all
            best = int(torch.argmax(mine[0]))
            running.append(best)
            reference.append(best)
            del token
        assert rows.counts.blocked == 0 and not rows.rows[1].ready
        gate.opened.set()
        rows.rows[1].pending.join()  # as the forward pass would have covered the build
        both = torch.randn(2, table.size, generator=generator) * 4
        rows.advance()
        rows.mask(both)  # the newcomer's first mask: its language is there
        assert int(torch.isfinite(both[1]).sum()) >= 1
    finally:
        gate.opened.set()
        rows.languages.close()
    assert (rows.counts.joined, rows.counts.blocked, rows.counts.blocked_s) == (2, 0, 0.0)
    assert gate.threads and threading.get_ident() not in gate.threads  # built on a worker


def test_a_row_whose_first_mask_comes_before_its_build_waits_and_is_counted(table):
    gate = _Gate(LEFT)
    rows = SeamRows(table, LanguageCache(ROW_LANGUAGES, factory=gate, workers=1))
    out: list[int] = []
    try:
        _add(rows, 0, _params(LEFT, RIGHT), out)
        pending, entered = rows.rows[0].pending, threading.Event()
        join = pending.join

        def joining():
            entered.set()
            return join()

        pending.join = joining
        # the gate opens once the mask has started to wait for the build
        opener = threading.Thread(target=lambda: entered.wait(60) and gate.opened.set())
        opener.start()
        logits = torch.randn(1, table.size)
        rows.advance()
        rows.mask(logits)
        opener.join()
    finally:
        gate.opened.set()
        rows.languages.close()
    assert (rows.counts.joined, rows.counts.blocked) == (1, 1) and rows.counts.blocked_s > 0
    assert int(torch.isfinite(logits[0]).sum()) == 1


def test_a_warm_up_builds_the_language_its_next_request_takes_and_is_not_constrained(table):
    rows = SeamRows(table, LanguageCache(ROW_LANGUAGES, workers=1))
    warm = SamplingParams(max_tokens=1, extra_args=SeamArgs(LEFT, RIGHT, warm=True)
                          .to_extra_args())
    try:
        _add(rows, 0, warm, [])
        assert not rows.rows and rows.languages.built == 1  # building, and no row kept
        _add(rows, 0, _params(LEFT + " b", RIGHT), [])  # the editor typed on
        hit = rows.rows[0].pending.join()
    finally:
        rows.languages.close()
    assert hit.reused and rows.languages.built == 1  # the warm-up's build served it
    assert hit.state is hit.language.cache.feed(hit.language.initial, " b")
