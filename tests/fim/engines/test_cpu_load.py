"""The CPU-load measurement and thread policy of ``fim.engines.cpu_load``, on /proc text.

``data/proc_samples.json`` is two real samples, one second apart, recorded on the project's
2-CPU machine while the recording process spun one thread of its own and a child process spun
another (the machine was also busy with other jobs: load average about 10).  The other samples
are written here in the same format, with numbers chosen so the answer is known.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest

from fim.engines.cpu_load import (
    CpuSample,
    LoadMonitor,
    ThreadGovernor,
    ThreadPolicy,
    ThreadSource,
    others_load,
    parse_proc_stat,
    parse_task_stat,
    read_sample,
    sample_from_text,
    window_load,
)

RECORDED = json.loads((Path(__file__).parent / "data" / "proc_samples.json").read_text())


def proc_stat(per_cpu: list[tuple[int, int, int]], running: int) -> str:
    """``/proc/stat`` text for CPUs given as ``(user, system, idle)`` ticks."""
    lines = [f"cpu{i} {u} 0 {s} {idle} 0 0 0 0 0 0" for i, (u, s, idle) in enumerate(per_cpu)]
    u, s, idle = (sum(c[k] for c in per_cpu) for k in range(3))
    return "\n".join([f"cpu  {u} 0 {s} {idle} 0 0 0 0 0 0", *lines, "intr 1 2 3",
                      "ctxt 99", f"procs_running {running}", "procs_blocked 0", ""])


def self_stat(ticks: int, name: str = "python") -> str:
    """``/proc/self/stat`` of a process that used ``ticks`` of CPU (all user time)."""
    return (f"4242 ({name}) R 1 4242 4242 0 -1 4194304 100 0 0 0 {ticks} 0 0 0 20 0 9 0 "
            "1167 1000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n")


def sample(at: float, per_cpu, running: int, own: int, own_running: int = 1) -> CpuSample:
    return sample_from_text(at, proc_stat(per_cpu, running), self_stat(own),
                            ["R"] * own_running + ["S"] * 3)


# ----- parsing ---------------------------------------------------------------------------------

def test_the_recorded_proc_stat_parses_per_cpu_and_in_total() -> None:
    text = RECORDED["samples"][0]["proc_stat"]
    whole = parse_proc_stat(text)
    cpu0, cpu1 = parse_proc_stat(text, [0]), parse_proc_stat(text, [1])
    both = parse_proc_stat(text, [0, 1])
    assert both.total == cpu0.total + cpu1.total
    # The kernel reads the counters for the total and for each line separately.
    assert both.total == pytest.approx(whole.total, rel=1e-4)
    assert both.idle == cpu0.idle + cpu1.idle > 0
    assert whole.running == 11
    with pytest.raises(ValueError):
        parse_proc_stat(text, [7])  # a CPU the text does not have


def test_steal_is_busy_and_iowait_is_idle() -> None:
    text = "cpu  10 0 0 50 5 0 0 30 0 0\ncpu0 10 0 0 50 5 0 0 30 0 0\nprocs_running 1\n"
    times = parse_proc_stat(text, [0])
    assert (times.total, times.idle) == (95, 55)


def test_task_stat_with_a_command_name_holding_spaces_and_parentheses() -> None:
    stat = parse_task_stat(self_stat(123, name="seam (worker) 2"))
    assert (stat.state, stat.cpu) == ("R", 123)
    recorded = [parse_task_stat(s["self_stat"]).cpu for s in RECORDED["samples"]]
    assert recorded[1] - recorded[0] == 20  # the spinning thread's share of the second
    with pytest.raises(ValueError):
        parse_task_stat("4242 (python R 1")


# ----- the others' load ------------------------------------------------------------------------

def test_this_process_s_own_threads_are_not_others() -> None:
    # Two CPUs, 100 ticks each: our two threads took 196 ticks, 4 were idle.
    a = sample(0.0, [(0, 0, 0), (0, 0, 0)], running=0, own=0)
    b = sample(1.0, [(97, 1, 2), (97, 1, 2)], running=3, own=196, own_running=3)
    assert others_load(a, b, 2) == pytest.approx(0.0)


def test_a_busy_core_elsewhere_counts_as_one() -> None:
    # We were idle; another process kept one CPU busy.
    a = sample(0.0, [(0, 0, 0), (0, 0, 0)], running=1, own=0)
    b = sample(1.0, [(100, 0, 0), (1, 0, 99)], running=2, own=1)
    assert others_load(a, b, 2) == pytest.approx(1.0)


def test_without_idle_time_others_count_their_runnable_threads() -> None:
    # Our two threads and a burner shared two CPUs: the burner got two thirds of one, but it
    # wanted a whole one (it was runnable at the end: 3 running, 2 of them ours).
    a = sample(0.0, [(0, 0, 0), (0, 0, 0)], running=3, own=0, own_running=2)
    b = sample(1.0, [(100, 0, 0), (100, 0, 0)], running=3, own=133, own_running=2)
    assert others_load(a, b, 2) == pytest.approx(1.0)
    # With idle time left, nobody queued: the runnable count is not used.
    c = sample(1.0, [(90, 0, 10), (90, 0, 10)], running=3, own=120, own_running=2)
    assert others_load(a, c, 2) == pytest.approx(0.6)


def test_the_recorded_busy_machine_leaves_no_core_free() -> None:
    cpus = [0, 1]
    a, b = (sample_from_text(s["monotonic"], s["proc_stat"], s["self_stat"], s["task_states"],
                             cpus) for s in RECORDED["samples"])
    load = others_load(a, b, 2)
    assert load == pytest.approx(2.0)  # no idle tick and 14 runnable threads not ours
    assert ThreadPolicy().choose(load, 2, 2, current=2) == 1


def test_no_time_between_samples_is_no_measurement() -> None:
    a = sample(0.0, [(5, 0, 5)], running=1, own=0)
    assert others_load(a, a, 1) is None
    assert window_load([a], 1) is None


def test_the_window_weights_intervals_by_their_length() -> None:
    s0 = sample(0.0, [(0, 0, 0), (0, 0, 0)], running=1, own=0)
    s1 = sample(3.0, [(300, 0, 0), (0, 0, 300)], running=1, own=0)  # 1 core busy, 3 s
    s2 = sample(4.0, [(300, 0, 100), (0, 0, 400)], running=1, own=0)  # quiet, 1 s
    assert window_load([s0, s1, s2], 2) == pytest.approx(0.75)


def test_the_monitor_keeps_only_the_last_seconds() -> None:
    monitor = LoadMonitor(2, window_s=2.0)
    ticks = 0
    for t in range(10):  # a busy core for 5 s, then a quiet machine
        busy = t < 5
        monitor.record(sample(float(t), [(ticks if busy else 500, 0, 0 if busy else ticks - 500),
                                         (0, 0, ticks)], running=1, own=0))
        ticks += 100
    assert monitor.others_load() == pytest.approx(0.0)
    assert len(monitor._samples) == 3


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc")
def test_this_system_s_proc_reads() -> None:
    s = read_sample()
    assert s.cpu.total > 0 and s.own > 0
    assert s.own_running >= 1  # the thread reading is running
    assert s.cpu.running >= s.own_running or s.cpu.running >= 1


# ----- the policy --------------------------------------------------------------------------------

def test_every_core_on_a_quiet_machine_one_fewer_per_busy_core() -> None:
    policy = ThreadPolicy()
    assert policy.choose(0.05, 2, 2, None) == 2
    assert policy.choose(1.0, 2, 2, None) == 1
    assert policy.choose(2.0, 2, 2, None) == 1  # never none
    assert policy.choose(3.0, 8, 8, None) == 5
    assert policy.choose(0.0, 16, 8, None) == 8  # at most ``most``


def test_the_count_drops_at_once_and_rises_with_a_margin() -> None:
    policy = ThreadPolicy(raise_margin=0.25)
    assert policy.choose(0.6, 2, 2, current=2) == 1  # a busy core shared with our threads
    assert policy.choose(0.4, 2, 2, current=2) == 2
    # Between a quarter and a half of a core the count in force stays: no flapping.
    for load in (0.26, 0.35, 0.45):
        assert policy.choose(load, 2, 2, current=1) == 1
        assert policy.choose(load, 2, 2, current=2) == 2
    assert policy.choose(0.2, 2, 2, current=1) == 2
    assert policy.choose(0.0, 8, 8, current=3) == 8  # several steps at once
    assert policy.choose(6.0, 8, 8, current=8) == 2


def test_a_varying_load_near_the_boundary_does_not_flap() -> None:
    policy, current, changes = ThreadPolicy(), 2, 0
    for load in [0.55, 0.3, 0.45, 0.28, 0.5, 0.3, 0.4, 0.27]:
        n = policy.choose(load, 2, 2, current)
        changes += n != current
        current = n
    assert changes == 1


class _Load:
    """A monitor over samples made here: each second, ``busy`` CPUs kept busy by others."""

    def __init__(self, cpus: int) -> None:
        self.monitor = LoadMonitor(cpus)
        self.t = 0.0
        self.ticks = [[0, 0] for _ in range(cpus)]  # busy, idle per CPU
        self._record(0)

    def _record(self, running: int) -> None:
        self.monitor.record(sample(self.t, [(b, 0, i) for b, i in self.ticks], running, own=0))

    def second(self, busy: int) -> None:
        self.t += 1.0
        for c, cpu in enumerate(self.ticks):
            cpu[0 if c < busy else 1] += 100
        self._record(busy)


def test_the_governor_pins_measures_and_keeps_without_a_measurement() -> None:
    load = _Load(2)
    governor = ThreadGovernor(most=2, cpus=2, monitor=load.monitor)
    first = governor.choose()
    assert (first.threads, first.source) == (2, ThreadSource.UNMEASURED)
    load.second(busy=1)
    choice = governor.choose()
    assert (choice.threads, choice.source) == (1, ThreadSource.MEASURED)
    assert choice.load == pytest.approx(1.0)
    governor.pin(2)
    assert governor.choose().threads == 2 and governor.last.source is ThreadSource.PINNED
    governor.pin(None)
    assert governor.choose().threads == 1  # chosen afresh from the load, not from the pin
    with pytest.raises(ValueError):
        governor.pin(0)
    unmeasured = ThreadGovernor(most=4, cpus=4, monitor=None)
    assert unmeasured.choose().threads == 4


def test_the_shared_monitor_samples_on_its_own_thread() -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("reads Linux's /proc")
    monitor = LoadMonitor.for_this_process()
    assert monitor is not None and monitor is LoadMonitor.for_this_process()
    assert any(t.name == "seam-cpu-load" and t.daemon for t in threading.enumerate())
