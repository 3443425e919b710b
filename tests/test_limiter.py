"""The in-flight limit: fixed, or adapted to an endpoint it does not know (``mas.models.limiter``).

The adaptive limit is driven here by scripted endpoints, round trip by round trip on a clock of
its own, so what is checked is its behaviour, not this machine's timing."""

from __future__ import annotations

import asyncio

import pytest

from mas.models.fake import FakeClient
from mas.models.limiter import AdaptiveLimit, Limited, backoff, rate_limited


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def refusing(limit: AdaptiveLimit, clock: Clock, slots: int, rounds: int, latency: float = 0.2) -> list[int]:
    """Endless demand on an endpoint that serves ``slots`` at once and answers 429 beyond: each
    round, as many calls as the limit allows go out; a refused one gives its place back at
    once, the others return after ``latency``. Returns the calls served per round."""
    served = []
    for _ in range(rounds):
        sent = 0
        while limit.try_acquire():
            sent += 1
            if sent > slots:
                limit.rate_limited()
                limit.release(None, refused=True)
                sent -= 1
        clock.now += latency
        for _ in range(sent):
            limit.release(latency)
        served.append(sent)
    return served


@pytest.mark.parametrize("slots", [2, 8, 32])
def test_the_limit_finds_a_refusing_endpoints_slots_and_seldom_asks_past_them(slots):
    clock = Clock()
    limit = AdaptiveLimit(clock=clock)
    served = refusing(limit, clock, slots, rounds=600)  # two minutes of 200 ms round trips
    assert sum(served[-500:]) >= 0.9 * slots * 500  # the endpoint is kept nearly full
    assert limit.refusals <= 12  # the first overshoot, then probes ever further apart
    assert slots - 1 <= limit.allowed <= slots + 1


def test_a_refusing_endpoint_that_grows_is_found_again():
    clock = Clock()
    limit = AdaptiveLimit(clock=clock)
    refusing(limit, clock, 4, rounds=100)
    served = refusing(limit, clock, 16, rounds=400)
    assert max(served) == 16 and sum(served[-100:]) >= 0.9 * 16 * 100


def queueing(limit: AdaptiveLimit, clock: Clock, slots: int, rounds: int, latency: float = 0.2) -> list[int]:
    """Endless demand on an endpoint that queues: a round trip takes ``latency`` times the
    number of calls per slot."""
    sizes = []
    for _ in range(rounds):
        sent = 0
        while limit.try_acquire():
            sent += 1
        took = latency * max(1.0, sent / slots)
        clock.now += took
        for _ in range(sent):
            limit.release(took)
        sizes.append(sent)
    return sizes


def test_against_a_queueing_endpoint_the_limit_grows_while_latency_holds_and_backs_off_when_it_climbs():
    clock = Clock()
    limit = AdaptiveLimit(clock=clock)
    sizes = queueing(limit, clock, 8, rounds=150)
    late = sizes[-100:]  # (over hundreds of round trips its floor drifts up, 0.2% each: see the module)
    assert min(late) >= 8  # every slot stays busy, with some calls waiting there
    assert max(late) <= 3 * 8  # but the queue stays near the tolerance (latency about 2x, never 3x)
    assert limit.refusals == 0


def test_latency_that_varies_with_reply_length_is_not_read_as_congestion():
    """Replies of 1 to 10 round trips at random, an endpoint with room to spare: the limit grows."""
    import random

    rng, clock = random.Random(0), Clock()
    limit = AdaptiveLimit(clock=clock)
    for _ in range(200):
        sent = 0
        while limit.try_acquire():
            sent += 1
        for _ in range(sent):
            limit.release(0.2 * rng.randint(1, 10))
        clock.now += 1
    assert limit.allowed >= 64


async def test_a_call_waiting_to_retry_gives_its_place_back():
    order = []
    limit = AdaptiveLimit(start=1)

    async def respond(request):
        return "ok"

    class Endpoint(FakeClient):
        refused_once = False

        async def create(self, messages, **kwargs):
            name = messages[0].content
            if name == "a" and not self.refused_once:
                self.refused_once = True
                rate_limited()
                order.append("a refused")
                await backoff(0.05)
            order.append(name)
            return await super().create(messages, **kwargs)

    from autogen_core.models import SystemMessage

    client = Limited(Endpoint(), limit)
    first = asyncio.ensure_future(client.create([SystemMessage(content="a")]))
    await asyncio.sleep(0.01)
    await client.create([SystemMessage(content="b")])  # runs while "a" waits to retry
    await first
    assert order == ["a refused", "b", "a"]
    assert limit.in_flight == 0 and limit.refusals == 1


