"""The decode scheduler with a real (random) engine: sharing, supersession, cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from lsp_server.jobs import JobScheduler

pytestmark = pytest.mark.timeout(300)

LEFT, RIGHT = "def f(x):\n    return ", "\n\nprint(f(1))\n"


@pytest.fixture(scope="module")
def engine():
    api = pytest.importorskip("fim.api")
    return api.Engine.load("random:santacoder")


def request(max_tokens: int = 300):
    from fim.api import CompletionRequest

    # Unconstrained, no stop but the budget: long enough that only cancellation ends it early.
    return CompletionRequest(LEFT, RIGHT, mode="unconstrained", max_tokens=max_tokens,
                             scope="free", time_budget_ms=120000)


def decode(engine, req):
    """The request's decode as ``JobScheduler.run`` takes it (``engine_work.Decode`` in the
    server): the engine's ``complete``, given the cancel test and the partial middles' sink."""
    def work(cancel, on_partial):
        if on_partial is None:  # stand-in engines take no more than they use
            return engine.complete(req, cancel=cancel)
        return engine.complete(req, cancel=cancel, on_partial=on_partial)
    return work


async def started(dec: JobScheduler, uri: str = "u") -> None:
    """Wait until the worker has begun the job on ``uri``."""
    for _ in range(6000):
        job = dec._inflight.get(uri)
        if job is not None and job.started_at is not None:
            return
        await asyncio.sleep(0.001)
    raise AssertionError("the job never started")


def test_identical_requests_share_one_decode(engine) -> None:
    async def main():
        dec = JobScheduler()
        try:
            a = asyncio.ensure_future(dec.run("u", decode(engine, request(8)), share_key="k"))
            await asyncio.sleep(0)
            b = asyncio.ensure_future(dec.run("u", decode(engine, request(8)), share_key="k"))
            ra, rb = await asyncio.gather(a, b)
            return ra, rb, list(dec.finished)
        finally:
            dec.shutdown()

    ra, rb, finished = asyncio.run(main())
    assert ra is rb and ra.result is not None
    assert len(finished) == 1


def test_newer_request_supersedes_and_stops_within_a_step(engine) -> None:
    async def main():
        dec = JobScheduler()
        try:
            first = asyncio.ensure_future(dec.run("u", decode(engine, request()), share_key="a"))
            await started(dec)
            second = await dec.run("u", decode(engine, request(2)), share_key="b")
            return await first, second, list(dec.finished)
        finally:
            dec.shutdown()

    first, second, finished = asyncio.run(main())
    assert first.result.stop == "cancelled" and first.result.tokens < 300
    assert second.result is not None and second.result.stop != "cancelled"
    assert finished[0].stop == "cancelled" and finished[0].after_cancel_ms is not None


def test_cancelling_one_of_two_waiters_keeps_the_decode(engine) -> None:
    async def main():
        dec = JobScheduler()
        try:
            a = asyncio.ensure_future(dec.run("u", decode(engine, request()), share_key="k"))
            b = asyncio.ensure_future(dec.run("u", decode(engine, request()), share_key="k"))
            await started(dec)
            a.cancel()
            with pytest.raises(asyncio.CancelledError):
                await a
            return await b
        finally:
            dec.shutdown()

    out = asyncio.run(main())
    assert out.result is not None and out.result.stop != "cancelled"


def test_cancelling_the_only_waiter_stops_the_decode(engine) -> None:
    async def main():
        dec = JobScheduler()
        try:
            a = asyncio.ensure_future(dec.run("u", decode(engine, request()), share_key="k"))
            await started(dec)
            a.cancel()
            with pytest.raises(asyncio.CancelledError):
                await a
            for _ in range(600):
                if dec.finished:
                    break
                await asyncio.sleep(0.05)
            return list(dec.finished)
        finally:
            dec.shutdown()

    finished = asyncio.run(main())
    assert finished and finished[0].stop == "cancelled" and finished[0].tokens < 300


class LineByLine:
    """An engine that writes ``lines`` one per ``pause`` seconds, reporting each as a
    partial middle, and finishes with all of them (or stops when cancelled)."""

    def __init__(self, lines: list[str], pause: float = 0.05) -> None:
        self.lines, self.pause = lines, pause

    def complete(self, request, cancel=None, on_partial=None):
        import time
        from types import SimpleNamespace

        done = []
        for line in self.lines:
            if cancel is not None and cancel():
                return SimpleNamespace(middle=None, stop="cancelled", tokens=len(done))
            time.sleep(self.pause)
            done.append(line)
            if on_partial is not None:
                on_partial("\n".join(done))
        return SimpleNamespace(middle="\n".join(done), stop="eos", tokens=len(done))


def test_an_early_request_is_answered_with_the_first_line_and_the_rest_follows() -> None:
    async def main():
        dec = JobScheduler()
        partials, finals = [], []
        try:
            out = await dec.run("u", decode(LineByLine(["a = 1", "b = 2", "c = 3"], 0.2), None),
                                early=True, on_partial=partials.append,
                                on_final=finals.append)
            answered_with = list(partials)
            while dec.running() or not finals:
                await asyncio.sleep(0.02)
            return out, answered_with, partials, finals
        finally:
            dec.shutdown()

    out, answered_with, partials, finals = asyncio.run(main())
    assert out.partial == "a = 1" and out.result is None
    assert answered_with == ["a = 1"]  # the answer came before the second line existed
    assert partials == ["a = 1", "a = 1\nb = 2", "a = 1\nb = 2\nc = 3"]
    assert finals[0].middle == "a = 1\nb = 2\nc = 3"


def test_background_work_waits_for_requests_and_gives_way_to_them() -> None:
    import threading

    async def main():
        dec = JobScheduler()
        log = []
        started_bg = threading.Event()

        def slow(cancel):
            started_bg.set()
            for _ in range(200):
                if cancel.is_set():
                    log.append("bg cancelled")
                    return None
                cancel.wait(0.01)
            log.append("bg done")

        try:
            dec.background("u", "slow", slow)
            await asyncio.to_thread(started_bg.wait, 5)
            asked = asyncio.ensure_future(dec.run("u", decode(LineByLine(["x = 1"], 0.2), None)))
            await asyncio.sleep(0.05)
            # Queued behind the request: the second "a" replaces the first.
            dec.background("u", "a", lambda c: log.append("a"))
            dec.background("u", "a", lambda c: log.append("a again"))
            out = await asked
            log.append("request done")
            while not dec.idle():
                await asyncio.sleep(0.02)
            return out, log
        finally:
            dec.shutdown()

    out, log = asyncio.run(main())
    assert out.result.middle == "x = 1"
    assert log[0] == "bg cancelled"  # the request made the running background work stop
    assert sorted(log[1:]) == ["a again", "request done"]  # the queued "a" was replaced


def test_a_request_adopts_the_background_job_with_its_share_key() -> None:
    import threading

    async def main():
        dec = JobScheduler()
        release = threading.Event()
        runs = []

        def prefetch(cancel):
            runs.append("prefetch")
            release.wait(5)
            from types import SimpleNamespace
            return SimpleNamespace(middle="y = 2", stop="eos", tokens=3)

        try:
            dec.background("u", "p", prefetch, share_key="next")
            while not runs:
                await asyncio.sleep(0.01)
            asked = asyncio.ensure_future(dec.run("u", decode(LineByLine(["never"]), None),
                                                  share_key="next"))
            await asyncio.sleep(0.1)
            release.set()
            return await asked, runs
        finally:
            dec.shutdown()

    out, runs = asyncio.run(main())
    assert out.result.middle == "y = 2" and runs == ["prefetch"]  # no second decode


def test_an_answered_early_decode_gives_way_to_a_request_on_another_document() -> None:
    # The rest of a block nobody waits for must not hold up the user's next file.
    async def main():
        dec = JobScheduler()
        finals = []
        try:
            first = await dec.run("a", decode(LineByLine(["x = 1"] * 40, 0.1), None), early=True,
                                  on_final=finals.append)
            other = await asyncio.wait_for(
                dec.run("b", decode(LineByLine(["y = 2"], 0.01), None)), timeout=2.0)
            while not finals:
                await asyncio.sleep(0.02)
            return first, other, finals
        finally:
            dec.shutdown()

    first, other, finals = asyncio.run(main())
    assert first.partial == "x = 1"
    assert other.result.middle == "y = 2" and other.queue_ms < 1000
    assert finals[0].stop == "cancelled" and finals[0].tokens < 40


async def logged(log: list, entries: int, seconds: float = 10.0) -> None:
    """Until background work logged ``entries`` entries (or ``seconds`` passed: the test's
    assertion on the log then says what is missing)."""
    for _ in range(int(seconds / 0.01)):
        if len(log) >= entries:
            return
        await asyncio.sleep(0.01)


def runs_until_stopped(name: str, log: list, begun) -> Callable:
    """Background work that says it began (``begun``), runs 0.3 s unless stopped, and logs
    ``"<name> stopped"`` or ``"<name> done"``."""
    def work(cancel):
        begun.set()
        cancel.wait(0.3)
        log.append(f"{name} stopped" if cancel.is_set() else f"{name} done")
    return work


def test_the_widening_runs_before_the_shown_places_alternatives() -> None:
    """After an answer the server queues the widened prompt (``Priority.CONTEXT``) and the
    place's other suggestions (``Priority.ALTERNATIVES``): the widening runs first, and a
    widening queued while alternatives run stops them (they are queued again), so a plain
    client's short rests go to the window every later request reads."""
    import threading

    from lsp_server.jobs import Priority

    async def main():
        dec = JobScheduler()
        log = []
        begun, release = threading.Event(), threading.Event()

        def blocker(cancel):  # the worker is busy while both are queued
            begun.set()
            release.wait(5)
            log.append("prefetch")

        def ranking(cancel):
            if "rank stopped" not in log:  # the first run waits to be stopped
                begun.set()
                cancel.wait(5)
                log.append("rank stopped" if cancel.is_set() else "rank ran out")
            else:
                log.append("rank")

        try:
            dec.background("u", "prefetch", blocker, priority=Priority.PREFETCH)
            await asyncio.to_thread(begun.wait, 5)
            dec.background("u", ("ranked", "u"), lambda c: log.append("rank"),
                           priority=Priority.ALTERNATIVES)
            dec.background("u", ("widen", "u"), lambda c: log.append("widen"),
                           priority=Priority.CONTEXT)
            release.set()
            await logged(log, 3)
            # Alternatives running when a widening is queued give way to it.
            begun.clear()
            dec.background("v", ("ranked", "v"), ranking, priority=Priority.ALTERNATIVES)
            await asyncio.to_thread(begun.wait, 5)
            dec.background("v", ("widen", "v"), lambda c: log.append("widen v"),
                           priority=Priority.CONTEXT)
            await logged(log, 6)
            return log
        finally:
            dec.shutdown()

    log = asyncio.run(main())
    assert log == ["prefetch", "widen", "rank", "rank stopped", "widen v", "rank"]


