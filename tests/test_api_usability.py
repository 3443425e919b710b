"""The Python API as a new user meets it: mistakes are one-line ``mas.UserError``s naming the
argument, results read well, and the names the README uses exist."""

import asyncio

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.teams import RoundRobinGroupChat

import mas

ROLES = {"writer": "You are the writer. Draft the answer.", "reviewer": "You are the reviewer. Check it."}
UNITS = "When quantities have units, convert them to the same unit before adding them."
TASKS = [mas.Task(id=f"t{i}", question=f"What is {i} + 1?", answer=str(i + 1)) for i in range(10)]


def team_of(*names):
    def make(system_messages, client, task):
        agents = [AssistantAgent(n, model_client=client, system_message=system_messages.get(n, n)) for n in names]
        return RoundRobinGroupChat(agents, max_turns=len(agents))

    return make


def scenario(**changes):
    arguments = {"roles": ROLES, "team": team_of("writer", "reviewer"), "tasks": TASKS, "reward": lambda t, a: 1.0}
    return mas.custom_scenario("demo", **{**arguments, **changes})


def test_a_role_that_no_agent_of_the_team_is_named_after_is_refused_at_construction():
    """It trained a library that no agent ever read, and said nothing."""
    with pytest.raises(
        mas.UserError, match=r"team: no agent is named 'reviewer' \(the team's agents: editor, writer\)"
    ):
        scenario(team=team_of("writer", "editor"))


def test_a_team_factory_that_fails_is_refused_at_construction_with_its_error_as_the_cause():
    """It failed in every rollout instead, with a traceback."""

    def broken(system_messages, client, task):
        return RoundRobinGroupChat([AssistantAgent("writer", model_client=client, system_message=system_messages["w"])])

    with pytest.raises(mas.UserError, match=r"team: building the team failed: KeyError: 'w'") as caught:
        scenario(team=broken)
    assert isinstance(caught.value.__cause__, KeyError)  # the user's own traceback is kept


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"roles": ["writer", "reviewer"]}, r"roles: expected a dict of role name to system prompt"),
        ({"roles": {}}, r"roles: expected a dict"),
        ({"roles": {"my writer": "x", "reviewer": "y"}}, r"roles: 'my writer' is not a role name"),
        ({"roles": {"global": "x", "reviewer": "y"}}, r"roles: 'global' is the name of the library every role shares"),
        ({"roles": {"writer": None, "reviewer": "y"}}, r"roles\['writer'\]: expected the role's system prompt"),
        ({"reward": "numeric"}, r"reward: expected a function, got str 'numeric'"),
        ({"team": None}, r"team: expected a function"),
        ({"tasks": TASKS + TASKS[:1]}, r"tasks\[10\]: task id 't0' is used twice"),
        ({"tasks": [{"id": "a"}]}, r"tasks\[0\]\.question: Field required"),
        ({"tasks": [object()]}, r"tasks\[0\]: expected a mas.Task, got object"),
        ({"tasks": "tasks.jsonl"}, r"tasks: expected a list of mas.Task, got str"),
        ({"test_tasks": TASKS[:1]}, r"test_tasks\[0\]: task 't0' is also in tasks"),
        ({"team": lambda s, c, t: "a team"}, r"team: expected an autogen team .*, got str"),
    ],
)
def test_each_bad_argument_is_one_line_naming_it(changes, message):
    with pytest.raises(mas.UserError, match=message) as caught:
        scenario(**changes)
    assert "\n" not in str(caught.value)


def test_a_scenario_name_that_cannot_name_a_file_is_refused_as_load_scenario_refuses_it():
    with pytest.raises(mas.UserError, match=r"name: 'a/b' is not a name"):
        mas.custom_scenario(
            "a/b", roles=ROLES, team=team_of("writer", "reviewer"), tasks=TASKS, reward=lambda t, a: 1.0
        )


def test_tasks_may_be_dicts_of_their_fields():
    """What a user has after reading a JSONL file; it failed with AttributeError: 'dict' object has no attribute 'id'."""
    made = scenario(tasks=[{"id": "a", "question": "What is 1 + 1?", "answer": "2"}], test_tasks=[])
    assert made.tasks == [mas.Task(id="a", question="What is 1 + 1?", answer="2")]


