"""Bookkeeping: the library store and the promotion pass, against plain json in the same run.

Goals:
  (a) commit one Version of 10,000 lessons to a LibraryStore, then ``heads()`` from a fresh
      store object: at most 3x a plain ``json.dump`` + ``json.load`` of the same records;
  (b) the promotion pass, ``evidence.contrasts(StepLog(path, UsageEvent))`` (a step at a time, as training calls it) +
      ``promotion.plan(...)``, over 1,000,000 usage events (3 roles, ~50 lessons, 8 lessons of
      each group's prompts randomized): at most 5x one plain pass that reads the same file with
      json and computes the same contrasts (shown minus not shown, per group) into a dict;
  (c) both grow at most linearly: log-log least-squares slope of time against size at most
      1.15 (1k/3k/10k lessons; 100k/300k/1M events).
Each time is the best of REPEAT runs. ``--quick`` stops at 300k events.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from mas.config import PromotionPolicy
from mas.library.evidence import contrasts
from mas.library.logs import StepLog
from mas.library.promotion import plan
from mas.library.store import LibraryStore
from mas.types.lessons import GLOBAL, Lesson, Version
from mas.types.usage import UsageEvent

REPEAT, STEP = 5, 1_000
LESSONS = (1_000, 3_000, 10_000)
EVENTS = (100_000, 300_000) if "--quick" in sys.argv else (100_000, 300_000, 1_000_000)
ROLES = ("planner", "solver", "verifier")
WORK = Path(tempfile.mkdtemp(prefix="mas-bench-"))
rng = random.Random(0)
WORDS = "when the task has numbers check units calculator expression brackets answer plan sum product step".split()


def best(fn, repeat: int = REPEAT) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def version(name: str, n: int) -> Version:
    lessons = [
        Lesson(id=f"{name}/{i:04d}", text=" ".join(rng.choices(WORDS, k=12)) + f" {i}.") for i in range(1, n + 1)
    ]
    return Version(library=name, number=1, lessons=lessons, next_id=n + 1)


def store_pair(n: int) -> tuple[float, float]:
    v, path = version("solver", n), WORK / f"lib{n}.json"
    records = [v.model_dump(mode="json")]

    def ours():
        for stale in WORK.glob(f"lib{n}.json*"):
            stale.unlink()
        LibraryStore(path).commit([v])
        # the store alone: what screening the lessons on load costs is bench/screen_load.py's
        assert len(LibraryStore(path).heads(screened=False)["solver"].lessons) == n

    def plain():
        with open(WORK / "plain.json", "w", encoding="utf-8") as f:
            json.dump(records, f)
        with open(WORK / "plain.json", encoding="utf-8") as f:
            assert len(json.load(f)[0]["lessons"]) == n

    return best(ours), best(plain)


HEADS = {name: version(name, 5 if name == GLOBAL else 15) for name in (GLOBAL, *ROLES)}


def usage_log(n: int) -> Path:
    """n events in steps of STEP; a few step bodies are drawn and reused to write fast."""
    ids = {r: [l.id for l in HEADS[r].lessons] for r in ROLES}
    shared = [l.id for l in HEADS[GLOBAL].lessons]
    bodies = []
    for _ in range(8):
        items = []
        for i in range(STEP):
            role, task = ROLES[i % 3], i // 15
            randomized = random.Random(f"{len(bodies)}/{task}/{role}").sample(ids[role], 8)  # one set per group
            prompt = shared + [l for l in randomized if rng.random() < 0.5]
            items.append({
                "schema_version": 2, "run": "bench", "epoch": 0, "step": 0, "task_id": f"t{task}", "rollout": i // 3 % 5,
                "role": role, "shown": prompt, "randomized": randomized,
                "judged": sorted(rng.sample(prompt, rng.randint(0, 3))), "reward": float(rng.random() < 0.5),
                "advantage": round(rng.gauss(0.2 if role == "solver" else 0.0, 1.0), 6),
            })  # fmt: skip
        bodies.append(json.dumps(items, separators=(",", ":")))
    path = WORK / f"usage{n}.usage.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for s in range(n // STEP):
            f.write(f'{{"run":"bench","epoch":0,"step":{s},"items":{bodies[s % len(bodies)]}}}\n')
    return path


def promotion_pair(n: int) -> tuple[float, float]:
    path = usage_log(n)

    def ours():
        plan(HEADS, contrasts(StepLog(path, UsageEvent)), PromotionPolicy(), same=lambda a, b: False)

    def plain():
        per_task: dict = defaultdict(list)
        with path.open("rb") as f:
            for line in f:
                record = json.loads(line)
                groups: dict = defaultdict(list)
                for e in record["items"]:
                    groups[(e["task_id"], e["role"])].append(e)
                for (task, role), members in groups.items():
                    for lesson in members[0]["randomized"]:
                        shown = [e["reward"] for e in members if lesson in e["shown"]]
                        hidden = [e["reward"] for e in members if lesson not in e["shown"]]
                        if shown and hidden:
                            per_task[(role, lesson, task)].append(sum(shown) / len(shown) - sum(hidden) / len(hidden))

    return best(ours, 3), best(plain, 3)


def slope(sizes, times) -> float:
    return float(np.polyfit(np.log(sizes), np.log(times), 1)[0])  # log-log least squares


def main() -> int:
    results = []
    for title, sizes, pair, goal in (("store", LESSONS, store_pair, 3.0), ("promotion", EVENTS, promotion_pair, 5.0)):
        print(f"{title:<10} {'size':>9} {'mas s':>9} {'plain s':>9} {'ratio':>7}")
        ours = []
        for n in sizes:
            t, p = pair(n)
            ours.append(t)
            print(f"{'':<10} {n:>9} {t:>9.4f} {p:>9.4f} {t / p:>7.2f}")
        results.append((f"{title}: ratio at {sizes[-1]:,} (goal <= {goal})", t / p, goal))
        results.append((f"{title}: growth exponent (goal <= 1.15)", slope(sizes, ours), 1.15))
    for name, value, goal in results:
        print(f"{'PASS' if value <= goal else 'FAIL'}  {name}: {value:.2f}")
    shutil.rmtree(WORK, ignore_errors=True)
    return 0 if all(value <= goal for _, value, goal in results) else 1


if __name__ == "__main__":
    sys.exit(main())
