"""vLLM's own counters around a team benchmark, read from its Prometheus ``/metrics`` page.

The team benchmark measures latency on the editors' side; whether one server really served N
users *together* shows only on the server: how many requests it decoded in the same engine
steps, how many prompt tokens each request sent (so a setting such as ``contextTokens`` is
seen to reach vLLM) and how many of them its automatic prefix cache served.  vLLM 0.32
exports these as Prometheus metrics (``vllm/v1/metrics/loggers.py``): counters such as
``vllm:prefix_cache_queries`` and ``vllm:prefix_cache_hits`` (in tokens), which the
Prometheus client writes with a ``_total`` suffix, and the gauge
``vllm:num_requests_running``.  This module parses that text, takes the difference of the
counters over one team's run, and samples the gauge while it runs.
"""

from __future__ import annotations

import http.client
import math
import re
import threading
import time
import urllib.request
from dataclasses import astuple, dataclass

#: ``name{labels} value [timestamp]``: the labels are kept whole (their values may hold
#: spaces), the value is Prometheus's float syntax (``NaN``, ``+Inf`` included).
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{.*\})?\s+(\S+)(?:\s+\S+)?$")


def parse_metrics(text: str) -> dict[str, float]:
    """Each sample name's value summed over its label sets (vLLM labels every metric with
    the model and the engine index: one server, one sum).  Comments, blank lines, lines
    that are not samples, and values that are not numbers are skipped."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        if math.isnan(value):
            continue
        out[m.group(1)] = out.get(m.group(1), 0.0) + value
    return out


def _counter(metrics: dict[str, float], name: str) -> float:
    """A counter by its vLLM name, as the Prometheus client writes it (``_total``) or not."""
    return metrics.get(name + "_total", metrics.get(name, 0.0))


@dataclass(frozen=True)
class Counters:
    """The server's counters that the team benchmark reports (tokens, unless named)."""

    prefix_queries: float = 0.0
    prefix_hits: float = 0.0
    prompt_tokens: float = 0.0
    generation_tokens: float = 0.0
    requests: float = 0.0  # finished requests, whatever their finish reason
    preemptions: float = 0.0
    #: engine steps and the tokens they ran (vllm:iteration_tokens_total, a histogram)
    steps: float = 0.0
    step_tokens: float = 0.0
    #: finished requests' prompts (vllm:request_prompt_tokens, a histogram): the prompt
    #: tokens counter above also counts requests that were prefilled and then aborted
    finished_prompts: float = 0.0
    finished_prompt_tokens: float = 0.0

    @classmethod
    def from_metrics(cls, metrics: dict[str, float]) -> Counters:
        return cls(
            prefix_queries=_counter(metrics, "vllm:prefix_cache_queries"),
            prefix_hits=_counter(metrics, "vllm:prefix_cache_hits"),
            prompt_tokens=_counter(metrics, "vllm:prompt_tokens"),
            generation_tokens=_counter(metrics, "vllm:generation_tokens"),
            requests=_counter(metrics, "vllm:request_success"),
            preemptions=_counter(metrics, "vllm:num_preemptions"),
            steps=metrics.get("vllm:iteration_tokens_total_count", 0.0),
            step_tokens=metrics.get("vllm:iteration_tokens_total_sum", 0.0),
            finished_prompts=metrics.get("vllm:request_prompt_tokens_count", 0.0),
            finished_prompt_tokens=metrics.get("vllm:request_prompt_tokens_sum", 0.0))

    def minus(self, before: Counters) -> Counters:
        """What happened between ``before`` and this reading (every field: one added later
        is differenced too, not left at its default)."""
        return Counters(*(a - b for a, b in zip(astuple(self), astuple(before), strict=True)))

    @property
    def hit_rate(self) -> float | None:
        """Share of the queried prompt tokens the prefix cache held (``None``: no query)."""
        return self.prefix_hits / self.prefix_queries if self.prefix_queries > 0 else None

    @property
    def prompt_per_request(self) -> float | None:
        """Mean prompt tokens of the finished requests (``None``: none finished)."""
        return (self.finished_prompt_tokens / self.finished_prompts
                if self.finished_prompts > 0 else None)


@dataclass(frozen=True)
class Batching:
    """How many requests the server had running, from samples of the gauge."""

    samples: int
    busy: int  # samples with at least one request running
    mean_running: float | None  # over the busy samples
    max_running: int
    mean_waiting: float | None  # over the busy samples: queued behind the batch

    @property
    def busy_share(self) -> float | None:
        return self.busy / self.samples if self.samples else None


def batching(samples: list[tuple[float, float]]) -> Batching:
    """Summarise ``(running, waiting)`` samples: the mean batch while the server was busy
    (idle samples say nothing about batching: the users were reading or typing)."""
    busy = [(r, w) for r, w in samples if r > 0]
    return Batching(
        len(samples), len(busy),
        sum(r for r, _ in busy) / len(busy) if busy else None,
        int(max((r for r, _ in samples), default=0)),
        sum(w for _, w in busy) / len(busy) if busy else None)


def read_metrics(url: str, timeout: float = 10.0) -> dict[str, float]:
    """The server's ``/metrics`` page, parsed; an unreachable page is an ``OSError``, and so
    is one cut off or garbled on the way (``http.client``'s errors are not ``OSError``s: one
    would end the sampler's thread or the benchmark after its run)."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/metrics", timeout=timeout) as resp:
            return parse_metrics(resp.read().decode("utf-8", "replace"))
    except http.client.HTTPException as exc:
        raise OSError(f"{url}/metrics: {exc!r}") from exc


class GaugeSampler:
    """Samples ``vllm:num_requests_running`` and ``..._waiting`` every ``interval`` seconds
    on a thread, from :meth:`start` to :meth:`stop` (a failed read is skipped, counted in
    ``failures``)."""

    def __init__(self, url: str, interval: float = 1.0) -> None:
        self.url, self.interval = url, interval
        self.samples: list[tuple[float, float]] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="vllm-gauges")

    def start(self) -> GaugeSampler:
        self._thread.start()
        return self

    def stop(self) -> Batching:
        self._stop.set()
        self._thread.join()
        return batching(self.samples)

    def _run(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                m = read_metrics(self.url, timeout=max(1.0, self.interval))
            except OSError:  # urllib's errors included
                self.failures += 1
            else:
                self.samples.append((m.get("vllm:num_requests_running", 0.0),
                                     m.get("vllm:num_requests_waiting", 0.0)))
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - t0)))
