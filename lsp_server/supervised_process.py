"""A server process run in the foreground of the command that started it, and stopped with it.

``seam team-server`` starts vLLM in a session of its own, so that vLLM's worker processes share
one process group that can be stopped together, and then waits on it. Ctrl-C or a SIGTERM (a
service manager's stop) stops the whole group. Two windows used to leave vLLM running with
nothing left to stop it:

* a signal that arrived while ``subprocess.Popen`` was still starting the child: the child
  existed, but its ``Popen`` object (its pid) never reached the code that stops it;
* a stop that ran out of patience, sent SIGKILL and returned before the server had died (or
  while the workers it started were still running).

So a signal is held back until the child's ``Popen`` exists and acts then; the stop asks the
group to end (SIGTERM), waits a grace period for the server, kills whatever of the group is
still there (leftover workers, or everything once the grace period is over) and reaps the
server. A second signal during the grace period ends the wait at once.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager

#: How long the server gets to stop by itself before its group is killed.
GRACE_S = 30.0
#: The signals that stop the command (and with it the server).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _Stopped(Exception):
    """A stop signal, raised where the command is waiting on its server."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _SignalGate:
    """The signal handler: holds a signal back until ``open`` (the child's ``Popen`` exists),
    raises ``_Stopped`` after it, and once the stop has begun kills the group at once."""

    def __init__(self) -> None:
        self.pending: int | None = None
        self.opened = False
        self.stopping_group: int | None = None

    def __call__(self, signum: int, frame) -> None:
        if self.stopping_group is not None:
            _kill_group(self.stopping_group)  # a second signal: no more grace
        elif self.opened:
            raise _Stopped(signum)
        elif self.pending is None:
            self.pending = signum

    def open(self) -> None:
        self.opened = True
        if self.pending is not None:
            raise _Stopped(self.pending)


@contextmanager
def _gated_signals() -> Iterator[_SignalGate]:
    gate = _SignalGate()
    previous = {sig: signal.signal(sig, gate) for sig in STOP_SIGNALS}
    try:
        yield gate
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone already


def stop_group(proc: subprocess.Popen, grace_s: float = GRACE_S) -> None:
    """Stop ``proc`` (a session leader) and its process group: SIGTERM, up to ``grace_s`` for
    ``proc`` to exit, then SIGKILL to whatever of the group is left; ``proc`` is reaped."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    # Workers the server started and left behind are in its group still (the group outlives
    # its leader while it has members), and so is the server when the grace period ran out.
    _kill_group(proc.pid)
    proc.wait()


def run_supervised(cmd: Sequence[str], env: Mapping[str, str],
                   serve: Callable[[subprocess.Popen], int],
                   grace_s: float = GRACE_S) -> int:
    """Start ``cmd`` in a session of its own and return ``serve(proc)`` (which waits on it), or
    128 + the signal's number when Ctrl-C or SIGTERM stops the command. Whichever way it
    ends, the server's process group is stopped (``stop_group``) before this returns."""
    with _gated_signals() as gate:
        proc: subprocess.Popen | None = None
        try:
            proc = subprocess.Popen(list(cmd), env=dict(env), start_new_session=True)
            gate.open()
            return serve(proc)
        except _Stopped as stop:
            return 128 + stop.signum
        finally:
            if proc is not None:
                gate.stopping_group = proc.pid
                stop_group(proc, grace_s)
