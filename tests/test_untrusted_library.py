"""A library file and its side logs are untrusted input: whatever they hold, a command either
works or stops with one line naming the file and the line or field (a ``UserError``), before it
writes anything. Each case here is a file an audit found mas reading wrong: a tokenizer path that
hung the loader, a judgement whose key is no text, an integer past 64 bits, a ``next_id`` at the
end of the ids, a step recorded twice, a held edit in no library of the step or held twice."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from mas.config import TrainConfig
from mas.errors import UserError
from mas.library import pending
from mas.library.edits import apply
from mas.library.ledger import Ledger
from mas.library.logs import CorruptLog, SideFiles, StepKey, StepLog
from mas.library.similar import Judge
from mas.library.store import MAX_ID, LibraryStore
from mas.models.fake import FakeClient
from mas.train import train
from mas.types.lessons import Add, Budget, Lesson, Modify, Provenance, Version
from mas.types.review import PendingEdit, PendingStep
from mas.types.usage import UsageEvent
from tests.test_integrity import cli as run_cli
from tests.test_untrusted_journal import cli

TEXT = "When a result comes back, compare it with a rough estimate first."


def one_line(error: Exception, *names: str) -> str:
    message = str(error)
    assert "\n" not in message and all(name in message for name in names), message
    return message


def library(path: Path, **provenance) -> LibraryStore:
    """A library file with one version of ``solver``, trained with ``provenance``."""
    store = LibraryStore(path)
    stamp = Provenance(run="r", epoch=0, step=0, budget=Budget(tokenizer="words"), **provenance)
    store.commit([Version(library="solver", number=1, lessons=[Lesson(id="solver/0001", text=TEXT)], next_id=2,
                          provenance=stamp)])  # fmt: skip
    return store


def edited(path: Path, change) -> None:
    """The library file after ``change`` (of its parsed JSON), as an editor would leave it."""
    data = json.loads(path.read_text())
    change(data["versions"]["1"])
    path.write_text(json.dumps(data, indent=2))


# -- 1. a tokenizer path from the file -----------------------------------------------------------


def test_a_library_naming_a_pipe_as_its_tokenizer_is_refused_when_read(tmp_path):
    fifo = tmp_path / "vocab.gguf"
    os.mkfifo(fifo)
    store = library(tmp_path / "lib.json")
    edited(store.path, lambda v: v["provenance"]["budget"].update(tokenizer=f"gguf:{fifo}"))
    with pytest.raises(UserError) as refused:
        LibraryStore(store.path).composition()
    one_line(refused.value, str(store.path), "provenance.budget.tokenizer", "not a regular file")
    with pytest.raises(ValidationError):
        Budget(tokenizer=f"gguf:{tmp_path}")  # a folder
    assert Budget(tokenizer=f"gguf:{tmp_path}/missing.gguf").tokenizer.endswith("missing.gguf")  # falls back to words


def test_the_tokenizer_loader_is_never_handed_a_pipe(tmp_path):
    """Whatever named the path, llama.cpp's loader would wait on a pipe for ever (deaf to
    SIGTERM): a child process, killed if it hangs."""
    fifo = tmp_path / "vocab.gguf"
    os.mkfifo(fifo)
    code = f"from mas.models.tokens import tokenizer; tokenizer({f'gguf:{fifo}'!r})"
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the loader hung on a pipe")
    assert done.returncode != 0
    assert "UserError" in done.stderr and "not a regular file" in done.stderr.strip().splitlines()[-1], done.stderr


def test_eval_of_a_library_naming_a_pipe_stops_before_writing(tmp_path):
    fifo = tmp_path / "vocab.gguf"
    os.mkfifo(fifo)
    store = library(tmp_path / "lib.json")
    edited(store.path, lambda v: v["provenance"]["budget"].update(tokenizer=f"gguf:{fifo}"))
    command = ["eval", "maths", "--model", "fake", "--tasks", "2", "--k", "1", "--library", store.path]
    command += ["--run-dir", tmp_path / "e"]
    try:
        done = subprocess.run([sys.executable, "-c", "from mas.cli.main import main; main()", *map(str, command)],
                              capture_output=True, text=True, timeout=90)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("eval hung on the pipe")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "lib.json" in lines[0], done.stderr
    assert not (tmp_path / "e").exists()


# -- 2. the judgements log -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "line, field",
    [
        ({"key": 5, "verdict": {"reason": "r", "same": False, "merged": ""}}, "key"),
        ({"key": None, "verdict": {"reason": "r", "same": False, "merged": ""}}, "key"),
        ({"key": "k", "verdict": {"reason": "r", "same": "yes", "merged": ""}}, "verdict.same"),
        ({"key": "k"}, "verdict"),
        ([1, 2], "key"),
    ],
)
def test_a_judgement_that_is_not_one_is_refused_naming_its_line(tmp_path, line, field):
    path = tmp_path / "lib.equivalence.jsonl"
    good = {"key": "canary", "verdict": {"reason": "r", "same": False, "merged": ""}}
    path.write_text(f"{json.dumps(good)}\n{json.dumps(line)}\n")
    with pytest.raises(UserError) as refused:
        Judge(path, client=None, overlap=0.3)
    one_line(refused.value, f"{path}:2:", field)


def test_a_judgement_cut_short_is_still_judged_again(tmp_path):
    path = tmp_path / "lib.equivalence.jsonl"
    good = json.dumps({"key": "canary", "verdict": {"reason": "r", "same": False, "merged": ""}})
    path.write_text(f"{good[:20]}\n{good}\n{good[:30]}")
    assert Judge(path, client=None, overlap=0.3).canaries == [True]


def test_training_with_a_bad_judgement_stops_before_its_folder_is_made(maths, tmp_path):
    store = library(tmp_path / "lib.json")
    SideFiles(store.path).equivalence.write_text('{"key": 5, "verdict": {"reason": "r", "same": false}}\n')
    run = train(maths, client=FakeClient(), store=store, run_dir=tmp_path / "run", config=TrainConfig(tasks=2))
    with pytest.raises(UserError) as refused:
        asyncio.run(run)
    one_line(refused.value, "lib.equivalence.jsonl:1:")
    assert not (tmp_path / "run").exists()


# -- 3. integers past 64 bits --------------------------------------------------------------------


@pytest.mark.parametrize(
    "change, field",
    [
        (lambda v: v["provenance"].update(epoch=10**30), "versions.1.provenance.epoch"),
        (
            lambda v: v["provenance"]["budget"].update(inject_tokens=10**30),
            "versions.1.provenance.budget.inject_tokens",
        ),
        (
            lambda v: v.update(rejected=[{"edit": {"x": [1, -(10**25)]}, "reason": "r"}]),
            "versions.1.rejected.0.edit.x.1",
        ),
    ],
)
def test_an_integer_past_64_bits_is_refused_when_the_file_is_read(tmp_path, change, field):
    store = library(tmp_path / "lib.json")
    edited(store.path, change)
    before = store.path.read_bytes()
    with pytest.raises(UserError) as refused:
        LibraryStore(store.path).rollback("solver", 0)
    one_line(refused.value, str(store.path), field, "64 bits")
    assert store.path.read_bytes() == before


def test_what_goes_into_a_library_file_holds_no_integer_past_64_bits():
    with pytest.raises(ValidationError):
        Provenance(run="r", epoch=2**63, step=0)
    with pytest.raises(ValidationError):
        Budget(private_tokens=2**64)
    with pytest.raises(ValidationError):
        PendingEdit(id=2**63, library="solver", edit=Add(op="add", text=TEXT))
    assert Provenance(run="r", epoch=2**63 - 1, step=0).epoch == 2**63 - 1


# -- 4. next_id at the end of the ids ------------------------------------------------------------


def test_a_library_that_used_every_id_reads_and_refuses_an_add_in_one_line(tmp_path):
    store = library(tmp_path / "lib.json")
    edited(store.path, lambda v: v.update(next_id=MAX_ID))
    store = LibraryStore(store.path)
    head = store.head("solver")
    assert head.next_id == MAX_ID
    before = store.path.read_bytes()
    version = head.model_copy(update={"number": 2, "next_id": MAX_ID + 1})  # made by hand, not by ``apply``
    with pytest.raises(UserError) as refused:
        store.commit([version])
    one_line(refused.value, str(store.path), "solver", "no lesson id left")
    assert store.path.read_bytes() == before
    assert store.rollback("solver", 0).next_id == MAX_ID  # what needs no new id is written


def test_an_edit_that_needs_an_id_when_none_is_left_is_refused_as_it_is_made(tmp_path):
    head = library(tmp_path / "lib.json").head("solver").model_copy(update={"next_id": MAX_ID})
    add = Add(op="add", text="When a unit is missing, ask for it before answering.")
    reword = Modify(op="modify", id="solver/0001", text="Compare a result with a rough estimate before using it.")
    recase = Modify(op="modify", id="solver/0001", text=TEXT.upper())
    version, rejected = apply(head, [add, reword, recase])
    assert [r.reason for r in rejected] == ["no lesson id left in library 'solver' (ids have at most 9 digits)"] * 2
    assert [lesson.text for lesson in version.lessons] == [TEXT.upper()] and version.next_id == MAX_ID


def test_training_a_library_that_used_every_id_runs_and_refuses_its_adds(tmp_path, capsys, monkeypatch):
    """The add was refused only as the step's versions were written, after the run's folder and
    its first records: the run stopped half made."""
    store = library(tmp_path / "lib.json")
    edited(store.path, lambda v: v.update(next_id=MAX_ID))
    run = tmp_path / "run"
    args = ["train", "maths", "--model", "fake", "--tasks", "2", "--library", store.path, "--run-dir", run]
    code, _, err = run_cli(*args, capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0, err
    head = LibraryStore(store.path).head("solver")
    assert head.next_id == MAX_ID and [lesson.text for lesson in head.lessons] == [TEXT]
    code, out, err = run_cli("library", "show", store.path, "--rejected", capsys=capsys, monkeypatch=monkeypatch)
    assert "no lesson id left in library 'solver' (ids have at most 9 digits)" in out + err, out + err


# -- 5. a step recorded twice --------------------------------------------------------------------


def usage(step: int, role: str = "solver") -> list[UsageEvent]:
    return [UsageEvent(run="r", epoch=0, step=step, task_id="t", rollout=i, role=role, shown=["solver/0001"],
                       randomized=["solver/0001"], reward=float(i), advantage=i - 0.5) for i in range(2)]  # fmt: skip


def test_a_step_recorded_twice_is_refused_by_every_reader(tmp_path):
    path = tmp_path / "lib.usage.jsonl"
    log = StepLog(path, UsageEvent)
    log.append(StepKey("r", 0, 0), usage(0))
    log.append(StepKey("r", 0, 1), usage(1))
    first = path.read_text().splitlines()[0]
    path.write_text(path.read_text() + first + "\n")
    for read in (lambda: list(StepLog(path, UsageEvent).steps()), lambda: Ledger(StepLog(path, UsageEvent)).groups()):
        with pytest.raises(CorruptLog) as refused:
            read()
        one_line(refused.value, f"{path}:3:", "first on line 1")


def test_a_step_recorded_again_after_the_ledger_read_is_refused(tmp_path):
    """``since`` reads on from where it stopped: the copy of a step above its mark is found."""
    path = tmp_path / "lib.usage.jsonl"
    log = StepLog(path, UsageEvent)
    ledger = Ledger(log)
    log.append(StepKey("r", 0, 0), usage(0))
    log.append(StepKey("r", 0, 1), usage(1))
    ledger.groups()
    with path.open("a") as f:
        f.write(path.read_text().splitlines()[1] + "\n")
    with pytest.raises(CorruptLog) as refused:
        ledger.groups()
    one_line(refused.value, f"{path}:3:", "first on line 2")


def test_a_copy_cut_short_at_the_end_is_dropped_and_recover_sets_a_whole_copy_aside(tmp_path):
    path = tmp_path / "lib.usage.jsonl"
    log = StepLog(path, UsageEvent)
    log.append(StepKey("r", 0, 0), usage(0))
    line = path.read_text()
    path.write_text(line + line[:40])  # torn by a crash: read as before
    assert [k for k, _ in StepLog(path, UsageEvent).steps()] == [StepKey("r", 0, 0)]
    path.write_text(line + line)
    log = StepLog(path, UsageEvent)
    assert log.damaged() and log.repair() == 1
    assert [k for k, _ in log.steps()] == [StepKey("r", 0, 0)]


# -- 6. held edits -------------------------------------------------------------------------------


def hold(path: Path, step: int, ids: list[int], libraries: list[str] | None = None) -> None:
    """A step's held edits (adds to ``solver``), with the libraries the step could edit or, as a
    mas from before them held them, without."""
    edits = [PendingEdit(id=i, library="solver", edit=Add(op="add", text=f"{TEXT} ({i})")) for i in ids]
    extra = {"libraries": libraries} if libraries is not None else {}
    held = PendingStep(provenance=Provenance(run="r", epoch=0, step=step), edits=edits, **extra)
    StepLog(path, PendingStep).append(StepKey("r", 0, step), [held])


@pytest.mark.parametrize("roster", [["global", "solver"], None], ids=["kept", "held before it was kept"])
def test_a_held_edit_in_a_library_the_step_could_not_edit_is_refused(tmp_path, capsys, monkeypatch, roster):
    """A held edit in ``ghost`` would make a library no role reads; a line held before steps
    kept their libraries is checked against the roles the usage log records for the step."""
    lib = tmp_path / "lib.json"
    side = SideFiles(lib)
    side.usage.append(StepKey("r", 0, 0), usage(0))
    hold(side.pending.path, 0, [1, 2], roster)
    log = side.pending.path
    log.write_text(log.read_text().replace('"id":2,"library":"solver"', '"id":2,"library":"ghost"'))
    code, err = cli("library", "review", lib, "--accept", "2", "--by", "me", capsys=capsys, monkeypatch=monkeypatch)
    assert code == 2 and len(err.strip().splitlines()) == 1 and f"{log}:1:" in err and "ghost" in err, err
    assert not lib.exists()


def test_a_held_modify_of_another_librarys_lesson_is_refused(tmp_path):
    log = tmp_path / "lib.pending.jsonl"
    hold(log, 0, [1])
    modify = '"edit":{"op":"modify","id":"global/0001","text"'
    log.write_text(log.read_text().replace('"edit":{"op":"add","text"', modify))
    with pytest.raises(UserError) as refused:
        pending.queue(LibraryStore(tmp_path / "lib.json"))
    one_line(refused.value, f"{log}:1:", "global/0001")


@pytest.mark.parametrize("where", ["another line", "the same line"])
def test_a_held_edit_id_held_twice_is_refused(tmp_path, capsys, monkeypatch, where):
    lib = tmp_path / "lib.json"
    log = SideFiles(lib).pending.path
    if where == "another line":
        hold(log, 0, [1])
        hold(log, 1, [2])
        log.write_text(log.read_text().replace('"id":2,', '"id":1,'))
    else:
        hold(log, 0, [1, 2])
        log.write_text(log.read_text().replace('"id":2,', '"id":1,'))
    code, err = cli("library", "review", lib, "--accept", "1", "--by", "me", capsys=capsys, monkeypatch=monkeypatch)
    line = 2 if where == "another line" else 1
    assert code == 2 and len(err.strip().splitlines()) == 1 and f"{log}:{line}:" in err, err
    assert not lib.exists()


def test_held_edits_as_a_step_holds_them_are_accepted(tmp_path, capsys, monkeypatch):
    lib = tmp_path / "lib.json"
    hold(SideFiles(lib).pending.path, 0, [1, 2], ["global", "solver"])
    code, err = cli("library", "review", lib, "--accept", "2", "--by", "me", capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0, err
    assert [lesson.text for lesson in LibraryStore(lib).head("solver").lessons] == [f"{TEXT} (2)"]


# -- 7. a lesson no edit could have written ------------------------------------------------------


@pytest.mark.parametrize("text", ["word " * 200_000, "Be."], ids=["a megabyte", "three characters"])
def test_a_lesson_of_a_length_no_edit_allows_is_quarantined_by_its_length(tmp_path, capsys, monkeypatch, text):
    """A megabyte typed into a library file took the screen's rule layers a minute to read on
    every ``mas library show``, and then passed; a lesson is what an edit or an import allows."""
    store = library(tmp_path / "lib.json")
    edited(store.path, lambda v: v["lessons"].append({"id": "solver/0002", "text": text}) or v.update(next_id=3))
    code, out, err = run_cli("library", "show", store.path, capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0, err
    assert TEXT in out and text.strip() not in out and "1 lesson quarantined" in out + err
    code, out, err = run_cli("library", "show", store.path, "--quarantine", capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0 and "solver/0002" in out + err and "lesson too" in out + err, err
    assert len(out + err) < 2_000  # a refused megabyte is shown by its start and its length
    assert [lesson.text for lesson in LibraryStore(store.path).head("solver").lessons] == [TEXT]
