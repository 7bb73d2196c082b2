"""Fixtures for the fim tests: the random model engine and a slow exact reference language."""

from __future__ import annotations

import pytest

from fim.decoding import parses
from fim.engines.transformers_engine import backend_from_loaded
from quotient.constraint import LanguageMode, Scope


class ReferenceState:
    """Exact but slow: every text is viable, completeness is ``ast.parse`` of the whole file."""

    __slots__ = ("lang", "text")

    def __init__(self, lang: ReferenceLanguage, text: str) -> None:
        self.lang = lang
        self.text = text

    def feed(self, text: str) -> ReferenceState:
        return ReferenceState(self.lang, self.text + text)

    def is_complete(self) -> bool:
        return parses(self.lang.left + self.text + self.lang.right)


class ReferenceLanguage:
    # Nothing is rejected while feeding and completeness is the parser's answer: what
    # ``NONE`` promises (exact completeness, no early rejection).
    mode = LanguageMode.NONE

    def __init__(self, left: str, right: str, scope: Scope = Scope.FREE) -> None:
        self.left, self.right, self.scope = left, right, scope
        self.built = 1

    @classmethod
    def for_python(cls, left: str, right: str, scope: Scope = Scope.FREE) -> ReferenceLanguage:
        return cls(left, right, scope)

    def check_region(self) -> None:
        return None  # decide on the whole text

    def initial(self) -> ReferenceState:
        return ReferenceState(self, "")


@pytest.fixture(scope="session")
def random_loaded():
    from fim.engines.transformers_engine import load_model

    return load_model("random:santacoder", device="cpu", dtype="fp32")


@pytest.fixture(scope="session")
def reference_engine(random_loaded):
    from fim.api import Engine

    return Engine(backend_from_loaded(random_loaded), language_factory=ReferenceLanguage.for_python)


@pytest.fixture(scope="session")
def engine(random_loaded):
    from fim.api import Engine

    return Engine(backend_from_loaded(random_loaded), window=256)
