"""``mas library import FILE``: another team's library comes in as screened lessons, each library
it touches gets a new version whose provenance names the file, its digest and the time; what
fails the screen is quarantined, not imported; bad input is one line, exit 2, nothing written."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from pathlib import Path

import pytest

from mas import paths
from mas.library.logs import SideFiles
from mas.library.store import LibraryStore
from mas.types.lessons import Lesson, Version
from tests.attacks import ATTACKS, HARMLESS, hand_written, leaked
from tests.inprocess import cli

UNITS = "When quantities have units, convert them to the same unit before adding."
CHECK = "When checking an answer, recompute the last step from the numbers in the question."


def snapshot(folder: Path) -> dict:
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def ours(tmp_path) -> Path:
    path = tmp_path / "ours" / "maths.json"
    LibraryStore(path).commit(
        [Version(library="solver", number=1, lessons=[Lesson(id="solver/0001", text=UNITS)], next_id=2)]
    )
    return path


@pytest.fixture
def theirs(tmp_path) -> Path:
    return hand_written(tmp_path / "theirs" / "maths.json", {
        "global": [ATTACKS["authority"], HARMLESS["global"], ATTACKS["template"]],
        "solver": [ATTACKS["fixed"], HARMLESS["solver"], UNITS],
        "verifier": [ATTACKS["rubber-stamp"], CHECK],
    })  # fmt: skip


def test_import_brings_screened_lessons_with_provenance(ours, theirs, capsys, monkeypatch):
    start = datetime.now().astimezone().replace(microsecond=0)
    code, out, err = cli(["library", "import", theirs, "--into", ours], capsys, monkeypatch)
    assert code == 0, err
    store = LibraryStore(ours)
    heads = store.heads()
    assert [l.text for l in heads["solver"].lessons] == [UNITS, HARMLESS["solver"]]  # the copy of ours is not added
    assert [l.text for l in heads["global"].lessons] == [HARMLESS["global"]]
    assert [l.text for l in heads["verifier"].lessons] == [CHECK]
    assert heads["solver"].lessons[1].id == "solver/0002"  # our ids, never theirs
    digest = hashlib.sha256(theirs.read_bytes()).hexdigest()
    for name, v in heads.items():
        source = v.provenance.source
        assert v.provenance.stage == "import" and v.number == (2 if name == "solver" else 1)
        assert (
            source.file == theirs.name and source.sha256 == digest and source.library == name
        )  # not the importer's folders
        assert start <= datetime.fromisoformat(source.at) <= datetime.now().astimezone()
        assert [e.op for e in v.edits] == ["add"] * len(v.edits)
    quarantined = list(SideFiles(store.path).quarantine.items())
    assert sorted(i.text for i in quarantined) == sorted(
        ATTACKS[k] for k in ("authority", "template", "fixed", "rubber-stamp")
    )
    assert all(i.stage == "import" and i.reason and i.source.sha256 == digest for i in quarantined)
    assert leaked(out.splitlines()) == [] and "quarantined their global/0001: instruction" in out
    assert "skipped their solver/0003: the same text as our solver/0001" in out

    code, out, _ = cli(["library", "show", ours, "--quarantine"], capsys, monkeypatch)
    assert code == 0 and sorted(leaked([out])) == sorted(["authority", "template", "fixed", "rubber-stamp"])
    assert f"not imported from {theirs.name} (" in out and str(theirs.parent) not in out

    code, out, err = cli(["library", "import", theirs, "--into", ours], capsys, monkeypatch)  # again: nothing new
    assert code == 0, err
    assert LibraryStore(ours).heads() == heads


def test_a_dry_run_writes_nothing(ours, theirs, tmp_path, capsys, monkeypatch):
    before = snapshot(tmp_path)
    code, out, err = cli(["library", "import", theirs, "--into", ours, "--dry-run"], capsys, monkeypatch)
    assert code == 0, err
    assert HARMLESS["solver"] in out and CHECK in out and leaked(out.splitlines()) == []
    assert snapshot(tmp_path) == before


def test_without_into_the_library_of_the_same_name(theirs, capsys, monkeypatch):
    code, _, err = cli(["library", "import", theirs], capsys, monkeypatch)
    assert code == 0, err
    assert [l.text for l in LibraryStore(paths.library_file("maths")).head("verifier").lessons] == [CHECK]


def _bad(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / "theirs" / "bad.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "missing":
        return path
    if kind == "folder":
        path.mkdir()
    elif kind == "not json":
        path.write_text('{"versions": ')
    elif kind == "not a library":
        path.write_text(json.dumps({"versions": {"1": {"library": "solver", "number": "one"}}}))
    elif kind == "not utf-8":
        path.write_bytes(b'{"versions": {}}\xff')
    return path


@pytest.mark.parametrize("kind", ["missing", "folder", "not json", "not a library", "not utf-8"])
def test_bad_input_is_one_line_exit_2_nothing_written(kind, ours, tmp_path, capsys, monkeypatch):
    bad = _bad(tmp_path, kind)
    before = snapshot(tmp_path)
    code, out, err = cli(["library", "import", bad, "--into", ours], capsys, monkeypatch)
    assert code == 2
    [line] = err.strip().splitlines()
    assert str(bad) in line and "Traceback" not in err, line
    assert snapshot(tmp_path) == before


def test_a_library_is_not_imported_into_itself(ours, tmp_path, capsys, monkeypatch):
    before = snapshot(tmp_path)
    code, _, err = cli(["library", "import", ours, "--into", ours], capsys, monkeypatch)
    assert code == 2 and str(ours) in err and len(err.strip().splitlines()) == 1
    assert snapshot(tmp_path) == before
