"""What a reviewer meets reading what training learned: `mas library review` decisions that say
what the reviewer said, a held edit that was rejected before named as such, a damaged library
file named where the damage is, and a usage graph that Gephi and yEd can read whatever a lesson
holds."""

import json
import shutil

import networkx as nx
import pytest

from mas.library import pending
from mas.library.logs import SideFiles
from mas.library.store import LibraryStore
from mas.types.lessons import Lesson, Provenance, Version
from tests.test_cli import mas, snapshot
from tests.test_review_gate import held_run

GOOD = "When a result comes back, compare it with a rough estimate before passing it on."


@pytest.fixture(scope="module")
def held_once(tmp_path_factory):
    return held_run(tmp_path_factory.mktemp("held"))


@pytest.fixture
def lib(held_once, tmp_path):
    """A copy of one `mas train --review` run's library folder and run."""
    shutil.copytree(held_once.parent, tmp_path / "held")
    return tmp_path / "held" / held_once.name


def review(lib, *args):
    return mas("library", "review", str(lib), "--by", "lead", *args)


# -- one --why for an accept and a reject ----------------------------------------------------------


def test_one_why_is_not_recorded_as_the_reason_of_an_accept_and_of_a_reject(lib):
    """`--accept 1 --reject 2 --why "a copy of 1"` recorded "a copy of 1" as the reason the lead
    accepted #1 too: the library's history said what the reviewer never said. The --why a
    rejection needs is the rejections' reason only."""
    first, second = [h.edit.id for h in pending.queue(LibraryStore(lib))][:2]
    done = review(lib, "--accept", str(first), "--reject", str(second), "--why", "a copy of the first")
    assert done.returncode == 0, done.stderr
    store = LibraryStore(lib)
    whys = {v.provenance.pending: v.provenance.why for n in store.libraries()
            for v in store.versions(n) if v.provenance and v.provenance.pending}  # fmt: skip
    assert whys == {first: "", second: "a copy of the first"}


def test_several_rejects_may_share_one_why(lib):
    first, second = [h.edit.id for h in pending.queue(LibraryStore(lib))][:2]
    done = review(lib, "--reject", str(first), "--reject", str(second), "--why", "not now")
    assert done.returncode == 0, done.stderr


# -- a held edit rejected before -------------------------------------------------------------------


def twice(store):
    """The first edit a run held twice (the fake proposes the same add in both steps)."""
    seen = {}
    for h in pending.queue(store):
        key = pending.same_edit(h.edit.library, h.edit.edit)
        if key in seen:
            return seen[key], h
        seen[key] = h
    raise AssertionError("the fake proposes the same add in both steps")


def test_a_held_edit_rejected_before_says_so_in_the_listing(lib):
    """A run holds the same edit again while the first is undecided (a step of its own each).
    The listing names the rejection of one beside the other (who, why), so the reviewer does not
    decide it blind."""
    first, second = twice(LibraryStore(lib))
    assert review(lib, "--reject", str(first.edit.id), "--why", "too vague").returncode == 0
    block = review(lib).stdout.split(f"#{second.edit.id} ")[1].split("\n#")[0]
    assert f"the same edit was rejected before: #{first.edit.id} by lead (too vague)" in block


def test_training_does_not_make_a_rejected_edit_again(lib):
    """Training forgot a reviewer's rejection: the next run held the same lessons again (the
    fake proposes them again), and a run without --review added them to the library. The
    reviewer's decision stands: the edit is refused with its rejection, where refusals are
    listed."""
    store = LibraryStore(lib)
    adds = [h for h in pending.queue(store) if h.edit.edit.op == "add"]
    rejected = [x for h in adds for x in ("--reject", str(h.edit.id))]
    assert review(lib, *rejected, "--why", "too vague").returncode == 0
    for extra in (["--review"], []):
        again = mas("train", "maths", "--model", "fake", "--tasks", "8", *extra, "--library", str(lib),
                    "--run-dir", str(lib.parent / f"again{len(extra)}"))  # fmt: skip
        assert again.returncode == 0, again.stderr
    words = {h.edit.edit.text for h in adds}
    assert not [h for h in pending.queue(store) if h.open and h.edit.edit.text in words]
    assert not words & {lesson.text for name in store.libraries() for lesson in store.head(name).lessons}
    listed = mas("library", "show", str(lib), "--rejected").stdout
    last = {pending.same_edit(h.edit.library, h.edit.edit): h.edit.id for h in adds}  # the last rejection
    for number in set(last.values()):
        assert f"refused: rejected in review before: #{number} by lead (too vague) (run again" in listed


