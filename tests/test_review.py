"""`mas library export`: each lesson with where it came from and its evidence per role, every
role listed, and --since for a review diff."""

import random

import pytest

from mas import paths
from mas.config import PromotionPolicy
from mas.library import hierarchy
from mas.library.logs import SideFiles, StepKey
from mas.library.review import NO_EVIDENCE
from mas.library.store import LibraryStore
from mas.types.lessons import Lesson, Provenance, Version
from mas.types.usage import UsageEvent
from tests.test_cli import mas

FIRST = "When a result comes back, compare it with a rough estimate before passing it on."
SECOND = "When the numbers are small, say each one aloud before using it."
CHANGED = "When the numbers are small, write each one down before using it."
PLANNER = "When a task has several operations, write the whole expression before computing."


def version(library, number, lessons, run, step, next_id):
    return Version(
        library=library, number=number, next_id=next_id, lessons=[Lesson(id=i, text=t) for i, t in lessons],
        provenance=Provenance(run=run, epoch=0, step=step),
    )  # fmt: skip


@pytest.fixture
def library():
    """maths.json: the solver adds two lessons (run a), then changes one and deletes the other
    (run b); the planner adds one in run a; the usage log shows solver/0001 at random to the
    solver and, as a transfer trial, to the verifier."""
    store = LibraryStore(paths.library_file("maths"))
    store.commit([version("solver", 1, [("solver/0001", FIRST)], "a", 0, 2),
                  version("planner", 1, [("planner/0001", PLANNER)], "a", 0, 2)])  # fmt: skip
    store.commit([version("solver", 2, [("solver/0001", FIRST), ("solver/0002", SECOND)], "a", 1, 3)])
    store.commit([version("solver", 3, [("solver/0002", CHANGED)], "b", 4, 3)])
    rng, events = random.Random(3), []
    for task in range(12):
        for role in ("solver", "verifier"):
            for i in range(4):
                shown = i < 2
                events.append(
                    UsageEvent(run="a", epoch=0, step=task, task_id=f"t{task}", rollout=i, role=role,
                               shown=["solver/0001"] if shown else [], randomized=["solver/0001"],
                               reward=float(rng.random() < 0.3 + 0.4 * shown), advantage=0.0)
                )  # fmt: skip
    SideFiles(store.path).usage.append(StepKey("a", 0, 0), events)
    return store


def export(*args):
    done = mas("library", "export", "maths", *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def section(text, name):
    return text.split(f"## {name}\n")[1].split("\n## ")[0]


def test_every_lesson_with_its_origin_and_evidence_and_every_role(library):
    text = export()
    solver = section(text, "solver")
    assert (
        f"- **solver/0002** {CHANGED}\n  - from: run a, epoch 0, step 1 (v2); changed by run b, epoch 0, step 4 (v3)"
        in solver
    )
    assert FIRST not in solver  # deleted since
    assert f"  - evidence: {NO_EVIDENCE}" in solver
    assert f"- **planner/0001** {PLANNER}\n  - from: run a, epoch 0, step 0 (v1)" in section(text, "planner")
    # roles without lessons are listed: the verifier of the scenario, and the empty global library
    assert "_(no lessons)_" in section(text, "verifier") and "_(no lessons)_" in section(text, "global")


def test_evidence_per_role_is_the_randomized_estimate(library):
    store = LibraryStore(library.path)
    store.commit([version("solver", 4, [("solver/0001", FIRST), ("solver/0002", CHANGED)], "c", 0, 3)])
    effects = hierarchy.effects(store, PromotionPolicy())
    mine, trial = effects[("solver", "solver/0001")], effects[("verifier", "solver/0001")]
    line = next(x for x in export().splitlines() if x.startswith("  - evidence: solver "))
    assert line == (
        f"  - evidence: solver {mine.effect:+.2f} [{mine.lcb:+.2f}, {mine.ucb:+.2f}] over 12 tasks, "
        f"e-value {mine.e_value:.1f}; verifier (transfer trial) {trial.effect:+.2f} [{trial.lcb:+.2f}, "
        f"{trial.ucb:+.2f}] over 12 tasks, e-value {trial.e_value:.1f}"
    )


def test_since_shows_only_what_changed(library):
    text = export("--since", "1")
    solver = section(text, "solver")
    assert f"- deleted **solver/0001** (by run b, epoch 0, step 4): {FIRST}" in solver
    assert f"- added **solver/0002** {CHANGED}" in solver  # new since v1, in its current words
    assert "changed by run b, epoch 0, step 4 (v3)" in solver
    assert "_no change since version 1 (now version 1)_" in section(text, "planner")
    since2 = section(export("--since", "2", "--role", "solver"), "solver")
    assert f"- changed **solver/0002** {CHANGED}" in since2 and f"  - was: {SECOND}" in since2
    assert "planner" not in export("--since", "2", "--role", "solver")
