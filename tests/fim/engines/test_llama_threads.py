"""The llama.cpp engine runs the thread count its governor chooses, and changes it only
between requests: on the tiny random model exported to GGUF (no download)."""

from __future__ import annotations

import pytest

from fim.engines.cpu_load import LoadMonitor, ThreadSource
from fim.engines.model_specs import llama_cpp_available

pytestmark = pytest.mark.skipif(not llama_cpp_available(),
                                reason="llama-cpp-python is not installed")


class _Replayed:
    """Samples in /proc's format fed to a real :class:`LoadMonitor`: each second, ``busy``
    CPUs kept busy by other processes (the tests cannot make the machine quiet or busy)."""

    def __init__(self, cpus: int) -> None:
        from tests.fim.engines.test_cpu_load import sample

        self._sample = sample
        self.monitor = LoadMonitor(cpus, window_s=1.5)
        self.t = 0.0
        self.ticks = [[0, 0] for _ in range(cpus)]
        self._record(0)

    def _record(self, running: int) -> None:
        self.monitor.record(self._sample(self.t, [(b, 0, i) for b, i in self.ticks], running,
                                         own=0))

    def seconds(self, n: int, busy: int) -> None:
        for _ in range(n):
            self.t += 1.0
            for c, cpu in enumerate(self.ticks):
                cpu[0 if c < busy else 1] += 100
            self._record(busy)


@pytest.fixture(scope="module")
def backend():
    from fim.engines.loading import load_backend

    return load_backend("random:santacoder", engine="llama.cpp", slots=2, window=256)


def test_the_engine_applies_the_count_it_chose_between_requests_only(backend) -> None:
    step, governor = backend.step_model, backend.threads
    assert governor is not None and governor.auto
    if governor.most < 2:
        pytest.skip("one CPU: there is no count to choose")
    load = _Replayed(governor.cpus)
    governor.monitor = load.monitor
    ids = backend.tokenizer.encode("def add(a, b):\n    return a + b\n")

    load.seconds(3, busy=0)
    step.prefill(ids)
    assert step.last_threads.source is ThreadSource.MEASURED
    assert step.llama.threads == governor.most  # a quiet machine: every CPU
    # The machine gets busy while a request decodes: its steps keep the count.
    load.seconds(3, busy=governor.cpus - 1)
    for token in ids[:5]:
        step.step(token)
    assert step.llama.threads == governor.most
    # The next request runs with one thread per core others leave free.
    step.prefill(ids[:-3])
    assert step.llama.threads == 1
    assert step.llama.lib.llama_n_threads_batch(step.llama.ctx) == 1
    # Pinned, the count ignores the load.
    governor.pin(governor.most)
    step.prefill(ids)
    assert step.llama.threads == governor.most
    governor.pin(None)
    step.prefill(ids[:-2])
    assert step.llama.threads == 1


def test_a_fixed_count_is_pinned_from_the_start() -> None:
    from fim.engines.loading import load_backend

    pinned = load_backend("random:santacoder", engine="llama.cpp", slots=1, window=128,
                          threads=1)
    assert pinned.threads is not None and pinned.threads.pinned == 1
    pinned.step_model.prefill(pinned.tokenizer.encode("x = 1\n"))
    assert pinned.step_model.llama.threads == 1
    assert "1 threads" in pinned.description
