"""Each engine's OpenMP runtime is loaded with the wait policy it wants
(``fim.engines.loading``): torch's idle threads sleep, llama.cpp's keep the runtime's default,
and a user's own ``OMP_WAIT_POLICY`` is never changed."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

from fim.engines.loading import OMP_WAIT_POLICY, idle_threads_sleep, load_backend

ENGINE_MODULE = "fim.engines.transformers_engine"


def test_idle_threads_sleep_while_torch_loads_and_the_setting_is_taken_back(monkeypatch):
    monkeypatch.delenv(OMP_WAIT_POLICY, raising=False)
    with idle_threads_sleep():
        assert os.environ[OMP_WAIT_POLICY] == "PASSIVE"
    # A llama.cpp loaded later in this process must not read it.
    assert OMP_WAIT_POLICY not in os.environ
    with pytest.raises(RuntimeError), idle_threads_sleep():
        raise RuntimeError("an import that fails")
    assert OMP_WAIT_POLICY not in os.environ


def test_a_users_own_policy_is_left_alone(monkeypatch):
    monkeypatch.setenv(OMP_WAIT_POLICY, "ACTIVE")
    with idle_threads_sleep():
        assert os.environ[OMP_WAIT_POLICY] == "ACTIVE"
    assert os.environ[OMP_WAIT_POLICY] == "ACTIVE"


class _SeesTheImport:
    """A meta path finder that only notes the policy when the transformers engine's module is
    imported (and leaves the import to the real finders)."""

    def __init__(self) -> None:
        self.policy: list[str | None] = []

    def find_spec(self, name, path=None, target=None):
        if name == ENGINE_MODULE:
            self.policy.append(os.environ.get(OMP_WAIT_POLICY))
        return None


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_the_transformers_engine_is_imported_with_idle_threads_sleeping(monkeypatch):
    monkeypatch.delenv(OMP_WAIT_POLICY, raising=False)
    monkeypatch.delitem(sys.modules, ENGINE_MODULE, raising=False)
    seen = _SeesTheImport()
    monkeypatch.setattr(sys, "meta_path", [seen, *sys.meta_path])
    backend = load_backend("random:santacoder", engine="transformers", slots=1)
    assert backend.step_model.vocab_size > 0
    assert seen.policy == ["PASSIVE"]
    assert OMP_WAIT_POLICY not in os.environ
