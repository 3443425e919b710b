"""Budgets: the injected block never exceeds its budget; over-budget libraries retire lessons
by explicit delete edits, weakest evidence first."""

import random

import pytest

from mas.library.budget import retirements, tokens
from mas.library.hierarchy import enforce_budgets
from mas.library.inject import role_block, select
from mas.library.store import LibraryStore
from mas.testing import train_on_fake
from mas.types.lessons import Budget, Lesson, Provenance, Version

WORDS = "apples boxes trains carry digits units parentheses fractions percent speed distance hours".split()


def library(name, n, seed=0):
    rng = random.Random(seed)
    lessons = [
        Lesson(id=f"{name}/{i:04d}", text=f"When {' and '.join(rng.sample(WORDS, 2))} appear, check step {i}.")
        for i in range(1, n + 1)
    ]
    return Version(library=name, number=1, lessons=lessons, next_id=n + 1)


@pytest.mark.parametrize("size", [10, 10_000])
@pytest.mark.parametrize("inject", ["relevant", "all"])
def test_injected_lessons_never_exceed_the_budget(size, inject):
    budget = Budget(global_tokens=60, inject_tokens=80, private_tokens=120, inject=inject)
    heads = {"global": library("global", size, 1), "solver": library("solver", size, 2)}
    block = role_block(heads, "solver", task="How many apples fit in the boxes?", budget=budget)
    text = {l.id: l.text for v in heads.values() for l in v.lessons}
    shared = [text[i] for i in block.shown if i.startswith("global/")]
    own = [text[i] for i in block.shown if i.startswith("solver/")]
    assert all(f"- {t}\n" in block.text + "\n" for t in shared + own)
    assert sum(map(tokens, shared)) <= budget.global_tokens
    assert sum(map(tokens, own)) <= (budget.inject_tokens if inject == "relevant" else budget.private_tokens)
    assert own


def test_relevant_injection_prefers_lessons_about_the_task():
    version = Version(
        library="solver",
        number=1,
        next_id=4,
        lessons=[
            Lesson(id="solver/0001", text="Check the units of speed and distance."),
            Lesson(id="solver/0002", text="When apples are packed in boxes, multiply first."),
            Lesson(id="solver/0003", text="Round percentages at the very end."),
        ],
    )
    chosen = select(version, limit=tokens(version.lessons[1].text), query="A farmer packs apples into boxes of 6.")
    assert [l.id for l in chosen] == ["solver/0002"]


def test_retirement_deletes_the_weakest_first():
    version = library("solver", 6)
    strength = {l.id: s for l, s in zip(version.lessons, [0.5, -0.4, 0.1, 0.9, -0.1, 0.2])}.get
    total = sum(tokens(l.text) for l in version.lessons)
    edits = retirements(version, cap=total - 1, strength=strength)
    assert [e.id for e in edits] == ["solver/0002"]
    edits = retirements(version, cap=total // 2, strength=strength)
    assert [e.id for e in edits][:3] == ["solver/0002", "solver/0005", "solver/0003"]


def test_an_over_budget_library_is_cut_by_delete_edits_with_provenance(tmp_path):
    store = LibraryStore(tmp_path / "lib.json")
    store.commit([library("solver", 20)])
    budget = Budget(private_tokens=50)
    (version,) = enforce_budgets(store, budget, Provenance(run="r", epoch=0, step=0))
    assert sum(tokens(l.text) for l in store.head("solver").lessons) <= 50
    assert all(e.op == "delete" for e in version.edits) and version.provenance.stage == "budget"
    assert enforce_budgets(store, budget, Provenance(run="r", epoch=0, step=0)) == []  # within budget now


def test_training_keeps_every_library_within_budget(maths, tmp_path):
    budget = Budget(private_tokens=10, global_tokens=10)
    result, _, store = train_on_fake(maths, tmp_path, tasks=16, epochs=2, budget=budget)
    for version in store.heads().values():  # every lesson the fake writes is longer than 10 tokens
        assert version.lessons == []
    assert sum(sum(s.retired.values()) for s in result.steps) == sum(sum(s.applied.values()) for s in result.steps) > 0