def test_an_edit_accepted_after_its_rejection_is_no_longer_refused(lib):
    """The last decision on an edit holds: rejected as #1, accepted as #2."""
    store = LibraryStore(lib)
    first, second = twice(store)
    assert review(lib, "--reject", str(first.edit.id), "--why", "too vague").returncode == 0
    key = pending.same_edit(first.edit.library, first.edit.edit)
    assert key in pending.rejected_before(store)
    assert review(lib, "--accept", str(second.edit.id)).returncode == 0
    assert key not in pending.rejected_before(store)


def test_same_edit_sets_case_and_spacing_aside():
    from mas.types.lessons import Add, Delete

    one = pending.same_edit("solver", Add(op="add", text="Reread  the question."))
    assert one == pending.same_edit("solver", Add(op="add", text="reread the question."))
    assert one != pending.same_edit("verifier", Add(op="add", text="Reread the question."))
    assert pending.same_edit("solver", Delete(op="delete", id="solver/0001")) != pending.same_edit(
        "solver", Delete(op="delete", id="solver/0002")
    )


# -- a damaged library file ------------------------------------------------------------------------


def test_a_bad_document_is_named_by_its_key_in_the_file(tmp_path):
    """The file's documents are keyed "1", "10", "11", ..., "2" (sorted as text): the tenth
    document read is not the one keyed "10", so naming the document by its place sent the
    reviewer to the wrong one."""
    path = tmp_path / "maths.json"
    store = LibraryStore(path)
    for n in range(1, 11):
        lessons = [Lesson(id="solver/0001", text=GOOD)]
        store.commit([Version(library="solver", number=n, next_id=2, lessons=lessons,
                              provenance=Provenance(run="r", epoch=0, step=n))])  # fmt: skip
    data = json.loads(path.read_text())
    assert list(data["versions"])[:3] == ["1", "10", "2"]  # as the file is written
    data["versions"]["10"]["lessons"][0]["text"] = 5
    path.write_text(json.dumps(data, indent=2, sort_keys=True))
    path.with_name("maths.json.bak").unlink()
    done = mas("library", "show", str(path))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert 'document "10": lessons.0.text' in done.stderr, done.stderr


# -- the usage graph as GraphML ---------------------------------------------------------------------


def test_graphml_reads_back_whatever_a_lesson_holds(tmp_path):
    """A form feed or a vertical tab passes the screen (they are white space; an escape or a NUL
    does not): XML 1.0 has no way to hold one, so the GraphML file Gephi, yEd and networkx read
    must write it escaped."""
    path = tmp_path / "maths.json"
    text = "When adding, carry\x0b the tens\x0c before the units digit."
    LibraryStore(path).commit([Version(library="solver", number=1, next_id=2,
                                       lessons=[Lesson(id="solver/0001", text=text)])])  # fmt: skip
    assert LibraryStore(path).head("solver").lessons  # on no screen's list
    done = mas("graph", "export", str(path), "--format", "graphml")
    assert done.returncode == 0, done.stderr
    graph = nx.read_graphml(SideFiles(path).graph("graphml"))
    assert graph.nodes["lesson:solver/0001"]["text"] == "When adding, carry\\x0b the tens\\x0c before the units digit."


# -- what was refused ------------------------------------------------------------------------------


def test_show_rejected_lists_what_a_review_rejected(lib):
    """`mas library show --rejected` lists the refused edits "with why, where and when": a
    reviewer's rejection is the one refusal a team lead looks for there, and it was missing (it
    is kept only in the version the decision made, not in the step's log)."""
    first = pending.queue(LibraryStore(lib))[0]
    assert review(lib, "--reject", str(first.edit.id), "--why", "too vague").returncode == 0
    done = mas("library", "show", str(lib), "--rejected", "--role", first.edit.library)
    assert done.returncode == 0, done.stderr
    p = first.step.provenance
    assert (
        f"[{first.edit.library}] add: {first.edit.edit.text}\n"
        f"  refused: rejected in review by lead: too vague; held #{first.edit.id} "
        f"(run {p.run}, epoch {p.epoch}, step {p.step}, at the review stage)"
    ) in done.stdout


# -- mas library diff ------------------------------------------------------------------------------

SECOND = "When the numbers are small, say each one aloud before using it."


