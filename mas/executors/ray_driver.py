"""Rollouts on Ray (``--executor ray``): whole rollouts run on Ray actors, everything else here.

Stage: rollout (where it runs: the driver's side of Ray).

``RayExecutor`` joins a Ray cluster (``address``; none: it starts a local Ray instance bound
to 127.0.0.1) and starts ``workers`` actors (``mas.executors.ray_worker.RolloutWorker``), each with its
own event loop, team factory and model client. The driver keeps what a run is: it draws the
exposures and seeds (the ``RolloutJob``), journals each rollout and each call it made, and runs
every learning stage and library write, under the run's lock. A rollout is the same wherever
it ran, so a run's journal, libraries and evidence are those of a local run with the same seed.

**The in-flight limit holds for the endpoint as a whole**: one limit, adaptive or the fixed
``--concurrency``, kept here and served to the workers (``mas.executors.ray_limit``): every call, this
process's learning calls and every worker's, takes a slot of it, as in one process.

**Faults.** Each worker holds at most ``window`` rollouts at once. A worker that dies (its
process killed, its machine gone) loses only those: each goes to another worker, up to
``ATTEMPTS`` times, and the dead one is replaced. A worker journals nothing: the driver
journals a rollout's calls when the rollout comes back, so a retried rollout starts again from
its first call, and so does a rollout that was under way when the driver was killed (in a
local run it would go on from its last journaled call). A worker that cannot reach the
endpoint fails its rollouts with the endpoint's error (after the client's retries), counted
like any failed rollout.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import os
import socket
import sys
from typing import Any
from urllib.parse import urlsplit

from mas.errors import UserError
from mas.executors import RolloutJob
from mas.executors.ray_limit import Fixed, LimitServer
from mas.executors.ray_worker import Opener, RolloutWorker
from mas.journal import Journal
from mas.meter import Meter
from mas.models.limiter import MOST, AdaptiveLimit
from mas.team.scenario import Scenario
from mas.tools import isolation
from mas.types.lessons import Version
from mas.types.reports import EndpointCounts
from mas.types.rollouts import Rollout

EXTRA = "pip install -e '.[ray]'"
ATTEMPTS = 3
"""Workers a rollout is sent to before it fails: its first, and two after workers died under it."""
FORWARDED = (isolation.UNSAFE_ENV, "MAS_SANDBOX_CGROUP")
"""Settings of the python tool's sandbox the workers get from this process's environment."""


def import_ray(*, local: bool) -> Any:
    """Ray, imported now; a ``UserError`` naming the extra when it is not installed. For a
    ``local`` instance (started here, or joined on 127.0.0.1), Ray's addresses are the loopback
    one: the instance serves this machine only."""
    if local:
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # read at import; the subprocesses inherit it
        os.environ.setdefault("RAY_AUTH_MODE", "token")  # Ray's default for a new instance, said: no warning
    try:
        import ray
    except ImportError:
        raise UserError(f"--executor ray needs Ray: {EXTRA}") from None
    if local and "ray._private.ray_constants" in sys.modules:  # imported before us: read again on use
        sys.modules["ray._private.ray_constants"].ENABLE_RAY_CLUSTER = False
    return ray


@dataclasses.dataclass
class _Worker:
    actor: Any
    holder: str
    """Its name at the limit (``mas.executors.ray_limit.LimitServer``)."""
    outstanding: int = 0
    alive: bool = True
    counts: EndpointCounts | None = None
    """What it met at the endpoint when last asked (kept when it dies)."""


class RayExecutor:
    """Runs rollouts on Ray actors; ``await start()`` before use, ``await close()`` after
    (``async with`` does both)."""

    def __init__(
        self,
        scenario: Scenario,
        opener: Opener,
        *,
        address: str | None = None,
        workers: int | None = None,
        concurrency: int | None = None,
        window: int | None = None,
    ):
        self.scenario, self.opener, self.address, self.concurrency = scenario, opener, address, concurrency
        self.count, self.window = workers, window
        self.workers: list[_Worker] = []
        self.retried = 0
        """Rollouts sent again after a worker died under them."""
        self.lost = 0
        """Workers that died."""
        self._ray: Any = None
        self._owned = False
        self._made = 0
        self._free = asyncio.Condition()
        self._heads: dict[int, tuple[dict, Any]] = {}

    async def __aenter__(self) -> RayExecutor:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # -- start, stop

    async def start(self) -> None:
        local = self.address is None or _loopback(self.address)
        ray = self._ray = import_ray(local=local)
        if not ray.is_initialized():
            if self.address is not None:
                _reachable(self.address)
            options = {"include_dashboard": False, "configure_logging": False, "log_to_driver": False}
            if self.address is None:  # "local": a new instance, whatever RAY_ADDRESS says
                options["num_cpus"] = max(os.cpu_count() or 1, self.count or 1)
            try:
                ray.init(address=self.address or "local", **options)
            except (ConnectionError, ValueError, RuntimeError) as exc:
                raise UserError(f"--ray-address {self.address}: cannot join the Ray cluster ({exc})") from None
            self._owned = True
        try:
            await self._start_workers(ray, local)
        except BaseException:  # what was started goes: the Ray instance, the workers, the limit
            await self.close()
            raise

    async def _start_workers(self, ray, local: bool) -> None:
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.count = self.count or max(1, cpus)
        if self.count > cpus:
            raise UserError(f"--workers {self.count}: the Ray cluster has {cpus} CPUs (a worker takes one)")
        self.window = self.window or 2 * (self.concurrency or MOST)
        host = "127.0.0.1" if local else ray.util.get_node_ip_address()
        self.limit = LimitServer(self.concurrency, host)
        await self.limit.start()
        env = {k: os.environ[k] for k in FORWARDED if k in os.environ}
        self._actor = ray.remote(RolloutWorker).options(
            num_cpus=1, max_concurrency=100_000, max_restarts=0, **({"runtime_env": {"env_vars": env}} if env else {})
        )  # fmt: skip
        try:
            self._scenario = ray.put(self.scenario)
        except Exception as exc:  # cloudpickle raises whatever the object's reducer raises
            raise UserError(f"--executor ray: the scenario cannot be sent to the workers ({exc})") from None
        self.workers = [self._new() for _ in range(self.count)]
        try:
            self.pids = await asyncio.gather(*(w.actor.ready.remote() for w in self.workers))
        except ray.exceptions.RayError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, UserError):
                raise UserError(str(cause)) from None
            raise UserError(f"--executor ray: a worker could not start ({_first_line(exc)})") from None

    def _new(self) -> _Worker:
        self._made += 1
        holder = f"worker-{self._made}"
        return _Worker(self._actor.remote(self._scenario, self.opener, self.limit.address, holder), holder)

    async def close(self) -> None:
        ray, self._heads = self._ray, {}
        if ray is None:
            return
        live = [w for w in self.workers if w.alive]
        if live:
            await asyncio.wait([asyncio.ensure_future(_awaited(w.actor.close.remote())) for w in live], timeout=10)
        for w in live:
            ray.kill(w.actor)
        if hasattr(self, "limit"):
            await self.limit.close()
        if self._owned:
            ray.shutdown()

    # -- the executor

    @property
    def in_flight(self) -> int:
        """Model calls in flight now, every worker's and this process's (for a progress bar)."""
        return self.limit.limit.in_flight

    def learning_limit(self, concurrency: int | None) -> AdaptiveLimit | Fixed:
        """The limit every worker shares (``concurrency`` is this executor's)."""
        return self.limit.limit

    async def run(self, job: RolloutJob, *, journal: Journal | None, meter: Meter) -> Rollout:
        replies = journal.calls_of(job.key) if journal is not None else {}
        heads, sent = self._put(job.heads), dataclasses.replace(job, heads={})
        lost = self._ray.exceptions.RayActorError, self._ray.exceptions.WorkerCrashedError
        for attempt in range(ATTEMPTS):
            worker = await self._take()
            try:
                rollout, calls = await worker.actor.run.remote([heads], sent, replies)
            except lost:
                self._died(worker)
                continue
            finally:
                await self._give(worker)
            if journal is not None:
                for kind, key, data in calls:
                    await journal.record(kind, key, data, sync=False)
            meter.add(rollout.calls)
            self.retried += attempt > 0
            return rollout
        failed = Meter()
        failed.fail("rollout", "worker lost")
        meter.add(calls := failed.snapshot())
        error = f"worker lost: {ATTEMPTS} Ray workers died running this rollout"
        return Rollout(task_id=job.task.id, index=job.index, traces=[], answer=None, error=error, calls=calls)

    async def endpoint_counts(self) -> EndpointCounts | None:
        live = [w for w in self.workers if w.alive]
        found = await asyncio.gather(*(w.actor.counts.remote() for w in live), return_exceptions=True)
        for worker, counts in zip(live, found):
            if not isinstance(counts, BaseException):
                worker.counts = counts
        total = None
        for counts in (w.counts for w in self.workers if w.counts is not None):
            total = counts if total is None else total.plus(counts)
        return total

    # -- workers

    def _put(self, heads: dict[str, Version]) -> Any:
        """The libraries in Ray's object store, once for every job that shares them (a step's,
        an evaluation's): sent by reference, each worker reads them once."""
        found = self._heads.get(id(heads))
        if found is None or found[0] is not heads:
            if len(self._heads) >= 4:
                self._heads.pop(next(iter(self._heads)))
            found = self._heads[id(heads)] = (heads, self._ray.put(heads))
        return found[1]

    async def _take(self) -> _Worker:
        """The live worker with the fewest rollouts, once one has fewer than ``window``."""
        async with self._free:
            while True:
                live = [w for w in self.workers if w.alive and w.outstanding < self.window]
                if live:
                    worker = min(live, key=lambda w: w.outstanding)
                    worker.outstanding += 1
                    return worker
                await self._free.wait()

    async def _give(self, worker: _Worker) -> None:
        async with self._free:
            worker.outstanding -= 1
            self._free.notify()

    def _died(self, worker: _Worker) -> None:
        """A worker died: its rollouts go elsewhere, and a new worker takes its place."""
        if worker.alive:
            worker.alive, self.lost = False, self.lost + 1
            self.limit.drop(worker.holder)  # the slots its calls held go back
            self.workers.append(self._new())


def _where(address: str) -> tuple[str | None, int | None]:
    """The host and port of a Ray address (``10.0.0.5:6379``, ``ray://head:10001``)."""
    try:
        parts = urlsplit(address if "://" in address else f"//{address}")
        return parts.hostname, parts.port
    except ValueError:
        return None, None


def _loopback(address: str) -> bool:
    """Whether ``address`` is on this machine's loopback: Ray must then use loopback addresses
    throughout (left to itself, it reaches for the machine's own address, and waits forever)."""
    host = _where(address)[0]
    try:
        return host == "localhost" or (host is not None and ipaddress.ip_address(host).is_loopback)
    except ValueError:
        return False


def _reachable(address: str, seconds: float = 10.0) -> None:
    """A ``UserError`` now when nothing answers at ``address`` (Ray itself would retry forever)."""
    host, port = _where(address)
    if host is None or port is None:
        raise UserError(f"--ray-address {address}: expected HOST:PORT (what ray start --head prints)")
    try:
        socket.create_connection((host, port), timeout=seconds).close()
    except OSError as exc:
        raise UserError(f"--ray-address {address}: nothing answers there ({exc.strerror or exc})") from None


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


async def _awaited(ref) -> Any:
    return await ref