def test_background_work_runs_by_priority_and_a_stopped_context_warm_runs_again() -> None:
    import threading

    from lsp_server.jobs import Priority

    async def main():
        dec = JobScheduler()
        log = []
        begun = threading.Event()

        def context(cancel):
            begun.set()
            for _ in range(300):
                if cancel.is_set():
                    log.append("context stopped")
                    return None
                cancel.wait(0.01)
            log.append("context done")

        try:
            dec.background("u", "context", context, priority=Priority.CONTEXT)
            await asyncio.to_thread(begun.wait, 5)
            # Queued in this order while the context runs: the prefetch stops the context and
            # runs first, then the warm-up; the stopped context is queued again (still wanted,
            # and nothing else asks for it) and, the newest of its priority, runs before the
            # older low-priority job.
            dec.background("u", "old", lambda c: log.append("old context"),
                           priority=Priority.CONTEXT)
            dec.background("u", "warm", lambda c: log.append("warm"), priority=Priority.WARM)
            dec.background("u", "prefetch", lambda c: log.append("prefetch"),
                           priority=Priority.PREFETCH)
            await logged(log, 5)
            return log
        finally:
            dec.shutdown()

    log = asyncio.run(main())
    assert log == ["context stopped", "prefetch", "warm", "context done", "old context"]


