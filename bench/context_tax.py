"""Context tax: the lesson tokens injected into one role call, as the libraries grow, counted
with the model's own tokenizer.

Goal: at 10, 100, 1,000 and 10,000 lessons (random texts, in the role's library and in the
global one) the lessons that ``mas.library.inject.role_block`` injects never exceed the budget,
``global_tokens + inject_tokens`` for inject="relevant", over 50 different tasks per size, in
the tokens of the budget's tokenizer: the embedded SmolLM2-135M's (its GGUF vocabulary), and
tiktoken's o200k_base when its encoding file can be loaded here (it is downloaded at first use;
without network that row says so and is skipped).
Printed per tokenizer and size: injected lesson tokens (max, and as a ratio of the budget), the
whole block with its headings, the first call (builds the BM25 index and counts every lesson)
and the median of the later calls. A last table shows what budgets counted in words (how mas
counted before) inject in real tokens: more than the budget.
"""

from __future__ import annotations

import random
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mas.library.inject import role_block
from mas.models.fake import PLANTED
from mas.models.tokens import tokenizer
from mas.team.scenario import load_scenario
from mas.types.lessons import GLOBAL, Budget, Lesson, Version

SIZES, CALLS, ROLE = (10, 100, 1_000, 10_000), 50, "solver"
LINE = re.compile(r"^- (.*)$", re.M)
rng = random.Random(0)
WORDS = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(3000)]
WORDS += "when the task has numbers check units calculator expression brackets answer plan sum product".split()
WORDS += ["12", "3.75", "1,250", "40%", "x^2", "(a+b)"]


def library(name: str, size: int) -> Version:
    lessons = [
        Lesson(id=f"{name}/{i:04d}", text=" ".join(rng.choices(WORDS, k=rng.randint(6, 30))) + ".")
        for i in range(1, size + 1)
    ]
    return Version(library=name, number=1, lessons=lessons, next_id=size + 1)


LIBRARIES = {size: {GLOBAL: library(GLOBAL, size), ROLE: library(ROLE, size)} for size in SIZES}
QUESTIONS = [t.question for t in load_scenario("maths").tasks[:CALLS]]


def run(spec: str, *, counted_by: str | None = None) -> tuple[bool, list[float]]:
    """Inject with budgets counted by ``spec``; count what went in with ``counted_by`` (the
    same tokenizer by default). Returns (never above the budget, max ratio per size)."""
    budget = Budget(tokenizer=spec)
    cap = budget.global_tokens + budget.inject_tokens
    count = tokenizer(counted_by or spec).count
    print(f"{'lessons':>8} {'max tok':>8} {'tok/budget':>10} {'block tok':>10} {'first ms':>9} {'ms/call':>8}")
    ok, ratios = True, []
    for size in SIZES:
        heads = LIBRARIES[size]
        spent, block_tokens, times = [], [], []
        for q in QUESTIONS:
            start = time.perf_counter()
            block = role_block(heads, ROLE, task=q, budget=budget)
            times.append(time.perf_counter() - start)
            spent.append(sum(count(text) for text in LINE.findall(block.text)))
            block_tokens.append(count(block.text))
        ok &= max(spent) <= cap and min(spent) > 0
        ratios.append(max(spent) / cap)
        print(
            f"{size:>8} {max(spent):>8} {max(spent) / cap:>10.3f} {max(block_tokens):>10} {times[0] * 1000:>9.1f} "
            f"{statistics.median(times[1:]) * 1000:>8.2f}"
        )
    return ok, ratios


def main() -> int:
    budget = Budget()
    cap = budget.global_tokens + budget.inject_tokens
    print(f"budget: global {budget.global_tokens} + inject {budget.inject_tokens} = {cap} tokens per prompt")
    goals = {}
    for spec in ("embedded", "tiktoken:o200k_base"):
        tok = tokenizer(spec)
        print(f"\n-- budgets and counts in {tok.label}")
        if tok.fallback:
            print("   skipped: this tokenizer cannot be loaded here")
            continue
        goals[f"{tok.label}: injected tokens never above the budget ({cap})"] = run(spec)[0]
    print("\n-- budgets counted in words (as before), what they inject in SmolLM2 tokens")
    _, ratios = run("words", counted_by="embedded")
    print(f"   up to {max(ratios):.2f}x the budget in real tokens (random letter strings split into many tokens)")
    english = list(PLANTED)
    real, words = (sum(tokenizer(spec).count(t) for t in english) for spec in ("embedded", "words"))
    print(f"   on English lessons (the fake's planted ones): {real / words:.2f} SmolLM2 tokens per word-count token")
    for name, ok in goals.items():
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    return 0 if goals and all(goals.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
