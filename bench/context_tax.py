"""Context tax: the lesson tokens injected into one role call, as the libraries grow.

Goal: at 10, 100, 1,000 and 10,000 lessons (random texts, in the role's library and in the
global one) the lessons that ``mas.library.inject.role_block`` injects never exceed the budget,
``global_tokens + inject_tokens`` for inject="relevant"; over 50 different tasks per size.
Printed per size: injected tokens (max, and as a ratio of the budget), the first call
(builds the BM25 index) and the median of the later calls, and that time as a ratio of
the time at 10 lessons.
"""

from __future__ import annotations

import random
import re
import statistics
import sys
import time

from mas.library.budget import tokens
from mas.library.inject import role_block
from mas.scenario import load_scenario
from mas.types import GLOBAL, Budget, Lesson, Version

SIZES, CALLS, ROLE = (10, 100, 1_000, 10_000), 50, "solver"
LINE = re.compile(r"^\[[\w-]+/\d{4,}\] (.*)$", re.M)
rng = random.Random(0)
WORDS = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(3000)]
WORDS += "when the task has numbers check units calculator expression brackets answer plan sum product".split()


def library(name: str, size: int) -> Version:
    lessons = [
        Lesson(id=f"{name}/{i:04d}", text=" ".join(rng.choices(WORDS, k=rng.randint(6, 30))) + ".")
        for i in range(1, size + 1)
    ]
    return Version(library=name, number=1, lessons=lessons, next_id=size + 1)


def main() -> int:
    budget = Budget()
    cap = budget.global_tokens + budget.inject_tokens
    questions = [t.question for t in load_scenario("maths").tasks[:CALLS]]
    print(f"budget: global {budget.global_tokens} + inject {budget.inject_tokens} = {cap} tokens")
    print(f"{'lessons':>8} {'max tok':>8} {'tok/budget':>10} {'first ms':>9} {'ms/call':>8} {'time x10':>9}")
    ok, base = True, None
    for size in SIZES:
        heads = {GLOBAL: library(GLOBAL, size), ROLE: library(ROLE, size)}
        spent, times = [], []
        for q in questions:
            start = time.perf_counter()
            block = role_block(heads, ROLE, task=q, budget=budget)
            times.append(time.perf_counter() - start)
            spent.append(sum(tokens(text) for text in LINE.findall(block.text)))
        per_call = statistics.median(times[1:])
        base = base or per_call
        ok &= max(spent) <= cap and min(spent) > 0
        print(
            f"{size:>8} {max(spent):>8} {max(spent) / cap:>10.3f} {times[0] * 1000:>9.1f} "
            f"{per_call * 1000:>8.2f} {per_call / base:>9.1f}"
        )
    print(f"injected tokens never above the budget ({cap}): {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