def test_a_scenario_prints_in_one_short_line():
    """The dataclass's own repr printed every role prompt and every task."""
    assert repr(scenario()) == "Scenario('demo', roles=['writer', 'reviewer'], tasks=10, held_out=0, reward='custom')"


@pytest.mark.parametrize("reward", [None, "1", [1.0]])
def test_a_reward_that_is_not_a_number_stops_training_with_one_line_naming_the_task(tmp_path, reward):
    """It stopped it with TypeError: must be real number, not NoneType, from math.isfinite."""
    made = scenario(reward=lambda task, answer: reward)
    run = mas.train(
        made,
        client=mas.FakeClient(),
        store=mas.LibraryStore(tmp_path / "lib.json"),
        run_dir=tmp_path / "run",
        config=mas.TrainConfig(tasks=1, group_size=2, batch_size=1),
    )
    with pytest.raises(mas.UserError, match=r"the reward of task 't\d+' is .* expected a number$"):
        asyncio.run(run)


def test_a_reward_may_be_a_bool_or_an_int(tmp_path):
    made = scenario(reward=lambda task, answer: answer == task.answer)
    rollout_ok = made.score(TASKS[0], _rollout(TASKS[0], "1"))
    assert rollout_ok == 1.0 and isinstance(rollout_ok, float)


def _rollout(task, answer):
    from mas.types.rollouts import Rollout

    return Rollout(task_id=task.id, index=0, traces=[], answer=answer)


def test_load_library_refuses_a_missing_file_as_lesson_memory_does(tmp_path):
    """A mistyped path gave no lessons, and a prompt without them, silently."""
    with pytest.raises(mas.UserError, match="no such library file"):
        mas.load_library(str(tmp_path / "missing.json"))
    with pytest.raises(mas.UserError, match="no such library file"):
        mas.LessonMemory(tmp_path / "missing.json", role="writer")


def test_load_library_takes_a_path_and_lessons_are_public(tmp_path):
    store = mas.LibraryStore(tmp_path / "lib.json")
    store.commit(
        [mas.Version(library="writer", number=1, lessons=[mas.Lesson(id="writer/0001", text="t" * 9)], next_id=2)]
    )
    assert list(mas.load_library(tmp_path / "lib.json")) == ["writer"]


def test_the_settings_and_results_the_readme_names_are_public():
    """The README writes ``PromotionPolicy(...)``, ``ExposurePolicy(...)`` and ``Budget``; ``on_step``
    gets a ``StepReport``; the embedded model's death raises ``Stopped``."""
    config = mas.TrainConfig(promotion=mas.PromotionPolicy(cadence="epoch"), exposure=mas.ExposurePolicy(trials=0))
    assert config.promotion.cadence == "epoch" and config.exposure.trials == 0
    assert mas.Budget().inject == "relevant"
    assert {"StepReport", "Stopped", "Lesson", "Budget"} <= set(mas.__all__)
    assert issubclass(mas.Stopped, Exception) and mas.StepReport.__name__ == "StepReport"


def test_a_script_for_your_own_team_can_hand_the_learning_calls_to_the_fake(tmp_path):
    """The README's offline recipe: ``mas.testing.default_respond`` answers the learning calls."""
    from mas.testing import default_respond

    def respond(request):
        if request.schema is not None:
            return default_respond(request)
        if "You are the writer" not in request.system:
            return "Checked."
        return f"ANSWER: {request.messages[0].split()[2] if request.unit('w') < 0.5 else -5}"

    made = scenario(reward=lambda task, answer: float(answer is not None and int(answer) + 1 == int(task.answer)))
    result = asyncio.run(
        mas.train(
            made,
            client=mas.FakeClient(respond),
            store=mas.LibraryStore(tmp_path / "lib.json"),
            run_dir=tmp_path / "run",
            config=mas.TrainConfig(tasks=4, group_size=4, batch_size=4),
        )
    )
    assert result.steps[0].informative > 0 and sum(result.steps[0].applied.values()) > 0


