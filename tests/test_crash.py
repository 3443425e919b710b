"""SIGKILL `mas train` in the middle of steps, restart it, and get the uninterrupted result."""

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter

from mas.library.logs import SideFiles
from mas.library.store import LibraryStore
from mas.train import finished

ARGS = ["train", "maths", "--model", "fake:0.01", "--tasks", "12", "--batch-size", "4", "--epochs", "2"]


def start(tmp, name, *extra):
    folder = tmp / name
    command = [sys.executable, "-c", "from mas.cli.main import main; main()", *ARGS, *extra]
    command += ["--library", str(folder / "lib.json"), "--run-dir", str(folder / "run")]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def journal_lines(tmp, name):
    path = tmp / name / "run" / "journal.jsonl"
    return path.read_bytes().count(b"\n") if path.exists() else 0


KILLS = 20


def test_sigkill_at_random_moments_then_resume(tmp_path):
    """20 kills, each at a random point of the journal (mid-step: between rollouts, between
    stages, around the library commit), every file checked after each kill."""
    assert start(tmp_path, "whole").wait(timeout=120) == 0
    total = journal_lines(tmp_path, "whole")
    kills = sorted(random.Random(7).sample(range(2, total - 2), KILLS))
    for at in kills:
        process = start(tmp_path, "killed")
        while journal_lines(tmp_path, "killed") < at and process.poll() is None:
            time.sleep(0.002)
        assert process.poll() is None, "the run ended before the kill point"
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        LibraryStore(tmp_path / "killed" / "lib.json").heads()  # never left corrupt
        list(SideFiles(tmp_path / "killed" / "lib.json").usage.items())
    assert start(tmp_path, "killed").wait(timeout=120) == 0

    whole, killed = LibraryStore(tmp_path / "whole" / "lib.json"), LibraryStore(tmp_path / "killed" / "lib.json")
    assert killed.libraries() == whole.libraries() and whole.head("solver").lessons
    for name in whole.libraries():
        assert killed.versions(name) == whole.versions(name)  # lessons, edits, provenance alike
    lines = (tmp_path / "killed" / "run" / "journal.jsonl").read_text().splitlines()
    keys = Counter((r["kind"], r["key"]) for r in map(json.loads, lines))
    assert max(keys.values()) == 1, "a finished stage was done twice"
    assert len(keys) == total
    # a resumed step counts the calls it read back as they were counted: it costs what it used
    spent = [{stage: c.model_dump() for stage, c in s.calls.items()} for s in finished(tmp_path / "whole" / "run")]
    assert [
        {stage: c.model_dump() for stage, c in s.calls.items()} for s in finished(tmp_path / "killed" / "run")
    ] == spent
    whole_usage = [e.model_dump() for e in SideFiles(tmp_path / "whole" / "lib.json").usage.items()]
    killed_usage = [e.model_dump() for e in SideFiles(tmp_path / "killed" / "lib.json").usage.items()]
    assert killed_usage == whole_usage  # each step's usage recorded exactly once


def test_a_second_writer_on_the_same_library_is_refused(tmp_path):
    first = start(tmp_path, "shared", "--model", "fake:0.2")  # slow enough to still be running
    while journal_lines(tmp_path, "shared") < 3:
        assert first.poll() is None
        time.sleep(0.01)
    command = [sys.executable, "-c", "from mas.cli.main import main; main()", *ARGS]
    command += ["--library", str(tmp_path / "shared" / "lib.json"), "--run-dir", str(tmp_path / "other")]
    second = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert second.returncode == 2 and "in use by another mas process" in second.stderr
    assert not (tmp_path / "other").exists()
    first.kill()
    first.wait()
