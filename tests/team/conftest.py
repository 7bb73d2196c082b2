"""Fixtures for the vLLM plugin tests: the token table of the random test tokenizer (the rule
for tests that need vLLM itself is in ``tests/support/team.py``)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def random_tokenizer():
    from fim.engines.random_model import build_tokenizer

    return build_tokenizer()


@pytest.fixture(scope="session")
def table(random_tokenizer):
    from fim.vllm.rows import TokenTable

    return TokenTable.from_tokenizer(random_tokenizer, len(random_tokenizer))
