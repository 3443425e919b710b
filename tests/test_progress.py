"""Progress bars: on a terminal only (never piped, under CI or with --json), counting what the
command really does, and a resumed run's bar starts where the run is."""

import asyncio
import io
import json
import os
import pty
import re
import subprocess
import sys
import threading

import pytest
from rich.console import Console

from mas.cli.progress import wanted
from mas.config import TrainConfig
from mas.library.store import LibraryStore
from mas.models.fake import FakeClient
from mas.train import train

MAS = [sys.executable, "-c", "from mas.cli.main import main; main()"]


def on_terminal(*args: str, ci: bool = False) -> tuple[int, str, str]:
    """Run ``mas`` with stderr on a pseudo-terminal: (exit code, stdout, what the terminal got)."""
    env = {k: v for k, v in os.environ.items() if k != "CI"} | {"TERM": "xterm-256color"}
    env |= {"CI": "true"} if ci else {}
    master, slave = pty.openpty()
    process = subprocess.Popen([*MAS, *args], stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    chunks: list[bytes] = []

    def drain() -> None:  # a full terminal buffer would stall the command
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # the other side is closed
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain)
    reader.start()
    stdout = process.communicate(timeout=300)[0].decode()
    reader.join(timeout=10)
    os.close(master)
    terminal = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode("utf-8", "replace"))
    return process.returncode, stdout, terminal


def test_bars_only_on_a_terminal_without_ci_or_json(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    terminal, piped = Console(force_terminal=True), Console(file=io.StringIO())
    assert wanted(terminal) and not wanted(piped) and not wanted(terminal, as_json=True)
    monkeypatch.setenv("CI", "true")
    assert not wanted(terminal)


def test_train_counts_rollouts_and_calls_in_flight(tmp_path):
    # Calls of 0.1 s: the bars redraw 10 times a second, and with calls of 0.02 s on a busy
    # machine a redraw could fall only between calls (1 run in 6 of the suite saw none).
    args = ["train", "maths", "--model", "fake:0.1", "--tasks", "8", "--run-dir", str(tmp_path / "run")]
    code, stdout, terminal = on_terminal(*args, "--library", str(tmp_path / "lib.json"))
    assert code == 0, terminal
    assert "40/40 rollouts" in terminal  # 8 tasks x G=5
    assert re.search(r"[1-9] calls? in flight", terminal)  # seen while calls were out
    assert "epoch 0 step 1:" in terminal


def test_no_bar_when_piped_under_ci_or_with_json(tmp_path):
    args = ["train", "maths", "--model", "fake", "--tasks", "4", "--library", str(tmp_path / "lib.json")]
    piped = subprocess.run([*MAS, *args, "--run-dir", str(tmp_path / "a")], capture_output=True, text=True)
    assert piped.returncode == 0 and "epoch 0 step 0:" in piped.stderr
    assert "rollouts" not in piped.stderr and "━" not in piped.stderr
    code, _, terminal = on_terminal(*args, "--run-dir", str(tmp_path / "b"), ci=True)
    assert code == 0 and "epoch 0 step 0:" in terminal and "rollouts" not in terminal
    code, stdout, terminal = on_terminal("eval", "maths", "--model", "fake", "--tasks", "4", "--no-library", "--json")
    assert code == 0 and json.loads(stdout)[0]["library"] == "none"
    assert "tasks" not in terminal and "━" not in terminal


@pytest.mark.parametrize(
    "args, done",
    [
        (["eval", "maths", "--model", "fake", "--tasks", "4", "--k", "2", "--no-library"], "4/4 tasks"),
        # no library: 4 held-out tasks; full: 1 epoch x 4 tasks x G=2 training, then 4 held-out
        (
            [
                "ablate",
                "maths",
                "--model",
                "fake",
                "--variants",
                "full",
                "--tasks",
                "4",
                "--test-tasks",
                "4",
                "--group-size",
                "2",
            ],
            "16/16 rollouts",
        ),  # fmt: skip
    ],
    ids=["eval", "ablate"],
)
def test_eval_and_ablate_bars_count_to_their_total(args, done, tmp_path):
    extra = ["--run-dir", str(tmp_path / "ablate")] if args[0] == "ablate" else []
    code, _, terminal = on_terminal(*args, *extra)
    assert code == 0, terminal
    assert done in terminal


def test_transfer_bar_counts_every_evaluation_run(tmp_path):
    lib = tmp_path / "lib.json"
    trained = subprocess.run(
        [*MAS, "train", "maths", "--model", "fake", "--tasks", "8", "--library", str(lib), "--run-dir", str(tmp_path / "r")],
        capture_output=True,
    )  # fmt: skip
    assert trained.returncode == 0
    heads = LibraryStore(lib).heads()
    roles = ["planner", "solver", "verifier"]
    runs = 1 + len(roles) * sum(1 for r in roles if r in heads and heads[r].lessons)
    code, _, terminal = on_terminal("transfer", "maths", "--model", "fake", "--tasks", "3", "--library", str(lib))
    assert code == 0, terminal
    assert f"{3 * runs}/{3 * runs} tasks" in terminal


def test_a_resumed_run_reports_what_it_did_before_at_once(maths, tmp_path):
    """Finished steps count at once, rollouts read back from the journal one by one: the
    bar starts where the run is, and nothing is counted twice."""
    config = TrainConfig(tasks=8, batch_size=4, group_size=5)

    def run(client):
        told: list[int] = []
        asyncio.run(
            train(maths, client=client, store=LibraryStore(tmp_path / "lib.json"), run_dir=tmp_path / "run",
                  config=config, on_rollout=told.append)
        )  # fmt: skip
        return told

    first = run(FakeClient())
    assert first == [1] * 40
    journal = tmp_path / "run" / "journal.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    journal.write_text("".join(line for line in lines if '"key":"e0/s1"' not in line or '"kind":"step"' not in line))
    client = FakeClient()
    again = run(client)
    assert again == [20] + [1] * 20  # step 0 at once; step 1's rollouts from the journal
    assert all(r.schema is not None for r in client.requests)  # no rollout was run again
