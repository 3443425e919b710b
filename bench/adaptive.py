"""Self-tuning concurrency: one training step with the default settings against endpoints of
2, 8 and 32 slots that answer 429 beyond them, their size unknown to mas.

Goals, for each endpoint: efficiency (the bound of its call dependencies / wall time) >= 0.85,
and at most 2% of the requests it received answered 429.

The step is the pipeline benchmark's (G = 5, the maths team's three roles), of 16 tasks or two
per slot, whichever is more, and so is the bound (``bound.py``). The step grows with the
endpoint because the bound is loose for a step that cannot fill it: 16 tasks are 80 rollouts,
whose calls come in three waves of dependent calls, then the summaries, advantages and edits
of the step wait for them; at 32 slots a concurrency set by hand to the slots reaches 0.78 of
that bound (2 s replies), whatever the limiter does. A reply takes 0.5 s, or longer at large
endpoints (``--latency``): the endpoint serves at most 16 calls a second, what one core drives
through autogen and the openai SDK at about 10 ms of CPU per call (``scale.py``) with room to
spare; beyond, the benchmark measures this machine's CPU (32 slots at 0.5 s: 0.62 with the
concurrency set by hand), and a real model's replies take seconds anyway. A request beyond the
slots gets a 429 at once, with no Retry-After: the client backs off and retries, and the
in-flight limit (``mas.models.limiter``) learns from it. Each endpoint runs in its own
process. ``--fixed`` also runs each step with the concurrency set by hand to the endpoint's
slots (which no one knows beforehand), as a reference: what the limit could reach at best.
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
from mas.models.fake import FakeClient
from mas.team.scenario import load_scenario
from mas.train import train

SIZES, GOAL, MOST_REFUSED = (2, 8, 32), 0.85, 0.02
RATE, LATENCY, TASKS = 16, 0.5, 16
"""Calls a second the endpoint serves at most; the least reply time; the least tasks a step."""

SERVE = """
import sys
sys.path.insert(0, {root!r})
from tests.fault_server import FaultServer
server = FaultServer().pace({latency}, {slots}, refuse=True).start()
print(server.url, flush=True)
sys.stdin.read()
print(server.served, server.refused, server.peak, flush=True)
"""


async def step(url: str, folder: Path, tasks: int, concurrency: int | None):
    config = TrainConfig(
        tasks=tasks, batch_size=tasks, group_size=5, concurrency=concurrency, promotion=PromotionPolicy(cadence="off")
    )
    async with open_client("openai:bench", base_url=url, api_key="sk-bench") as client:
        store = LibraryStore(folder / "lib.json")
        started = time.perf_counter()
        result = await train(load_scenario("maths"), client=client, store=store, run_dir=folder / "run", config=config)
        return result.steps[0], time.perf_counter() - started


def one(slots: int, latency: float | None, concurrency: int | None = None) -> tuple[float, float]:
    latency, tasks = latency or max(LATENCY, slots / RATE), max(TASKS, 2 * slots)
    code = SERVE.format(root=str(Path(__file__).resolve().parents[1]), latency=latency, slots=slots)
    server = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    url = server.stdout.readline().strip()
    try:
        with TemporaryDirectory() as tmp:
            report, wall = asyncio.run(step(url, Path(tmp), tasks, concurrency))
    finally:
        served, refused, peak = map(int, server.communicate("", timeout=10)[0].split())
    calls = sum(c.calls for c in report.calls.values())
    bound = step_bound({k: c.calls for k, c in report.calls.items()}, report.informative, slots, latency)
    share = refused / max(served + refused, 1)
    failures = report.endpoint.failures if report.endpoint else 0
    print(
        f"{slots:>5} {latency:>7g} {tasks:>5} {concurrency or 'auto':>5} {calls:>6} {bound:>8.2f} {wall:>7.2f} "
        f"{bound / wall:>6.3f} {peak:>5} "
        f"{served + refused:>9} {refused:>5} {share:>7.2%} {failures:>6}",
        flush=True,
    )
    return bound / wall, share


def warm() -> None:
    """One small step on the fake first, and the OpenAI client's modules, so that what a step
    imports on first use (autogen, the maths grader, the openai SDK: about 2.5 s) is loaded
    before any step is timed: a training run pays it once, and it is not the concurrency's
    doing (it made the first endpoint's step look 0.04 less efficient than the next)."""
    import autogen_ext.models.openai  # noqa: F401

    with TemporaryDirectory() as tmp:
        folder = Path(tmp)
        config = TrainConfig(tasks=1, batch_size=1, group_size=2, promotion=PromotionPolicy(cadence="off"))
        store = LibraryStore(folder / "lib.json")
        asyncio.run(
            train(load_scenario("maths"), client=FakeClient(), store=store, run_dir=folder / "run", config=config)
        )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("sizes", nargs="*", type=int, default=list(SIZES), help="endpoint slots")
    parser.add_argument("--latency", type=float, help=f"seconds per reply (default: {LATENCY:g}, or slots / {RATE})")
    parser.add_argument("--fixed", action="store_true", help="also run with --concurrency set to the slots")
    args = parser.parse_args()
    warm()
    print(
        f"{'slots':>5} {'reply s':>7} {'tasks':>5} {'conc':>5} {'calls':>6} {'bound s':>8} {'wall s':>7} {'eff':>6} {'peak':>5} ",
        end="",
    )
    print(f"{'requests':>9} {'429':>5} {'429 %':>7} {'failed':>6}")
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
