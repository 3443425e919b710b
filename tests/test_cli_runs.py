"""What `mas train` says about the run it starts: the library it continues, --fresh, a resume."""

from datetime import datetime

from mas import paths
from mas.library.store import LibraryStore
from tests.test_cli import mas


def train(tmp_path, run: str, *extra: str):
    args = ["train", "maths", "--model", "fake", "--tasks", "4", "--library", str(tmp_path / "lib.json")]
    done = mas(*args, "--run-dir", str(tmp_path / run), *extra)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[0]


def test_a_run_says_which_library_versions_it_continues(tmp_path):
    assert train(tmp_path, "one").endswith("lib.json: no lessons yet")
    heads = LibraryStore(tmp_path / "lib.json").heads()
    lessons = sum(len(v.lessons) for v in heads.values())
    assert lessons > 0
    versions = ", ".join(f"{name} v{v.number}: {len(v.lessons)}" for name, v in heads.items())
    line = train(tmp_path, "two")
    assert line.startswith("continuing ") and f"lib.json: {lessons} lesson" in line
    assert f"({versions}); --fresh starts from empty libraries" in line


def test_fresh_empties_every_library_and_keeps_their_history(tmp_path):
    train(tmp_path, "one")
    store = LibraryStore(tmp_path / "lib.json")
    before = {name: store.versions(name) for name in store.libraries()}
    line = train(tmp_path, "two", "--fresh")
    assert line.startswith("starting from empty libraries (--fresh)")
    assert any(versions[-1].lessons for versions in before.values())
    for name, versions in before.items():
        now = store.versions(name)
        assert now[: len(versions)] == versions  # history kept, nothing rewritten
        if not versions[-1].lessons:
            continue
        emptied = now[len(versions)]
        assert emptied.lessons == [] and emptied.provenance.stage == "fresh" and emptied.provenance.run == "two"
        assert {e.id for e in emptied.edits} == {lesson.id for lesson in versions[-1].lessons}
    # what was there is one rollback away
    name, versions = next((name, v) for name, v in before.items() if v[-1].lessons)
    assert mas("library", "rollback", str(store.path), name, str(versions[-1].number)).returncode == 0
    assert store.head(name).lessons == versions[-1].lessons


def test_a_resumed_run_says_so_and_keeps_its_fresh_setting(tmp_path):
    train(tmp_path, "one")
    line = train(tmp_path, "one")
    assert line.startswith(f"resuming {tmp_path / 'one'} (1 of 1 steps done) with ")
    refused = mas("train", "maths", "--model", "fake", "--tasks", "4", "--library", str(tmp_path / "lib.json"),
                  "--run-dir", str(tmp_path / "one"), "--fresh")  # fmt: skip
    assert refused.returncode == 2 and "other settings (fresh)" in refused.stderr


def test_two_runs_in_one_second_get_two_folders(monkeypatch):
    class Frozen(datetime):
        @classmethod
        def now(cls, tz=None):
            return cls(2026, 1, 2, 3, 4, 5)

    monkeypatch.setattr(paths, "datetime", Frozen)
    first = paths.new_run_dir("maths")
    first.mkdir(parents=True)
    second = paths.new_run_dir("maths")
    assert first.name == "maths-20260102-030405" and second.name == "maths-20260102-030405-2"


def test_a_refused_run_takes_back_only_what_it_wrote(tmp_path):
    """``runs.undone_if_refused``: a new run's run.json and the folders made for it go; a resumed
    run, a journal with work in it and a folder the user made stay."""
    import json

    import pytest

    from mas import runs
    from mas.errors import UserError

    def refused_after(run_dir, journal: str = ""):
        with pytest.raises(UserError), runs.undone_if_refused(run_dir):
            runs.start(run_dir, {"kind": "eval"})
            if journal:
                (run_dir / "journal.jsonl").write_text(journal)
            raise UserError("the server has no model 'llama9'")

    refused_after(tmp_path / "a" / "b" / "run")
    assert not (tmp_path / "a").exists()
    refused_after(tmp_path / "empty", journal="")
    assert not (tmp_path / "empty").exists()
    refused_after(tmp_path / "worked", journal='{"kind": "rollout"}\n')
    assert (tmp_path / "worked" / "run.json").exists()
    (tmp_path / "mine").mkdir()
    refused_after(tmp_path / "mine")
    assert (tmp_path / "mine").is_dir() and not any((tmp_path / "mine").iterdir())
    resumed = tmp_path / "resumed"
    runs.start(resumed, {"kind": "eval"})
    with pytest.raises(UserError), runs.undone_if_refused(resumed):
        raise UserError("no")
    assert json.loads((resumed / "run.json").read_text()) == {"kind": "eval"}
