"""SIGKILL `mas eval`, `mas transfer` and `mas ablate` twice each, run the same command again,
and get the table of an uninterrupted run, repeating no finished model call.

Each process counts the calls the fake model answers, by a digest of the request (the digest
``Replayed`` keys its records with), in a log of its own. A call is finished once its record is
in a journal; after each kill, the calls still to make are the uninterrupted run's minus the
finished ones, and the processes after it make no more than those."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

COUNTING = """
import os, sys
from mas.models.fake import FakeClient
from mas.models.wrappers import _request_digest

create = FakeClient.create


async def counted(self, messages, **kwargs):
    result = await create(self, messages, **kwargs)
    with open(os.environ["MAS_TEST_CALLS"], "a") as log:
        log.write(f"{_request_digest(messages, kwargs)}\\n")
    return result


FakeClient.create = counted
from mas.cli.main import main
main()
"""

STUDIES = {
    "eval": ["eval", "maths", "--tasks", "6", "--k", "2", "--library", "{lib}"],
    "transfer": ["transfer", "maths", "--tasks", "4", "--library", "{lib}"],
    "ablate": ["ablate", "maths", "--variants", "full,direct lessons", "--tasks", "4", "--test-tasks", "4"],
}
COMMON = ["--model", "fake:0.02", "--concurrency", "4", "--prices", "{prices}", "--group-size", "2"]
IN_FLIGHT = 4
"""Calls in flight at once (``--concurrency``): what a kill may cut short, to be made again."""


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("trained")
    lib, prices = folder / "lib.json", folder / "prices.toml"
    prices.write_text('[prices]\n"fake" = [1000.0, 2000.0]\n')  # dollars per million tokens: the cost shows
    done = subprocess.run(
        [sys.executable, "-c", COUNTING, "train", "maths", "--model", "fake", "--tasks", "8", "--library", str(lib),
         "--run-dir", str(folder / "run")],
        capture_output=True, text=True, env={**os.environ, "MAS_TEST_CALLS": str(folder / "calls")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return {"lib": lib, "prices": prices}


def command(study: str, files: dict[str, Path], run_dir: Path) -> list[str]:
    args = [*STUDIES[study], *COMMON]
    if study != "ablate":  # --group-size is the ablation's (its training)
        args = args[:-2]
    args = [a.format(lib=files["lib"], prices=files["prices"]) for a in args]
    return [sys.executable, "-c", COUNTING, *args, "--run-dir", str(run_dir)]


def start(args: list[str], log: Path) -> subprocess.Popen:
    env = {**os.environ, "MAS_TEST_CALLS": str(log)}
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def lines(run_dir: Path) -> int:
    return sum(p.read_bytes().count(b"\n") for p in run_dir.rglob("journal.jsonl"))


def records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for p in run_dir.rglob("journal.jsonl") for line in p.read_text().splitlines()]


def finished_calls(run_dir: Path) -> Counter:
    """The digests of the calls whose replies are in the journals."""
    return Counter(r["key"].split("/")[-2] for r in records(run_dir) if r["kind"] == "call")


def calls(log: Path) -> Counter:
    return Counter(log.read_text().split()) if log.exists() else Counter()


def table(stdout: str) -> str:
    """The output but the lines naming the run folder."""
    return "\n".join(line for line in stdout.splitlines() if not line.startswith(("run in ", "starting ", "resuming ")))


def run_to_the_end(args: list[str], log: Path) -> str:
    process = start(args, log)
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr
    return stdout


@pytest.mark.parametrize("study", STUDIES)
def test_a_study_killed_twice_resumes_to_the_uninterrupted_table(study, files, tmp_path):
    whole = run_to_the_end(command(study, files, tmp_path / "whole"), tmp_path / "whole.calls")
    everything, total = calls(tmp_path / "whole.calls"), lines(tmp_path / "whole")

    killed, finished = tmp_path / "killed", []
    for n, at in enumerate((total // 3, 2 * total // 3)):
        process = start(command(study, files, killed), tmp_path / f"process{n}.calls")
        while lines(killed) < at and process.poll() is None:
            time.sleep(0.002)
        assert process.poll() is None, "the study ended before the kill point"
        os.kill(process.pid, signal.SIGKILL)
        process.communicate()
        finished.append(finished_calls(killed))
    resumed = run_to_the_end(command(study, files, killed), tmp_path / "process2.calls")

    assert table(resumed) == table(whole)
    assert re.search(
        r"(?<![\d.])(?!0\.0000)\d+\.\d{4}(?!\d)", whole
    )  # a cost (4 decimals) not zero: every call counted
    keys = Counter((r["kind"], r["key"]) for r in records(killed))
    assert max(keys.values()) == 1, "a finished unit of work was done twice"
    for n, done in enumerate(finished):  # the process after a kill makes only calls not finished before it
        assert done
        assert not calls(tmp_path / f"process{n + 1}.calls") - (everything - done), "a finished call was made again"
    made = sum((calls(tmp_path / f"process{n}.calls") for n in range(3)), Counter())
    assert not everything - made  # every call of the uninterrupted run was made
    again = sum((made - everything).values())
    assert again <= 2 * IN_FLIGHT  # only calls in flight at a kill were made again
    print(
        f"[{study}] calls: {everything.total()} uninterrupted, {made.total()} killed twice; finished calls made again: 0"
    )
