"""Pipeline efficiency: one training step against an endpoint with a fixed latency per call
and a concurrency limit, measured against the lower bound its call dependencies allow.

Goal: efficiency = lower bound / wall time >= 0.85.

The step: 16 tasks, G = 5, the maths team's three roles. A rollout is a chain of one call per
role; an informative group then needs one summary per rollout and one advantage, and the
step ends with one edit call per library that got proposals, then the equivalence calls that
judge the lessons it added (``bound.py``: no schedule beats it).
mas runs with --concurrency at twice the endpoint's limit: between a reply and the next
request of the same slot the client spends some milliseconds, and only requests already
waiting at the endpoint hide that gap (at concurrency = limit the same step measures ~0.75).
Run: .venv/bin/python bench/pipeline.py
"""

from __future__ import annotations

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
from mas.team.scenario import load_scenario
from mas.train import train

LATENCY, SLOTS, GOAL = 0.2, 8, 0.85


async def step(url: str, folder: Path):
    config = TrainConfig(
        tasks=16, batch_size=16, group_size=5, concurrency=2 * SLOTS, promotion=PromotionPolicy(cadence="off")
    )
    async with open_client("openai:bench", base_url=url, api_key="sk-bench") as client:
        store = LibraryStore(folder / "lib.json")
        started = time.perf_counter()
        result = await train(load_scenario("maths"), client=client, store=store, run_dir=folder / "run", config=config)
        return result.steps[0], time.perf_counter() - started


SERVE = f"""
import sys, time
sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
from tests.fault_server import FaultServer
server = FaultServer().pace({LATENCY}, {SLOTS}).start()
print(server.url, flush=True)
sys.stdin.read()
print(server.peak, flush=True)
"""


def main() -> int:
    # The endpoint runs in its own process, as a real one would: in ours it would take the GIL.
    server = subprocess.Popen([sys.executable, "-c", SERVE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    url = server.stdout.readline().strip()
    try:
        with TemporaryDirectory() as tmp:
            report, wall = asyncio.run(step(url, Path(tmp)))
    finally:
        peak = server.communicate("", timeout=10)[0].strip()
    calls = sum(c.calls for c in report.calls.values())
    bound = step_bound({k: c.calls for k, c in report.calls.items()}, report.informative, SLOTS, LATENCY)
    efficiency = bound / wall
    print(
        f"calls {calls} ({', '.join(f'{k} {v.calls}' for k, v in report.calls.items())}), "
        f"informative groups {report.informative}, server peak concurrency {peak}/{SLOTS}"
    )
    print(f"lower bound {bound:.2f} s, wall {wall:.2f} s, efficiency {efficiency:.3f} (goal >= {GOAL})")
    return 0 if efficiency >= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
