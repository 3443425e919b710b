"""What screening every lesson on load costs (``mas.library.screened``).

A library file of 3 roles and the global library, ``--lessons`` honest lessons each (taken from
``tests/screening/dev.jsonl``, repeated with a number when there are too few), is read in a new
process three ways: the heads as stored (no screen), screened with no verdict on record (the
first read on a machine, or after the screen changed), and screened again with the verdicts on
record. Each is timed inside the process (the read alone) and as the whole ``mas library show``.
Prints the medians of ``--rounds``; no goal, a measurement.

    .venv/bin/python bench/screen_load.py [--lessons 20] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

from mas.library.store import LibraryStore
from mas.types.lessons import GLOBAL, Lesson, Version

ROOT = Path(__file__).resolve().parents[1]
MAS = str(Path(sys.executable).with_name("mas"))
READ = """
import sys, time
from mas.library.store import LibraryStore
store = LibraryStore(sys.argv[1])
start = time.perf_counter()
heads = store.heads(screened=sys.argv[2] == "screened")
print(time.perf_counter() - start, sum(len(v.lessons) for v in heads.values()))
"""


def library(folder: Path, per: int) -> Path:
    items = [json.loads(line) for line in (ROOT / "tests/screening/dev.jsonl").open()]
    honest = [i["text"] for i in items if i["label"] == "honest" and not i.get("answers") and not i.get("sources")]
    names = [GLOBAL, "planner", "solver", "verifier"]
    texts = [honest[i % len(honest)] + ("" if i < len(honest) else f" ({i})") for i in range(per * len(names))]
    store = LibraryStore(folder / "lib.json")
    store.commit([
        Version(library=name, number=1, next_id=per + 1,
                lessons=[Lesson(id=f"{name}/{i + 1:04d}", text=texts[n * per + i]) for i in range(per)])
        for n, name in enumerate(names)
    ])  # fmt: skip
    return store.path


def timed(command: list[str], cache: Path) -> tuple[float, str]:
    """Wall seconds of ``command`` run with ``cache`` as the user's cache, and its output."""
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    return time.perf_counter() - start, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lessons", type=int, default=20, help="lessons per library (4 libraries)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    reads: dict[str, list[float]] = {"stored": [], "screened, cold": [], "screened, on record": []}
    shows: dict[str, list[float]] = {"screened, cold": [], "screened, on record": []}
    with TemporaryDirectory() as tmp:
        path = library(Path(tmp), args.lessons)
        read = [sys.executable, "-c", READ, str(path)]
        show = [MAS, "library", "show", str(path)]
        for r in range(args.rounds):
            none, reading, showing = (Path(tmp) / f"{kind}{r}" for kind in ("none", "read", "show"))  # new caches
            reads["stored"].append(float(timed([*read, "stored"], none)[1].split()[0]))
            reads["screened, cold"].append(float(timed([*read, "screened"], reading)[1].split()[0]))
            reads["screened, on record"].append(float(timed([*read, "screened"], reading)[1].split()[0]))
            shows["screened, cold"].append(timed(show, showing)[0])
            shows["screened, on record"].append(timed(show, showing)[0])
    total = 4 * args.lessons
    print(f"{total} lessons in 4 libraries; medians of {args.rounds} rounds")
    print(f"{'heads':<22} {'read s':>8} {'per lesson':>11} {'mas library show s':>19}")
    for name, values in reads.items():
        read_s = statistics.median(values)
        show_s = f"{statistics.median(shows[name]):.3f}" if name in shows else "-"
        print(f"{name:<22} {read_s:>8.3f} {read_s / total * 1000:>9.2f}ms {show_s:>19}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
