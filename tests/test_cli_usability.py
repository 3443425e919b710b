"""What a new user meets at the command line: a mistake gets one line that says what to do,
exit code 2 and nothing written; a command's output says what comes next and reads at 80
columns. Each test here failed before the change it covers (the CLI audit of 2026-12-06)."""

import os
import shutil
import subprocess
import sys

import pytest

from mas.library.store import LibraryStore
from mas.types.lessons import Lesson, Version
from tests.test_cli import snapshot
from tests.test_cli_hierarchy import evidence  # noqa: F401  (a fixture: a library with randomized evidence)

LESSON = "When a task has several operations, write the whole expression before computing."


def mas(*args, columns=None):
    """``mas ARGS`` in a fresh process; ``columns`` sets the terminal width rich lays out for."""
    env = {**os.environ, **({"COLUMNS": str(columns)} if columns else {})}
    code = "from mas.cli.main import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env)


def one_line_exit_2(done, message: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in done.stderr, done.stderr


@pytest.fixture
def library(tmp_path):
    """A library file with one lesson in the solver's library (version 1)."""
    store = LibraryStore(tmp_path / "lib.json")
    store.commit([Version(library="solver", number=1, next_id=2, lessons=[Lesson(id="solver/0001", text=LESSON)])])
    return store.path


@pytest.fixture(scope="module")
def held(tmp_path_factory):
    """A training run with --review: its library file (no lessons, edits held) and its output."""
    folder = tmp_path_factory.mktemp("held")
    lib = folder / "lib.json"
    args = ["--model", "fake", "--tasks", "8", "--library", str(lib), "--run-dir", str(folder / "run")]
    done = mas("train", "maths", "--review", *args)
    assert done.returncode == 0, done.stderr
    return lib, done


def test_a_library_file_without_the_json_suffix_is_a_file_not_a_scenario_name(library, tmp_path):
    """Error messages name a damaged library file by its path (``mas library recover PATH``);
    a path that did not end in .json was read as a scenario name and refused as one."""
    renamed = tmp_path / "lib.db"
    shutil.copy(library, renamed)
    shown = mas("library", "show", str(renamed))
    assert shown.returncode == 0, shown.stderr
    assert "solver/0001" in shown.stdout
    empty = tmp_path / "notalibrary"
    empty.write_text("")
    recovered = mas("library", "recover", str(empty))
    one_line_exit_2(recovered, str(empty))
    assert "scenario name" not in recovered.stderr


def test_a_typo_in_a_role_names_the_libraries_the_file_has(library):
    """``has no version 1`` sent the user looking for a version of a library that never was."""
    before = snapshot(library.parent)
    for args in (["diff", str(library), "solvr", "1"], ["rollback", str(library), "solvr", "1"]):
        one_line_exit_2(mas("library", *args), "unknown library 'solvr' (has solver)")
    one_line_exit_2(mas("library", "show", str(library), "--role", "solvr", "--version", "1"), "unknown library")
    assert snapshot(library.parent) == before


def test_rollback_counts_one_lesson_in_the_singular(library):
    done = mas("library", "rollback", str(library), "solver", "1")
    assert done.returncode == 0, done.stderr
    assert "(1 lesson)" in done.stdout


def test_a_missing_library_says_which_command_writes_it(home):
    """Before any ``mas train``, the library commands and the studies name the command that
    makes the library they looked for."""
    for args in (["library", "show", "maths"], ["promote", "maths"], ["transfer", "maths", "--model", "fake"]):
        one_line_exit_2(mas(*args), "no such library file (mas train maths writes it with its first lesson)")
    assert not (home / "runs").exists() and not (home / "libraries").exists()


def test_eval_before_train_says_which_command_writes_the_library(home):
    done = mas("eval", "maths", "--model", "fake", "--tasks", "2")
    assert done.returncode == 0, done.stderr
    assert "(mas train maths writes it with its first lesson)" in done.stdout


def test_eval_refuses_no_library_with_library(library, home):
    """--no-library silently dropped the library named with --library: the table then scored
    something else than asked."""
    done = mas("eval", "maths", "--model", "fake", "--no-library", "--library", str(library))
    one_line_exit_2(done, "--no-library and --library: choose one")
    assert not (home / "runs").exists()


def test_training_with_review_does_not_blame_the_groups_for_no_lessons(held):
    """With --review every edit is held: "no group had both winners and losers" was wrong."""
    _, done = held
    assert "waiting for review" in done.stdout
    assert "no group had both winners and losers" not in done.stdout


def test_training_says_how_to_evaluate_what_it_learned(tmp_path):
    lib = tmp_path / "lib.json"
    args = ["--model", "fake", "--tasks", "8", "--library", str(lib), "--run-dir", str(tmp_path / "run")]
    done = mas("train", "maths", *args)
    assert done.returncode == 0, done.stderr
    assert f"next: mas eval maths --library {lib} --model fake" in done.stdout
    assert " 1 edits" not in done.stderr  # the step lines count in the singular too


def test_the_review_listing_says_how_to_decide(held):
    lib, _ = held
    done = mas("library", "review", str(lib))
    assert done.returncode == 0, done.stderr
    assert f"decide with: mas library review {lib} --accept ID" in done.stdout


def test_review_refuses_why_without_a_decision(held):
    """--why with nothing to decide was ignored without a word: the reason was lost."""
    lib, _ = held
    before = snapshot(lib.parent)
    one_line_exit_2(mas("library", "review", str(lib), "--why", "seen it help"), "--why goes with --accept")
    assert snapshot(lib.parent) == before


def test_promote_shows_each_move_whole_at_80_columns(evidence, tmp_path):  # noqa: F811
    """A six-column table wrapped the evidence a word to a line and cut the lesson ids."""
    for side in evidence.parent.glob("lib.*"):
        shutil.copy(side, tmp_path / side.name)
    done = mas("promote", str(tmp_path / "lib.json"), "--dry-run", columns=80)
    assert done.returncode == 0, done.stderr
    assert "promote solver/0001 (roles: solver, verifier)" in done.stdout
    assert any(line.startswith("  verifier: +") and " tasks, e-value " in line for line in done.stdout.splitlines())
    assert "the same command without --dry-run applies these moves" in done.stdout


def test_help_names_the_scenario_argument_as_the_text_does():
    """The usage line said ``[scenario]`` while every help text says SCENARIO."""
    train = mas("train", "--help", columns=100).stdout
    assert "train [OPTIONS] [SCENARIO]" in train
    assert "Train on the first N tasks." in train  # not "held-out ones for evaluation"
    assert "recover" in mas("library", "--help").stdout.split("Options:")[0]


def test_eval_compare_refuses_the_library_itself_and_tells_two_files_of_one_name_apart(library, home, tmp_path):
    """--compare with the --library file printed two identical columns; two files named
    lib.json in two folders printed two columns both headed lib.json."""
    done = mas("eval", "maths", "--model", "fake", "--tasks", "2", "--library", str(library), "--compare", str(library))
    one_line_exit_2(done, "the library evaluated already")
    other = tmp_path / "other" / "lib.json"
    other.parent.mkdir()
    shutil.copy(library, other)
    done = mas("eval", "maths", "--model", "fake", "--tasks", "2", "--k", "1", "--library", str(library),
               "--compare", str(other), columns=200)  # fmt: skip
    assert f"{library.parent.name}/lib.json" in done.stdout and "other/lib.json" in done.stdout, done.stdout


def test_a_step_line_counts_edits_in_the_singular():
    from mas.cli.commands import _step_line
    from mas.types.reports import StepReport

    report = StepReport(epoch=0, step=0, task_ids=["a"], groups=1, informative=1, mean_reward=0.5,
                        applied={"solver": 1, "planner": 2}, rejected={})  # fmt: skip
    assert "solver 1 edit, planner 2 edits," in _step_line(report)


def test_the_next_eval_reads_the_tasks_as_training_did(tmp_path):
    """After `mas train hf.jsonl --question-field problem --answer-field solution --test-file ...`,
    the suggested `mas eval hf.jsonl` failed on the first task ("missing field 'question'"), or
    scored a split of the training file instead of the test file: the hint now carries them."""
    import json
    import shlex

    def tasks(path, first, n):
        rows = [{"problem": f"What is {i} + {i}?", "solution": f"\\boxed{{{2 * i}}}"} for i in range(first, first + n)]
        path.write_text("".join(json.dumps({"id": f"t{i}", **r}) + "\n" for i, r in enumerate(rows, first)))
        return path

    train_file, test_file = tasks(tmp_path / "hf.jsonl", 1, 12), tasks(tmp_path / "test.jsonl", 100, 3)
    args = ["--question-field", "problem", "--answer-field", "solution", "--test-file", str(test_file)]
    args += ["--model", "fake", "--library", str(tmp_path / "lib.json"), "--run-dir", str(tmp_path / "run")]
    done = mas("train", str(train_file), *args)
    assert done.returncode == 0, done.stderr
    hint = next(line for line in done.stdout.splitlines() if line.startswith("next: "))
    words = shlex.split(hint.removeprefix("next: ").partition("   #")[0])
    assert words[:3] == ["mas", "eval", str(train_file)], words
    done = mas(*words[1:], "--k", "1", "--run-dir", str(tmp_path / "eval"), "--json")
    assert done.returncode == 0, done.stderr
    assert all(len(column["tasks"]) == 3 for column in json.loads(done.stdout)), (
        done.stdout
    )  # the test file's, not a split of the training file's


def test_lessons_no_role_of_the_team_reads_are_named(tmp_path):
    """A team whose checker was renamed (or a library trained for another team): train said
    "continuing ... (checker v1: 1)" and eval "injected checker v1 (1)", though no prompt shows them."""
    lib = tmp_path / "lib.json"
    lesson = Lesson(id="checker/0001", text=LESSON)
    LibraryStore(lib).commit([Version(library="checker", number=1, next_id=2, lessons=[lesson])])
    said = "lib.json: 1 lesson of checker, which no role of this team reads (its roles: planner, solver, verifier)"
    done = mas("eval", "maths", "--model", "fake", "--tasks", "2", "--k", "1", "--library", str(lib),
               "--run-dir", str(tmp_path / "eval"))  # fmt: skip
    assert done.returncode == 0 and said in done.stdout + done.stderr, done.stdout
    done = mas("train", "maths", "--model", "fake", "--tasks", "2", "--epochs", "1", "--library", str(lib),
               "--run-dir", str(tmp_path / "run"))  # fmt: skip
    assert done.returncode == 0 and said in done.stdout + done.stderr, done.stderr
