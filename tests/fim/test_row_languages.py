"""The vLLM server's rows build their languages in child processes on a GPU server and on
threads on a CPU one, unless ``SEAM_LANGUAGE_PROCESSES`` says otherwise; a bad value is a
clear error at load."""

from __future__ import annotations

import pytest

from fim.vllm.row_languages import (
    LANGUAGE_PROCESSES,
    PROCESSES_ENV,
    server_languages,
    thread_languages,
)


def test_a_gpu_server_builds_in_child_processes_by_default(monkeypatch):
    monkeypatch.delenv(PROCESSES_ENV, raising=False)
    cache = server_languages("cuda")
    try:
        assert cache.processes is not None and cache._pool is None
        assert len(cache.processes._children) == LANGUAGE_PROCESSES
    finally:
        cache.close()


def test_a_cpu_server_builds_on_threads_by_default(monkeypatch):
    monkeypatch.delenv(PROCESSES_ENV, raising=False)
    cache = server_languages("cpu")
    assert cache.processes is None and cache._pool is not None
    cache.close()


def test_the_variable_overrides_the_device(monkeypatch):
    monkeypatch.setenv(PROCESSES_ENV, "0")
    cache = server_languages("cuda")
    assert cache.processes is None and cache._pool is not None
    assert thread_languages().processes is None
    cache.close()
    monkeypatch.setenv(PROCESSES_ENV, "1")
    cache = server_languages("cpu")
    try:
        assert cache.processes is not None and len(cache.processes._children) == 1
    finally:
        cache.close()


@pytest.mark.parametrize("raw", ["two", "-1", "1.5"])
def test_a_bad_value_is_a_clear_error(monkeypatch, raw):
    monkeypatch.setenv(PROCESSES_ENV, raw)
    with pytest.raises(ValueError, match=f"{PROCESSES_ENV} must be a whole number"):
        server_languages("cuda")
