"""Long runs: resuming a run whose journal holds 100,000 rollouts, and memory over 100 steps.

Goals:
  - resume: ``train()`` on a finished run of 1,250 steps (100,000 rollouts with their traces,
    and each step's summaries, advantages, edits and report) takes at most 1.5x the time of
    reading its journal line by line with orjson (medians of 5, side by side, in CPU time:
    both are one thread's work, and on a shared machine wall time also measures the others'
    load; wall times are printed too);
  - memory: the peak resident memory of a training run on the fake client after 100 steps is
    at most 1.2x its peak after 10 steps (each run in its own process): memory is bounded by
    a step, not by the run.

The journal is made from one real step (16 tasks, G = 5, the maths team, the fake client):
its records are repeated under the keys of 1,250 steps, and its run.json says 1,250 epochs of
one step, so that ``train()`` finds every step done. The memory runs train 4 tasks per step,
G = 5, 10 steps per epoch (the default promotion pass once per epoch), on a fake client that
keeps no log of its requests (``record=False``: that log is the test suite's, not mas's).
Run: .venv/bin/python bench/resume.py [--quick]   (--quick: 250 steps, 20,000 rollouts)
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mas.config import TrainConfig
from mas.library.store import LibraryStore
from mas.models.fake import FakeClient
from mas.team.scenario import load_scenario
from mas.train import train

TIME_GOAL, MEMORY_GOAL = 1.5, 1.2

MEMORY_RUN = """
import asyncio, resource, sys, tempfile
from pathlib import Path
sys.path.insert(0, {root!r})
from mas.config import TrainConfig
from mas.library.store import LibraryStore
from mas.models.fake import FakeClient
from mas.team.scenario import load_scenario
from mas.train import train
steps = {steps}
with tempfile.TemporaryDirectory() as tmp:
    config = TrainConfig(tasks=40, batch_size=4, group_size=5, epochs=steps // 10)
    asyncio.run(train(load_scenario("maths"), client=FakeClient(record=False), store=LibraryStore(Path(tmp) / "lib.json"),
                      run_dir=Path(tmp) / "run", config=config))
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def synthetic_run(folder: Path, steps: int) -> tuple[Path, TrainConfig]:
    """A run directory whose journal holds ``steps`` finished steps of 80 rollouts each."""
    scenario = load_scenario("maths")
    one = TrainConfig(tasks=16, batch_size=16, group_size=5, shuffle=False)
    asyncio.run(
        train(
            scenario, client=FakeClient(), store=LibraryStore(folder / "lib.json"), run_dir=folder / "one", config=one
        )
    )
    records = [orjson.loads(line) for line in (folder / "one" / "journal.jsonl").read_bytes().splitlines()]
    run = folder / "run"
    run.mkdir()
    with (run / "journal.jsonl").open("wb") as f:
        for epoch in range(steps):
            for r in records:
                key = f"e{epoch}/s0" + r["key"][len("e0/s0") :]
                data = {**r["data"], "epoch": epoch} if r["kind"] == "step" else r["data"]
                f.write(orjson.dumps({"kind": r["kind"], "key": key, "data": data}) + b"\n")
    config = one.model_copy(update={"epochs": steps})
    settings = json.loads((folder / "one" / "run.json").read_text())
    settings["config"] = config.model_copy(
        update={"budget": config.budget.model_copy(update={"tokenizer": "words"})}
    ).model_dump(mode="json")
    (run / "run.json").write_text(json.dumps(settings, indent=1))
    return run, config


def timed(work) -> tuple[float, float, object]:
    """CPU seconds, wall seconds and result of ``work()``."""
    cpu, wall = time.process_time(), time.perf_counter()
    result = work()
    return time.process_time() - cpu, time.perf_counter() - wall, result


def orjson_read(path: Path) -> None:
    with path.open("rb") as f:
        for line in f:
            orjson.loads(line)


def resume(run: Path, config: TrainConfig, library: Path) -> int:
    store = LibraryStore(library)
    result = asyncio.run(train(load_scenario("maths"), client=FakeClient(), store=store, run_dir=run, config=config))
    return len(result.steps)


def peak_rss(steps: int) -> int:
    code = MEMORY_RUN.format(root=str(Path(__file__).resolve().parents[1]), steps=steps)
    return int(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()[-1]
    )


def main() -> int:
    steps = 250 if "--quick" in sys.argv else 1250
    with tempfile.TemporaryDirectory() as tmp:
        run, config = synthetic_run(Path(tmp), steps)
        journal = run / "journal.jsonl"
        rollouts = sum(1 for line in journal.open("rb") if line.startswith(b'{"kind":"rollout"'))
        print(f"journal: {journal.stat().st_size / 2**20:.0f} MiB, {rollouts:,} rollouts, {steps:,} steps")
        reads, resumes = [], []
        for _ in range(5):
            reads.append(timed(lambda: orjson_read(journal)))
            resumes.append(timed(lambda: resume(run, config, Path(tmp) / "lib.json")))
            assert resumes[-1][2] == steps, resumes[-1][2]
    (read, read_wall), (resumed, resumed_wall) = (
        (statistics.median(t[0] for t in ts), statistics.median(t[1] for t in ts)) for ts in (reads, resumes)
    )
    print(f"orjson line by line: {read:.2f} s CPU ({read_wall:.2f} s wall)")
    print(f"resume:              {resumed:.2f} s CPU ({resumed_wall:.2f} s wall)")
    print(f"resume / read: {resumed / read:.2f}x CPU, {resumed_wall / read_wall:.2f}x wall (goal <= {TIME_GOAL})")
    small, large = peak_rss(10), peak_rss(100)
    ratio = large / small
    print(
        f"peak memory: 10 steps {small / 1024:.0f} MiB, 100 steps {large / 1024:.0f} MiB: {ratio:.2f}x (goal <= {MEMORY_GOAL})"
    )
    goals = {
        f"resume within {TIME_GOAL}x of an orjson read": resumed / read <= TIME_GOAL,
        f"peak memory at 100 steps within {MEMORY_GOAL}x of 10 steps": ratio <= MEMORY_GOAL,
    }
    for name, ok in goals.items():
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    return 0 if all(goals.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
