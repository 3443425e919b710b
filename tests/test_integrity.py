"""The red-team matrix of issue 12 (integrity and secrets): each case an input a hostile or
careless user could give, or a moment they could pick to interrupt, with what must follow:
one line naming the file, line or field and exit code 2 with nothing written; or the
operation refused while another holds the library, and the other unharmed; or no secret on
disk; or nothing raw on the terminal.

New names (``mas.redact``, ...) are imported inside the tests, so that the matrix also runs,
case by case, against a checkout from before them.
"""

from __future__ import annotations

import asyncio
import base64
import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mas import paths
from mas.cli.main import main
from mas.library.store import LibraryStore
from mas.types.lessons import Lesson, Version

KEY = "sk-mas-secret-0f1e2d3c4b5a69788796a5b4c3d2e1f0"
GOOD_TASK = {"id": "1", "question": "What is 1 + 1?", "answer": "2"}


# -- helpers ------------------------------------------------------------------------------------


def cli(*args, capsys, monkeypatch) -> tuple[int, str, str]:
    """``mas ARGS`` in this process: exit code, stdout, stderr."""
    monkeypatch.setattr(sys, "argv", ["mas", *map(str, args)])
    try:
        main()
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def mas(*args, **kwargs) -> subprocess.CompletedProcess:
    command = [sys.executable, "-c", "from mas.cli.main import main; main()", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, **kwargs)


def snapshot(*folders: Path) -> dict:
    out = {}
    for folder in folders:
        if folder.exists():
            for p in folder.rglob("*"):
                out[p] = (p.stat().st_mtime_ns, p.stat().st_size) if p.is_file() and not p.is_symlink() else None
    return out


def refused(args, message, tmp_path, capsys, monkeypatch) -> str:
    """One line on stderr holding ``message``, exit code 2, no traceback, nothing written."""
    before = snapshot(tmp_path, paths.home())
    code, _, err = cli(*args, capsys=capsys, monkeypatch=monkeypatch)
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and message in lines[0], err
    assert "Traceback" not in err
    assert snapshot(tmp_path, paths.home()) == before
    return lines[0]


def doc(library="solver", number=1, lessons=(("solver/0001", "Check the units."),), next_id=2, **extra) -> dict:
    return {
        "schema_version": 1,
        "library": library,
        "number": number,
        "lessons": [{"id": i, "text": t} for i, t in lessons],
        "next_id": next_id,
        **extra,
    }


def library_text(*docs: dict) -> str:
    return json.dumps({"versions": {str(i): d for i, d in enumerate(docs, 1)}}, indent=1)


def lesson_versions(*texts: str, library: str = "solver") -> list[Version]:
    lessons = [Lesson(id=f"{library}/{i:04d}", text=t) for i, t in enumerate(texts, 1)]
    return [Version(library=library, number=1, lessons=lessons, next_id=len(texts) + 1)]


@pytest.fixture
def lib(tmp_path) -> Path:
    """A healthy library file with two versions of the solver's library."""
    path = tmp_path / "lib.json"
    store = LibraryStore(path)
    store.commit(lesson_versions("Check the units before answering."))
    store.commit([Version(library="solver", number=2, lessons=[], next_id=2)])
    return path


def write_jsonl(path: Path, *records) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


# -- A. every persisted file is untrusted input: libraries ------------------------------------

LIBRARIES = {  # a library file a careless hand or a bad merge left -> what the one line says
    "next_id not above the highest id": (library_text(doc(next_id=1)), "next_id 1 is not above"),
    "duplicate ids": (
        library_text(doc(lessons=[("solver/0001", "Check a."), ("solver/0001", "Check b.")])),
        "duplicate lesson id",
    ),
    "an id of another role": (library_text(doc(lessons=[("planner/0001", "Plan it.")])), "not an id of library"),
    "versions that do not chain": (library_text(doc(), doc(number=3)), "versions must chain"),
    "an empty text": (library_text(doc(lessons=[("solver/0001", "  ")])), "empty text"),
    "true as a version": (library_text(doc(number=True)), "number"),
    "a version as a string": (library_text(doc(number="1")), "number"),
    "next_id going back": (library_text(doc(next_id=5), doc(number=2, next_id=2)), "next_id goes back"),
    "a 5000-digit id": (library_text(doc(lessons=[("solver/" + "9" * 5000, "Check it.")])), "not an id of"),
    "a 5000-digit number": (
        library_text(doc()).replace('"number": 1', '"number": 1' + "0" * 5000),
        "not a valid library file",
    ),
    "a library name with a path": (library_text(doc(library="../x", lessons=[])), "is not a name"),
    "a lone surrogate": (library_text(doc(lessons=[("solver/0001", "Check \ud800 it.")])), "lone surrogate"),
    "two versions 1": (library_text(doc(), doc()), "two versions 1"),
}


@pytest.mark.parametrize("case", LIBRARIES)
@pytest.mark.parametrize("command", ["show", "rollback"])
def test_a_library_that_breaks_an_invariant_is_refused_with_one_line(case, command, tmp_path, capsys, monkeypatch):
    text, message = LIBRARIES[case]
    path = tmp_path / "lib.json"
    path.write_text(text)
    args = ["library", "show", path] if command == "show" else ["library", "rollback", path, "solver", "1"]
    line = refused(args, message, tmp_path, capsys, monkeypatch)
    assert "lib.json" in line and "no backup to restore" in line  # `mas library recover` would refuse too
    path.with_name("lib.json.bak").write_text(text)
    line = refused(args, message, tmp_path, capsys, monkeypatch)
    assert f"mas library recover {path}` to restore the backup" in line


# -- A. ... the step logs and the journal -------------------------------------------------------


def usage_line(number: int, **change) -> str:
    event = {"schema_version": 1, "run": "r", "epoch": 0, "step": number, "task_id": "t", "rollout": 0}
    event |= {"role": "solver", "in_prompt": ["solver/0001"], "cited": ["solver/0001"], "judged": []}
    event |= {"reward": 1.0, "advantage": 0.5}
    return json.dumps({"run": "r", "epoch": 0, "step": number, "items": [event], **change})


BAD_LOG_LINES = {
    "not JSON": "{half a line",
    "a list": "[1, 2]",
    "a step that is text": usage_line(9, step="nine"),
    "an item that is not an event": usage_line(9, items=[{"role": 3}]),
    "a reward that is NaN": usage_line(9).replace('"reward": 1.0', '"reward": NaN'),
}


