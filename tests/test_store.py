from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import filelock
import pytest

from mas.errors import UserError
from mas.library import review
from mas.library.store import LibraryStore, diff
from mas.types.lessons import Add, Lesson, Provenance, Version

ROOT = Path(__file__).resolve().parent.parent


def lesson(library: str, n: int, text: str | None = None) -> Lesson:
    return Lesson(id=f"{library}/{n:04d}", text=text or f"lesson {n} of {library}")


def version(library: str, number: int, ids: list[int], prov: Provenance | None = None) -> Version:
    return Version(
        library=library,
        number=number,
        lessons=[lesson(library, i) for i in ids],
        next_id=max(ids, default=0) + 1,
        edits=[Add(op="add", text="a new lesson text")],
        provenance=prov,
    )


@pytest.fixture
def store(tmp_path: Path) -> LibraryStore:
    return LibraryStore(tmp_path / "libraries" / "maths.json")


def filled(store: LibraryStore, n: int = 3) -> None:
    for k in range(1, n + 1):
        store.commit([version("solver", k, list(range(1, k + 1)))])


def test_missing_file_means_empty(store: LibraryStore) -> None:
    assert store.libraries() == []
    assert store.versions("solver") == []
    assert store.head("solver") == Version(library="solver", number=0, lessons=[], next_id=1)
    assert store.heads() == {}
    assert not store.has_provenance("r", 0, 0)
    assert not store.path.exists()


def test_round_trip(store: LibraryStore) -> None:
    v = version("solver", 1, [1, 2], Provenance(run="r1", epoch=0, step=2, task_ids=["t1"]))
    store.commit([v])
    assert store.versions("solver") == [v]
    assert LibraryStore(store.path).version("solver", 1) == v
    text = store.path.read_text()
    assert text.startswith('{\n  "versions"') and json.loads(text)


def test_number_order_and_head(store: LibraryStore) -> None:
    filled(store, 12)
    assert [v.number for v in store.versions("solver")] == list(range(1, 13))
    assert store.head("solver").number == 12
    assert store.version("solver", 0).lessons == []


def test_commit_several_libraries(store: LibraryStore) -> None:
    store.commit([version("solver", 1, [1]), version("global", 1, [1]), version("planner", 1, [])])
    assert store.libraries() == ["global", "planner", "solver"]
    heads = store.heads()
    assert list(heads) == ["global", "planner", "solver"]
    assert all(h.number == 1 for h in heads.values())
    assert not list(store.path.parent.glob("*.tmp"))


def test_wrong_number_rejected(store: LibraryStore) -> None:
    filled(store, 2)
    before = store.path.read_text()
    with pytest.raises(ValueError):
        store.commit([version("planner", 1, []), version("solver", 2, [1])])
    with pytest.raises(ValueError):
        store.commit([version("planner", 2, [])])
    with pytest.raises(ValueError):
        store.commit([version("planner", 1, []), version("planner", 2, [])])
    assert store.path.read_text() == before


def test_missing_version_names_file(store: LibraryStore) -> None:
    filled(store, 1)
    with pytest.raises(UserError, match=r"maths\.json.*'solver'.*7"):
        store.version("solver", 7)


def test_has_provenance(store: LibraryStore) -> None:
    store.commit([version("solver", 1, [1], Provenance(run="r1", epoch=1, step=4))])
    assert store.has_provenance("r1", 1, 4)
    assert not store.has_provenance("r1", 1, 5)
    assert not store.has_provenance("r2", 1, 4)


def test_rollback_keeps_next_id_and_content(store: LibraryStore) -> None:
    filled(store, 3)
    new = store.rollback("solver", 1)
    assert new.number == 4 and new.next_id == 4
    assert new.lessons == store.version("solver", 1).lessons
    assert new.edits == [] and new.provenance is None
    assert store.head("solver") == new
    with pytest.raises(UserError):
        store.rollback("solver", 9)


def test_diff_lines() -> None:
    two = [lesson("solver", 1), lesson("solver", 2)]
    old = Version(library="solver", number=1, lessons=two, next_id=3)
    new = Version(
        library="solver",
        number=2,
        lessons=[lesson("solver", 1, "changed text"), lesson("solver", 3)],
        next_id=4,
    )
    assert diff(old, new) == [
        "~ solver/0001: lesson 1 of solver -> changed text",
        "- solver/0002: lesson 2 of solver",
        "+ solver/0003: lesson 3 of solver",
    ]
    assert diff(new, new) == []


def test_export_markdown(store: LibraryStore) -> None:
    prov = Provenance(run="r1", epoch=2, step=5, model="qwen")
    store.commit([version("solver", 1, [1, 3], prov), version("global", 1, [])])
    md = review.markdown(store, {})
    assert md.index("## global") < md.index("## solver")
    assert "- **solver/0001** lesson 1 of solver" in md
    assert "**solver/0003**" in md
    assert "_version 1, last changed by run r1, epoch 2, step 5_" in md


