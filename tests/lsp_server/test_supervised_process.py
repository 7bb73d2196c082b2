"""``run_supervised``: the server it starts is stopped with it, in each of the windows that
used to leave ``seam team-server``'s vLLM running (a signal while the server was being
started; a stop that sent SIGKILL and returned before the server died; workers the server
left in its group). Real child processes and real signals, in this test's process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lsp_server import supervised_process
from lsp_server.supervised_process import run_supervised

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")

SLEEPER = "import time; time.sleep(120)"
#: A server that ignores SIGTERM, notes that it got one, and says when it is set up. It never
#: ends by itself, so only a kill stops it.
STUBBORN = """
import pathlib, signal, sys, time
seen = pathlib.Path(sys.argv[1])
signal.signal(signal.SIGTERM, lambda *_: (seen / "term").touch())
(seen / "ready").touch()
while True:
    time.sleep(1)
"""
#: The worker: it ignores SIGTERM, then writes its pid where it is told.
WORKER = """
import os, pathlib, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
pathlib.Path(sys.argv[1]).write_text(str(os.getpid()))
while True:
    time.sleep(1)
"""
#: A server that leaves a worker in its group: the worker ignores SIGTERM, the server does not.
LEAVES_A_WORKER = f"""
import pathlib, subprocess, sys, time
seen = pathlib.Path(sys.argv[1])
subprocess.Popen([sys.executable, "-c", {WORKER!r}, str(seen / "worker")])
time.sleep(120)
"""


def _reaped(pid: int) -> bool:
    """Whether ``pid`` is gone entirely (not even a zombie waiting for its parent)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _dead(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def _until(check, what: str, limit_s: float = 60.0) -> None:
    """Wait for ``check()``; the limit only keeps a broken run from hanging."""
    end = time.monotonic() + limit_s
    while not check():
        assert time.monotonic() < end, what
        time.sleep(0.02)


def _command(script: str, seen: Path) -> list[str]:
    return [sys.executable, "-c", script, str(seen)]


def test_the_servers_exit_code_is_the_commands_and_the_handlers_are_put_back():
    before = {sig: signal.getsignal(sig) for sig in supervised_process.STOP_SIGNALS}
    code = run_supervised([sys.executable, "-c", "raise SystemExit(3)"], os.environ,
                          lambda proc: proc.wait())
    assert code == 3
    assert {sig: signal.getsignal(sig) for sig in supervised_process.STOP_SIGNALS} == before


def test_a_signal_while_the_server_is_being_started_still_stops_it(monkeypatch):
    """The signal lands after the fork, before ``Popen`` returns: with the handler raising
    at once, the child's pid never reached the stop and the server ran on."""
    real_popen = subprocess.Popen
    started: list[int] = []

    def popen_hit_by_a_signal(*args, **kwargs):
        proc = real_popen(*args, **kwargs)
        started.append(proc.pid)
        signal.raise_signal(signal.SIGTERM)  # its Python handler runs here, inside Popen
        return proc

    monkeypatch.setattr(subprocess, "Popen", popen_hit_by_a_signal)
    served = []
    code = run_supervised([sys.executable, "-c", SLEEPER], os.environ,
                          lambda proc: served.append(proc) or proc.wait())
    assert code == 128 + signal.SIGTERM
    assert served == []  # the stop came before the server was served
    assert started and _reaped(started[0])


def test_a_server_that_ignores_sigterm_is_killed_after_the_grace_period_and_reaped(tmp_path):
    pids = []

    def serve(proc):
        pids.append(proc.pid)
        _until((tmp_path / "ready").exists, "the server never got ready")
        signal.raise_signal(signal.SIGTERM)
        return proc.wait()

    code = run_supervised(_command(STUBBORN, tmp_path), os.environ, serve, grace_s=0.5)
    assert code == 128 + signal.SIGTERM
    assert (tmp_path / "term").exists()  # it was asked first
    assert _reaped(pids[0])  # killed and waited for: no zombie, nothing running


def test_workers_the_server_left_in_its_group_are_killed(tmp_path):
    def serve(proc):
        _until(lambda: (tmp_path / "worker").exists() and (tmp_path / "worker").read_text(),
               "the worker never got ready")
        signal.raise_signal(signal.SIGINT)  # Ctrl-C
        return proc.wait()

    code = run_supervised(_command(LEAVES_A_WORKER, tmp_path), os.environ, serve)
    assert code == 128 + signal.SIGINT
    worker = int((tmp_path / "worker").read_text())
    _until(lambda: _dead(worker), "the worker left in the server's group is still running")


@pytest.mark.timeout(300)  # a hang guard: without the second signal, an hour's wait
def test_a_second_signal_during_the_grace_period_kills_at_once(tmp_path):
    """The server ignores SIGTERM and never ends; the grace period is longer than the test's
    own time limit, so only a second Ctrl-C while the command waits it out ends the wait."""
    grace_s = 3600.0
    served = []

    def second_signal():
        _until((tmp_path / "term").exists, "the server was never asked to stop")
        os.kill(os.getpid(), signal.SIGINT)

    def serve(proc):
        served.append(proc)
        _until((tmp_path / "ready").exists, "the server never got ready")
        threading.Thread(target=second_signal, daemon=True).start()
        signal.raise_signal(signal.SIGTERM)
        return proc.wait()

    code = run_supervised(_command(STUBBORN, tmp_path), os.environ, serve, grace_s=grace_s)
    assert code == 128 + signal.SIGTERM
    assert served[0].returncode == -signal.SIGKILL  # killed, not waited out
