"""A study's run folder: the same command resumes it without a model call; another kind of run,
or the same study with other tasks, libraries or settings, is refused with one line naming
run.json, exit code 2, and nothing written."""

import json
import os
import subprocess
import sys

import pytest

from tests.test_cli import mas, snapshot
from tests.test_study_crash import COUNTING, calls, table

STUDIES = {
    "eval": ["eval", "maths", "--model", "fake", "--tasks", "3", "--library", "{lib}"],
    "transfer": ["transfer", "maths", "--model", "fake", "--tasks", "2", "--library", "{lib}"],
    "ablate": ["ablate", "maths", "--model", "fake", "--variants", "full", "--tasks", "2", "--test-tasks", "2"],
}
NAMES = {"eval": "an evaluation", "transfer": "a transfer study", "ablate": "an ablation"}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A library and the training run that made it."""
    folder = tmp_path_factory.mktemp("trained")
    done = mas("train", "maths", "--model", "fake", "--tasks", "8", "--library", str(folder / "lib.json"),
               "--run-dir", str(folder / "run"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    return folder


def args(study: str, trained, run_dir, *extra: str) -> list[str]:
    return [a.format(lib=trained / "lib.json") for a in STUDIES[study]] + ["--run-dir", str(run_dir), *extra]


def refused(command: list[str], message: str, *watched) -> None:
    before = [snapshot(folder) for folder in watched]
    done = mas(*command)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and message in lines[0], done.stderr
    assert "Traceback" not in done.stderr and [snapshot(folder) for folder in watched] == before


@pytest.mark.parametrize("study", STUDIES)
def test_a_training_run_folder_is_not_a_study_folder(study, trained):
    run = trained / "run"
    refused(
        args(study, trained, run), f"{run / 'run.json'}: the folder holds a training run, not {NAMES[study]}", trained
    )


@pytest.mark.parametrize("study", STUDIES)
def test_a_study_folder_is_not_a_training_run_folder_nor_another_study(study, trained, tmp_path):
    done = mas(*args(study, trained, tmp_path / "study"))
    assert done.returncode == 0, done.stderr
    message = f"the folder holds {NAMES[study]}, not a training run"
    train = ["train", "maths", "--model", "fake", "--library", str(tmp_path / "lib.json")]
    refused([*train, "--run-dir", str(tmp_path / "study")], message, tmp_path)
    other = next(s for s in STUDIES if s != study)
    refused(args(other, trained, tmp_path / "study"), f"holds {NAMES[study]}, not {NAMES[other]}", tmp_path, trained)


def run_counting(command: list[str], log) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-c", COUNTING, *command], capture_output=True, text=True,
        env={**os.environ, "MAS_TEST_CALLS": str(log)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.parametrize("study", STUDIES)
def test_the_same_command_again_reads_the_study_back_without_a_model_call(study, trained, tmp_path):
    command = args(study, trained, tmp_path / "study")
    first = run_counting(command, tmp_path / "first.calls")
    again = run_counting(command, tmp_path / "again.calls")
    assert calls(tmp_path / "first.calls") and not calls(tmp_path / "again.calls")
    assert table(again.stdout) == table(first.stdout) and "resuming " in again.stdout
    # the settings that only bound the run may change on resume
    run_counting([*command, "--concurrency", "3", "--retries", "1", "--call-timeout", "9"], tmp_path / "free.calls")
    assert not calls(tmp_path / "free.calls")


@pytest.mark.parametrize(
    "study, change, named",
    [
        ("eval", ["--tasks", "2"], "(tasks)"),
        ("eval", ["--k", "2"], "(k)"),
        ("eval", ["--no-library"], "(libraries)"),
        ("eval", ["--temperature", "0.1"], "(temperature)"),
        ("transfer", ["--seed", "3"], "(seed)"),
        ("ablate", ["--variants", "full,global only"], "(variants)"),
        ("ablate", ["--group-size", "3"], "(training settings)"),
        ("ablate", ["--model", "fake:0"], "(model)"),
    ],
)
def test_a_study_resumed_with_other_settings_is_refused(study, change, named, trained, tmp_path):
    command = args(study, trained, tmp_path / "study")
    assert mas(*command).returncode == 0
    if "--model" in change:
        command = [w if w != "fake" else "fake:0" for w in command]
        change = []
    if "--no-library" in change:  # in place of the library named (both at once are refused)
        at = command.index("--library")
        command = command[:at] + command[at + 2 :]
    refused([*command, *change], f"{tmp_path / 'study' / 'run.json'}: this run was started with other settings {named}",
            tmp_path)  # fmt: skip


def test_a_library_changed_since_is_refused(trained, tmp_path):
    lib = tmp_path / "lib.json"
    lib.write_bytes((trained / "lib.json").read_bytes())
    command = [
        "eval",
        "maths",
        "--model",
        "fake",
        "--tasks",
        "2",
        "--library",
        str(lib),
        "--run-dir",
        str(tmp_path / "e"),
    ]
    assert mas(*command).returncode == 0
    assert mas("library", "rollback", str(lib), "solver", "0").returncode == 0
    refused(command, "this run was started with other settings (libraries)", tmp_path / "e")
    settings = json.loads((tmp_path / "e" / "run.json").read_text())
    assert settings["kind"] == "eval" and settings["libraries"]["library"]["path"] == str(lib.resolve())
