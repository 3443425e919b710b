"""Run every benchmark in this folder, each in its own process; exit non-zero if any goal fails.

Usage: ``.venv/bin/python bench/run_all.py [NAME ...]`` (default: all of them). An entry may
carry arguments: ``learning_world --hard`` runs the learning world's table for today's world
and the hard world (``bench/hard_world.py``) side by side, about 15 minutes of the total on
2 idle cores.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ALL = [
    "pipeline", "overhead", "learning_calls", "context_tax", "bookkeeping", "embedded",
    "startup", "prefix", "adaptive", "resume", "scale", "distributed", "learning_world --hard",
]  # fmt: skip


def main() -> int:
    names = sys.argv[1:] or ALL
    results = []
    for name in names:
        print(f"=== {name}", flush=True)
        start = time.perf_counter()
        script, *arguments = name.split()
        code = subprocess.call([sys.executable, str(HERE / f"{script}.py"), *arguments], cwd=HERE.parent)
        results.append((name, code, time.perf_counter() - start))
    print("\n=== summary")
    for name, code, seconds in results:
        print(f"{'PASS' if code == 0 else 'FAIL'}  {name:<21} ({seconds:.0f} s)")
    return 0 if all(code == 0 for _, code, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
