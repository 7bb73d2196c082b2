"""Building constraint languages in worker processes, so that a build never holds the
interpreter lock of the process that asked for it.

The vLLM engine's process runs its steps in Python between kernels; a language built on a
thread there (``fim.language_cache`` with ``workers``) holds the GIL while it runs, so every
step beside it waits, longer the larger the newcomer's file, and the build's allocations bring
on the cyclic collector's full passes over vLLM's whole heap.  Here a build runs in a child
process (started with this interpreter, ``python -m fim.language_processes``, at a lower CPU
priority so that it takes the cores the step leaves idle) and comes back as a pickle in which
the grammar and its automaton are named, not copied (``quotient.transfer``): the asking
process spends only the unpickling (milliseconds) on it.

A child builds one language at a time; each child has a dispatcher thread in the parent that
hands it the next request and waits on its pipe (without the GIL).  A child that dies, or a
language that cannot travel, is not a lost request: the dispatcher builds that one itself
(``fallback``) and starts a new child.  Children exit when the parent closes their pipe, and so
when the parent dies.

Wire format, both ways: an 8-byte big-endian length, then a pickle.  Parent to child:
``(language id, left, right, scope)``; child to parent: ``("built", transfer pickle of
(language, initial state))``, ``("failed", the build's exception)`` or ``("unsendable", why)``.
"""

from __future__ import annotations

import logging
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

from fim.languages import Language, by_id
from fim.options import Scope
from quotient import transfer
from quotient.constraint import Constraint, ConstraintState

log = logging.getLogger(__name__)

_LENGTH = struct.Struct(">Q")
#: How much lower the children run than the parent (``os.nice``): the step's threads first.
CHILD_NICENESS = 10
# What a child answers: a built language's transfer pickle, the build's exception, or why the
# built language could not be pickled.
_BUILT, _FAILED, _UNSENDABLE = "built", "failed", "unsendable"
#: The project's root, for a child started where the package is not installed (tests, a
#: checkout).
_ROOT = str(Path(__file__).resolve().parent.parent)


class WorkerGone(RuntimeError):
    """A language process ended (or sent what could not be read) before it answered."""


@dataclass(frozen=True)
class Built:
    """A language built in a child process, received here."""

    language: Constraint
    initial: ConstraintState


@dataclass
class _Job:
    of: Language
    left: str
    right: str
    scope: Scope
    done: Future[Built]
    #: builds the language on the dispatcher's thread when the child cannot
    fallback: Callable[[], Built]


def _write(stream, payload: bytes) -> None:
    stream.write(_LENGTH.pack(len(payload)))
    stream.write(payload)
    stream.flush()


def _read(stream) -> bytes | None:
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (size,) = _LENGTH.unpack(head)
    body = stream.read(size)
    return body if len(body) == size else None


class _Child:
    """One language process and the thread that feeds it."""

    def __init__(self, owner: LanguageProcesses, index: int) -> None:
        self.owner, self.index = owner, index
        self.proc: subprocess.Popen | None = None
        self.thread = threading.Thread(target=self._run, daemon=True,
                                       name=f"seam-language-process-{index}")
        self.thread.start()

    def _start(self) -> subprocess.Popen:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH")) if p)
        return subprocess.Popen(
            [sys.executable, "-m", "fim.language_processes", str(self.owner.niceness),
             *self.owner.languages],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True)

    def _run(self) -> None:
        while True:
            job = self.owner.jobs.get()
            if job is None:
                break
            if not job.done.set_running_or_notify_cancel():
                continue
            try:
                built = self._ask(job)
            except WorkerGone as err:
                self.owner.fallbacks += 1
                log.warning("Seam's language process %d failed (%s); building this language "
                            "in the server's process", self.index, err)
                self._stop()
                try:
                    built = job.fallback()
                except BaseException as failed:  # noqa: BLE001 - the joining thread raises it
                    job.done.set_exception(failed)
                    continue
            except BaseException as err:  # noqa: BLE001 - the build's own error, re-raised
                job.done.set_exception(err)
                continue
            job.done.set_result(built)
        self._stop()

    def _ask(self, job: _Job) -> Built:
        try:
            if self.proc is None or self.proc.poll() is not None:
                self.proc = self._start()
            _write(self.proc.stdin, pickle.dumps(
                (job.of.id, job.left, job.right, str(job.scope)),
                protocol=pickle.HIGHEST_PROTOCOL))
            answer = _read(self.proc.stdout)
        except OSError as err:
            raise WorkerGone(f"it could not be started or its pipe broke: {err}") from err
        if answer is None:
            raise WorkerGone(f"it exited (code {self.proc.poll()})")
        kind, payload = _unpickled(pickle.loads, answer)
        if kind == _FAILED:
            raise payload  # the build's own error, raised by the joining thread
        if kind != _BUILT:
            raise WorkerGone(f"the language could not be sent: {payload}")
        language, initial = _unpickled(transfer.loads, payload)
        self.owner.received += 1
        return Built(language, initial)

    def _stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()


