"""Multi-hop QA: scoring, answer extraction, the generated pack and the shared benchmark files."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from mas.datasets import load_jsonl
from mas.domains.qa import (
    RELATIONS,
    build_world,
    chains,
    exact_match,
    extract_answer,
    f1,
    generate,
    gold,
    normalize,
    passage,
    qa_reward,
    question,
    write_jsonl,
)
from mas.team.scenario import EXTRACTORS, REWARDS, load_scenario
from mas.types.tasks import Task

PACK = Path(__file__).resolve().parents[1] / "scenarios" / "multihop"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


# -- scoring ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Eiffel Tower!", "eiffel tower"),
        ("  A  cat,   an apple; the END. ", "cat apple end"),
        ("Velora  Quint", "velora quint"),
        ("“Tamsk”, the town", "tamsk town"),
        ("state-of-the-art", "stateoftheart"),  # SQuAD drops punctuation without a space
        ("Theatre", "theatre"),
        ("", ""),
    ],
)
def test_normalize(text, expected):
    assert normalize(text) == expected


def test_exact_match_ignores_case_articles_and_punctuation():
    assert exact_match("the Orlen.", ["Orlen"]) == 1.0
    assert exact_match("Orlen River", ["Orlen"]) == 0.0
    assert exact_match("USA", ["United States", "usa"]) == 1.0
    assert exact_match(None, ["x"]) == 0.0
    assert exact_match("x", []) == 0.0


def test_f1_gives_partial_credit_and_takes_the_best_answer():
    assert f1("Velora Quint", ["Velora Quint"]) == 1.0
    assert f1("Quint", ["Velora Quint"]) == pytest.approx(2 / 3)
    assert f1("Velora Quint of Tamsk", ["Velora Quint"]) == pytest.approx(2 * 0.5 * 1 / 1.5)
    assert f1("Barack Obama", ["Obama", "Barack Obama"]) == 1.0
    assert f1("Someone Else", ["Velora Quint"]) == 0.0
    assert f1(None, ["x"]) == 0.0
    assert f1("", ["x"]) == 0.0
    assert f1("the", ["x"]) == 0.0


def test_qa_reward_counts_aliases():
    task = Task(id="t", question="q", answer="United States", aliases=["USA", "America"])
    assert qa_reward(task, "the USA") == 1.0
    assert qa_reward(task, "united states.") == 1.0
    assert qa_reward(task, "Canada") == 0.0
    assert qa_reward(task, None) == 0.0
    assert qa_reward(Task(id="t", question="q"), "anything") == 0.0


# -- extraction ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ANSWER: Velora Quint", "Velora Quint"),
        ("Answer: Tamsk.", "Tamsk"),
        ("answer:Tamsk", "Tamsk"),
        ('Final answer: "Orlen"', "Orlen"),
        ("**Answer:** Brannock Mills", "Brannock Mills"),
        ("She was born in Tamsk.\nANSWER: Tamsk\nThat is all.", "Tamsk"),
        ("ANSWER: Tamsk\nwait, no.\nANSWER: Velmor", "Velmor"),
        ("ANSWER:\nVelmor", "Velmor"),
        ("The town is Tamsk.\n\nVelmor\n", "Velmor"),
        ("x" * 300, "x" * 100),
        ("", None),
        ("   \n  ", None),
        ("ANSWER: ", None),
    ],
)
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


# -- the generated pack -------------------------------------------------------------------


def test_generate_is_deterministic_and_seeded():
    assert generate(30, seed=3) == generate(30, seed=3)
    assert generate(30, seed=3) != generate(30, seed=4)


def test_generate_spreads_hops_and_questions():
    tasks = generate(90)
    assert Counter(t.level for t in tasks) == {2: 30, 3: 30, 4: 30}
    assert len({t.question for t in tasks}) == 90
    assert len({t.id for t in tasks}) == 90
    assert all(8 <= len(t.passages) <= 10 for t in tasks)
    assert all(len({p.title for p in t.passages}) == len(t.passages) for t in tasks)
    last = Counter(next(r for r in RELATIONS if _asks(RELATIONS[r].question, t.question)) for t in tasks)
    assert len(last) >= 6  # not all "who governs ..."


def _asks(template: str, question: str) -> bool:
    head, tail = template.split("{x}")
    return question.lower().startswith(head.lower()) and question.endswith(tail)


def test_the_answer_is_stated_in_a_passage_but_not_in_the_question():
    for task in generate(60, seed=5):
        assert task.answer not in task.question
        assert any(task.answer in p.text for p in task.passages), task.question


def test_gold_passages_are_among_the_task_passages():
    """Every task's chain, found again in its world: each hop's passage is in the task, and
    the last one states the answer."""
    world = build_world(random.Random(0))  # generate(seed=0) builds its world first
    tasks = {t.question: t for t in generate(200)}
    checked = 0
    for hops in (2, 3, 4):
        for entities, relations in chains(world, hops):
            task = tasks.get(question(world, entities, relations))
            if task is None:
                continue
            checked += 1
            assert task.answer == entities[-1]
            titles = [p.title for p in task.passages]
            holders = gold(entities, relations)
            assert set(holders) <= set(titles)
            assert len(holders) <= hops
            assert task.answer in passage(world, holders[-1]).text
            assert all(passage(world, h) in task.passages for h in holders)
    assert checked == 200


def test_shipped_pack_loads_and_matches_the_generator():
    train, test = load_jsonl(PACK / "tasks.jsonl"), load_jsonl(PACK / "test.jsonl")
    assert (len(train), len(test)) == (200, 100)
    assert train == generate(200, seed=0)
    assert test == generate(100, seed=1, prefix="multihop-test")
    assert all(t.id.startswith("multihop-test-") for t in test)


def test_write_jsonl_round_trips_aliases(tmp_path):
    task = Task(id="a", question="q?", answer="Orlen", aliases=["the Orlen River"], level=2)
    write_jsonl([task], tmp_path / "x.jsonl")
    assert load_jsonl(tmp_path / "x.jsonl") == [task]


def test_scenario_loads_with_the_qa_reward():
    assert REWARDS["qa"] is qa_reward and EXTRACTORS["qa"] is extract_answer
    scenario = load_scenario("multihop", limit=5)
    assert scenario.role_names == ["planner", "searcher", "solver"]
    assert scenario.role("searcher").tools == ["search", "open"]
    assert scenario.role("solver").tools == []
    for role in scenario.roles:
        assert role.system_prompt.strip().startswith(f"You are the {role.name} of a small team")
    task = scenario.tasks[0]
    assert scenario.reward(task, scenario.extract(f"reasoning\nANSWER: {task.answer}")) == 1.0


# -- the shared benchmark files -----------------------------------------------------------

needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="no ../shared/data")


@needs_shared
def test_hotpotqa_loads_with_passages():
    tasks = load_jsonl(SHARED / "hotpotqa_dev_distractor_200.jsonl")
    assert len(tasks) == 200
    counts = Counter(len(t.passages) for t in tasks)
    assert counts[10] >= 199 and min(counts) >= 2  # one record in the file carries only its 2 gold
    assert all(p.title and p.text for t in tasks for p in t.passages)


@needs_shared
def test_musique_loads_with_passages_and_aliases():
    tasks = load_jsonl(SHARED / "musique_ans_dev_200.jsonl")
    assert len(tasks) == 200
    assert all(len(t.passages) == 20 for t in tasks)
    with_aliases = [t for t in tasks if t.aliases]
    assert with_aliases
    task = with_aliases[0]
    assert qa_reward(task, task.aliases[0]) == 1.0
