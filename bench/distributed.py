"""Distributed: one training step with its rollouts in this process (``local``) and on Ray
workers (``--executor ray``, 1 and 2 workers), side by side in one run, against a loopback
endpoint with many slots (512, 2 s a reply) where one process is CPU-bound.

Goal: ``ray`` with 2 workers >= 1.7x the calls per second of ``local`` on 2 cores (with
``--refuse``, an endpoint that answers 429 beyond its slots: <= 2% of requests answered 429
with every executor, ``--workers 1,4`` say). Reported per
executor: efficiency (the bound of the step's call dependencies, ``bound.py``, over the wall
time), calls per second, and the CPU per model call of each kind of process (this one, the
workers, Ray's own, the endpoint); the rollouts' own ratio beside their latency bound, and the
most the step could reach with them at it (the learning stages stay in this process, whatever
the executor); the CPU a rollout's trip to a worker costs (pickling its job
and the ``Rollout`` it returns, with its calls' replies, per model call); and, from the
measured CPU per call, an estimate on paper for 8 machines x 16 workers.

The endpoint is ``tests/fault_server.py`` in its own process (``scale.py``'s), a fresh one per
executor. Ray starts once (its start is timed apart). This machine has 2 cores for everything
here: the endpoint, this process, the workers and Ray's own processes.
Run: .venv/bin/python bench/distributed.py [--tasks N] [--latency S]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bound import step_bound

from mas.config import PromotionPolicy, TrainConfig
from mas.domains.maths import generate
from mas.executors.ray_driver import EXTRA, RayExecutor, import_ray
from mas.library.store import LibraryStore
from mas.models.clients import open_client
from mas.team.scenario import load_scenario
from mas.testing import descendants
from mas.train import train

G, SLOTS, GOAL, REFUSED = 8, 512, 1.7, 0.02
ROOT = str(Path(__file__).resolve().parents[1])
TICK = os.sysconf("SC_CLK_TCK")
KINDS = ("this process", "workers", "Ray's own", "endpoint")


def scenario(tasks: int):
    maths = load_scenario("maths")
    return dataclasses.replace(maths, tasks=generate(tasks, seed=14, prefix="distributed"))


def cpu_of(pids) -> float:
    """Seconds of CPU the processes ``pids`` used so far (one gone counts 0)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICK


async def step(spec, url: str, folder: Path, workers: int, endpoint: int) -> dict:
    """One step of every task of ``spec``, its rollouts on ``workers`` Ray workers (0: here)."""
    config = TrainConfig(tasks=len(spec.tasks), batch_size=len(spec.tasks), group_size=G)
    config = config.model_copy(update={"promotion": PromotionPolicy(cadence="off")})
    opener = functools.partial(open_client, "openai:bench", base_url=url, api_key="sk-bench")
    async with (
        open_client("openai:bench", base_url=url, api_key="sk-bench") as client,
        _executor(spec, opener, workers) as executor,
    ):
        pids = {"workers": list(executor.pids) if executor else []}
        pids["Ray's own"] = sorted(descendants(os.getpid()) - {*pids["workers"], endpoint})
        pids["endpoint"] = [endpoint]
        before = {kind: cpu_of(p) for kind, p in pids.items()}
        cpu, started, ended = time.process_time(), time.perf_counter(), []
        result = await train(
            spec, client=client, store=LibraryStore(folder / "lib.json"), run_dir=folder / "run", config=config,
            executor=executor, on_rollout=lambda n: ended.append(time.perf_counter() - started),
        )  # fmt: skip
        wall = time.perf_counter() - started
        used = {"this process": time.process_time() - cpu, **{k: cpu_of(p) - before[k] for k, p in pids.items()}}
    return {
        "report": result.steps[0], "wall": wall, "rollouts": ended[-1], "cpu": used,
        "journal": folder / "run" / "journal.jsonl",
    }  # fmt: skip


def _executor(spec, opener, workers: int):
    return RayExecutor(spec, opener, workers=workers) if workers else contextlib.nullcontext()