def _unpickled(load, data: bytes):
    """``load(data)``; what cannot be read (a child's broken answer, a grammar numbered
    otherwise) is the child's failure, not the build's."""
    try:
        return load(data)
    except transfer.TransferError as err:
        raise WorkerGone(str(err)) from err
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError) as err:
        raise WorkerGone(f"its answer could not be read: {err}") from err


class LanguageProcesses:
    """``count`` child processes that build languages of the named ``languages`` (ids of
    ``fim.languages``, imported and warmed in each child when it starts)."""

    def __init__(self, count: int, languages: tuple[str, ...] = ("python",),
                 niceness: int = CHILD_NICENESS) -> None:
        if count < 1:
            raise ValueError("language processes: at least one")
        self.languages = languages
        self.niceness = niceness
        self.jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        #: languages received from a child, and builds a dispatcher did itself
        self.received = 0
        self.fallbacks = 0
        self._children = [_Child(self, k) for k in range(count)]

    def submit(self, of: Language, left: str, right: str, scope: Scope,
               fallback: Callable[[], Built]) -> Future[Built]:
        """Build the language of ``of`` for ``(left, right, scope)`` in a child; ``fallback``
        builds it here if no child can."""
        done: Future[Built] = Future()
        self.jobs.put(_Job(of, left, right, scope, done, fallback))
        return done

    def close(self) -> None:
        """Finish the builds asked for, then stop the children."""
        for _ in self._children:
            self.jobs.put(None)
        for child in self._children:
            child.thread.join()


# -- the child --------------------------------------------------------------------------------


def _serve(niceness: int, languages: list[str]) -> int:
    try:
        os.nice(niceness)
    except OSError:
        pass  # not allowed here: the child runs at the parent's priority
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))
    for name in languages:  # warm: the grammars are made before the first request
        try:
            by_id(name).constraint("", "", Scope.FREE)
        except Exception:  # noqa: BLE001 - a request for it will report the error
            pass
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write on the answers' pipe
    while True:
        request = _read(stdin)
        if request is None:
            return 0
        name, left, right, scope = pickle.loads(request)
        try:
            language = by_id(name).constraint(left, right, Scope(scope))
            initial = language.initial()
        except Exception as err:  # noqa: BLE001 - sent to the parent, which raises it
            try:
                pickle.dumps(err)
                answer: tuple = (_FAILED, err)
            except Exception:  # noqa: BLE001 - an exception that cannot travel
                answer = (_FAILED, RuntimeError(f"{type(err).__name__}: {err}"))
        else:
            try:
                answer = (_BUILT, transfer.dumps((language, initial)))
            except Exception as err:  # noqa: BLE001 - the parent builds this one itself
                answer = (_UNSENDABLE, f"{type(err).__name__}: {err}")
        try:
            _write(stdout, pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL))
        except (BrokenPipeError, ValueError):
            return 0  # the parent is gone (or closed the pipe): nobody is waiting


if __name__ == "__main__":
    sys.exit(_serve(int(sys.argv[1]), sys.argv[2:]))
