"""How many CPU threads llama.cpp should run, from the load *other* processes put on the CPUs.

Why: llama.cpp splits each matrix product of a forward pass across its threads and waits at a
barrier for the slowest one.  When another process (a build, a test run) keeps one of two
cores busy, one of two threads runs at about half speed and every step waits for it: on this
project's 2-core machine a batch of completions took 2.5x as long with two threads and one busy
core (issue 18).  One thread fewer than the cores others leave free avoids the wait; on a quiet
machine every core is used.

How the load is measured (Linux ``/proc``; elsewhere there is no measurement and the engine
keeps every core, the old behaviour):

* CPU time: between two samples, the busy time of the CPUs this process may run on (from
  ``/proc/stat``) minus this process's own CPU time (``/proc/self/stat``, all its threads, so
  llama.cpp's own threads never count as "others");
* when the CPUs had no idle time in an interval, others may have wanted more than they got
  (they shared the cores with our threads), so their demand is taken as at least the number of
  their runnable threads (``procs_running`` minus this process's running threads).

A :class:`LoadMonitor` samples once a second on a daemon thread and averages the last few
seconds; :class:`ThreadGovernor` turns that into a thread count with :class:`ThreadPolicy`'s
hysteresis (so a load near a boundary does not make the count flap) or returns the count the
user pinned.  The engine asks the governor before each run of the model (a prefill starts
every request), never in the middle of a decode.  Parsing and the policy are pure functions
over recorded ``/proc`` text, which the tests replay.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

log = logging.getLogger(__name__)

#: Most threads worth running: more threads than cores only slow llama.cpp down.
MAX_THREADS = 8
#: Seconds between the monitor's samples, and how far back its average looks.
SAMPLE_EVERY_S = 1.0
WINDOW_S = 5.0
#: An interval whose idle time is below this share of the CPUs' time was saturated: others
#: may have wanted more CPU than they got.
SATURATED_IDLE_SHARE = 0.05


# ----- reading /proc (pure: text in, numbers out) ---------------------------------------------

@dataclass(frozen=True)
class CpuTimes:
    """``/proc/stat`` over a set of CPUs: clock ticks in total and idle, and the runnable
    threads of the whole system."""

    total: int
    idle: int
    running: int


def parse_proc_stat(text: str, cpus: Iterable[int] | None = None) -> CpuTimes:
    """The ticks of ``cpus`` (all CPUs when ``None``) and ``procs_running`` from ``/proc/stat``.

    Total is user + nice + system + idle + iowait + irq + softirq + steal (guest time is
    already inside user); idle is idle + iowait.  Steal (time the hypervisor gave other
    machines) counts as busy: it is CPU this process cannot have.  Raises ``ValueError`` when
    the text holds none of the CPUs asked for.
    """
    wanted = None if cpus is None else {f"cpu{n}" for n in cpus}
    total = idle = 0
    found = False
    running = 0
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        name = fields[0]
        if name == "procs_running" and len(fields) > 1:
            running = int(fields[1])
            continue
        if not name.startswith("cpu") or (name == "cpu") != (wanted is None):
            continue
        if wanted is not None and name not in wanted:
            continue
        ticks = [int(x) for x in fields[1:9]]
        if len(ticks) < 4:
            raise ValueError(f"/proc/stat line {name!r} has {len(ticks)} fields")
        ticks += [0] * (8 - len(ticks))
        total += sum(ticks)
        idle += ticks[3] + ticks[4]
        found = True
    if not found:
        raise ValueError("no CPU lines for the CPUs asked for in /proc/stat")
    return CpuTimes(total, idle, running)


@dataclass(frozen=True)
class TaskStat:
    """One line of ``/proc/<pid>/stat`` or ``/proc/<pid>/task/<tid>/stat``."""

    state: str
    #: user + system time in clock ticks (for a process: all its threads, live or ended)
    cpu: int


def parse_task_stat(text: str) -> TaskStat:
    """The state letter and utime + stime of a ``stat`` line.  The command name (field 2)
    may hold spaces and parentheses, so fields are counted after its last ``)``."""
    head, sep, rest = text.rpartition(")")
    fields = rest.split()
    if not sep or len(fields) < 13:
        raise ValueError("not a /proc stat line")
    return TaskStat(fields[0], int(fields[11]) + int(fields[12]))


@dataclass(frozen=True)
class CpuSample:
    """What the monitor reads at one moment."""

    at: float  # time.monotonic()
    cpu: CpuTimes
    #: this process's CPU ticks (all its threads)
    own: int
    #: this process's threads in state R (running or waiting for a CPU)
    own_running: int


def sample_from_text(at: float, proc_stat: str, self_stat: str, task_states: Iterable[str],
                     cpus: Iterable[int] | None = None) -> CpuSample:
    """A :class:`CpuSample` from recorded ``/proc`` text (what the tests replay)."""
    return CpuSample(at, parse_proc_stat(proc_stat, cpus), parse_task_stat(self_stat).cpu,
                     sum(1 for s in task_states if s == "R"))


def others_load(before: CpuSample, after: CpuSample, cpus: int) -> float | None:
    """Cores other processes kept busy between two samples (0 to ``cpus``), or ``None`` when
    the samples hold no time between them.

    Their CPU time is the CPUs' busy time minus this process's; in an interval without idle
    time it is at least the number of runnable threads that were not ours at its end (they
    queued behind ours, so what they got understates what they wanted).
    """
    total = after.cpu.total - before.cpu.total
    if total <= 0 or cpus < 1:
        return None
    idle = max(0, after.cpu.idle - before.cpu.idle)
    busy = max(0, total - idle)
    own = max(0, after.own - before.own)
    per_cpu = total / cpus
    load = max(0, busy - own) / per_cpu
    if idle < SATURATED_IDLE_SHARE * total:
        load = max(load, float(max(0, after.cpu.running - after.own_running)))
    return min(float(cpus), load)


def window_load(samples: list[CpuSample], cpus: int) -> float | None:
    """The time-weighted mean of :func:`others_load` over consecutive samples (``None``
    with fewer than two samples or no time between them)."""
    weighted = seconds = 0.0
    for a, b in zip(samples, samples[1:], strict=False):
        load = others_load(a, b, cpus)
        dt = b.at - a.at
        if load is None or dt <= 0:
            continue
        weighted += load * dt
        seconds += dt
    return weighted / seconds if seconds > 0 else None


# ----- the policy (pure) ---------------------------------------------------------------------

@dataclass(frozen=True)
class ThreadPolicy:
    """Threads for the cores others leave free, with hysteresis.

    With ``free = cpus - load`` cores, the count drops as soon as ``free`` falls below the
    count minus one half (the nearest whole number of free cores is lower), and rises only when
    ``free`` is at least ``raise_margin`` above the next boundary: a count chosen under a
    light, varying load (between 0.25 and 0.5 of a core on 2 cores) stays.  Dropping early is
    the cheaper mistake: a thread too many on a busy core slowed a batch 2.5x here, a thread too
    few on a quiet machine costs the share of the idle core.
    """

    raise_margin: float = 0.25

    def choose(self, load: float, cpus: int, most: int, current: int | None) -> int:
        """The thread count for ``load`` cores taken by others out of ``cpus``, at most
        ``most``; ``current`` is the count in force (``None``: none yet)."""
        most = max(1, most)
        free = max(0.0, cpus - max(0.0, load))
        if current is None:
            return max(1, min(most, math.floor(free + 0.5)))
        n = max(1, min(most, current))
        while n > 1 and free < n - 0.5:
            n -= 1
        while n < most and free >= n + 0.5 + self.raise_margin:
            n += 1
        return n


class ThreadSource(Enum):
    """Why the governor chose its count."""

    PINNED = "pinned"  # the user's setting
    MEASURED = "measured"  # from the others' load
    UNMEASURED = "unmeasured"  # no measurement (yet, or not on this system): the count stays


@dataclass(frozen=True)
class ThreadChoice:
    """A thread count and where it came from (``load``: the others' cores, when measured)."""

    threads: int
    source: ThreadSource
    load: float | None = None


# ----- the impure parts: the monitor and the governor ----------------------------------------

_shared_lock = threading.Lock()
#: the process's monitor (``False``: /proc cannot be read here)
_shared: LoadMonitor | bool | None = None

def allowed_cpus() -> list[int] | None:
    """The CPUs this process may run on, or ``None`` where the system does not say."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def cpu_count() -> int:
    """How many CPUs this process may run on."""
    cpus = allowed_cpus()
    return len(cpus) if cpus else (os.cpu_count() or 1)


def default_threads() -> int:
    """Every CPU this process may use, at most :data:`MAX_THREADS`."""
    return max(1, min(MAX_THREADS, cpu_count()))


def _own_running(proc: Path) -> int:
    n = 0
    try:
        tasks = list((proc / "self" / "task").iterdir())
    except OSError:
        return 0
    for task in tasks:
        try:
            if parse_task_stat((task / "stat").read_text()).state == "R":
                n += 1
        except (OSError, ValueError):
            continue  # the thread ended between the listing and the read
    return n


def read_sample(proc: Path = Path("/proc"), cpus: Iterable[int] | None = None) -> CpuSample:
    """Read a :class:`CpuSample` now.  Raises ``OSError``/``ValueError`` where ``/proc`` is
    missing or unreadable.

    This process's running threads are counted before and after ``/proc/stat`` is read and
    the larger count kept: a thread of ours that just stopped must not pass for someone else's
    (erring that way under-counts others, never invents them).
    """
    first = _own_running(proc)
    stat = (proc / "stat").read_text()
    own = parse_task_stat((proc / "self" / "stat").read_text()).cpu
    running = max(first, _own_running(proc))
    return CpuSample(time.monotonic(), parse_proc_stat(stat, cpus), own, running)


class LoadMonitor:
    """The others' load over the last :data:`WINDOW_S` seconds.

    :meth:`start` samples on a daemon thread every :data:`SAMPLE_EVERY_S` (a few small file
    reads); :meth:`record` adds a sample taken elsewhere (the tests replay recorded ones).
    """

    def __init__(self, cpus: int, window_s: float = WINDOW_S,
                 reader: Callable[[], CpuSample] | None = None) -> None:
        self.cpus = max(1, cpus)
        self.window_s = window_s
        self._reader = reader
        self._samples: deque[CpuSample] = deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def for_this_process(cls) -> LoadMonitor | None:
        """The process's one monitor of this system's ``/proc``, sampling from its first use
        on (every engine loaded in the process shares it), or ``None`` where ``/proc`` cannot
        be read."""
        global _shared
        with _shared_lock:
            if _shared is None:
                allowed = allowed_cpus()
                try:
                    read_sample(cpus=allowed)
                except (OSError, ValueError):
                    _shared = False
                else:
                    _shared = cls(len(allowed) if allowed else cpu_count(),
                                  reader=lambda: read_sample(cpus=allowed)).start()
            return _shared or None

    def record(self, sample: CpuSample) -> None:
        with self._lock:
            self._samples.append(sample)
            # Keep one sample older than the window, so the window is covered whole.
            while len(self._samples) > 2 and self._samples[1].at <= sample.at - self.window_s:
                self._samples.popleft()

    def others_load(self) -> float | None:
        """The others' cores over the window, or ``None`` before two samples."""
        with self._lock:
            samples = list(self._samples)
        return window_load(samples, self.cpus)

    def start(self) -> LoadMonitor:
        """Sample now and then every :data:`SAMPLE_EVERY_S` seconds until :meth:`stop`."""
        if self._reader is None or self._thread is not None:
            return self
        self._sample_once()
        self._thread = threading.Thread(target=self._run, name="seam-cpu-load", daemon=True)
        self._thread.start()
        return self

    def _sample_once(self) -> bool:
        assert self._reader is not None
        try:
            self.record(self._reader())
        except (OSError, ValueError) as exc:
            log.warning("CPU load not measurable (%s); threads stay as they are", exc)
            return False
        return True

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY_S):
            if not self._sample_once():
                return

    def stop(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2 * SAMPLE_EVERY_S)