def test_atomic_write_leaves_no_temp_files(store: LibraryStore) -> None:
    filled(store, 5)
    names = sorted(p.name for p in store.path.parent.iterdir())
    assert names == ["maths.json", "maths.json.bak", "maths.json.lock", "maths.json.run.lock"]


def test_stale_temp_file_swept(store: LibraryStore) -> None:
    filled(store, 1)
    stale = store.path.parent / ".maths.json.abc123.tmp"
    stale.write_text('{"half')
    store.commit([version("solver", 2, [1, 2])])
    assert not stale.exists()


@pytest.mark.parametrize("garble", ["junk", "truncated", "empty", "invalid doc"])
def test_garbled_file_and_recover(store: LibraryStore, garble: str) -> None:
    filled(store, 3)
    good = store.path.read_text()
    store.commit([version("solver", 4, [1, 2, 3, 4])])
    text = store.path.read_text()
    garbled = {
        "junk": "\x00\x13garbage{{",
        "truncated": text[: len(text) // 2],
        "empty": "",
        "invalid doc": text.replace('"next_id": 5', '"next_id": "five"'),
    }[garble]
    store.path.write_text(garbled)
    with pytest.raises(UserError, match=r"maths\.json: not a valid library file") as err:
        store.head("solver")
    assert "\n" not in str(err.value)
    with pytest.raises(UserError, match="maths.json"):
        store.commit([version("solver", 5, [1])])
    assert store.path.read_text() == garbled
    assert store.recover() == 4  # the backup holds the latest good state
    assert store.path.read_text() == text != good
    assert store.head("solver").number == 4


def test_non_utf8_file(store: LibraryStore) -> None:
    store.path.parent.mkdir(parents=True)
    store.path.write_bytes(b"\xff\xfe\x00junk")
    with pytest.raises(UserError, match="maths.json"):
        store.libraries()


def test_recover_without_backup_or_when_healthy(store: LibraryStore) -> None:
    filled(store, 2)
    with pytest.raises(UserError, match="not corrupt"):
        store.recover()
    store.backup.unlink()
    store.path.write_text("nope")
    with pytest.raises(UserError, match="no backup"):
        store.recover()


def test_lock_timeout(store: LibraryStore, tmp_path: Path) -> None:
    filled(store, 1)
    quick = LibraryStore(store.path, lock_timeout=0.2)
    with filelock.FileLock(f"{store.path}.lock"):
        with pytest.raises(UserError, match=r"maths\.json: locked by another mas process"):
            quick.commit([version("solver", 2, [1])])
        with pytest.raises(UserError, match="locked"):
            quick.rollback("solver", 1)
        assert quick.head("solver").number == 1  # reads do not wait for the lock
    quick.commit([version("solver", 2, [1])])
    assert quick.head("solver").number == 2


WRITER = """
import sys
from mas.library.store import LibraryStore
from mas.types.lessons import Lesson, Version
store = LibraryStore(sys.argv[1])
first = True
while True:
    head = store.head("solver")
    n = head.number + 1
    lessons = [Lesson(id=f"solver/{i:04d}", text="x" * 300 + str(i)) for i in range(1, n + 1)]
    store.commit([
        Version(library="solver", number=n, lessons=lessons, next_id=n + 1),
        Version(library="planner", number=store.head("planner").number + 1,
                lessons=[Lesson(id="planner/0001", text="y" * 300)], next_id=2),
    ])
    if first:
        print("ready", flush=True)
        first = False
"""


def test_sigkill_during_commits_never_corrupts(tmp_path: Path) -> None:
    path = tmp_path / "maths.json"
    rng = random.Random(1234)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    last = 0
    for _ in range(8):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, env=env, text=True)
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        time.sleep(rng.uniform(0.0, 0.3))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        store = LibraryStore(path)
        heads = store.heads()
        numbers = [v.number for v in store.versions("solver")]
        assert numbers == list(range(1, heads["solver"].number + 1))
        assert heads["solver"].number > last
        last = heads["solver"].number
        if store.backup.exists():
            json.loads(store.backup.read_text())
    store.commit([version("solver", last + 1, list(range(1, last + 2)))])  # a new writer sweeps leftover temp files
    assert not list(tmp_path.glob("*.tmp"))


def test_recover_with_corrupt_backup(store: LibraryStore) -> None:
    filled(store, 2)
    store.path.write_text("nope")
    store.backup.write_text("{also nope")
    with pytest.raises(UserError, match=r"maths\.json: corrupt, and so is .*maths\.json\.bak"):
        store.recover()
    assert store.path.read_text() == "nope"


def test_newer_schema_is_not_treated_as_corrupt(store: LibraryStore) -> None:
    filled(store, 2)
    text = store.path.read_text()
    store.path.write_text(text.replace('"schema_version": 1', '"schema_version": 99'))
    newer = store.path.read_text()
    with pytest.raises(UserError, match="newer mas"):
        store.head("solver")
    with pytest.raises(UserError, match="newer mas"):
        store.recover()
    assert store.path.read_text() == newer