async def test_a_fixed_limit_holds_exactly_n_in_flight():
    busy, peak = 0, 0

    class Slow(FakeClient):
        async def create(self, messages, **kwargs):
            nonlocal busy, peak
            busy += 1
            peak = max(peak, busy)
            await asyncio.sleep(0.01)
            busy -= 1
            return await super().create(messages, **kwargs)

    from autogen_core.models import SystemMessage, UserMessage

    client = Limited(Slow(), 3)
    messages = [SystemMessage(content="You are the planner."), UserMessage(content="1 + 1", source="user")]
    await asyncio.gather(*(client.create(messages) for _ in range(12)))
    assert peak == 3


def test_a_burst_of_refusals_brings_the_limit_down_to_what_the_endpoint_took():
    """A start that doubled past the endpoint: its answers to the calls beyond it are all 429s,
    and they arrive before any of those calls has stepped out. Each is one call too many."""
    clock = Clock()
    limit = AdaptiveLimit(start=64, clock=clock)
    while limit.try_acquire():
        pass
    assert limit.in_flight == 64
    for _ in range(32):  # an endpoint of 32 slots refuses the other 32 at once
        limit.rate_limited()
    for _ in range(32):
        limit.release(None, refused=True)
    assert limit.allowed == 32 and not limit.try_acquire()


def test_the_start_opens_its_new_slots_across_a_round_trip_not_at_once():
    """A call returns while the limit is full: the limit grows by two, but the new slots open
    a share of a round trip apart, so that an endpoint's 429 to the first call too many comes
    back before the start has sent many more."""
    clock = Clock()
    limit = AdaptiveLimit(start=4, clock=clock)
    while limit.try_acquire():
        pass
    limit.release(0.2)  # a whole round trip of 0.2 s at a full limit of 4
    assert limit.allowed == 6  # 4 calls returning in a round trip triple it
    assert limit.try_acquire()  # the returned call's own place
    assert not limit.try_acquire()  # the new ones are not open yet
    for _ in range(2):
        clock.now += 0.2 / 8  # 8 new slots a round trip
        assert limit.try_acquire()
        assert not limit.try_acquire()


async def test_callers_waiting_for_a_paced_slot_are_let_in_when_it_opens():
    limit = AdaptiveLimit(start=2)  # the real clock
    for _ in range(2):
        await limit.acquire()
    limit.release(0.4)  # grows to 4, the new slots open 0.1 and 0.2 s later
    await asyncio.wait_for(limit.acquire(), 1)
    started = asyncio.get_running_loop().time()
    await asyncio.wait_for(limit.acquire(), 1)  # woken by the timer, not by a release
    assert asyncio.get_running_loop().time() - started > 0.05


async def test_a_retry_inside_a_fixed_limit_keeps_the_outer_limits_place():
    """The embedded model's client is ``Limited(server, 1)``, and a run wraps it in its own
    adaptive limit. A call waiting to retry inside the fixed limit still holds its slot there:
    giving back its place in the outer limit let another call take it and wait for the fixed
    slot, and neither could go on (a run on the embedded model stopped forever after its first
    call timeout). It keeps both and goes on."""
    from autogen_core.models import SystemMessage

    order = []

    class Endpoint(FakeClient):
        retried = False

        async def create(self, messages, **kwargs):
            name = messages[0].content
            if name == "a" and not self.retried:
                self.retried = True
                order.append("a retries")
                await backoff(0.05)
            order.append(name)
            return await super().create(messages, **kwargs)

    client = Limited(Limited(Endpoint(), 1), AdaptiveLimit(start=1))
    first = asyncio.ensure_future(client.create([SystemMessage(content="a")]))
    await asyncio.sleep(0.01)
    await asyncio.wait_for(asyncio.gather(first, client.create([SystemMessage(content="b")])), 5)
    assert order == ["a retries", "a", "b"]


def test_a_long_pause_between_round_trips_does_not_overflow_the_floor():
    """A process stopped for minutes (or replies of microseconds) makes millions of round trips
    of drift between two judgements of the latency: the floor stops at the median, it does not
    overflow (it did, and the call that returned raised OverflowError)."""
    clock = Clock()
    limit = AdaptiveLimit(clock=clock)
    for pause in (0.0, 400.0):
        clock.now += pause
        for _ in range(64):
            assert limit.try_acquire()
            limit.release(0.0001)
    assert limit.limit >= 1