def test_background_work_of_lower_priority_does_not_stop_a_prefetch() -> None:
    import threading

    from lsp_server.jobs import Priority

    async def main():
        dec = JobScheduler()
        log = []
        begun = threading.Event()

        prefetch = runs_until_stopped("prefetch", log, begun)
        try:
            dec.background("u", "prefetch", prefetch, priority=Priority.PREFETCH)
            await asyncio.to_thread(begun.wait, 5)
            dec.background("u", "warm", lambda c: log.append("warm"), priority=Priority.WARM)
            await logged(log, 2)
            return log
        finally:
            dec.shutdown()

    assert asyncio.run(main()) == ["prefetch done", "warm"]


@pytest.mark.parametrize("same_cursor", [True, False])
def test_a_request_waits_for_the_warm_up_of_its_own_prompt(same_cursor: bool) -> None:
    # Stopping the warm-up of the very prompt the request runs would throw away a batch.
    import threading

    from lsp_server.jobs import Priority

    async def main():
        dec = JobScheduler()
        log = []
        begun = threading.Event()

        warm = runs_until_stopped("warm", log, begun)
        try:
            dec.background("u", "warm", warm, share_key="here", priority=Priority.WARM,
                           prepares=True)
            await asyncio.to_thread(begun.wait, 5)
            out = await dec.run("u", decode(LineByLine(["x = 1"], 0.01), None),
                                share_key="here" if same_cursor else "elsewhere")
            log.append("request done")
            return out, log
        finally:
            dec.shutdown()

    out, log = asyncio.run(main())
    assert out.result.middle == "x = 1"  # the request ran itself: nothing was adopted
    assert log == ["warm done" if same_cursor else "warm stopped", "request done"]


