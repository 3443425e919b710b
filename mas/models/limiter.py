"""How many model calls are in flight: a fixed number, or one adapted to the endpoint.

Stage: none: the model seam (every model call takes a slot).

An endpoint serves some number of requests at once, unknown to mas. Below it, slots idle;
above it, the endpoint either queues (latency rises: vLLM, llama.cpp) or refuses (429: hosted
APIs). ``AdaptiveLimit`` finds it from the endpoint's answers, TCP-style:

- **start**: from ``start`` (2) calls, the limit grows by ``GAIN`` (2) per call that returns
  while the limit is full, so it triples every round trip (2, 6, 18, 54: a doubling took four
  round trips to 32 slots, in a step of about ten), the new slots opening one by one across the
  round trip (paced: a 429 answered at once stops the growth a call or two past the endpoint,
  where slots opened all at once met a 429 each), until the first 429 or rising latency (then
  it halves: the last growth went too far; a client slowed by its own work shows this too,
  and its calls would reach the endpoint all at once later);
- **429**: the limit falls by one per 429, and to one below the calls in flight when it came
  (the most the endpoint took); one more than that becomes the ceiling; the limit stays below
  it, and tries it again (one call more) only after ``probe`` (50) more calls have returned,
  twice as many after each failed try (at most ``PROBE_MAX``), so that refusals stay rare: a
  handful, then about one per thousands of calls; a try that returns without a 429 lifts the
  ceiling, and the limit grows by one per round trip from there;
- **latency**: grows by one per round trip while the median latency of recent calls stays
  within ``GROWTH`` (1.5) x the lowest median seen (medians of a window, so that short and long
  replies do not read as congestion, and a client slowed by its own work stops growing); above
  ``tolerance`` (2) x (the endpoint queues), the limit shrinks by a fifth, at most once per
  round trip. A tolerance of 2 lets as many calls wait at a queueing
  endpoint as it serves: they hide the client's own time between a reply and its next request.
  The lowest median drifts up 0.2% per round trip, so that an endpoint that becomes slower for
  good (longer prompts) is not read as a queue forever; the price: over hundreds of round trips
  at a queueing endpoint, the queue allowed grows slowly.

``Limited(client, n)`` holds at most n calls in flight; ``Limited(client, None)`` adapts.
The endpoint adapter (``mas.models.endpoint``) tells the limit that admitted the current call
about a 429 (``rate_limited()``), and waits out its backoff before a retry with ``backoff()``,
which gives the call's place back meanwhile: a call waiting to retry holds no slot, so the
count in flight is the count at the endpoint.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
import statistics
import time
from collections import deque
from collections.abc import Awaitable, Callable

from autogen_core.models import ChatCompletionClient, CreateResult

from mas.models.wrappers import QUEUED, Delegating

START, GAIN, MOST, PROBE, PROBE_MAX, GROWTH, TOLERANCE, WINDOW = 2, 2, 512, 50, 5000, 1.5, 2.0, 64
DRIFT_TRIPS = 10_000
"""The most round trips of drift counted at once (1.002 ** 10,000 is 4.8e8, past any median)."""


class AdaptiveLimit:
    """The limit and the in-flight count; ``clock`` is injectable for tests."""

    def __init__(
        self,
        *,
        start: int = START,
        most: int = MOST,
        probe: int = PROBE,
        tolerance: float = TOLERANCE,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.limit, self.most, self.probe, self.tolerance, self.clock = float(start), most, probe, tolerance, clock
        self.in_flight = 0
        self.starting = True
        self.ceiling: int | None = None
        """One more than the calls the endpoint took when it last answered 429: the limit
        stays below it until ``returned`` reaches ``probe_at``, then tries it."""
        self.returned = 0
        """Calls that returned (not refused)."""
        self.probe_at, self.probe_wait, self.probing = 0, probe, 0.0
        self.refusals = 0
        self._samples: list[float] = []
        self._window = 4
        self._best = math.inf
        self._judged_at = 0.0
        self._queueing = False
        self._holding = True
        self._cut_at = -math.inf
        self._full_at = -math.inf
        self._waiters: deque[asyncio.Future] = deque()
        self._opens: deque[float] = deque()
        """When the slots the start added open: paced across a round trip, not all at once."""
        self._timer: asyncio.TimerHandle | None = None

    # -- admission

    @property
    def allowed(self) -> int:
        return max(1, int(self.limit))

    def _closed(self) -> int:
        """Slots the start has added that are not open yet."""
        if not self.starting:
            self._opens.clear()
        now = self.clock()
        while self._opens and self._opens[0] <= now:
            self._opens.popleft()
        return len(self._opens)

    def try_acquire(self) -> bool:
        if self.in_flight >= self.allowed - self._closed():
            self._full_at = self.clock()
            return False
        self.in_flight += 1
        if self.in_flight >= self.allowed:
            self._full_at = self.clock()
        if self.ceiling is not None and self.in_flight >= self.ceiling and not self.probing:
            self.probing = self.clock()  # the probe is out: a 429 before it returns means no
        return True

    async def acquire(self) -> None:
        while not self.try_acquire():
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            self._arm()
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake()  # pass on a wake-up this task can no longer use
                raise

    def release(self, latency: float | None, *, refused: bool = False) -> None:
        """A call ended (or stepped out to wait for a retry): its latency (None when it failed
        or was refused), and whether it met a 429."""
        self.in_flight -= 1
        if not refused and latency is not None:
            self._returned(latency)
        self._wake()

    def _wake(self) -> None:
        room = self.allowed - self._closed() - self.in_flight
        while room > 0 and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                room -= 1
        self._arm()

    def _arm(self) -> None:
        """Wake the waiters again when the next paced slot opens."""
        if self._timer is None and self._waiters and self._closed():

            def fire() -> None:
                self._timer = None
                self._wake()

            delay = max(0.0, self._opens[0] - self.clock())
            self._timer = asyncio.get_running_loop().call_later(delay, fire)

    # -- the endpoint's answers

    def rate_limited(self) -> None:
        """A 429: the endpoint took fewer calls than are in flight now (this one included), and
        each call refused was one too many. The limit falls by one per 429, and to one below
        the calls in flight: a start that doubled 32 calls to 64 meets 32 refusals at once,
        which bring it back to 32 (falling to the calls in flight alone, it stayed near 63
        while they all came back refused)."""
        self.refusals += 1
        took = max(1, self.in_flight - 1)
        self.limit, self.starting = float(max(1, min(self.allowed - 1, took))), False
        if self.ceiling is not None and self.returned < self.probe_at:  # more of the same: a lower ceiling
            self.ceiling = min(self.ceiling, self.allowed + 1)
            return
        self.probe_wait = min(PROBE_MAX, self.probe_wait * 2) if self.probing else self.probe
        self.ceiling, self.probe_at, self.probing = self.allowed + 1, self.returned + self.probe_wait, 0.0

    def _returned(self, latency: float) -> None:
        now = self.clock()
        self.returned += 1
        if not self._samples:  # a window of about one round trip's calls, at the limit it starts at
            self._window = min(max(self.allowed, 4), WINDOW)
        if latency > 0:  # a call timed at zero (a Ray worker rounds to 1 us) says nothing, and a zero median divides
            self._samples.append(latency)
        if len(self._samples) >= self._window:
            median = statistics.median(self._samples)
            self._samples.clear()
            trips = (now - self._judged_at) / median if math.isfinite(self._best) else 0.0
            # The floor drifts up 0.2% a round trip, to the median at most. After a pause (the
            # process stopped, the machine asleep), or with replies of microseconds, the trips are
            # millions, and 1.002 to their power would overflow a float.
            self._best = min(self._best * 1.002 ** min(trips, DRIFT_TRIPS), median)
            self._judged_at = now
            self._holding = median <= GROWTH * self._best
            self._queueing = median > self.tolerance * self._best
            if self.starting and not self._holding:  # the start overshot: back to the last limit that held
                self.limit, self.starting = max(1.0, self.limit / 2), False
            if self._queueing and now - self._cut_at > median:  # at most one cut per round trip
                self.limit, self.starting, self._cut_at = max(1.0, self.limit * 0.8), False, now
        if self.probing and latency < now - self.probing:  # a whole call at the ceiling, and no 429
            self.ceiling, self.probing, self.probe_wait = None, 0.0, self.probe
        if not self._holding or self._full_at < now - latency * 1.01 - 0.001:
            return  # latency climbs, or the limit held nothing back while this call ran: no reason to grow
        grown = self.limit + (GAIN if self.starting else 1.0 / self.limit)
        if self.ceiling is not None and grown >= self.ceiling:
            if self.returned < self.probe_at or self.probing:
                grown = min(grown, self.ceiling - 1.0)
            else:  # try one call more than the endpoint took last time (``probing``: when it went out)
                grown = float(self.ceiling)
        before = self.allowed
        self.limit = max(self.limit, min(float(self.most), grown))
        for _ in range(self.allowed - before if self.starting else 0):  # new slots open across a round trip
            self._opens.append(max(self._opens[-1] if self._opens else now, now) + latency / (GAIN * before))


class _Call:
    """The current call's place under an adaptive limit (in a context variable)."""

    def __init__(self, limit: AdaptiveLimit):
        self.limit, self.holding, self.refused = limit, False, False


