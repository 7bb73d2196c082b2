"""The ``threads`` setting reaches the llama.cpp engine of a running ``seam serve`` and
applies from the next request on, without a reload (tiny random model, exported to GGUF)."""

from __future__ import annotations

import os

import pytest

from fim.engines.model_specs import llama_cpp_available
from tests.support.raw_client import SeamProcess

pytestmark = [pytest.mark.timeout(600),
              pytest.mark.skipif(not llama_cpp_available(),
                                 reason="llama-cpp-python is not installed"),
              pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2,
                                 reason="one CPU: there is no count to pin below it")]

SETTINGS = {"model": "random:santacoder", "engine": "llama.cpp", "constrained": False,
            "timeBudgetMs": 60000, "threads": 1}


def _asked(srv, line: int) -> None:
    reply = srv.inline("file:///a.py", line, 11, timeout=240)
    assert "result" in reply, reply


def test_a_pinned_count_applies_from_load_and_changes_live(tmp_path) -> None:
    with SeamProcess(tmp_path) as srv:
        srv.initialize({"seam": SETTINGS})
        srv.notify("initialized", {})
        assert srv.wait_loaded()["state"] == "ready"
        # The warm-up already ran with the pinned count.
        assert "llama.cpp threads" in srv.log_text() and "-> 1 (pinned)" in srv.log_text()
        srv.open("file:///a.py", "def f(x):\n    return \n\ndef g(y):\n    return \n")
        _asked(srv, 1)
        srv.notify("workspace/didChangeConfiguration",
                   {"settings": {"seam": {**SETTINGS, "threads": 2}}})
        _asked(srv, 4)
        assert "1 -> 2 (pinned)" in srv.log_text()
        assert srv.log_text().count("model runtime:") == 1  # no reload
        assert srv.status()["settings"]["threads"] == 2