def test_warming_another_document_stops_an_answered_early_decode() -> None:
    from lsp_server.jobs import Priority

    async def main():
        dec = JobScheduler()
        finals, log = [], []
        try:
            await dec.run("a", decode(LineByLine(["x = 1"] * 40, 0.1), None), early=True,
                          on_final=finals.append)
            dec.background("a", "same", lambda c: log.append("same doc"),
                           share_key="a-here", priority=Priority.WARM, prepares=True)
            await asyncio.sleep(0.3)
            assert not finals  # a warm-up in the same document lets the block go on
            dec.background("b", "warm", lambda c: log.append("warm b"), share_key="b-here",
                           priority=Priority.WARM, prepares=True)
            for _ in range(200):
                if len(log) == 2 and finals:
                    break
                await asyncio.sleep(0.01)
            return finals, log
        finally:
            dec.shutdown()

    finals, log = asyncio.run(main())
    assert finals and finals[0].stop == "cancelled" and finals[0].tokens < 40
    # After the stopped block; the warm-up queued in ``a`` follows a cursor that has left it.
    assert log == ["warm b"]


def test_warming_another_document_drops_the_work_queued_for_the_one_left() -> None:
    """A rest in ``b`` stops ``a``'s widening and does not queue it again (it would run after
    ``b``'s and hold ``a``'s window); ``a``'s shown place keeps its alternatives."""
    import threading

    from lsp_server.jobs import Priority

    async def main():
        dec = JobScheduler()
        log = []
        begun = threading.Event()

        widen_a = runs_until_stopped("widen a", log, begun)
        try:
            dec.background("a", ("widen", "a"), widen_a, priority=Priority.CONTEXT)
            await asyncio.to_thread(begun.wait, 5)
            dec.background("a", ("ranked", "a"), lambda c: log.append("alternatives a"),
                           priority=Priority.ALTERNATIVES)
            dec.background("a", ("prefetch", "a"), lambda c: log.append("prefetch a"),
                           priority=Priority.PREFETCH)
            dec.background("b", ("warm", "b"), lambda c: log.append("warm b"),
                           share_key="b-here", priority=Priority.WARM, prepares=True)
            await logged(log, 3)
            await asyncio.sleep(0.5)  # nothing else runs
            return log
        finally:
            dec.shutdown()

    assert asyncio.run(main()) == ["widen a stopped", "warm b", "alternatives a"]


def test_a_server_gone_is_one_log_line_and_a_bug_is_a_traceback(caplog) -> None:
    """Background work failing because the model server is unreachable (a ``ConnectionError``,
    as the vLLM client raises) is logged as one line per job; any other failure keeps its
    traceback, and the scheduler goes on after both."""
    import logging

    async def main():
        dec = JobScheduler()
        done = []

        def gone(cancel):
            raise ConnectionError("vLLM server at http://127.0.0.1:9 refused the connection")

        def bug(cancel):
            raise ValueError("a bug")

        try:
            dec.background("u", "prefetch", gone)
            dec.background("v", "warm", bug)
            dec.background("w", "after", lambda c: done.append("after"))
            while not dec.idle() or not done:
                await asyncio.sleep(0.02)
        finally:
            dec.shutdown()
        return done

    with caplog.at_level(logging.WARNING, logger="lsp_server.jobs"):
        assert asyncio.run(main()) == ["after"]
    records = {r.getMessage().split(":")[0]: r for r in caplog.records}
    gone = records["background work on u failed"]
    assert gone.levelno == logging.WARNING and gone.exc_info is None
    assert "refused the connection" in gone.getMessage()
    bug = records["background work on v failed"]
    assert bug.levelno == logging.ERROR and bug.exc_info is not None


