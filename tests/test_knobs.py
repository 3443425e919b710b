"""Every configuration field acts: each test turns one knob and watches its effect."""

import asyncio
import json
from collections import Counter

import pytest

from mas.config import EvalConfig, TrainConfig
from mas.library.store import LibraryStore
from mas.models.fake import FakeClient, default_respond
from mas.step.rollout import reward
from mas.studies.evaluate import evaluate
from mas.testing import journal, stage, train_on_fake
from mas.train import train
from mas.types.rollouts import Group, Rollout
from mas.types.tasks import Task


def run(maths, tmp_path, client=None, /, **config):
    result, client, store = train_on_fake(maths, tmp_path, client, **config)
    return result, client, store, journal(tmp_path / "run")


def rollouts(journal):
    return [r["data"] for r in journal if r["kind"] == "rollout"]


def test_tasks_batch_size_epochs(maths, tmp_path):
    result, *_, journal = run(maths, tmp_path, tasks=6, batch_size=4, epochs=2)
    assert [len(s.task_ids) for s in result.steps] == [4, 2, 4, 2]
    assert [s.epoch for s in result.steps] == [0, 0, 1, 1]
    assert {r["task_id"] for r in rollouts(journal)} == {t.id for t in maths.tasks[:6]}


def test_group_size(maths, tmp_path):
    *_, journal = run(maths, tmp_path, tasks=2, group_size=5)
    assert Counter(r["task_id"] for r in rollouts(journal)) == {t.id: 5 for t in maths.tasks[:2]}


@pytest.mark.parametrize("shuffle", [True, False])
def test_shuffle_reorders_each_epoch(maths, tmp_path, shuffle):
    result, *_ = run(maths, tmp_path, tasks=8, batch_size=8, epochs=2, shuffle=shuffle)
    first, second = (s.task_ids for s in result.steps)
    plain = [t.id for t in maths.tasks[:8]]
    assert (first != plain and first != second) if shuffle else (first == second == plain)


def test_seed_changes_order_and_sampling(maths, tmp_path):
    a, ca, *_ = run(maths, tmp_path / "a", tasks=8, batch_size=8, seed=1)
    b, cb, *_ = run(maths, tmp_path / "b", tasks=8, batch_size=8, seed=2)
    assert a.steps[0].task_ids != b.steps[0].task_ids
    assert {r.seed for r in ca.requests}.isdisjoint({r.seed for r in cb.requests})


def test_temperatures_and_max_tokens_reach_the_model(maths, tmp_path):
    _, client, *_ = run(maths, tmp_path, tasks=4, temperature=1.3, learning_temperature=0.1, max_tokens=99)
    team = [r for r in client.requests if r.schema is None]
    learning = [r for r in client.requests if r.schema is not None]
    assert team and all(r.settings["temperature"] == 1.3 and r.settings["max_tokens"] == 99 for r in team)
    assert learning and all(r.settings["temperature"] == 0.1 for r in learning)


def test_rollout_timeout_cancels_slow_teams(maths, tmp_path):
    result, client, _, journal = run(
        maths, tmp_path, FakeClient(latency=0.5), tasks=2, group_size=2, rollout_timeout=0.2
    )
    assert all(r["error"].startswith("timeout") for r in rollouts(journal))
    assert result.steps[0].calls["rollout"].failures == 4


def test_rollout_timeout_counts_the_teams_own_time_not_the_queue(maths, tmp_path):
    """One call slot, 16 rollouts of ~3 calls of 0.05 s: the last rollouts wait over 2 s for
    slots, far beyond their 1 s deadline, yet none of their own work (~0.15 s, with room for a
    busy machine) is slow, so none times out."""
    result, client, _, journal = run(
        maths, tmp_path, FakeClient(latency=0.05), tasks=2, group_size=8, concurrency=1, rollout_timeout=1.0
    )
    assert client.calls >= 40
    assert not [r["error"] for r in rollouts(journal) if r["error"]]


class Counting(FakeClient):
    def __init__(self):
        super().__init__(latency=0.01)
        self.now = self.peak = 0

    async def create(self, messages, **kwargs):
        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            return await super().create(messages, **kwargs)
        finally:
            self.now -= 1