def test_train_and_evaluate_take_paths_and_dicts_as_the_rest_of_the_api_does(tmp_path):
    """``LibraryStore`` and ``LessonMemory`` take a path as a string; ``train`` failed on one with
    TypeError ('str' / 'str'), on a library path with AttributeError ('str' object has no
    attribute 'path'), and on a dict of settings with AttributeError ('dict' object has no
    attribute 'budget'). ``evaluate`` failed on a ``LibraryStore`` as ``heads`` ('items')."""
    made = scenario(tasks=TASKS[:6], test_tasks=TASKS[6:8])
    result = asyncio.run(
        mas.train(
            made,
            client=mas.FakeClient(),
            store=str(tmp_path / "lib.json"),
            run_dir=str(tmp_path / "run"),
            config={"tasks": 2, "group_size": 2, "batch_size": 2},
        )
    )
    assert result.run == "run" and len(result.steps) == 1 and (tmp_path / "run" / "journal.jsonl").exists()
    scored = asyncio.run(
        mas.evaluate(made, client=mas.FakeClient(), heads=mas.LibraryStore(tmp_path / "lib.json"), config={"k": 1})
    )
    assert len(scored.tasks) == 2
    assert "<2 task scores>" in repr(scored) and "TaskScore" not in repr(scored)


@pytest.mark.parametrize("call", ["train", "evaluate"])
def test_a_bad_setting_in_a_dict_is_one_line_naming_it(tmp_path, call):
    made = scenario(tasks=TASKS[:6], test_tasks=TASKS[6:8])
    if call == "train":
        run = mas.train(
            made, client=mas.FakeClient(), store=tmp_path / "lib.json", run_dir=tmp_path / "run", config={"epochs": 0}
        )
    else:
        run = mas.evaluate(made, client=mas.FakeClient(), heads=None, config={"kk": 1})
    with pytest.raises(mas.UserError, match=r"^config\.(epochs: Input should be greater than|kk: Extra inputs)"):
        asyncio.run(run)
    assert not (tmp_path / "run").exists()


def test_nothing_to_train_on_or_to_score_is_said_not_reported_as_a_result(tmp_path):
    """No training task made a run of no step; no held-out task a Mean@k of 0.00 [0.00, 0.00]."""
    none_to_train = scenario(tasks=[], test_tasks=TASKS[:2])
    with pytest.raises(mas.UserError, match="scenario 'demo' has no tasks to train on"):
        asyncio.run(
            mas.train(none_to_train, client=mas.FakeClient(), store=tmp_path / "lib.json", run_dir=tmp_path / "run")
        )
    assert not (tmp_path / "run").exists()
    none_held_out = scenario(tasks=TASKS[:4], test_tasks=[])
    with pytest.raises(mas.UserError, match="scenario 'demo' has no held-out tasks to score"):
        asyncio.run(mas.evaluate(none_held_out, client=mas.FakeClient(), heads=None))


def test_the_evidence_of_a_library_file_is_public(tmp_path):
    """A user studying transfer needed ``mas.library.hierarchy.effects(store, PromotionPolicy())``."""
    maths = mas.load_scenario("maths")
    config = mas.TrainConfig(tasks=8, batch_size=4, group_size=4)
    asyncio.run(mas.train(maths, client=mas.FakeClient(), store=tmp_path / "lib.json", run_dir=tmp_path / "run",
                          config=config))  # fmt: skip
    found = mas.evidence(tmp_path / "lib.json")
    assert found and all(isinstance(e, mas.Effect) and (e.role, e.lesson) == key for key, e in found.items())
    assert {role for role, _ in found} <= {"planner", "solver", "verifier", "global"}
    with pytest.raises(mas.UserError, match="no such library file"):
        mas.evidence(tmp_path / "missing.json")


def test_system_message_takes_a_library_store_composed_as_trained(tmp_path):
    """The README's inference line passed ``budget=store.composition()``, which is None for a
    library that was never trained, and ``system_message`` failed on None."""
    solver = mas.load_scenario("maths").role("solver")
    store = mas.LibraryStore(tmp_path / "lib.json")
    store.commit(
        [mas.Version(library="solver", number=1, next_id=2, lessons=[mas.Lesson(id="solver/0001", text=UNITS)])]
    )
    assert store.composition() is None
    assert UNITS in mas.system_message(solver, store, task="What is 3 m + 20 cm?")
    assert mas.system_message(solver, store, task="x") == mas.system_message(solver, store.heads(), task="x")
    assert mas.system_message(solver, store.heads(), budget=None) == mas.system_message(solver, store.heads())
