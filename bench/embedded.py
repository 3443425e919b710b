"""Decode speed of the embedded model through mas, against llama-cpp-python in-process.

Goal: SmolLM2-135M through ``mas.clients.open_client("local", threads=T)`` (a plain
``create()``, max_tokens=128, temperature 0, fixed seed) decodes at least 0.9x the tokens per
second of ``llama_cpp.Llama(model_path=mas.server.model_path(), n_threads=T, n_ctx=8192)``
``.create_chat_completion(...)`` on the same prompt. Same threads, context size and weight
buffers (plain CPU ones, ``mas.models.llama_server``) on both sides; the two are timed
alternately, ROUNDS times each after a warm-up, medians compared.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time

from autogen_core.models import SystemMessage, UserMessage

from mas.models.clients import open_client
from mas.models.server import model_path

THREADS, N_CTX, MAX_TOKENS, SEED, ROUNDS, GOAL = os.cpu_count() or 2, 8192, 128, 1234, 5, 0.9
SYSTEM = "You are a helpful assistant."
PROMPT = "Write a long, detailed story about a lighthouse keeper who finds a message in a bottle."


async def through_mas(client) -> tuple[int, float]:
    messages = [SystemMessage(content=SYSTEM), UserMessage(content=PROMPT, source="user")]
    extra = {"max_tokens": MAX_TOKENS, "temperature": 0.0, "seed": SEED}
    start = time.perf_counter()
    result = await client.create(messages, extra_create_args=extra)
    return result.usage.completion_tokens, time.perf_counter() - start


def direct(llm) -> tuple[int, float]:
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROMPT}]
    start = time.perf_counter()
    reply = llm.create_chat_completion(messages=messages, max_tokens=MAX_TOKENS, temperature=0.0, seed=SEED)
    return reply["usage"]["completion_tokens"], time.perf_counter() - start


async def main() -> int:
    from llama_cpp import Llama

    from mas.models.llama_server import plain_buffers

    plain_buffers()
    llm = Llama(model_path=str(model_path()), n_threads=THREADS, n_ctx=N_CTX, verbose=False)
    ours, theirs = [], []
    async with open_client("local", threads=THREADS) as client:
        await through_mas(client), direct(llm)  # warm-up
        for r in range(ROUNDS):
            for side in ("mas", "direct")[:: 1 if r % 2 else -1]:
                tokens, seconds = await through_mas(client) if side == "mas" else direct(llm)
                (ours if side == "mas" else theirs).append(tokens / seconds)
                print(f"round {r + 1} {side:<6} {tokens:>4} tokens in {seconds:.3f} s = {tokens / seconds:7.1f} tok/s")
    mas_tps, direct_tps = statistics.median(ours), statistics.median(theirs)
    ratio = mas_tps / direct_tps
    print(f"threads {THREADS}: mas {mas_tps:.1f} tok/s, direct {direct_tps:.1f} tok/s (medians of {ROUNDS})")
    print(f"decode speed ratio mas/direct = {ratio:.3f} (goal >= {GOAL}) {'PASS' if ratio >= GOAL else 'FAIL'}")
    return 0 if ratio >= GOAL else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
