"""The learning step as METHOD.md has it, and the hygiene rules that keep evaluation honest.

Each hygiene test names the defect it pins: it failed on the code before the fix.
"""

import json
import subprocess
import sys

import pytest

from mas.config import TrainConfig, train_config
from mas.errors import UserError
from mas.library.edits import apply
from mas.library.store import LibraryStore
from mas.models.fake import FakeClient, default_respond
from mas.step.rollout import reward
from mas.studies.evaluate import check_held_out
from mas.team.scenario import held_out, load_scenario
from mas.testing import journal, stage, train_on_fake
from mas.types.lessons import Add, Delete, Lesson, Provenance, Version
from mas.types.rollouts import Group, Rollout
from mas.types.tasks import Task

# -- lesson ids never change an answer ------------------------------------------------------


def test_a_cited_lesson_id_never_becomes_the_answer(maths):
    """Before: "following [verifier/0003]" extracted 3 (the last number of the text)."""
    assert maths.extract("The total is 42 eggs, following [verifier/0003].") == "42"
    assert maths.extract("ANSWER: 42 per solver/0007") == "42"


def test_a_cited_lesson_id_never_lowers_a_qa_score():
    """Before: "ANSWER: Paris [searcher/0002]" scored F1 0.67."""
    qa = load_scenario("multihop")
    task = Task(id="t", question="?", answer="Paris")
    got = qa.extract("ANSWER: Paris [searcher/0002]")
    assert qa.reward(task, got) == 1.0


def test_role_prompts_show_lessons_without_ids(maths, tmp_path):
    _, client, store = train_on_fake(maths, tmp_path, tasks=8, batch_size=4)
    lessons = [l for v in store.heads().values() for l in v.lessons]
    team_prompts = [r.system for r in client.requests if r.schema is None]
    assert lessons and any(l.text in p for l in lessons for p in team_prompts)  # (those of the first step)
    assert not any(l.id in p for l in lessons for p in team_prompts)


# -- failed rollouts, majorities --------------------------------------------------------------


def rollouts(*answers, errors=()):
    return [
        Rollout(task_id="t", index=i, traces=[], answer=a, error="timeout after 1 s" if i in errors else None)
        for i, a in enumerate(answers)
    ]


def test_a_failed_rollout_leaves_the_group(maths):
    """Before: a timed-out rollout scored 0 next to two right ones, and the group became
    "informative" for a behavioural lesson about an endpoint fault."""
    group = reward(
        maths,
        Group(task=Task(id="t", question="?", answer="5"), rollouts=rollouts("5", "5", None, errors=[2])),
        ground_truth=True,
    )
    assert group.rewards == [1.0, 1.0] and not group.informative


def test_failed_rollouts_are_reported_per_step(maths, tmp_path):
    def respond(request):
        if request.schema is None and "You are the verifier" in request.system and request.unit("fail") < 0.3:
            raise RuntimeError("endpoint fell over")
        return default_respond(request)

    result, *_ = train_on_fake(maths, tmp_path, FakeClient(respond), tasks=8, batch_size=8)
    report = result.steps[0]
    assert report.failed_rollouts > 0
    summaries = journal(tmp_path / "run", "summary")
    errored = {r["key"] for r in journal(tmp_path / "run", "rollout") if r["data"]["error"]}
    assert errored and not errored & {r["key"] for r in summaries}  # never summarized as losers


def test_without_ground_truth_a_strict_majority_is_needed(maths):
    """Before: with every answer different, rollout 0's answer became "the majority"."""
    task = Task(id="t", question="?", answer="5")
    split = reward(maths, Group(task=task, rollouts=rollouts("1", "2", "3")), ground_truth=False)
    assert split.no_majority and not split.informative
    tie = reward(maths, Group(task=task, rollouts=rollouts("1", "1", "2", "2")), ground_truth=False)
    assert tie.no_majority
    clear = reward(maths, Group(task=task, rollouts=rollouts("1", "1", "2")), ground_truth=False)
    assert clear.rewards == [1.0, 1.0, 0.0] and clear.informative


def test_groups_without_a_majority_are_counted(maths, tmp_path):
    def respond(request):
        if request.schema is None and "You are the verifier" in request.system:
            return f"ANSWER: {request.seed}"  # every rollout a different answer
        return default_respond(request)

    result, client, _ = train_on_fake(maths, tmp_path, FakeClient(respond), tasks=4, ground_truth=False)
    assert result.steps[0].no_majority == 4 and result.steps[0].informative == 0
    assert not any(stage("Advantage")(r) for r in client.requests)


# -- held-out split, composition -----------------------------------------------------------


def test_the_held_out_split_is_a_hash_of_the_id():
    ids = [f"task-{i}" for i in range(2000)]
    share = sum(map(held_out, ids)) / len(ids)
    assert 0.17 < share < 0.23
    assert [held_out(i) for i in ids] == [held_out(i) for i in ids]


def test_a_task_file_is_split_and_the_split_is_recorded(tmp_path):
    """Before: a JSONL file had no held-out part; eval scored the tasks training used."""
    path = tmp_path / "sums.jsonl"
    path.write_text(
        "".join(json.dumps({"id": f"s{i}", "question": f"{i} + 1?", "answer": str(i + 1)}) + "\n" for i in range(50))
    )
    scenario = load_scenario(str(path))
    train_ids, test_ids = {t.id for t in scenario.tasks}, {t.id for t in scenario.held_out}
    assert test_ids and train_ids and not train_ids & test_ids and len(train_ids | test_ids) == 50
    assert test_ids == {f"s{i}" for i in range(50) if held_out(f"s{i}")}
    _, _, store = train_on_fake(scenario, tmp_path, tasks=8, batch_size=8)
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["held_out"].startswith("hash") and set(run["held_out_tasks"]) == test_ids
    version = next(v for v in store.heads().values() if v.provenance)
    assert version.provenance.held_out.startswith("hash") and set(version.provenance.task_ids) <= train_ids