def test_diff_names_the_step_or_pass_behind_each_change(tmp_path):
    """`mas library diff` listed what changed with nothing on why: a lesson that left by a
    promotion read like one a step deleted. Each change is followed by what made it."""
    path = tmp_path / "maths.json"
    store = LibraryStore(path)
    one, two = Lesson(id="solver/0001", text=GOOD), Lesson(id="solver/0002", text=SECOND)
    store.commit([Version(library="solver", number=1, next_id=2, lessons=[one],
                          provenance=Provenance(run="a", epoch=0, step=0))])  # fmt: skip
    store.commit([Version(library="solver", number=2, next_id=3, lessons=[one, two],
                          provenance=Provenance(run="a", epoch=0, step=1))])  # fmt: skip
    store.commit([Version(library="solver", number=3, next_id=3, lessons=[two],
                          provenance=Provenance(run="b", epoch=1, step=2, stage="promotion"))])  # fmt: skip
    store.rollback("solver", 1)
    done = mas("library", "diff", str(path), "solver", "0", "3")
    assert done.returncode == 0, done.stderr
    assert done.stdout == (f"+ solver/0002: {SECOND}\n    by run a, epoch 0, step 1 (v2)\n")
    done = mas("library", "diff", str(path), "solver", "2")
    assert done.stdout == (f"- solver/0002: {SECOND}\n    by a rollback (v4)\n")
    done = mas("library", "diff", str(path), "solver", "1", "3")
    assert done.stdout == (
        f"- solver/0001: {GOOD}\n    by run b, epoch 1, step 2, a promotion pass (v3)\n"
        f"+ solver/0002: {SECOND}\n    by run a, epoch 0, step 1 (v2)\n"
    )


def test_a_document_number_given_twice_by_a_merge_is_refused_not_dropped(tmp_path):
    """Two branches each add a version as document "3" (one the solver's, one the planner's);
    merged by hand, the file holds the key twice. JSON keeps the last: the solver's version and
    its new lesson were gone without a word, and the next write made the loss permanent."""
    path = tmp_path / "maths.json"

    def doc(library, number, lessons, next_id):
        return json.dumps({"library": library, "number": number, "next_id": next_id, "schema_version": 1,
                           "lessons": [{"id": i, "text": t} for i, t in lessons], "edits": [], "rejected": []})  # fmt: skip

    merged = ",\n".join([
        f'"1": {doc("solver", 1, [("solver/0001", GOOD)], 2)}',
        f'"2": {doc("planner", 1, [("planner/0001", SECOND)], 2)}',
        f'"3": {doc("solver", 2, [("solver/0001", GOOD), ("solver/0002", SECOND)], 3)}',
        f'"3": {doc("planner", 2, [], 2)}',
    ])  # fmt: skip
    path.write_text('{"versions": {\n' + merged + "\n}}\n")
    before = snapshot(tmp_path)
    for args in (["library", "show", str(path)], ["library", "import", str(path), "--into", str(tmp_path / "o.json")]):
        done = mas(*args)
        assert done.returncode == 2, done.stdout
        assert done.stderr.count("\n") == 1 and 'key "3" appears twice' in done.stderr, done.stderr
    assert snapshot(tmp_path) == before


# -- mas library export --since --------------------------------------------------------------------


def test_since_never_says_no_change_of_a_library_that_never_had_that_version(tmp_path):
    """Each library numbers its own versions: after a run, `--since 5` (the solver's number
    before it) said "no change since version 5" of a global library at version 1, whose one
    lesson that very run had promoted, hiding it from the review."""
    path = tmp_path / "maths.json"
    store = LibraryStore(path)
    for n in range(1, 6):
        store.commit([Version(library="solver", number=n, next_id=2, lessons=[Lesson(id="solver/0001", text=GOOD)],
                              provenance=Provenance(run="a", epoch=0, step=n))])  # fmt: skip
    store.commit([Version(library="global", number=1, next_id=2, lessons=[Lesson(id="global/0001", text=SECOND)],
                          provenance=Provenance(run="b", epoch=0, step=0, stage="promotion"))])  # fmt: skip
    done = mas("library", "export", str(path), "--since", "5")
    assert done.returncode == 0, done.stderr
    shared = done.stdout.split("## global\n")[1].split("\n## ")[0]
    assert "no change" not in shared
    assert "_no version 5: the library is at version 1 (`--since 0` shows all its changes)_" in shared
    assert "_no change since version 5 (now version 5)_" in done.stdout.split("## solver\n")[1]