@pytest.mark.parametrize("limit", [1, 3])
def test_concurrency_bounds_calls_in_flight(maths, tmp_path, limit):
    client = Counting()
    run(maths, tmp_path, client, tasks=4, group_size=3, concurrency=limit)
    assert client.peak == limit


def test_ground_truth_off_rewards_the_majority():
    task = Task(id="t", question="?", answer="7")
    group = Group(
        task=task, rollouts=[Rollout(task_id="t", index=i, traces=[], answer=a) for i, a in enumerate(["5", "5", "7"])]
    )
    from mas.team.scenario import load_scenario

    maths = load_scenario("maths")
    assert reward(maths, group, ground_truth=True).rewards == [0, 0, 1]
    assert reward(maths, group, ground_truth=False).rewards == [1, 1, 0]


def test_ground_truth_off_hides_the_answer_from_the_advantage(maths, tmp_path):
    _, client, *_ = run(maths, tmp_path, tasks=8, ground_truth=False)
    prompts = [r.messages[0] for r in client.requests if r.schema is not None and r.schema.__name__ == "Advantage"]
    assert prompts and all("Correct answer: unknown" in p for p in prompts)
    assert not any(f"Correct answer: {t.answer}\n" in p for p in prompts for t in maths.tasks)


def three_lessons(request):
    if request.schema is not None and request.schema.__name__ == "Advantage":
        n = int(request.unit() * 1000)
        ops = [
            {"op": "add", "library": "solver", "text": f"When solving task kind {n}-{i}, check twice."}
            for i in range(3)
        ]
        return json.dumps({"comparison": "c", "deciding_roles": ["solver"], "operations": ops})
    return default_respond(request)


def test_lessons_per_group_caps_proposals_and_reports_the_rest(maths, tmp_path):
    result, client, *_ = run(maths, tmp_path, FakeClient(three_lessons), tasks=8, batch_size=8, lessons_per_group=1)
    edit = next(r for r in client.requests if stage("EditBatch")(r))
    informative = sum(1 for r in client.requests if r.schema is not None and r.schema.__name__ == "Advantage")
    assert edit.messages[0].count("- add: ") == informative  # one of the three per group...
    refused = result.steps[0].refused_operations
    assert len(refused) == 2 * informative and all("over the limit of 1" in r.reason for r in refused)  # ...and why


def test_max_lessons_caps_each_library(maths, tmp_path):
    _, client, store, _ = run(maths, tmp_path, FakeClient(three_lessons), tasks=8, batch_size=8, max_lessons=2)
    assert len(store.head("solver").lessons) == 2
    assert any("at most 2 lessons" in r.system for r in client.requests if stage("EditBatch")(r))


def test_eval_knobs(maths):
    client = FakeClient()
    result = asyncio.run(
        evaluate(maths, client=client, heads=None, config=EvalConfig(tasks=3, k=4, temperature=0.9, max_tokens=50))
    )
    assert len(result.tasks) == 3 and all(len(t.rewards) == 4 for t in result.tasks)
    assert all(r.settings["temperature"] == 0.9 and r.settings["max_tokens"] == 50 for r in client.requests)
    assert {t.task_id for t in result.tasks} == {t.id for t in maths.held_out[:3]}


def test_eval_seed_concurrency_and_timeout(maths):
    config = EvalConfig(tasks=2, k=2, seed=5, concurrency=1)
    client = Counting()
    asyncio.run(evaluate(maths, client=client, heads=None, config=config))
    other = FakeClient()
    asyncio.run(evaluate(maths, client=other, heads=None, config=config.model_copy(update={"seed": 6})))
    assert client.peak == 1 and {r.seed for r in client.requests}.isdisjoint({r.seed for r in other.requests})
    slow = asyncio.run(
        evaluate(maths, client=FakeClient(latency=0.5), heads=None, config=EvalConfig(tasks=1, rollout_timeout=0.1))
    )
    assert slow.tasks[0].rewards == [0.0] and slow.calls["rollout"].failures == 1


def test_route_global_sends_every_lesson_to_the_global_library(maths, tmp_path):
    _, _, store, _ = run(maths, tmp_path, tasks=8, route="global")
    assert store.head("global").lessons and not store.head("solver").lessons