class ThreadGovernor:
    """The thread count for the next run of the model: the pinned one, or one chosen from the
    others' load (:class:`ThreadPolicy`).  Ask :meth:`choose` only between requests."""

    def __init__(self, most: int, cpus: int, monitor: LoadMonitor | None,
                 pinned: int | None = None, policy: ThreadPolicy | None = None) -> None:
        self.most = max(1, most)
        self.cpus = max(1, cpus)
        self.monitor = monitor
        self.policy = policy or ThreadPolicy()
        self.pinned: int | None = None
        self.pin(pinned)
        self.last = ThreadChoice(pinned or self.most, ThreadSource.PINNED if pinned
                                 else ThreadSource.UNMEASURED)

    def pin(self, threads: int | None) -> None:
        """Fix the count (``None``: choose it from the load again)."""
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be at least 1, not {threads}")
        if threads is not None and threads > self.cpus and threads != self.pinned:
            # More threads than CPUs only make them wait on each other (256 on 2 CPUs made
            # suggestions 15 times slower): the count is honoured, and the user told.
            log.warning("threads is %d but this process may use %d CPU%s: llama.cpp will be "
                        "much slower than with %d; set \"threads\" to at most %d, or to "
                        "\"auto\"", threads, self.cpus, "" if self.cpus == 1 else "s",
                        self.cpus, self.cpus)
        self.pinned = threads

    @property
    def auto(self) -> bool:
        return self.pinned is None

    def choose(self) -> ThreadChoice:
        """The count for the run that starts now (remembered for the next choice)."""
        if self.pinned is not None:
            choice = ThreadChoice(self.pinned, ThreadSource.PINNED)
        else:
            load = self.monitor.others_load() if self.monitor is not None else None
            current = None if self.last.source is ThreadSource.PINNED else self.last.threads
            if load is None:
                choice = ThreadChoice(current or self.most, ThreadSource.UNMEASURED)
            else:
                choice = ThreadChoice(self.policy.choose(load, self.cpus, self.most, current),
                                      ThreadSource.MEASURED, load)
        if choice.threads != self.last.threads:
            log.info("llama.cpp threads %d -> %d (%s%s)", self.last.threads, choice.threads,
                     choice.source.value, "" if choice.load is None
                     else f": other processes keep {choice.load:.2f} of {self.cpus} CPUs busy")
        self.last = choice
        return choice