def test_another_documents_alternatives_survive_a_request_queued_or_running() -> None:
    """Issue 28, finding 6, in the scheduler: a request in "b" drops "b"'s queued work, but
    the alternatives of other documents, queued ("c") or stopped while running ("a"), run
    after it."""
    import threading

    from lsp_server.jobs import Priority

    async def main():
        dec = JobScheduler()
        log = []
        begun = threading.Event()

        def running_rank(cancel):
            if not begun.is_set():
                begun.set()
                cancel.wait(5)
                log.append("rank a stopped" if cancel.is_set() else "rank a ran out")
            else:
                log.append("rank a again")

        try:
            dec.background("a", ("ranked", "a"), running_rank, priority=Priority.ALTERNATIVES)
            await asyncio.to_thread(begun.wait, 5)
            dec.background("c", ("ranked", "c"), lambda c: log.append("rank c"),
                           priority=Priority.ALTERNATIVES)
            dec.background("b", ("ranked", "b"), lambda c: log.append("rank b"),
                           priority=Priority.ALTERNATIVES)
            out = await dec.run("b", decode(LineByLine(["y = 2"], 0.01), None))
            for _ in range(500):
                if dec.idle():
                    break
                await asyncio.sleep(0.01)
            return out, log
        finally:
            dec.shutdown()

    out, log = asyncio.run(main())
    assert out.result.middle == "y = 2"
    assert log[0] == "rank a stopped"
    assert sorted(log[1:]) == ["rank a again", "rank c"]  # not b's: the request made it moot


@pytest.mark.parametrize("running", ["prefetch", "warm"])
def test_a_rest_elsewhere_stops_the_running_prefetch_or_warm_up(running: str) -> None:
    """The cursor resting at a place stops the running work of another place, even of a
    higher priority (a prefetch that foresaw the shown suggestion accepted) or the same (an
    earlier rest's warm-up): the user went elsewhere. A rest at the prefetch's own place lets
    it run."""
    import threading

    from lsp_server.jobs import Priority

    priority = Priority.PREFETCH if running == "prefetch" else Priority.WARM

    async def main(rest_at: str):
        dec = JobScheduler()
        log = []
        begun = threading.Event()
        try:
            dec.background("a", running, runs_until_stopped(running, log, begun),
                           share_key="a-there", priority=priority,
                           prepares=running == "warm")
            await asyncio.to_thread(begun.wait, 5)
            dec.background("a", "rest", lambda c: log.append("warm here"), share_key=rest_at,
                           priority=Priority.WARM, prepares=True)
            await logged(log, 2)
            return log
        finally:
            dec.shutdown()

    assert asyncio.run(main("a-here")) == [f"{running} stopped", "warm here"]
    assert asyncio.run(main("a-there")) == [f"{running} done", "warm here"]


@pytest.mark.parametrize("running", ["prefetch", "context"])
def test_clearing_for_planning_stops_the_running_work_and_queues_what_is_still_due(
        running: str) -> None:
    """Before the event loop plans a new rest, the running background work (which queuing
    the rest's warm-up would stop) is stopped; project context, still due, runs again."""
    import threading

    from lsp_server.jobs import Priority

    priority = Priority.PREFETCH if running == "prefetch" else Priority.CONTEXT

    async def main():
        dec = JobScheduler()
        log = []
        begun = threading.Event()
        runs = runs_until_stopped(running, log, begun)

        def work(cancel):
            if f"{running} stopped" in log:
                log.append(f"{running} again")
                return None
            return runs(cancel)

        try:
            dec.background("a", running, work, priority=priority)
            await asyncio.to_thread(begun.wait, 5)
            dec.clear_for_planning()
            await logged(log, 1)
            dec.clear_for_planning()  # nothing running: nothing happens
            await asyncio.sleep(0.4)
            return log
        finally:
            dec.shutdown()

    again = [f"{running} again"] if running == "context" else []
    assert asyncio.run(main()) == [f"{running} stopped", *again]