def trip_cost(journal: Path) -> tuple[float, int]:
    """Seconds of CPU to pickle and unpickle what crosses to and from a worker for each rollout
    of ``journal`` (its job without the libraries, which go once per step; its ``Rollout`` and
    the replies of its calls), as Ray does (cloudpickle, protocol 5); and the rollouts' calls."""
    from ray import cloudpickle

    from mas.executors import RolloutJob
    from mas.types.lessons import Budget
    from mas.types.rollouts import Rollout
    from mas.types.tasks import Task

    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    calls: dict[str, list] = {}
    for r in lines:
        if r["kind"] == "call":
            calls.setdefault(r["key"].rsplit("/", 2)[0], []).append(("call", r["key"], r["data"]))
    trips = []
    for r in (r for r in lines if r["kind"] == "rollout"):
        rollout = Rollout.model_validate(r["data"])
        task = Task(id=rollout.task_id, question="x" * 120, answer="1")
        job = RolloutJob(r["key"], task, rollout.index, {}, {"seed": 1, "temperature": 0.7}, 300.0, Budget())
        trips.append(([None], job, {}))
        trips.append((rollout, calls.get(r["key"], [])))
    started = time.process_time()
    for item in trips:
        cloudpickle.loads(cloudpickle.dumps(item, protocol=5))
    return time.process_time() - started, sum(len(c) for c in calls.values())


SERVE = """
import sys
sys.path.insert(0, {root!r})
from tests.fault_server import FaultServer
server = FaultServer().pace({latency}, {slots}, refuse={refuse}).start()
print(server.url, flush=True)
sys.stdin.read()
print(server.served, server.refused, server.peak, flush=True)
"""


def serve(args) -> tuple[subprocess.Popen, str]:
    code = SERVE.format(root=ROOT, latency=args.latency, slots=args.slots, refuse=args.refuse)
    server = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return server, server.stdout.readline().strip()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=128, help="tasks of the step (G = 8)")
    parser.add_argument("--latency", type=float, default=2.0, help="seconds per reply")
    parser.add_argument("--slots", type=int, default=SLOTS, help="requests the endpoint serves at once")
    parser.add_argument("--refuse", action="store_true", help="answer 429 beyond the slots (else: queue)")
    parser.add_argument("--workers", default="1,2", help="the Ray configurations, by their workers")
    args = parser.parse_args()
    if importlib.util.find_spec("ray") is None:
        print(f"distributed: needs Ray, the ray extra ({EXTRA})")
        return 2
    spec, ray, rows = scenario(args.tasks), None, {}
    counts = [int(n) for n in args.workers.split(",")]
    for workers in [0, *counts]:
        if workers and ray is None:  # after the local step: Ray's idle processes take some CPU too
            started, ray = time.perf_counter(), import_ray(local=True)
            options = {"include_dashboard": False, "configure_logging": False, "log_to_driver": False}
            ray.init(address="local", num_cpus=max(2, *counts), **options)
            print(f"Ray started in {time.perf_counter() - started:.1f} s (not counted below)")
        label = f"ray, {workers} worker{'s' if workers > 1 else ''}" if workers else "local"
        server, url = serve(args)
        try:
            with TemporaryDirectory() as tmp:
                rows[label] = asyncio.run(step(spec, url, Path(tmp), workers, server.pid))
                if workers:
                    rows[label]["trip"] = trip_cost(rows[label]["journal"])
        finally:
            served, refused, peak = map(int, server.communicate("", timeout=30)[0].split())
            rows[label].update(refused=refused / max(served + refused, 1), peak=peak)
    if ray is not None:
        ray.shutdown()
    return report(rows, args)


