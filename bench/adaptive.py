"""Self-tuning concurrency: one training step with the default settings against endpoints of
2, 8 and 32 slots that answer 429 beyond them, their size unknown to mas.

Goals, for each endpoint: efficiency (the bound of its call dependencies / wall time) >= 0.85,
and at most 2% of the requests it received answered 429.

The step is the pipeline benchmark's (16 tasks, G = 5, the maths team's three roles), and so is
the bound (``bound.py``). A reply takes 0.5 s (``--latency``): at the pipeline
benchmark's 0.2 s, 32 slots ask 160 calls a second of the client, more than one core drives
through autogen and the openai SDK (about 10 ms of CPU per call, see ``scale.py``); a real
model's replies take seconds. A request beyond the slots gets a 429 at once, with no
Retry-After: the client backs off and retries, and the in-flight limit (``mas.models.limiter``)
learns from it. Each endpoint runs in its own process. ``--fixed`` also runs each step with
the concurrency set by hand to the endpoint's slots (which no one knows beforehand), as a
reference: what the client itself allows on this machine.
Run: .venv/bin/python bench/adaptive.py [--latency S] [--fixed] [SLOTS ...]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bound import step_bound

from mas.config import PromotionPolicy, TrainConfig
from mas.library.store import LibraryStore
from mas.models.clients import open_client
from mas.scenario import load_scenario
from mas.train import train

SIZES, GOAL, MOST_REFUSED = (2, 8, 32), 0.85, 0.02

SERVE = """
import sys
sys.path.insert(0, {root!r})
from tests.fault_server import FaultServer
server = FaultServer().pace({latency}, {slots}, refuse=True).start()
print(server.url, flush=True)
sys.stdin.read()
print(server.served, server.refused, server.peak, flush=True)
"""


async def step(url: str, folder: Path, concurrency: int | None):
    config = TrainConfig(
        tasks=16, batch_size=16, group_size=5, concurrency=concurrency, promotion=PromotionPolicy(cadence="off")
    )
    async with open_client("openai:bench", base_url=url, api_key="sk-bench") as client:
        store = LibraryStore(folder / "lib.json")
        started = time.perf_counter()
        result = await train(load_scenario("maths"), client=client, store=store, run_dir=folder / "run", config=config)
        return result.steps[0], time.perf_counter() - started


def one(slots: int, latency: float, concurrency: int | None = None) -> tuple[float, float]:
    code = SERVE.format(root=str(Path(__file__).resolve().parents[1]), latency=latency, slots=slots)
    server = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    url = server.stdout.readline().strip()
    try:
        with TemporaryDirectory() as tmp:
            report, wall = asyncio.run(step(url, Path(tmp), concurrency))
    finally:
        served, refused, peak = map(int, server.communicate("", timeout=10)[0].split())
    calls = sum(c.calls for c in report.calls.values())
    bound = step_bound({k: c.calls for k, c in report.calls.items()}, report.informative, slots, latency)
    share = refused / max(served + refused, 1)
    failures = report.endpoint.failures if report.endpoint else 0
    print(
        f"{slots:>5} {concurrency or 'auto':>5} {calls:>6} {bound:>8.2f} {wall:>7.2f} {bound / wall:>6.3f} {peak:>5} "
        f"{served + refused:>9} {refused:>5} {share:>7.2%} {failures:>6}",
        flush=True,
    )
    return bound / wall, share


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("sizes", nargs="*", type=int, default=list(SIZES), help="endpoint slots")
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per reply")
    parser.add_argument("--fixed", action="store_true", help="also run with --concurrency set to the slots")
    args = parser.parse_args()
    print(f"{'slots':>5} {'conc':>5} {'calls':>6} {'bound s':>8} {'wall s':>7} {'eff':>6} {'peak':>5} ", end="")
    print(f"{'requests':>9} {'429':>5} {'429 %':>7} {'failed':>6}   ({args.latency:g} s per reply)")
    goals = {}
    for slots in args.sizes:
        efficiency, share = one(slots, args.latency)
        if args.fixed:
            one(slots, args.latency, concurrency=slots)
        goals[f"{slots} slots: efficiency >= {GOAL}"] = efficiency >= GOAL
        goals[f"{slots} slots: 429 answers <= {MOST_REFUSED:.0%} of requests"] = share <= MOST_REFUSED
    for name, ok in goals.items():
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    return 0 if all(goals.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
