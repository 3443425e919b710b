"""The in-flight limit the driver serves to its Ray workers (``mas.executors.ray_limit``): one limit for
every process, slots back when a worker goes. No Ray needed: the handles connect on loopback."""

from __future__ import annotations

import asyncio

from mas.executors.ray_limit import LimitServer, Shared
from mas.models.limiter import AdaptiveLimit


async def served(concurrency):
    server = LimitServer(concurrency, "127.0.0.1")
    await server.start()
    return server


async def settle(condition, seconds: float = 5.0) -> None:
    """Wait until ``condition()`` holds (the server reads its lines as they come)."""
    for _ in range(int(seconds / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("never settled")


def test_one_fixed_limit_across_workers_and_the_driver():
    async def main():
        server = await served(3)
        a, b = Shared(server.address, "a"), Shared(server.address, "b")
        await a.acquire()
        await b.acquire()
        await server.limit.acquire()  # the driver's own call: the third slot
        waiting = asyncio.ensure_future(a.acquire())
        await asyncio.sleep(0.2)
        assert not waiting.done() and server.limit.in_flight == 3
        b.release(0.5)
        await asyncio.wait_for(waiting, 5)
        await settle(lambda: server.held == {"a": 2, "b": 0})
        await server.close()

    asyncio.run(main())


def test_a_dead_workers_slots_go_back():
    """Its connection closes (the process died), or the driver drops it: its slots return."""

    async def main():
        server = await served(2)
        a, b = Shared(server.address, "a"), Shared(server.address, "b")
        await a.acquire()
        await a.acquire()
        waiting = asyncio.ensure_future(b.acquire())
        await asyncio.sleep(0.2)
        assert not waiting.done()
        a._writer.transport.abort()  # as a kill -9 leaves it
        await asyncio.wait_for(waiting, 5)
        await b.acquire()
        assert server.held == {"b": 2}
        server.drop("b")
        await settle(lambda: server.limit.in_flight == 0 and not server.held)
        await server.close()

    asyncio.run(main())


def test_a_cancelled_wait_leaves_no_slot_taken():
    async def main():
        server = await served(1)
        a, b = Shared(server.address, "a"), Shared(server.address, "b")
        await a.acquire()
        waiting = asyncio.ensure_future(b.acquire())
        await asyncio.sleep(0.2)
        waiting.cancel()
        a.release(0.1)  # the slot goes to b's cancelled wait, which gives it back
        await settle(lambda: server.limit.in_flight == 0)
        await a.acquire()
        assert server.held["a"] == 1
        await server.close()

    asyncio.run(main())


def test_the_adaptive_limit_hears_every_workers_calls():
    """Latencies and 429s from the workers reach the driver's one ``AdaptiveLimit``."""

    async def main():
        server = await served(None)
        assert isinstance(server.limit, AdaptiveLimit)
        a = Shared(server.address, "a")
        for _ in range(2):
            await a.acquire()
        a.rate_limited()
        a.release(None, refused=True)
        a.release(0.25)
        await settle(lambda: server.limit.refusals == 1 and server.limit.returned == 1)
        assert server.limit.in_flight == 0
        await server.close()

    asyncio.run(main())