_CALL: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("mas_call_limit", default=None)


def rate_limited() -> None:
    """Tell the limit that admitted the current call that the endpoint answered 429."""
    call = _CALL.get()
    if call is not None:
        call.refused = True
        call.limit.rate_limited()


async def backoff(seconds: float) -> None:
    """Wait ``seconds`` before the current call's next attempt, out of its limit meanwhile."""
    call = _CALL.get()
    if call is None or not call.holding:
        await asyncio.sleep(seconds)
        return
    call.holding = False
    call.limit.release(None, refused=call.refused)
    await asyncio.sleep(seconds)
    await _queue(call.limit.acquire)
    call.holding = True


async def _queue(acquire: Callable[[], Awaitable[object]]) -> None:
    """Wait for a slot; the wait counts on the running rollout's queue clock (``QUEUED``), not
    on its deadline."""
    clock = QUEUED.get()
    if clock is not None:
        clock.enter()
    try:
        await acquire()
    finally:
        if clock is not None:
            clock.leave()


class Limited(Delegating):
    """At most ``n`` calls in flight, across every rollout and learning call of a run; with
    ``n=None``, as many as the endpoint takes (``AdaptiveLimit``)."""

    def __init__(self, inner: ChatCompletionClient, n: int | AdaptiveLimit | None):
        super().__init__(inner)
        fixed = isinstance(n, int)
        self.adaptive = None if fixed else n or AdaptiveLimit()
        self.slots = asyncio.Semaphore(n) if fixed else None

    async def create(self, messages, **kwargs) -> CreateResult:
        if self.adaptive is None:
            await _queue(self.slots.acquire)
            # A retry's wait in here keeps an outer limit's place (``backoff``): giving it back
            # while this slot is held lets another call take it and wait for this slot, and
            # then neither can go on.
            outer = _CALL.set(None)
            try:
                return await self.inner.create(messages, **kwargs)
            finally:
                _CALL.reset(outer)
                self.slots.release()
        call = _Call(self.adaptive)
        await _queue(call.limit.acquire)
        call.holding, start, latency = True, time.perf_counter(), None
        token = _CALL.set(call)
        try:
            result = await self.inner.create(messages, **kwargs)
            latency = None if call.refused else time.perf_counter() - start
            return result
        finally:
            _CALL.reset(token)
            if call.holding:
                call.limit.release(latency, refused=call.refused)