@pytest.mark.parametrize("where", ["middle", "end"])
@pytest.mark.parametrize("bad", BAD_LOG_LINES)
def test_a_bad_usage_log_line_is_named_and_recover_sets_it_aside(where, bad, lib, tmp_path, capsys, monkeypatch):
    """At the end too, when it has its newline: only a crash cuts a line before it."""
    log = tmp_path / "lib.usage.jsonl"
    lines = (
        [usage_line(0), BAD_LOG_LINES[bad], usage_line(1)]
        if where == "middle"
        else [usage_line(0), usage_line(1), BAD_LOG_LINES[bad]]
    )
    log.write_text("\n".join(lines) + "\n")
    number = 2 if where == "middle" else 3

    line = refused(
        ["graph", "export", lib, "--output", tmp_path / "g.html"],
        f"lib.usage.jsonl:{number}",
        tmp_path,
        capsys,
        monkeypatch,
    )
    assert "mas library recover" in line
    code, out, err = cli("library", "recover", lib, capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0, err
    assert Path(f"{log}.bad").read_text().strip() == BAD_LOG_LINES[bad]
    assert len(log.read_text().splitlines()) == 2
    code, out, err = cli(
        "graph", "export", lib, "--output", tmp_path / "g.html", capsys=capsys, monkeypatch=monkeypatch
    )
    assert code == 0, err


def test_a_bad_usage_log_line_does_not_stop_training_for_good(tmp_path, capsys, monkeypatch):
    """It stops the run with one line; `mas library recover` sets it aside; the run resumes."""
    lib, run = tmp_path / "lib.json", tmp_path / "run"
    args = [
        "train",
        "maths",
        "--model",
        "fake",
        "--tasks",
        "8",
        "--batch-size",
        "4",
        "--library",
        lib,
        "--run-dir",
        run,
    ]
    log = tmp_path / "lib.usage.jsonl"
    write_jsonl(log, usage_line(0), "garbage", usage_line(1))
    code, _, err = cli(*args, capsys=capsys, monkeypatch=monkeypatch)
    assert code == 2 and "lib.usage.jsonl:2" in err and len(err.strip().splitlines()) == 1, err
    assert cli("library", "recover", lib, capsys=capsys, monkeypatch=monkeypatch)[0] == 0
    code, _, err = cli(*args, capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0, err


@pytest.mark.parametrize("log", ["lib.usage.jsonl", "lib.promotions.jsonl"])
def test_a_damaged_log_stops_a_new_run_before_its_folder_is_made(log, lib, tmp_path, capsys, monkeypatch):
    (tmp_path / log).write_text("garbage\n" + usage_line(0) + "\n")
    args = ["train", "maths", "--model", "fake", "--tasks", "2", "--library", lib, "--run-dir", tmp_path / "run"]
    refused(args, f"{log}:1", tmp_path, capsys, monkeypatch)


def test_a_folder_where_the_backup_goes_stops_a_commit_before_the_library_changes(lib, tmp_path, capsys, monkeypatch):
    Path(f"{lib}.bak").unlink()
    Path(f"{lib}.bak").mkdir()
    refused(["library", "rollback", lib, "solver", "1"], "lib.json.bak", tmp_path, capsys, monkeypatch)
    assert LibraryStore(lib).head("solver").number == 2


@pytest.mark.parametrize("holds", ["notes.txt", "a file as the folder"])
def test_an_ablation_folder_holding_other_files_is_not_written_into(holds, tmp_path, capsys, monkeypatch):
    folder = tmp_path / "abl"
    if holds == "notes.txt":
        folder.mkdir()
        (folder / "notes.txt").write_text("mine\n")
    else:
        folder.write_text("mine\n")
    args = ["ablate", "maths", "--model", "fake", "--tasks", "2", "--run-dir", folder, "--variants", "no library"]
    refused(args, "abl", tmp_path, capsys, monkeypatch)


def test_a_torn_last_log_line_is_dropped_and_the_step_recorded(tmp_path):
    from mas.library.logs import SideFiles, StepKey

    log = SideFiles(tmp_path / "lib.json").usage
    log.path.write_text(usage_line(0) + "\n" + usage_line(1)[:40])
    assert [k.step for k, _ in log.steps()] == [0]
    log.append(StepKey("r", 0, 1), [])
    assert [k.step for k, _ in log.steps()] == [0, 1]


def test_a_whole_last_log_line_whose_newline_was_cut_is_kept(tmp_path):
    from mas.library.logs import SideFiles, StepKey

    log = SideFiles(tmp_path / "lib.json").usage
    log.path.write_text(usage_line(0) + "\n" + usage_line(1))
    log.append(StepKey("r", 0, 2), [])
    assert [k.step for k, _ in log.steps()] == [0, 1, 2]


def journal_lines(n: int) -> list[str]:
    return [json.dumps({"kind": "summary", "key": f"k{i}", "data": {"ok": True, "i": i}}) for i in range(n)]


@pytest.mark.parametrize("bad", ["{torn", "[1, 2]", '{"kind": "summary"}', "\xff\xfe"])
def test_a_corrupt_journal_line_in_the_middle_keeps_every_record_after_it(bad, tmp_path):
    """Was: 23 of 28 records silently dropped. Now: one line naming line 6, file unchanged."""
    from mas.errors import UserError
    from mas.journal import Journal

    path = tmp_path / "journal.jsonl"
    lines = journal_lines(28)
    lines[5] = bad
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogateescape")
    before = path.read_bytes()
    with pytest.raises(UserError, match=r"journal\.jsonl:6: ") as caught:
        Journal(path)
    assert "\n" not in str(caught.value)
    assert path.read_bytes() == before


@pytest.mark.parametrize("bad", ["{torn", '{"kind": "summary"}', "\xff\xfe"])
def test_a_whole_bad_last_journal_line_is_named_not_dropped(bad, tmp_path):
    """A crash cuts a line before its newline; a bad line that has its newline is damage."""
    from mas.errors import UserError
    from mas.journal import Journal

    path = tmp_path / "journal.jsonl"
    path.write_text("\n".join([*journal_lines(28), bad]) + "\n", encoding="utf-8", errors="surrogateescape")
    before = path.read_bytes()
    with pytest.raises(UserError, match=r"journal\.jsonl:29: "):
        Journal(path)
    assert path.read_bytes() == before


def test_only_a_torn_last_journal_line_is_dropped(tmp_path):
    from mas.journal import Journal

    path = tmp_path / "journal.jsonl"
    path.write_text("\n".join(journal_lines(28)) + "\n" + journal_lines(29)[-1][:30])
    assert len(Journal(path).index) == 28
    assert path.read_text().count("\n") == 28
    Journal(path).put("summary", "k28", {"ok": True})
    assert len(Journal(path).index) == 29


def test_a_corrupt_journal_stops_the_resumed_run_with_one_line(tmp_path, capsys, monkeypatch):
    args = ["train", "maths", "--model", "fake", "--tasks", "4", "--library", tmp_path / "lib.json"]
    args += ["--run-dir", tmp_path / "run"]
    assert cli(*args, capsys=capsys, monkeypatch=monkeypatch)[0] == 0
    journal = tmp_path / "run" / "journal.jsonl"
    lines = journal.read_text().splitlines()
    lines[3] = "not json"
    journal.write_text("\n".join(lines) + "\n")
    refused(args, "journal.jsonl:4: not a journal record", tmp_path, capsys, monkeypatch)


# -- B. the run is its tasks and role prompts -------------------------------------------------


def scenario_folder(tmp_path: Path, question: str, prompt: str = "You are the solver.") -> Path:
    folder = tmp_path / "scen"
    (folder / "roles").mkdir(parents=True, exist_ok=True)
    (folder / "scenario.toml").write_text(
        'name = "scen"\nroles = ["planner", "solver", "verifier"]\ntasks = "tasks.jsonl"\nreward = "numeric"\n'
    )
    (folder / "roles" / "solver.toml").write_text(
        f'name = "solver"\ndescription = "d"\nsystem_prompt = "{prompt}"\ntools = ["calculator"]\n'
    )
    write_jsonl(
        folder / "tasks.jsonl", {**GOOD_TASK, "question": question}, {"id": "2", "question": "2+2?", "answer": "4"}
    )
    return folder


SCENARIO_FAULTS = {  # what a hand edit did to a scenario folder -> what the one line says
    "a Windows-1252 byte in scenario.toml": ("scenario.toml", b'description = "caf\xe9"\n', "not UTF-8"),
    "a Windows-1252 byte in a role file": ("roles/solver.toml", b'tool_summary = "caf\xe9"\n', "not UTF-8"),
    "no roles": ("scenario.toml", "roles = []", "field 'roles'"),
    "a role named twice": ("scenario.toml", 'roles = ["solver", "solver"]', "named twice"),
    "a tool named twice": ("roles/solver.toml", 'tools = ["calculator", "calculator"]', "named twice"),
    "an unknown field in tool_summary": ("roles/solver.toml", 'tool_summary = "{nope}"', "unknown field {nope}"),
    "an attribute in tool_summary": ("roles/solver.toml", 'tool_summary = "{result.__class__}"', "unknown field"),
}


@pytest.mark.parametrize("fault", SCENARIO_FAULTS)
def test_a_scenario_folder_a_hand_broke_gets_one_line_before_anything_is_written(fault, tmp_path, capsys, monkeypatch):
    folder = scenario_folder(tmp_path, "What is 1 + 1?")
    name, change, message = SCENARIO_FAULTS[fault]
    path = folder / name
    if isinstance(change, bytes):
        path.write_bytes(path.read_bytes() + change)
    else:  # replace the line of that key, or add it
        key = change.split(" =")[0]
        lines = [line for line in path.read_text().splitlines() if not line.startswith(f"{key} ")]
        path.write_text("\n".join([*lines, change]) + "\n")
    args = ["train", folder, "--model", "fake", "--library", tmp_path / "lib.json", "--run-dir", tmp_path / "run"]
    assert name.split("/")[-1] in refused(args, message, tmp_path, capsys, monkeypatch)


@pytest.mark.parametrize("change", ["tasks.jsonl", "scenario role prompt"])
def test_a_resume_with_other_tasks_or_prompts_is_refused(change, tmp_path, capsys, monkeypatch):
    folder = scenario_folder(tmp_path, "What is 1 + 1?")
    args = ["train", folder, "--model", "fake", "--library", tmp_path / "lib.json", "--run-dir", tmp_path / "run"]
    code, _, err = cli(*args, "--epochs", "2", capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0, err
    if change == "tasks.jsonl":  # same ids, other questions
        scenario_folder(tmp_path, "What is 5 + 5?")
    else:
        scenario_folder(tmp_path, "What is 1 + 1?", prompt="You are the solver. Always answer 7.")
    refused(
        [*args, "--epochs", "2"], "run.json: this run was started with other settings", tmp_path, capsys, monkeypatch
    )


def test_a_resume_with_another_jsonl_of_the_same_name_is_refused(tmp_path, capsys, monkeypatch):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    write_jsonl(first / "tasks.jsonl", GOOD_TASK)
    write_jsonl(second / "tasks.jsonl", {**GOOD_TASK, "question": "What is 2 + 2?", "answer": "4"})
    common = ["--model", "fake", "--library", tmp_path / "lib.json", "--run-dir", tmp_path / "run"]
    assert cli("train", first / "tasks.jsonl", *common, capsys=capsys, monkeypatch=monkeypatch)[0] == 0
    refused(["train", second / "tasks.jsonl", *common], "(tasks)", tmp_path, capsys, monkeypatch)


# -- C. bad paths and names ----------------------------------------------------------------------


def make(tmp_path: Path, kind: str) -> Path:
    """A path of the given kind in ``tmp_path``."""
    if kind == "file":
        (tmp_path / "afile").write_text("not a folder")
        return tmp_path / "afile"
    if kind == "folder.json":
        (tmp_path / "dir.json").mkdir()
        return tmp_path / "dir.json"
    if kind == "loop":
        os.symlink(tmp_path / "loop2.json", tmp_path / "loop1.json")
        os.symlink(tmp_path / "loop1.json", tmp_path / "loop2.json")
        return tmp_path / "loop1.json"
    raise ValueError(kind)


PATHS = [  # (arguments with {x} for the path made, kind, message)
    (["train", "maths", "--model", "fake", "--tasks", "4", "--run-dir", "{x}"], "file", "not a folder"),
    (["train", "maths", "--model", "fake", "--tasks", "4", "--run-dir", "{x}/run"], "file", "afile"),
    (["train", "maths", "--model", "fake", "--tasks", "4", "--library", "{x}"], "folder.json", "a folder"),
    (["train", "maths", "--model", "fake", "--tasks", "4", "--library", "{x}/lib.json"], "file", "afile"),
    (["eval", "maths", "--model", "fake", "--tasks", "2", "--library", "{x}"], "folder.json", "a folder"),
    (["library", "show", "{x}"], "folder.json", "a folder"),
    (["library", "rollback", "{x}", "solver", "1"], "folder.json", "a folder"),
    (["library", "recover", "{x}"], "folder.json", "a folder"),
    (["promote", "{x}"], "folder.json", "a folder"),
    (["library", "show", "{x}"], "loop", "loop1.json"),
    (["report", "{run}", "--output", "{x}"], "file", "not a folder"),
]


FIFOS = {  # a named pipe where mas reads a file: reading it would wait for a writer for ever
    "the library file": ("lib.json", ["train", "maths", "--model", "fake", "--tasks", "2", "--library", "{lib}"]),
    "the usage log": ("lib.usage.jsonl", ["promote", "{lib}", "--dry-run"]),
    "the equivalence log": ("lib.equivalence.jsonl", ["promote", "{lib}", "--dry-run"]),
    "the price table": ("prices.toml", ["eval", "maths", "--model", "fake", "--tasks", "1", "--prices", "{x}"]),
    "the journal": ("run/journal.jsonl", ["train", "maths", "--model", "fake", "--tasks", "2", "--library", "{lib}",
                                          "--run-dir", "{x}/.."]),
}  # fmt: skip


@pytest.mark.parametrize("where", FIFOS)
def test_a_fifo_where_a_file_is_read_gets_one_line_not_a_hang(where, lib, tmp_path):
    name, args = FIFOS[where]
    fifo = tmp_path / name
    if where == "the journal":
        fifo.parent.mkdir()
        (fifo.parent / "run.json").write_text("{}")
    if fifo.exists():
        fifo.unlink()
    os.mkfifo(fifo)
    done = mas(*(a.format(lib=lib, x=fifo) for a in args))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and name.split("/")[-1] in lines[0], done.stderr


def test_an_equivalence_log_line_that_is_not_utf8_is_judged_again(lib, tmp_path, capsys, monkeypatch):
    (tmp_path / "lib.equivalence.jsonl").write_bytes(b'{"key": "caf\xe9"}\n')
    code, _, err = cli("promote", lib, "--dry-run", capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0 and "Traceback" not in err, err


@pytest.mark.parametrize("args, kind, message", PATHS, ids=[f"{a[0]} {a[-1]} {k}" for a, k, _ in PATHS])
def test_a_bad_path_gets_one_line(args, kind, message, tmp_path, capsys, monkeypatch):
    run = tmp_path / "arun"
    if "{run}" in args:
        train = [
            "train",
            "maths",
            "--model",
            "fake",
            "--tasks",
            "4",
            "--library",
            tmp_path / "l.json",
            "--run-dir",
            run,
        ]
        assert cli(*train, capsys=capsys, monkeypatch=monkeypatch)[0] == 0
    x = make(tmp_path, kind)
    refused([a.format(x=x, run=run) for a in args], message, tmp_path, capsys, monkeypatch)


def test_a_run_folder_holding_other_files_is_not_written_into(tmp_path, capsys, monkeypatch):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    refused(
        ["train", "maths", "--model", "fake", "--run-dir", tmp_path / "mine"],
        "not a run folder",
        tmp_path,
        capsys,
        monkeypatch,
    )


@pytest.mark.parametrize("settings", ["{not json", "[1, 2]", "\xff"])
def test_a_broken_run_json_gets_one_line(settings, tmp_path, capsys, monkeypatch):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_text(settings, encoding="utf-8", errors="surrogateescape")
    args = ["train", "maths", "--model", "fake", "--tasks", "4", "--run-dir", tmp_path / "run"]
    refused([*args, "--library", tmp_path / "lib.json"], "run.json", tmp_path, capsys, monkeypatch)


@pytest.mark.parametrize("name", ["../../x", "a/b", "", ".hidden", "x" * 65])
def test_a_scenario_name_that_is_no_file_name_is_refused(name, tmp_path, capsys, monkeypatch):
    folder = scenario_folder(tmp_path, "What is 1 + 1?")
    toml = (folder / "scenario.toml").read_text().replace('name = "scen"', f"name = {json.dumps(name)}")
    (folder / "scenario.toml").write_text(toml)
    refused(
        ["train", folder, "--model", "fake", "--tasks", "1"],
        "scenario.toml: field 'name'",
        tmp_path,
        capsys,
        monkeypatch,
    )


@pytest.mark.parametrize("stem", ["my tasks (v2)", "..", "-x", "données"])
def test_a_task_file_with_an_odd_name_trains_into_libraries(stem, tmp_path, capsys, monkeypatch):
    path = write_jsonl(tmp_path / f"{stem}.jsonl", GOOD_TASK)
    code, _, err = cli("train", path, "--model", "fake", capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0, err
    home = paths.home().resolve()
    written = [p.resolve() for p in paths.home().rglob("*") if p.is_file()]
    assert any(p.parent == home / "libraries" for p in written)
    assert all(p.parent == home / "libraries" or p.parent.parent == home / "runs" for p in written), written


@pytest.mark.parametrize(
    "args, message",
    [
        (["train", "maths", "--model", "fake", "--budget-usd", "0"], "--budget-usd"),
        (["train", "maths", "--model", "fake", "--budget-usd", "-1"], "--budget-usd"),
        (["library", "rollback", "{lib}", "solver", "9" * 5000], "'VERSION'"),
        (["library", "diff", "{lib}", "solver", "--", "-1"], "no version -1"),
        (["eval", "maths", "--model", "fake", "--no-library", "--k", "1" + "0" * 20], "--k"),
        (["train", "maths", "--model", "fake", "--group-size", "1" + "0" * 20], "--group-size"),
        (["train", "maths", "--model", "fake", "--concurrency", "1" + "0" * 20], "--concurrency"),
        (["eval", "maths", "--model", "fake:inf", "--no-library"], "fake:inf"),
        (["eval", "maths", "--model", "fake:1e300", "--no-library"], "fake:1e300"),
        (["eval", "maths", "--model", "fake:nan", "--no-library"], "fake:nan"),
        (["library", "export", "{lib}", "--format", "prompt", "--role", "nobody"], "--role 'nobody'"),
        (["library", "export", "{lib}", "--role", "nobody"], "--role 'nobody'"),
        (["library", "recover", "{lib}.missing.json"], "no such library file"),
    ],
)
def test_a_bad_number_or_name_gets_one_line(args, message, lib, tmp_path, capsys, monkeypatch):
    refused([a.format(lib=lib) for a in args], message, tmp_path, capsys, monkeypatch)


def test_a_5000_digit_task_id_gets_one_line(tmp_path, capsys, monkeypatch):
    path = tmp_path / "big.jsonl"
    path.write_text('{"id": 1' + "0" * 5000 + ', "question": "q", "answer": "1"}\n')
    refused(["train", path, "--model", "fake"], "big.jsonl:1: not valid JSON", tmp_path, capsys, monkeypatch)


def test_a_lone_surrogate_in_a_task_or_a_lesson_reaches_no_crash(tmp_path, capsys, monkeypatch):
    path = write_jsonl(tmp_path / "s.jsonl", '{"id": "1", "question": "What is \\ud800 1 + 1?", "answer": "2"}')
    lib = tmp_path / "lib.json"
    args = ["train", path, "--model", "fake", "--library", lib, "--run-dir", tmp_path / "run"]
    code, _, err = cli(*args, capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0, err
    other = tmp_path / "other.json"
    LibraryStore(other).commit(lesson_versions("Check \ud800 the units."))  # as a model reply may hold one
    for command in (
        ["library", "show", other],
        ["library", "rollback", other, "solver", "0"],
        ["library", "export", other],
    ):
        code, _, err = cli(*command, capsys=capsys, monkeypatch=monkeypatch)
        assert code == 0, err


@pytest.mark.parametrize("where", ["mkstemp", "replace"])
@pytest.mark.parametrize("fault", [errno.EROFS, errno.ENOSPC])
def test_a_read_only_or_full_disk_gets_one_line(where, fault, lib, tmp_path, capsys, monkeypatch):
    import tempfile

    def failing(*args, **kwargs):
        raise OSError(fault, os.strerror(fault))

    target = {"mkstemp": (tempfile, "mkstemp"), "replace": (os, "replace")}[where]
    before = lib.read_bytes()
    monkeypatch.setattr(*target, failing)
    code, _, err = cli("library", "rollback", lib, "solver", "1", capsys=capsys, monkeypatch=monkeypatch)
    monkeypatch.undo()
    assert code == 2 and len(err.strip().splitlines()) == 1 and os.strerror(fault) in err, err
    assert lib.read_bytes() == before and LibraryStore(lib).head("solver").number == 2


def test_a_full_disk_during_training_gets_one_line(tmp_path, capsys, monkeypatch):
    real_open = Path.open

    def open_(self, mode="r", *args, **kwargs):
        if self.name == "journal.jsonl" and "a" in mode:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real_open(self, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", open_)
    args = ["train", "maths", "--model", "fake", "--tasks", "4", "--library", tmp_path / "l.json"]
    code, _, err = cli(*args, "--run-dir", tmp_path / "run", capsys=capsys, monkeypatch=monkeypatch)
    assert code == 2 and "No space left on device" in err and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err


# -- D. outputs never replace a library file --------------------------------------------------


@pytest.mark.parametrize(
    "target", ["lib.json", "lib.json.bak", "lib.usage.jsonl", "a link to lib.json", "lib.json.lock"]
)
def test_graph_export_never_replaces_a_file_of_the_library(target, lib, tmp_path, capsys, monkeypatch):
    (tmp_path / "lib.usage.jsonl").write_text(usage_line(0) + "\n")
    output = tmp_path / target
    if target.startswith("a link"):
        output = tmp_path / "link.html"
        output.symlink_to(lib)
    refused(["graph", "export", lib, "--output", output], "--output", tmp_path, capsys, monkeypatch)


@pytest.mark.parametrize("other", ["another library", "a notes file", "a journal named g.html.jsonl"])
def test_graph_export_never_replaces_a_file_that_is_no_graph(other, lib, tmp_path, capsys, monkeypatch):
    """Not another library (even one whose run lock a training run holds), nor any file but an
    earlier graph; an earlier graph is replaced."""
    target = {
        "another library": "other.json",
        "a notes file": "notes.txt",
        "a journal named g.html.jsonl": "g.html.jsonl",
    }[other]
    output = tmp_path / target
    if other == "another library":
        LibraryStore(output).commit(lesson_versions("Plan before searching.", library="planner"))
    else:
        output.write_text("mine\n")
    refused(["graph", "export", lib, "--output", output], "--output", tmp_path, capsys, monkeypatch)
    earlier = tmp_path / "g.html"
    earlier.write_text("<html>old</html>")
    code, _, err = cli("graph", "export", lib, "--output", earlier, capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0 and "Usage graph" in earlier.read_text(), err


@pytest.mark.parametrize("output", ["folder", "missing/g.html"])
def test_graph_export_to_a_folder_or_nowhere_gets_one_line(output, lib, tmp_path, capsys, monkeypatch):
    (tmp_path / "folder").mkdir()
    refused(["graph", "export", lib, "--output", tmp_path / output], "--output", tmp_path, capsys, monkeypatch)


# -- E. the library lock --------------------------------------------------------------------------


def other_process_holds(lib: Path):
    """A child process that holds the library's run lock until killed."""
    code = (
        "import sys, time, filelock\n"
        "from mas.library.logs import SideFiles\n"
        "side = SideFiles(__import__('pathlib').Path(sys.argv[1]).resolve())\n"
        "lock = filelock.FileLock(getattr(side, 'run_lock', None) or side.train_lock)\n"
        "lock.acquire()\nprint('held', flush=True)\ntime.sleep(60)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code, str(lib)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "held\n"
    return child


@pytest.mark.parametrize(
    "args",
    [
        ["library", "rollback", "{lib}", "solver", "1"],
        ["promote", "{lib}"],
        ["graph", "export", "{lib}", "--output", "{tmp}/g.html"],
        ["library", "recover", "{lib}"],
        ["library", "rollback", "{link}", "solver", "1"],
        ["train", "maths", "--model", "fake", "--tasks", "4", "--library", "{link}", "--run-dir", "{tmp}/r"],
    ],
    ids=["rollback", "promote", "graph export", "recover", "rollback via a symlink", "train via a symlink"],
)
def test_a_writer_is_refused_while_a_training_run_holds_the_library(args, lib, tmp_path, capsys, monkeypatch):
    if "recover" in args:
        lib.write_text("{broken")
    (tmp_path / "link.json").symlink_to(lib)
    child = other_process_holds(lib)
    try:
        args = [a.format(lib=lib, tmp=tmp_path, link=tmp_path / "link.json") for a in args]
        before = {p: p.read_bytes() for p in tmp_path.iterdir() if p.is_file() and not p.name.endswith(".lock")}
        code, _, err = cli(*args, capsys=capsys, monkeypatch=monkeypatch)
        assert code == 2 and len(err.strip().splitlines()) == 1 and "in use by another mas process" in err, err
        after = {p: p.read_bytes() for p in tmp_path.iterdir() if p.is_file() and not p.name.endswith(".lock")}
        assert after == before and not (tmp_path / "g.html").exists() and not (tmp_path / "r").exists()
    finally:
        child.kill()
        child.wait()


def test_library_commands_during_a_real_training_run_never_crash_it(tmp_path):
    """The reported crash: `mas library rollback` and `mas promote` during a run made the
    trainer die with `ValueError: solver: next version is 4, not 3`."""
    lib = tmp_path / "lib.json"
    args = ["train", "maths", "--model", "fake:0.05", "--tasks", "24", "--batch-size", "4", "--epochs", "2"]
    args += ["--library", lib, "--run-dir", tmp_path / "run", "--promote-every", "step"]
    command = [sys.executable, "-c", "from mas.cli.main import main; main()", *map(str, args)]
    trainer = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not (lib.exists() and LibraryStore(lib).head("solver").number >= 1) and time.time() < deadline:
        assert trainer.poll() is None, trainer.stderr.read()
        time.sleep(0.05)
    outcomes = []
    for _ in range(3):
        for other in (["library", "rollback", lib, "solver", "0"], ["promote", lib], ["graph", "export", lib]):
            done = mas(*other)
            outcomes.append(done.returncode)
            assert done.returncode in (0, 2) and "Traceback" not in done.stderr, done.stderr
    assert trainer.wait(timeout=120) == 0, trainer.stderr.read()
    assert 2 in outcomes
    store = LibraryStore(lib)
    for name in store.libraries():
        assert [v.number for v in store.versions(name)] == list(range(1, store.head(name).number + 1))


def test_a_symlinked_library_is_written_through(lib, tmp_path, capsys, monkeypatch):
    link = tmp_path / "link.json"
    link.symlink_to(lib)
    code, _, err = cli("library", "rollback", link, "solver", "1", capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0, err
    assert link.is_symlink() and LibraryStore(lib).head("solver").number == 3


# -- F. crashes and signals ---------------------------------------------------------------------


def test_a_rollout_timeout_leaves_no_traceback(tmp_path):
    """autogen's runtime, stopped under a cancelled rollout, raised in a task no one awaits."""
    args = ["train", "maths", "--model", "fake:2", "--tasks", "2", "--group-size", "2", "--rollout-timeout", "1"]
    done = mas(*args, "--library", tmp_path / "lib.json", "--run-dir", tmp_path / "run")
    assert done.returncode == 0 and "timeout" in done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_all_stopword_lessons_do_not_crash_eval(tmp_path, capsys, monkeypatch):
    path = tmp_path / "lib.json"
    LibraryStore(path).commit(lesson_versions("the and of it is", "to be or not to be"))
    code, _, err = cli(
        "eval", "maths", "--model", "fake", "--tasks", "2", "--library", path, capsys=capsys, monkeypatch=monkeypatch
    )
    assert code == 0, err


def test_all_stopword_lessons_do_not_crash_train(tmp_path, capsys, monkeypatch):
    path = tmp_path / "lib.json"
    LibraryStore(path).commit(lesson_versions("the and of it is", "to be or not to be"))
    args = ["train", "maths", "--model", "fake", "--tasks", "2", "--library", path, "--run-dir", tmp_path / "run"]
    code, _, err = cli(*args, capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0, err
    assert (tmp_path / "run" / "journal.jsonl").stat().st_size > 0


DEEP = "[" * 100_000 + "]" * 100_000
"""Nested past any parser's recursion limit."""


@pytest.mark.parametrize(
    "where", ["library file", "library backup", "run.json", "journal line", "model config", "model config yaml",
              "scenario.toml", "role file", "usage log line"]
)  # fmt: skip
def test_input_nested_past_the_recursion_limit_gets_one_line(where, tmp_path, capsys, monkeypatch):
    lib, run = tmp_path / "lib.json", tmp_path / "run"
    train = ["train", "maths", "--model", "fake", "--tasks", "2", "--library", lib, "--run-dir", run]
    if where in ("run.json", "journal line", "usage log line"):
        assert cli(*train, capsys=capsys, monkeypatch=monkeypatch)[0] == 0
    if where == "library file":
        lib.write_text('{"versions": {"1": ' + DEEP + "}}")
        args, message = ["library", "show", lib], "not a valid library file"
    elif where == "library backup":
        LibraryStore(lib).commit(lesson_versions("Check the units."))  # (its lock files too)
        lib.write_text("{torn")
        Path(f"{lib}.bak").write_text(DEEP)
        args, message = ["library", "recover", lib], ".bak"
    elif where == "run.json":
        (run / "run.json").write_text(DEEP)
        args, message = train, "run.json"
    elif where == "journal line":
        journal = run / "journal.jsonl"
        lines = journal.read_text().splitlines()
        lines[1] = '{"kind": "rollout", "key": "k", "data": ' + DEEP + "}"
        journal.write_text("\n".join(lines) + "\n")
        args, message = train, "journal.jsonl:2"
    elif where == "usage log line":
        usage = tmp_path / "lib.usage.jsonl"
        usage.write_text(DEEP + "\n" + usage.read_text() if usage.exists() else DEEP + "\n" + usage_line(0) + "\n")
        args, message = ["graph", "export", lib, "--output", tmp_path / "g.html"], "usage"
    elif where.startswith("model config"):
        config = tmp_path / ("model.yaml" if where.endswith("yaml") else "model.json")
        config.write_text(DEEP)
        args, message = ["train", "maths", "--model-config", config, "--library", lib], "--model-config"
    else:
        folder = scenario_folder(tmp_path, "What is 1 + 1?")
        name = "scenario.toml" if where == "scenario.toml" else "roles/solver.toml"
        (folder / name).write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n")
        args, message = ["train", folder, "--model", "fake", "--library", lib], name.split("/")[-1]
    refused(args, message, tmp_path, capsys, monkeypatch)


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_run_exits_cleanly_and_says_how_to_resume(signum, code, tmp_path):
    run = tmp_path / "run"
    args = ["train", "maths", "--model", "fake:0.05", "--tasks", "40", "--library", tmp_path / "lib.json"]
    command = [sys.executable, "-c", "from mas.cli.main import main; main()", *map(str, args), "--run-dir", str(run)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not ((run / "journal.jsonl").exists() and (run / "journal.jsonl").stat().st_size > 2000):
        assert process.poll() is None and time.time() < deadline
        time.sleep(0.05)
    process.send_signal(signum)
    _, err = process.communicate(timeout=60)
    assert process.returncode == code, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert "interrupted" in last and f"--run-dir {run}" in last, err
    assert sum(line.startswith("interrupted") for line in err.splitlines()) == 1
    resumed = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr


def test_a_ctrl_c_outside_the_event_loop_says_so_and_exits_130(tmp_path):
    """typer catches a Ctrl-C that falls outside ``interrupt.run`` (a command's set-up, a
    report, a graph export) and returns 130 instead of raising: it must still end as one."""
    store = LibraryStore(tmp_path / "lib.json")
    store.commit(
        [Version(library="solver", number=1, lessons=[Lesson(id="solver/0001", text="Check units.")], next_id=2)]
    )
    code = (
        "import mas.cli.library as l\n"
        "def stop(*a, **k): raise KeyboardInterrupt\n"
        "l.print_lessons = stop\n"
        "from mas.cli.main import main; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "library", "show", str(store.path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 130, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == ["interrupted (SIGINT); nothing to resume: run the command again"]


@pytest.fixture(scope="module")
def evidence(tmp_path_factory) -> Path:
    """A library with randomized evidence that a solver lesson helps two roles, so a
    promotion is waiting (the fixture of test_cli_hierarchy)."""
    from tests.test_cli_hierarchy import evidence as build

    return build.__wrapped__(tmp_path_factory).parent


@pytest.mark.parametrize("kill_at", ["the log write", "the commit"])
def test_a_kill_inside_a_promotion_loses_no_log_entry(kill_at, evidence, tmp_path, monkeypatch):
    from mas.config import PromotionPolicy
    from mas.library import hierarchy
    from mas.library.logs import SideFiles, StepLog
    from mas.types.lessons import Budget, Provenance

    for name in ("lib.json", "lib.usage.jsonl"):
        (tmp_path / name).write_bytes((evidence / name).read_bytes())
    store = LibraryStore(tmp_path / "lib.json")
    stamp = Provenance(run="promote-x", epoch=0, step=0)

    class Killed(BaseException):
        pass

    def killed(*args, **kwargs):
        raise Killed

    with monkeypatch.context() as patch:
        if kill_at == "the log write":
            patch.setattr(StepLog, "append", killed)
        else:
            patch.setattr(type(store), "commit", killed)
        with pytest.raises(Killed):
            asyncio.run(hierarchy.promote(store, PromotionPolicy(), stamp, budget=Budget()))
    store = LibraryStore(store.path)
    moves = asyncio.run(hierarchy.promote(store, PromotionPolicy(), stamp, budget=Budget()))  # the pass, run again
    logged = [m for key, items in SideFiles(store.path).promotions.steps() if key.run == "promote-x" for m in items]
    shared = {lesson.text for lesson in store.head("global").lessons}
    promoted = {m.text for m in logged if m.kind == "promote"}
    assert promoted and promoted <= shared
    assert len(logged) == len({m.model_dump_json() for m in logged})  # each move logged once
    assert not moves or {m.text for m in moves} == promoted


# -- G. the terminal ------------------------------------------------------------------------------

HOSTILE = "Check \x1b[2J\x1b[31mred\x1b[0m and \u202eevil\u202c, \x07 and a fake\n  [solver/0009] line."


@pytest.mark.parametrize(
    "args",
    [
        ["library", "show", "{lib}"],
        ["library", "diff", "{lib}", "solver", "0"],
        ["library", "export", "{lib}"],
        ["library", "export", "{lib}", "--format", "prompt", "--role", "solver"],
        ["library", "show", "{lib}", "--quarantine"],
    ],
    ids=["show", "diff", "export", "export prompt", "quarantine"],
)
def test_lesson_text_reaches_the_terminal_escaped(args, tmp_path, capsys, monkeypatch):
    from mas.library.logs import SideFiles, StepKey
    from mas.types.refusals import QuarantineItem

    lib = tmp_path / "lib.json"
    LibraryStore(lib).commit(lesson_versions(HOSTILE))
    item = QuarantineItem(library="solver", text=HOSTILE, reason="an instruction", stage="edit")
    SideFiles(lib).quarantine.append(StepKey("r", 0, 0), [item])
    code, out, err = cli(*[a.format(lib=lib) for a in args], capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0, err
    assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out
    assert not any(line.lstrip().startswith("[solver/0009]") for line in out.splitlines())  # no faked line
    if args[1] in ("diff",) or "--quarantine" in args:
        assert "\\x1b" in out and "\\u202e" in out
    else:  # the screen keeps a lesson with hidden characters out of the heads (mas.library.screened)
        assert "\\x1b" not in out


def test_an_error_message_reaches_the_terminal_escaped(tmp_path, capsys, monkeypatch):
    code, _, err = cli("library", "show", tmp_path / "\x1b[31mred\u202e.json", capsys=capsys, monkeypatch=monkeypatch)
    assert code == 2 and "\x1b" not in err and "\u202e" not in err and "\\x1b" in err


# -- H. secrets -------------------------------------------------------------------------------------

ECHOES = {
    "the key": KEY,
    "upper-cased": KEY.upper(),
    "base64": base64.b64encode(KEY.encode()).decode(),
    "base64 inside a longer blob": base64.b64encode(b"prefix:" + KEY.encode() + b":suffix").decode(),
    "url-safe base64": base64.urlsafe_b64encode(b"\xfb" + KEY.encode()).decode(),
    "spaced": " ".join(KEY),
    "split in two": KEY[:20] + " ... " + KEY[20:],
    "hex": KEY.encode().hex(),
    "a Bearer token": "Authorization: Bearer eyJhbGciOi.J9x2.abc123def456",
    "another sk- key": "sk-proj-" + "Ab3dE" * 8,
    "user:pass@ in a URL": "http://admin:hunter2-swordfish@10.0.0.1:8000/v1",
    "Basic credentials": "Authorization: Basic " + base64.b64encode(b"admin:hunter2-swordfish").decode(),
}
NEEDLES = [KEY[14:30], KEY[30:], "hunter2", "J9x2.abc123def456", "Ab3dEAb3dE", "YWRtaW46aHVudGVy"]


def no_secret(text: str) -> bool:
    squeezed = "".join(c for c in text.lower() if c.isalnum())
    return not any("".join(c for c in n.lower() if c.isalnum()) in squeezed for n in NEEDLES) and not any(
        e.lower() in text.lower() for e in ECHOES.values()
    )


@pytest.mark.parametrize("echo", ECHOES)
def test_a_secret_is_written_nowhere(echo, tmp_path, monkeypatch):
    """The journal, the library and its backup, the step logs, a report, a graph export."""
    from mas.journal import Journal
    from mas.library.logs import SideFiles, StepKey
    from mas.types.refusals import QuarantineItem

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    text = f"Keep the calculator handy ({ECHOES[echo]}) when adding."
    Journal(tmp_path / "journal.jsonl").put("rollout", "e0/s0/t/0", {"content": text, "args": {"q": text}})
    lib = tmp_path / "lib.json"
    LibraryStore(lib).commit(lesson_versions(text))
    SideFiles(lib).quarantine.append(
        StepKey("r", 0, 0), [QuarantineItem(library="solver", text=text, reason="r", stage="edit")]
    )
    mas("graph", "export", lib, "--output", tmp_path / "g.html")
    for path in [
        tmp_path / "journal.jsonl",
        lib,
        Path(f"{lib}.bak"),
        tmp_path / "lib.quarantine.jsonl",
        tmp_path / "g.html",
    ]:
        assert path.exists() and no_secret(path.read_text(errors="replace")), path.name


@pytest.mark.parametrize("echo", ECHOES)
def test_a_lesson_holding_a_secret_is_refused(echo, monkeypatch):
    from mas.step import edit as stages
    from mas.types.lessons import Add

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    text = f"Keep the calculator handy ({ECHOES[echo]}) when adding."
    from mas.types.replies import AddOperation

    proposals = [AddOperation(op="add", library="solver", text=t) for t in (text, "Check the units before answering.")]
    kept, refused_ = stages.screened({"solver": proposals}, [], [])
    assert [op.text for op in kept["solver"]] == ["Check the units before answering."] and len(refused_) == 1
    edits, caught = stages.screened_edits("solver", [Add(op="add", text=text)], [], [])
    assert not edits and len(caught) == 1


def test_a_short_url_password_is_cut_where_it_stands_whole(monkeypatch):
    """A URL's password of 7 characters echoed alone (a model repeating it, an error naming it)
    is cut; the same letters inside a longer word, or in another case, are not it."""
    from mas import redact
    from mas.models.clients import secrets_of
    from mas.models.endpoint import Adapted

    monkeypatch.setattr(redact, "_known", set())
    url = "http://bob:pw12345@10.0.0.1:8000/v1"
    Adapted(None, schema_in_format=False, text_tools=False, name="m", secrets=secrets_of(None, url))
    assert redact.redact("the password is pw12345.") == "the password is [redacted]."
    assert redact.redact_data({"args": ["pw12345"]}) == {"args": ["[redacted]"]}
    assert redact.redact("pw123456 and PW12345 and xpw12345 stay") == "pw123456 and PW12345 and xpw12345 stay"
    assert redact.secret_in("Log in with pw12345 first.")


def test_a_random_looking_key_nobody_announced_is_refused_and_words_are_not():
    from mas.redact import secret_in

    assert secret_in("Use token a8f3e9c2b7d14e6f9a0b3c5d7e9f1a2b to log in.")
    assert secret_in("The key is Zx9Qw2Er7Ty4Ui1Op3As5Df8Gh.")
    for fine in [
        "Check the units before answering.",
        "Pass the exact expression, such as (12 + 7) * 3, to the calculator.",
        "For ISBN9780306406157 look up the Pythagorean_theorem_2024_edition.",
        "Open 550e8400-e29b-41d4-a716-446655440000 before answering.",
        "Basic arithmetic first; the bearer of the news is not the source.",
    ]:
        assert secret_in(fine) is None, fine


def test_an_error_message_holding_the_key_is_printed_redacted(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    code, _, err = cli("library", "show", tmp_path / f"{KEY.upper()}.json", capsys=capsys, monkeypatch=monkeypatch)
    assert code == 2 and no_secret(err), err


def test_a_report_holds_no_secret(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    lib, run = tmp_path / "lib.json", tmp_path / "run"
    cli(
        "train",
        "maths",
        "--model",
        "fake",
        "--tasks",
        "4",
        "--library",
        lib,
        "--run-dir",
        run,
        capsys=capsys,
        monkeypatch=monkeypatch,
    )
    store = LibraryStore(lib)
    head = store.head("solver")
    with pytest.MonkeyPatch.context() as patch:  # a library written before redaction existed
        patch.setattr("mas.library.store.redact_data", lambda value: value, raising=False)
        text = f"Remember {base64.b64encode(KEY.encode()).decode()} for later."
        lessons = [*head.lessons, Lesson(id=f"solver/{head.next_id:04d}", text=text)]
        store.commit([Version(library="solver", number=head.number + 1, lessons=lessons, next_id=head.next_id + 1)])
    code, _, err = cli("report", run, "--output", tmp_path / "report", capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0, err
    assert no_secret((tmp_path / "report" / "report.md").read_text())


def _resumable_run(tmp_path, capsys, monkeypatch) -> tuple[list, Path, list[dict]]:
    """A finished two-epoch run whose last step report is taken away: resuming redoes that
    step, reading its rollouts back from the journal."""
    args = ["train", "maths", "--model", "fake", "--tasks", "4", "--epochs", "2", "--library", tmp_path / "lib.json"]
    args += ["--run-dir", tmp_path / "run"]
    assert cli(*args, capsys=capsys, monkeypatch=monkeypatch)[0] == 0
    journal = tmp_path / "run" / "journal.jsonl"
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    assert records[-1]["kind"] == "step"
    return args, journal, records[:-1]


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda trace, lesson: trace["chance"].update({lesson: 1.5}), "chance"),
        (lambda trace, lesson: trace["chance"].update({lesson: 0.0}), "chance"),
        (lambda trace, lesson: trace["classes"].update({lesson: "solver/0999"}), "class"),
    ],
)
def test_a_bad_exposure_record_in_the_journal_is_named_by_its_line(damage, message, tmp_path, capsys, monkeypatch):
    args, journal, records = _resumable_run(tmp_path, capsys, monkeypatch)
    number, record = next(
        (i, r)
        for i, r in enumerate(records)
        if r["kind"] == "rollout" and any(t["chance"] for t in r["data"]["traces"])
    )
    trace = next(t for t in record["data"]["traces"] if t["chance"])
    damage(trace, trace["randomized"][0])
    journal.write_text("".join(json.dumps(r) + "\n" for r in records))
    line = refused(args, f"journal.jsonl:{number + 1}: not a rollout record", tmp_path, capsys, monkeypatch)
    assert message in line


def test_a_bad_exposure_record_in_the_usage_log_is_named_by_its_line(tmp_path, capsys, monkeypatch):
    args, _, _ = _resumable_run(tmp_path, capsys, monkeypatch)
    usage = tmp_path / "lib.usage.jsonl"
    lines = usage.read_text().splitlines()
    number, step = next(
        (i, json.loads(l)) for i, l in enumerate(lines) if any(e["chance"] for e in json.loads(l)["items"])
    )
    event = next(e for e in step["items"] if e["chance"])
    event["chance"][event["randomized"][0]] = -0.2
    lines[number] = json.dumps(step)
    usage.write_text("\n".join(lines) + "\n")
    line = refused(args, f"lib.usage.jsonl:{number + 1}: not a step record", tmp_path, capsys, monkeypatch)
    assert "chance" in line
