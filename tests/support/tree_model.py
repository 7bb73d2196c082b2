"""A model written as a tree: what it prefers after each generated prefix, for tests of
decoding that looks past the next token (``fim.alternatives``) through the engine and the
server, with log-probabilities known in advance."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from fim.api import Engine
from fim.engines.backend import Backend
from fim.engines.step_model import StepModel
from fim.templates import detect_template

#: ``make_tree(one, eos)``: ``one(text)`` is the id of a one-token text.
TreeMaker = Callable[[Callable[[str], int], int], dict[tuple[int, ...], dict[int, float]]]


class Tree(StepModel):
    """Logits by the generated prefix: ``tree[prefix] = {token: logit}``; the rest 0, and
    the end of text where the tree says nothing."""

    def __init__(self, vocab_size: int, tree: dict[tuple[int, ...], dict[int, float]],
                 eos: int) -> None:
        super().__init__()
        self._size, self.tree, self.eos = vocab_size, tree, eos
        self.path: list[int] = []
        self.prefills = 0
        self.steps = 0

    @property
    def vocab_size(self) -> int:
        return self._size

    def _logits(self) -> np.ndarray:
        out = np.zeros(self._size, dtype=np.float32)
        for tid, logit in self.tree.get(tuple(self.path), {self.eos: 40.0}).items():
            out[tid] = logit
        return out

    def prefill(self, ids, interrupt=None, progress=None, keep_cached=False, hold=False):
        self.prefills += 1
        self.path = []
        return self._logits()

    def step(self, token):
        self.steps += 1
        self.path.append(token)
        return self._logits()

    def _forward(self, slot, ids, interrupt):  # pragma: no cover - prefill/step are scripted
        raise NotImplementedError

    _truncate = _copy_prefix = _clear = _forward


def tree_engine_over(backend: Backend, make_tree: TreeMaker,
                     stops: tuple[str, ...] | None = None) -> tuple[Engine, Tree]:
    """An engine over ``backend`` (its tokenizer and vocabulary) whose model is the tree;
    no token healing, so the tree's first token is the middle's.  ``stops``: the template's
    stop tokens instead of its own (a model with several, as Qwen's has)."""
    tok = backend.tokenizer
    eos = tok.token_id("<|endoftext|>")

    def one(text: str) -> int:
        ids = tok.encode(text)
        assert len(ids) == 1, (text, ids)
        return ids[0]

    model = Tree(backend.step_model.vocab_size, make_tree(one, eos), eos)
    backend.step_model = model
    template = detect_template(tok)
    if stops is not None:
        template = dataclasses.replace(template, stops=stops)
    return Engine(backend, heal=False, template=template), model


def ends_then_detours(said: list[int], detour: list[int], end: int) -> dict:
    """A model that says ``said``, then prefers ``end`` (a stop token, or a line break) just
    ahead of ``detour``'s first token, and says the rest of ``detour`` after it: the tree of
    a model whose end a constraint refuses (``tests/fim/test_refused_end.py``)."""
    tree: dict[tuple[int, ...], dict[int, float]] = {}
    for k, tid in enumerate(said):
        tree[tuple(said[:k])] = {tid: 50.0}
    tree[tuple(said)] = {end: 50.0, detour[0]: 49.0}
    path = said + detour
    for k in range(len(said) + 1, len(path)):
        tree[tuple(path[:k])] = {path[k]: 50.0}
    return tree


def greedy_trap(one: Callable[[str], int], eos: int) -> dict:
    """``x = |``: greedy writes ``1`` (logit 10 against ``None``'s 9.5), after which the model
    wants ``)`` (forbidden) and ends only with a small probability; after ``None`` it ends at
    once. After ``y`` (a third first token) it ends too, but ``y`` itself is unlikely.
    Log-probabilities (1,024 ids): ``None`` -1.0, ``1`` -0.5 - 6.0, ``y`` -8.5."""
    return {
        (): {one("1"): 10.0, one("None"): 9.5, one("y"): 2.0},
        (one("1"),): {one(")"): 12.0, eos: 6.0},
        (one("None"),): {eos: 30.0},
        (one("y"),): {eos: 30.0},
    }
