"""The review and sharing workflows as users combine them: two reviewers deciding the same held
edit, a review command killed (or refused the library) between recording a decision and applying
it, a review run after the pending log was cleared, an import of a lesson the shared library
already gives the role, and the hint for an edit of a lesson gone since it was held. Each case
is one an audit found going wrong."""

from __future__ import annotations

from pathlib import Path

from mas.library import pending
from mas.library.logs import SideFiles
from mas.library.store import InUse, LibraryStore
from mas.types.lessons import Lesson, Version
from mas.types.review import Decision
from tests.test_integrity import cli

ESTIMATE = "When a result comes back, compare it with a rough estimate before passing it on."
RESTATE = "Before answering, restate what the question asks for in one sentence."


def held(folder: Path, capsys, monkeypatch, run: str = "run") -> Path:
    """`mas train maths --review` on the fake model (two steps); returns the library file."""
    lib = folder / "lib.json"
    code, out, err = cli("train", "maths", "--model", "fake", "--tasks", "8", "--review", "--library", lib,
                         "--run-dir", folder / run, capsys=capsys, monkeypatch=monkeypatch)  # fmt: skip
    assert code == 0 and "waiting for review" in out, err
    return lib


def settled(store: LibraryStore) -> dict[int, Version]:
    return {
        v.provenance.pending: v for name in store.libraries() for v in store.versions(name) if v.provenance is not None
    }


def test_a_decision_another_reviewer_made_meanwhile_is_refused(tmp_path, capsys, monkeypatch):
    """Bob accepts #1 while Alice's command, which saw #1 open, is about to reject it: Alice's
    reject is refused with one line, not reported as done while Bob's accept is applied."""
    lib = held(tmp_path, capsys, monkeypatch)
    store, real = LibraryStore(lib), pending.record

    def bob_first(path, made):
        real(path, [Decision(id=1, verdict="accept", by="bob")])
        pending.settle(LibraryStore(lib))
        real(path, made)

    monkeypatch.setattr(pending, "record", bob_first)
    code, out, err = cli("library", "review", lib, "--reject", "1", "--why", "a copy", "--by", "alice",
                         capsys=capsys, monkeypatch=monkeypatch)  # fmt: skip
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "held edit 1: already accepted by bob" in lines[0], (out, err)
    assert [d.by for d in pending.decisions(SideFiles(lib).reviews)] == ["bob"]
    assert settled(store)[1].provenance.by == "bob"


