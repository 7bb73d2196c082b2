"""Fixtures of the ``seam serve`` tests: a peer on 127.0.0.1 that speaks vLLM's API."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.vllm_peer import VllmPeer


@pytest.fixture
def peer() -> Iterator[VllmPeer]:
    """A running ``VllmPeer`` with its default answer, stopped after the test (a module that
    needs another answer defines its own ``peer``)."""
    running = VllmPeer().start()
    yield running
    running.stop()