def test_scoring_a_training_task_is_refused(maths, tmp_path):
    _, _, store = train_on_fake(maths, tmp_path, tasks=8, batch_size=8)
    trained = [t for t in maths.tasks if t.id in store.trained_on()]
    with pytest.raises(UserError, match="used to train it"):
        check_held_out(maths.held_out[:5] + trained[:1], store)
    check_held_out(maths.held_out[:5], store)


def test_the_library_records_its_composition(maths, tmp_path):
    config = TrainConfig(tasks=8, batch_size=8, budget={"inject": "all", "inject_tokens": 120})
    _, _, store = train_on_fake(maths, tmp_path, config=config)
    assert store.composition() == config.budget.model_copy(update={"tokenizer": "words"})  # what counted (the fake's)


def run_mas(*args, cwd):
    return subprocess.run([sys.executable, "-m", "mas.cli.main", *args], capture_output=True, text=True, cwd=cwd)


def test_eval_on_a_task_file_after_training_on_it_scores_only_held_out_tasks(tmp_path, home):
    path = tmp_path / "sums.jsonl"
    path.write_text(
        "".join(
            json.dumps({"id": f"s{i}", "question": f"What is {i} + 1?", "answer": str(i + 1)}) + "\n" for i in range(40)
        )
    )
    trained = run_mas("train", str(path), "--model", "fake", "--tasks", "8", cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr
    done = run_mas("eval", str(path), "--model", "fake", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    scored = {t["task_id"] for result in json.loads(done.stdout) for t in result["tasks"]}
    assert scored == {f"s{i}" for i in range(40) if held_out(f"s{i}")}
    assert not scored & LibraryStore(home / "libraries" / "sums.json").trained_on()
    overlap = tmp_path / "overlap.jsonl"
    overlap.write_text(path.read_text())
    refused = run_mas("eval", str(path), "--model", "fake", "--test-file", str(overlap), cwd=tmp_path)
    assert refused.returncode == 2 and "used to train it" in refused.stderr


# -- lessons: refused whole, never cut; deletes before adds ------------------------------------


def test_at_the_size_cap_a_delete_makes_room_for_an_add_listed_before_it():
    """Before: edits applied in order, so the add was refused as "library is full"."""
    full = Version(
        library="solver",
        number=1,
        next_id=3,
        lessons=[Lesson(id="solver/0001", text="A lesson."), Lesson(id="solver/0002", text="Another lesson.")],
    )
    edits = [Add(op="add", text="When adding, carry the tens."), Delete(op="delete", id="solver/0001")]
    version, refused = apply(full, edits, provenance=Provenance(run="r", epoch=0, step=0), limit=2)
    assert refused == [] and [l.text for l in version.lessons] == ["Another lesson.", "When adding, carry the tens."]


def test_presets_and_explicit_settings():
    assert train_config("paper").epochs == 3 and train_config("paper").group_size == 5
    assert train_config("paper", group_size=7).group_size == 7
    assert train_config("quick").tasks == 4 and train_config().epochs == TrainConfig().epochs


# -- what the learning prompts carry -------------------------------------------------------


def test_every_learning_prompt_of_a_three_role_team_carries_what_the_method_needs(maths, tmp_path):
    seeded = {
        "global": "When a result looks odd, recompute it before passing it on.",
        "planner": "When the task has several steps, number them in the plan.",
        "solver": "When a product is involved, compute it with the calculator.",
        "verifier": "When checking, redo the last operation in the other direction.",
    }
    store = LibraryStore(tmp_path / "lib.json")
    store.commit(
        [Version(library=n, number=1, next_id=2, lessons=[Lesson(id=f"{n}/0001", text=t)]) for n, t in seeded.items()]
    )
    _, client, _ = train_on_fake(maths, tmp_path, tasks=8, batch_size=8)  # some group has winners and losers
    task = {t.question: t for t in maths.tasks}
    advantage = next(r for r in client.requests if stage("Advantage")(r))
    prompt = advantage.system + "\n" + advantage.messages[0]
    for name, text in seeded.items():
        assert f"[{name}/0001] {text}" in prompt  # every library, with ids
    for role in maths.roles:
        assert role.description.strip() in prompt and f"- {role.name}:" in prompt
    assert "calculator (" in prompt and "Tools: none" in prompt  # who has which tool
    question = advantage.messages[0].split("\nTask: ", 1)[1].split("\n", 1)[0]
    assert f"Correct answer: {task[question].answer}\n" in prompt
    assert prompt.index('"comparison"') < prompt.index('"operations"')  # reasons before conclusions
    assert "When [condition], [strategy]" in advantage.system and "delete" in advantage.system
    summary = next(r for r in client.requests if stage("Summary")(r))
    assert "Correct answer: " in summary.messages[0] and "- solver:" in summary.system
    assert "Lessons shown:" in summary.messages[0] and "missed" in summary.system
    edit = next(r for r in client.requests if stage("EditBatch")(r))
    library = next(name for name in seeded if f"[{name}/0001]" in edit.messages[0])
    assert f"[{library}/0001] {seeded[library]}" in edit.messages[0]  # the library it edits, with ids
    assert "(why: " in edit.messages[0] and "Deletes are applied first" in edit.system
