"""The learning world under the evidence rule mas had before issue 26, run as it was.

That rule (commit ``TODAY``): a one-sided t bound on the estimate, its level spent across the
epochs' promotion passes; lessons that had shown they help shown to every rollout but in 30%
of the groups; three transfer trials a role, of lessons already promising where they were.
Rather than keep that code alive in mas for one row of a table, this exports ``mas/`` and
``bench/`` of that commit from the repository's history into a temporary folder and runs its
own ``learning_world.run`` there, in a subprocess, on the same seeds: the row is what that
code does, not a replica. (Roles and scenarios come from the installed package; they are the
same files.) Without the history (a shallow clone), the row is left out and says why.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

TODAY = "7befbe5"

SCRIPT = """
import importlib.util, json, sys
from concurrent.futures import ProcessPoolExecutor
folder, planted, nulls, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
sys.path.insert(0, folder)
spec = importlib.util.spec_from_file_location("learning_world", folder + "/bench/learning_world.py")
lw = importlib.util.module_from_spec(spec)
sys.modules["learning_world"] = lw
spec.loader.exec_module(lw)

def one(job):
    seed, null = job
    o = lw.run(seed, null=null)
    return {"seed": seed, "null": null, "share": o.share, "promoted": o.promoted, "gone": o.harmful_gone}

if __name__ == "__main__":
    jobs = [(s, False) for s in range(planted)] + [(100 + s, True) for s in range(nulls)]
    with ProcessPoolExecutor(workers) as pool:
        for row in pool.map(one, jobs):
            print(json.dumps(row), flush=True)
"""


def row(planted: int, nulls: int, workers: int, cross: frozenset[str]) -> dict | str:
    """The table row of today's rule over ``planted`` and ``nulls`` seeds, or why there is none."""
    repo = Path(__file__).resolve().parents[1]
    archive = subprocess.run(["git", "-C", str(repo), "archive", TODAY, "mas", "bench"], capture_output=True)
    if archive.returncode:
        return f"commit {TODAY} is not in this clone's history"
    with tempfile.TemporaryDirectory(prefix="today-rule-") as folder:
        subprocess.run(["tar", "-x", "-C", folder], input=archive.stdout, check=True)
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, folder, str(planted), str(nulls), str(workers)],
            capture_output=True, text=True, cwd=folder,
        )  # fmt: skip
    if done.returncode:
        return f"the run of {TODAY} failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}"
    runs = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    seeds = [r for r in runs if not r["null"]]
    promoted = [k for r in seeds for k in r["promoted"]]
    found = [len(set(r["promoted"]) & cross) / len(cross) for r in seeds]
    return {
        "share": statistics.fmean(r["share"] for r in seeds),
        "precision": sum(k in cross for k in promoted) / len(promoted) if promoted else float("nan"),
        "recall": statistics.fmean(found),
        "se": statistics.stdev(found) / len(found) ** 0.5 if len(found) > 1 else 0.0,
        "null": sum(bool(r["promoted"]) for r in runs if r["null"]),
        "nulls": nulls,
        "harmful": max((r["gone"] or 99) for r in seeds),
        "seeds": len(seeds),
    }