def test_inject_global_off_leaves_the_global_library_out(maths):
    from mas.library.inject import role_block
    from mas.types.lessons import Budget, Lesson, Version

    heads = {
        "global": Version(
            library="global", number=1, next_id=2, lessons=[Lesson(id="global/0001", text="Shared lesson.")]
        )
    }
    assert role_block(heads, "solver").shown == ["global/0001"]
    assert role_block(heads, "solver", budget=Budget(inject_global=False)).text == ""


def test_group_size_1_learns_against_the_answer(maths, tmp_path):
    result, client, *_ = run(maths, tmp_path, tasks=4, group_size=1)
    assert sum(s.informative for s in result.steps) == 0  # no group has winners and losers...
    assert any(r.schema is not None and r.schema.__name__ == "Advantage" for r in client.requests)  # ...yet it learns


def test_budget_usd_stops_cleanly_and_resumes(maths, tmp_path):
    from mas.cost import Price

    price = Price(prompt=1000.0, completion=1000.0)
    store = LibraryStore(tmp_path / "lib.json")
    config = TrainConfig(tasks=12, batch_size=4, budget_usd=0.5)
    first = asyncio.run(
        train(maths, client=FakeClient(), store=store, run_dir=tmp_path / "run", config=config, price=price)
    )
    assert first.stopped and len(first.steps) == 1 and first.cost_usd >= 0.5
    more = config.model_copy(update={"budget_usd": 100.0})
    second = asyncio.run(
        train(maths, client=FakeClient(), store=store, run_dir=tmp_path / "run", config=more, price=price)
    )
    assert second.stopped is None and len(second.steps) == 3


def test_dollars_per_stage_and_per_role(maths, tmp_path):
    from mas.cost import Price

    price = Price(prompt=1.0, completion=2.0)
    store = LibraryStore(tmp_path / "lib.json")
    result = asyncio.run(
        train(
            maths, client=FakeClient(), store=store, run_dir=tmp_path / "run", config=TrainConfig(tasks=4), price=price
        )
    )
    step = result.steps[0]
    rollout = step.calls["rollout"]
    assert step.stage_cost_usd["rollout"] == pytest.approx(
        (rollout.prompt_tokens + 2 * rollout.completion_tokens) / 1e6
    )
    assert sum(step.role_cost_usd.values()) == pytest.approx(step.stage_cost_usd["rollout"])
    assert step.cost_usd == pytest.approx(sum(step.stage_cost_usd.values())) and result.cost_usd == step.cost_usd


def test_fresh_starts_from_empty_libraries(maths, tmp_path):
    _, _, store = train_on_fake(maths, tmp_path, tasks=8)
    before = {name: v for name, v in store.heads().items() if v.lessons}
    assert before
    asyncio.run(
        train(
            maths, client=FakeClient(), store=store, run_dir=tmp_path / "again", config=TrainConfig(tasks=4, fresh=True)
        )
    )
    for name, head in before.items():
        emptied = store.version(name, head.number + 1)
        assert emptied.lessons == [] and emptied.provenance.stage == "fresh"


@pytest.mark.parametrize("stage_name", ["train", "eval"])
def test_a_large_step_sends_its_first_call_before_building_every_team(maths, tmp_path, monkeypatch, stage_name):
    """All rollouts of a step start at once; without a bound on those building their team, the
    event loop built every team (a few ms each) before any call went out."""
    import mas.team.rollout

    built, first = [0], []
    compose = mas.team.rollout.compose

    def counting(role, *args, **kwargs):
        built[0] += 1
        return compose(role, *args, **kwargs)

    class Watching(FakeClient):
        async def create(self, messages, **kwargs):
            if not first:
                first.append(built[0])
            return await super().create(messages, **kwargs)

    monkeypatch.setattr(mas.team.rollout, "compose", counting)
    roles = len(maths.roles)
    if stage_name == "train":
        run(maths, tmp_path, Watching(), tasks=32, batch_size=32, group_size=4)
    else:
        asyncio.run(evaluate(maths, client=Watching(), heads=None, config=EvalConfig(tasks=32, k=4)))
    assert built[0] >= 128 * roles  # every rollout was built in the end
    assert first[0] <= 2 * mas.team.rollout.STARTING * roles  # the first call went out after a few
