"""Start-up: the wall time of `mas --help` and `mas library show` against a bare
`python -c "import typer, rich"`, in the same run.

Goal: both within 2x of the bare import (median of interleaved runs).

The three commands run in turn, ROUNDS times, so that the machine's load hits each alike; the
median of each is compared. `mas library show` reads a library file of 3 roles and the global
library, 20 lessons each, written by this script. Printed beside them, as a reference and not
a goal: `import pydantic` with one model built and validated, the least that any command
reading a library file (checked on load) pays.
Run: .venv/bin/python bench/startup.py
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mas.library.edits import apply
from mas.library.store import LibraryStore
from mas.types.lessons import GLOBAL, Add, Version

ROUNDS, GOAL = 15, 2.0
PYTHON = sys.executable
MAS = str(Path(sys.executable).with_name("mas"))
ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
"""The commands may write bytecode: with PYTHONDONTWRITEBYTECODE set (some containers set it)
an editable install of mas compiles each of its modules again at every start, and the bench
timed the compiler too (15 to 20 ms of `mas library show`), not the start-up of an installed
mas, whose bytecode pip writes at install. The warm-up run writes it here."""
PYDANTIC = (
    "from pydantic import BaseModel\nclass Lesson(BaseModel):\n    id: str\n    text: str\nLesson(id='a', text='b')"
)


def library(folder: Path) -> Path:
    store = LibraryStore(folder / "lib.json")
    lessons = [
        Add(op="add", text=f"When step {i} has several numbers, check each unit before the sum.") for i in range(20)
    ]
    store.commit([
        apply(Version(library=name, number=0, lessons=[], next_id=1), lessons)[0]
        for name in (GLOBAL, "planner", "solver", "verifier")
    ])  # fmt: skip
    return store.path


def timed(command: list[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one run."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=ENV)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> int:
    with TemporaryDirectory() as tmp:
        commands = {
            'python -c "import typer, rich"': [PYTHON, "-c", "import typer, rich"],
            "mas --help": [MAS, "--help"],
            "mas library show": [MAS, "library", "show", str(library(Path(tmp)))],
            "(reference) pydantic, one model": [PYTHON, "-c", PYDANTIC],
        }
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for command in commands.values():
            timed(command)  # warm the file cache, write the bytecode
        for _ in range(ROUNDS):
            for name, command in commands.items():
                times[name].append(timed(command))
    wall = {name: statistics.median(w for w, _ in values) for name, values in times.items()}
    cpu = {name: statistics.median(c for _, c in values) for name, values in times.items()}
    bare = 'python -c "import typer, rich"'
    print(f"{'command':<36} {'wall s':>7} {'x bare':>7} {'cpu s':>7} {'x bare':>7}  (medians of {ROUNDS})")
    ratios = {}
    for name in commands:
        ratios[name] = wall[name] / wall[bare]
        print(f"{name:<36} {wall[name]:>7.3f} {ratios[name]:>7.2f} {cpu[name]:>7.3f} {cpu[name] / cpu[bare]:>7.2f}")
    goals = {
        f"{name} within {GOAL:g}x of the bare import": ratios[name] <= GOAL
        for name in ("mas --help", "mas library show")
    }
    for name, ok in goals.items():
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    return 0 if all(goals.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