def test_a_decision_recorded_but_not_applied_is_applied_by_the_next_review(tmp_path, capsys, monkeypatch):
    """A review command killed between recording a decision and applying it leaves it in the
    reviews log only: the next `mas library review`, even a listing, applies it."""
    lib = held(tmp_path, capsys, monkeypatch)
    store = LibraryStore(lib)
    text = pending.queue(store)[0].edit.edit.text
    pending.record(SideFiles(lib).reviews, [Decision(id=1, verdict="accept", by="alice")])  # then killed
    code, out, err = cli("library", "review", lib, capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0, err
    assert "#1 accepted by alice: solver v1" in out
    assert text in [lesson.text for lesson in store.head("solver").lessons]


def test_a_decision_the_library_cannot_take_now_says_who_applies_it(tmp_path, capsys, monkeypatch):
    """The library held by another mas process (a promotion, a rollback, another review): the
    decision is recorded, and the message says what applies it, not only a training run."""
    lib = held(tmp_path, capsys, monkeypatch)
    real = pending.settle

    def busy(store):
        raise InUse(f"{store.path}: in use by another mas process")

    monkeypatch.setattr(pending, "settle", busy)
    code, out, err = cli("library", "review", lib, "--accept", "1", "--by", "alice", capsys=capsys,
                         monkeypatch=monkeypatch)  # fmt: skip
    assert code == 0, err
    assert "the training run using the library applies it" in out and f"mas library review {lib}" in out
    monkeypatch.setattr(pending, "settle", real)  # the library free again
    code, out, err = cli("library", "review", lib, capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0 and "#1 accepted by alice: solver v1" in out, err


def test_settling_takes_the_decisions_recorded_while_it_works(tmp_path, capsys, monkeypatch):
    """Bob records #2 while Alice's command is applying #1: Alice's command applies both."""
    lib = held(tmp_path, capsys, monkeypatch)
    store, reviews, real = LibraryStore(lib), SideFiles(lib).reviews, LibraryStore.commit

    def commit(self, versions):
        if not pending.decisions(reviews)[1:]:
            pending.record(reviews, [Decision(id=2, verdict="reject", by="bob", why="no")])
        real(self, versions)

    monkeypatch.setattr(LibraryStore, "commit", commit)
    pending.record(reviews, [Decision(id=1, verdict="accept", by="alice")])
    pending.settle(store)
    assert {1, 2} <= settled(store).keys()


def test_new_held_edits_never_take_the_number_of_a_decided_one(tmp_path, capsys, monkeypatch):
    """Decisions refer to held edits by number: after the pending log was cleared (by hand, or
    its lines set aside by `mas library recover`), a new run's held edits are numbered past every
    number decided, so none is taken for decided and silently never applied."""
    lib = held(tmp_path, capsys, monkeypatch)
    code, _, err = cli("library", "review", lib, "--accept", "1", "--reject", "2", "--why", "no", capsys=capsys,
                       monkeypatch=monkeypatch)  # fmt: skip
    assert code == 0, err
    SideFiles(lib).pending.path.unlink()
    held(tmp_path, capsys, monkeypatch, run="later")
    queue = pending.queue(LibraryStore(lib))
    assert queue and all(h.open for h in queue), [(h.edit.id, h.decision) for h in queue]
    assert min(h.edit.id for h in queue) > 2


def test_import_skips_a_lesson_the_shared_library_gives_the_role(tmp_path, capsys, monkeypatch):
    """A lesson of ours in the global library is one every role already has: their role's copy
    of it is skipped, as training refuses such a copy; so is a role copy of their own global one."""
    ours, theirs = tmp_path / "ours.json", tmp_path / "theirs.json"
    LibraryStore(ours).commit([Version(library="global", number=1, lessons=[Lesson(id="global/0001", text=ESTIMATE)],
                                       next_id=2)])  # fmt: skip
    other = "When a task has several operations, write the whole expression before computing."
    LibraryStore(theirs).commit([
        Version(library="planner", number=1, lessons=[Lesson(id="planner/0001", text=ESTIMATE),
                Lesson(id="planner/0002", text=RESTATE), Lesson(id="planner/0003", text=other)], next_id=4),
        Version(library="global", number=1, lessons=[Lesson(id="global/0001", text=other)], next_id=2),
    ])  # fmt: skip
    code, out, err = cli("library", "import", theirs, "--into", ours, capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0, err
    assert "skipped their planner/0001: the same text as our global/0001" in out
    assert "skipped their planner/0003: the same text as their global/0001" in out
    store = LibraryStore(ours)
    assert [lesson.text for lesson in store.head("planner").lessons] == [RESTATE]
    assert [lesson.text for lesson in store.head("global").lessons] == [ESTIMATE, other]


def test_an_edit_of_a_lesson_gone_since_is_not_told_to_edit_its_text(tmp_path, capsys, monkeypatch):
    """A held delete or modify of a lesson that left the library since (a rollback, a promotion):
    new words cannot help, so the hint is to reject it, not to edit a text a delete does not have."""
    from mas.library.edits import apply
    from mas.types.lessons import Delete, Modify, Provenance

    store = LibraryStore(tmp_path / "lib.json")
    lessons = [Lesson(id="solver/0001", text=ESTIMATE), Lesson(id="solver/0002", text=RESTATE)]
    store.commit([Version(library="solver", number=1, lessons=lessons, next_id=3)])
    heads = store.heads()
    changed, _ = apply(heads["solver"], [Delete(op="delete", id="solver/0002"),
                                         Modify(op="modify", id="solver/0001", text=ESTIMATE + " Always.")])  # fmt: skip
    pending.hold(store, Provenance(run="r", epoch=0, step=0), [changed], [], heads=heads)
    store.rollback("solver", 0)
    for number, gone in ((1, "solver/0002"), (2, "solver/0001")):
        code, _, err = cli("library", "review", store.path, "--accept", number, capsys=capsys, monkeypatch=monkeypatch)
        assert code == 2 and err.strip().endswith(f"--accept {number}: unknown lesson id {gone!r}; reject it"), err


def test_a_bad_line_in_the_reviews_or_judgements_log_stops_training_before_its_folder_and_recover_sets_it_aside(
    tmp_path, capsys, monkeypatch
):
    """A line of the reviews log that is no decision stopped `mas library review`, but training
    stopped only after writing its run folder, and `mas library recover` said "not corrupt,
    nothing to recover"; a JSON line of the equivalence log that is no judgement, the same."""
    lib = held(tmp_path, capsys, monkeypatch)
    side = SideFiles(lib)
    code, _, err = cli("library", "review", lib, "--accept", "1", "--by", "alice", capsys=capsys,
                       monkeypatch=monkeypatch)  # fmt: skip
    assert code == 0, err
    decided = side.reviews.read_bytes()
    for log, line in ((side.reviews, b"garbage\n"), (side.equivalence, b'{"key": 3, "verdict": {"same": true}}\n')):
        with log.open("ab") as f:
            f.write(line)
        run = tmp_path / f"run-{log.name}"
        args = ["train", "maths", "--model", "fake", "--tasks", "2", "--library", lib, "--run-dir", run]
        code, _, err = cli(*args, capsys=capsys, monkeypatch=monkeypatch)
        assert code == 2 and len(err.strip().splitlines()) == 1 and f"{log}:" in err and "recover" in err, err
        assert not run.exists()
        code, out, err = cli("library", "recover", lib, capsys=capsys, monkeypatch=monkeypatch)
        assert code == 0 and f"{log}: set 1 bad line aside" in out + err, out + err
        assert Path(f"{log}.bad").read_bytes() == line
        code, _, err = cli(*args, capsys=capsys, monkeypatch=monkeypatch)
        assert code == 0, err
    assert side.reviews.read_bytes().startswith(decided)  # the decisions stay
    assert 1 in settled(LibraryStore(lib))


def test_an_import_of_a_library_no_role_of_the_scenario_reads_says_so(tmp_path, capsys, monkeypatch):
    """A multihop team's searcher library imported into maths came in without a word: no maths
    role reads it, so its lessons reach no prompt."""
    theirs = LibraryStore(tmp_path / "theirs.json")
    theirs.commit([Version(library="searcher", number=1, lessons=[Lesson(id="searcher/0001", text=ESTIMATE)],
                           next_id=2)])  # fmt: skip
    monkeypatch.setenv("MAS_HOME", str(tmp_path / "home"))
    code, out, err = cli("library", "import", theirs.path, "--into", "maths", capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0, err
    assert "imported 1 lesson," in out + err
    assert "note: no role of maths reads library 'searcher'" in out + err, out + err