def report(rows: dict, args) -> int:
    endpoint = f"{args.slots} slots{' (429 beyond)' if args.refuse else ''}, {args.latency:g} s per reply"
    print(f"\none step: {args.tasks} tasks x G={G} x 3 roles, {endpoint}, {os.cpu_count()} cores")
    print(
        f"{'executor':<15} {'calls':>6} {'wall s':>6} {'bound':>6} {'effic':>5} {'calls/s':>7} {'peak':>4} {'429':>5}",
        end="",
    )
    print("  CPU ms per call: " + ", ".join(KINDS) + ", all")
    for label, row in rows.items():
        r = row["report"]
        row["calls"] = calls = sum(c.calls for c in r.calls.values())
        bound = step_bound({k: c.calls for k, c in r.calls.items()}, r.informative, args.slots, args.latency)
        row["rate"], row["all"] = calls / row["wall"], sum(row["cpu"].values()) / calls
        print(f"{label:<15} {calls:>6} {row['wall']:>6.1f} {bound:>6.1f} {bound / row['wall']:>5.2f} ", end="")
        print(f"{row['rate']:>7.1f} {row['peak']:>4} {row['refused']:>5.1%}  ", end="")
        print(" / ".join(f"{row['cpu'][k] / calls * 1000:.1f}" for k in KINDS) + f" / {row['all'] * 1000:.1f}")
    first = rows["local"]["report"]
    learning = sum(c.calls for k, c in first.calls.items() if k != "rollout")
    print(f"(calls by stage: {', '.join(f'{k} {c.calls}' for k, c in first.calls.items())}; this process makes")
    print(f" the {learning} learning calls whatever the executor)")
    if args.refuse:  # the limit's goal: refusals as rare with many workers as in one process
        ok = all(row["refused"] <= REFUSED for row in rows.values())
        print(f"\n{'PASS' if ok else 'FAIL'}  requests answered 429 <= {REFUSED:.0%} with every executor")
        return 0 if ok else 1
    two = rows.get("ray, 2 workers")
    if two is None:
        return 0
    local = rows["local"]
    ratio = two["rate"] / local["rate"]
    trip, rollout_calls = two["trip"]
    # The most 2 workers could reach here: every core busy at the CPU per call they measured,
    # against local's one process at its own CPU per call (the others' on the other core).
    ceiling = min(os.cpu_count() / two["all"], args.slots / args.latency)
    local_ceiling = min(1 / (local["cpu"]["this process"] / local["calls"]), args.slots / args.latency)
    print(f"\nray, 2 workers / local: {ratio:.2f}x the calls per second (goal >= {GOAL}x); at this CPU per call,")
    print(
        f"with every core busy: at most {ceiling / local_ceiling:.2f}x ({ceiling:.0f} against {local_ceiling:.0f} calls/s)"
    )
    # The learning stages stay in this process, the same with any executor: with the rollouts at
    # their latency bound, the step could take no less than that bound plus ray's learning stages.
    learning = two["wall"] - two["rollouts"]
    fastest = first.calls["rollout"].calls * args.latency / args.slots
    print(
        f"the rollouts alone: {local['rollouts'] / two['rollouts']:.2f}x ({two['rollouts']:.1f} s against"
        f" {local['rollouts']:.1f}, bound {fastest:.1f}); the learning stages after them take {learning:.1f} s:"
    )
    print(f"with the rollouts at their bound, the step could reach {local['wall'] / (fastest + learning):.2f}x at most")
    print(f"CPU per call over local, all processes: {(two['all'] - local['all']) * 1000:+.1f} ms; of it, pickling")
    print(f"a rollout's job and its result both ways: {trip / rollout_calls * 1000:.2f} ms per rollout call")
    paper(two)
    ok = ratio >= GOAL
    print(f"\n{'PASS' if ok else 'FAIL'}  ray with 2 workers >= {GOAL}x local")
    return 0 if ok else 1


def paper(row: dict) -> None:
    """8 machines x 16 workers on paper, from the CPU per call measured with 2 workers: what
    the 128 workers could send, and what the one driver can take (it journals every rollout,
    serves the in-flight limit and makes every learning call)."""
    rollout_calls = row["report"].calls["rollout"].calls
    learning = row["calls"] - rollout_calls
    worker = row["cpu"]["workers"] / rollout_calls
    driver = row["cpu"]["this process"] / row["calls"]
    rates = {"the 128 workers": 8 * 16 / worker, "the driver": 1 / driver}
    print("\non paper, 8 machines x 16 workers, a core each, from the CPU per call measured with 2 workers:")
    print(
        f"  a worker spends {worker * 1000:.1f} ms per rollout call: the 128 send up to {rates['the 128 workers']:,.0f} calls/s"
    )
    print(
        f"  the driver spends {driver * 1000:.1f} ms per call of the step ({learning} of its {row['calls']} calls are"
    )
    print(f"  its learning calls): it takes up to {rates['the driver']:,.0f} calls/s")
    print(f"  so about {min(rates.values()):,.0f} calls a second, held by {min(rates, key=rates.get)}")


if __name__ == "__main__":
    sys.exit(main())
