"""One in-flight limit for the endpoint, shared by the driver and every Ray worker.

Stage: rollout (and the learning calls: every model call takes a slot).

The driver keeps the run's one limit, adaptive (``mas.models.limiter.AdaptiveLimit``) or the
fixed ``--concurrency`` (``Fixed``), uses it for its own learning calls, and serves it to the
workers on a TCP port of its own (``LimitServer``, one line a message). A worker reaches it
through a ``Shared`` handle, which ``mas.models.limiter.Limited`` takes like a limit of its
own: a call asks for a slot before it goes out (``A id``, answered ``G id``) and gives it back
when it returns, with its latency (``R seconds refused``), or says the endpoint answered 429
(``L``). So the limit sees every call at the endpoint, from whichever process, as in one.
A worker's slots go back when its connection closes (it died) or the driver drops it.

Measured (``bench/distributed.py``), the two other ways cost more. A limit per worker, each
adapting on its own: at an endpoint that refuses beyond 32 calls, 3% of the requests were
refused (0.5% from one process) and the step took 2.7 times as long. One limit in a Ray
actor: 2.3 ms of the actor's CPU and about 2 ms of the worker's per model call (two actor
calls), with 2 workers on 2 cores.
"""

from __future__ import annotations

import asyncio
import secrets

from mas.models.limiter import AdaptiveLimit


class Fixed:
    """A fixed limit with ``AdaptiveLimit``'s interface: at most ``n`` calls in flight."""

    def __init__(self, n: int):
        self.slots, self.in_flight = asyncio.Semaphore(n), 0

    async def acquire(self) -> None:
        await self.slots.acquire()
        self.in_flight += 1

    def release(self, latency: float | None, *, refused: bool = False) -> None:
        self.in_flight -= 1
        self.slots.release()

    def rate_limited(self) -> None:
        pass


class LimitServer:
    """The driver's limit, served to the workers on ``host``; ``address`` is what they get."""

    def __init__(self, concurrency: int | None, host: str):
        self.limit = AdaptiveLimit() if concurrency is None else Fixed(concurrency)
        self.host, self.token = host, secrets.token_hex(16)
        self.held: dict[str, int] = {}
        """Slots each worker holds, by its name."""
        self._writers: dict[str, asyncio.StreamWriter] = {}
        self._serving: set[asyncio.Task] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, 0)
        self.address = (self.host, self._server.sockets[0].getsockname()[1], self.token)

    async def close(self) -> None:
        """Stop serving; each connection's slots go back."""
        self._server.close()
        for writer in list(self._writers.values()):
            writer.close()
        for task in list(self._serving):
            task.cancel()
        await asyncio.gather(*self._serving, return_exceptions=True)

    def drop(self, holder: str) -> None:
        """``holder`` died: close its connection, and the slots it held go back."""
        if holder in self._writers:
            self._writers[holder].close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One worker's connection. It ends quietly however it ends (asyncio reports a handler
        that ends cancelled as an error)."""
        self._serving.add(task := asyncio.current_task())
        try:
            await self._messages(reader, writer)
        except asyncio.CancelledError:
            pass
        finally:
            self._serving.discard(task)

    async def _messages(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        token, _, holder = (await reader.readline()).decode().strip().partition(" ")
        if token != self.token or not holder:  # not one of ours
            writer.close()
            return
        self._writers[holder], self.held[holder], grants = writer, 0, set()

        async def grant(ask: str) -> None:
            await self.limit.acquire()
            self.held[holder] += 1
            writer.write(f"G {ask}\n".encode())

        try:
            while line := await reader.readline():
                op, *args = line.decode().split()
                if op == "A":
                    grants.add(task := asyncio.ensure_future(grant(args[0])))
                    task.add_done_callback(grants.discard)
                elif op == "R" and self.held[holder] > 0:
                    self.held[holder] -= 1
                    self.limit.release(None if args[0] == "-" else float(args[0]), refused=args[1] == "1")
                elif op == "L":
                    self.limit.rate_limited()
        except (ConnectionError, ValueError, IndexError):
            pass  # a worker killed mid-line, or a line that is not ours: the connection ends
        finally:
            for task in grants:
                task.cancel()
            await asyncio.gather(*grants, return_exceptions=True)
            for _ in range(self.held.pop(holder, 0)):
                self.limit.release(None)
            self._writers.pop(holder, None)
            writer.close()


class Shared:
    """A worker's handle on the driver's limit (``LimitServer.address``), connected at first use."""

    def __init__(self, address: tuple[str, int, str], holder: str):
        self.address, self.holder = address, holder
        self._writer: asyncio.StreamWriter | None = None
        self._waiting: dict[int, asyncio.Future] = {}
        self._asked = 0
        self._connecting = asyncio.Lock()

    async def _connect(self) -> asyncio.StreamWriter:
        async with self._connecting:
            if self._writer is None:
                host, port, token = self.address
                reader, self._writer = await asyncio.open_connection(host, port)
                self._writer.write(f"{token} {self.holder}\n".encode())
                self._reading = asyncio.ensure_future(self._read(reader))
            return self._writer

    async def _read(self, reader: asyncio.StreamReader) -> None:
        while line := await reader.readline():
            waiter = self._waiting.pop(int(line.split()[1]), None)
            if waiter is None or waiter.done():  # its call was cancelled while it waited: give it back
                self.release(None)
            else:
                waiter.set_result(None)
        for waiter in self._waiting.values():  # the driver went away
            if not waiter.done():
                waiter.set_exception(ConnectionError("the driver's in-flight limit closed"))

    async def acquire(self) -> None:
        writer = await self._connect()
        self._asked += 1
        waiter = self._waiting[self._asked] = asyncio.get_running_loop().create_future()
        writer.write(f"A {self._asked}\n".encode())
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # granted as it was cancelled
                self.release(None)
            raise

    def release(self, latency: float | None, *, refused: bool = False) -> None:
        if self._writer is not None:
            self._writer.write(f"R {'-' if latency is None else f'{latency:.6f}'} {int(refused)}\n".encode())

    def rate_limited(self) -> None:
        if self._writer is not None:
            self._writer.write(b"L\n")
