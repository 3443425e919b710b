"""SIGKILL `mas train` in the middle of steps, restart it, and get the uninterrupted result."""

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter

from mas.store import LibraryStore

ARGS = ["train", "maths", "--model", "fake:0.01", "--tasks", "12", "--batch-size", "4", "--epochs", "2"]


def start(tmp, name):
    folder = tmp / name
    command = [sys.executable, "-c", "from mas.cli import main; main()", *ARGS]
    command += ["--library", str(folder / "lib.json"), "--run-dir", str(folder / "run")]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def journal_lines(tmp, name):
    path = tmp / name / "run" / "journal.jsonl"
    return path.read_bytes().count(b"\n") if path.exists() else 0


def test_sigkill_at_random_moments_then_resume(tmp_path):
    assert start(tmp_path, "whole").wait(timeout=120) == 0
    total = journal_lines(tmp_path, "whole")
    kills = sorted(random.Random(7).sample(range(5, total - 5), 4))
    for at in kills:
        process = start(tmp_path, "killed")
        while journal_lines(tmp_path, "killed") < at and process.poll() is None:
            time.sleep(0.005)
        assert process.poll() is None, "the run ended before the kill point"
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    assert start(tmp_path, "killed").wait(timeout=120) == 0

    whole, killed = LibraryStore(tmp_path / "whole" / "lib.json"), LibraryStore(tmp_path / "killed" / "lib.json")
    assert killed.libraries() == whole.libraries() and whole.head("solver").lessons
    for name in whole.libraries():
        assert killed.versions(name) == whole.versions(name)  # lessons, edits, provenance alike
    lines = (tmp_path / "killed" / "run" / "journal.jsonl").read_text().splitlines()
    keys = Counter((r["kind"], r["key"]) for r in map(json.loads, lines))
    assert max(keys.values()) == 1, "a finished stage was done twice"
    assert len(keys) == total
