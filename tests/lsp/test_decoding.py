"""The decode scheduler with a real (random) engine: sharing, supersession, cancellation."""

from __future__ import annotations

import asyncio

import pytest

from lsp_server.decoding import Decoder

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


async def started(dec: Decoder, uri: str = "u") -> None:
    """Wait until the worker has begun the job on ``uri``."""
    for _ in range(6000):
        job = dec._inflight.get(uri)
        if job is not None and job.started_at is not None:
            return
        await asyncio.sleep(0.001)
    raise AssertionError("the job never started")


def test_identical_requests_share_one_decode(engine) -> None:
    async def main():
        dec = Decoder()
        try:
            a = asyncio.ensure_future(dec.run("u", engine, request(8), share_key="k"))
            await asyncio.sleep(0)
            b = asyncio.ensure_future(dec.run("u", engine, request(8), share_key="k"))
            ra, rb = await asyncio.gather(a, b)
            return ra, rb, list(dec.finished)
        finally:
            dec.shutdown()

    ra, rb, finished = asyncio.run(main())
    assert ra is rb and ra.result is not None
    assert len(finished) == 1


def test_newer_request_supersedes_and_stops_within_a_step(engine) -> None:
    async def main():
        dec = Decoder()
        try:
            first = asyncio.ensure_future(dec.run("u", engine, request(), share_key="a"))
            await started(dec)
            second = await dec.run("u", engine, request(2), share_key="b")
            return await first, second, list(dec.finished)
        finally:
            dec.shutdown()

    first, second, finished = asyncio.run(main())
    assert first.result.stop == "cancelled" and first.result.tokens < 300
    assert second.result is not None and second.result.stop != "cancelled"
    assert finished[0]["stop"] == "cancelled" and "after_cancel_ms" in finished[0]


def test_cancelling_one_of_two_waiters_keeps_the_decode(engine) -> None:
    async def main():
        dec = Decoder()
        try:
            a = asyncio.ensure_future(dec.run("u", engine, request(), share_key="k"))
            b = asyncio.ensure_future(dec.run("u", engine, request(), share_key="k"))
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
        dec = Decoder()
        try:
            a = asyncio.ensure_future(dec.run("u", engine, request(), share_key="k"))
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
    assert finished and finished[0]["stop"] == "cancelled" and finished[0]["tokens"] < 300
