"""Fixtures for the fim tests: the random model engine, plain and over the slow exact reference
language (`tests.support.reference_language`)."""

from __future__ import annotations

import pytest

from fim.engines.transformers_engine import backend_from_loaded
from tests.support.reference_language import ReferenceLanguage


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
