"""mas.testing: the scripted client fails on an unexpected call and on a scripted call never made."""

import asyncio
import json

import pytest
from autogen_core.models import SystemMessage, UserMessage

from mas.config import TrainConfig
from mas.testing import Rule, ScriptedClient, UnexpectedCall, UnusedRule, journal, stage, system_has, train_on_fake
from mas.types.replies import Summary


def ask(client, system, user="Task: What is 2 + 2?", schema=None):
    messages = [SystemMessage(content=system), UserMessage(content=user, source="user")]
    return asyncio.run(client.create(messages, json_output=schema)).content


def test_rules_answer_by_request_not_by_order():
    client = ScriptedClient([Rule(system_has("solver"), "ANSWER: 4"), Rule(system_has("planner"), "Add them.")])
    assert ask(client, "You are the planner.") == "Add them."
    assert ask(client, "You are the solver.") == "ANSWER: 4"
    client.verify()


def test_an_unexpected_call_fails():
    client = ScriptedClient([Rule(system_has("solver"), "ANSWER: 4")])
    with pytest.raises(UnexpectedCall, match="verifier"):
        ask(client, "You are the verifier.")


def test_a_rule_used_up_fails_the_next_call_and_a_rule_never_used_fails_verify():
    client = ScriptedClient([Rule(stage("Summary"), '{"roles": [], "outcome": "ok"}', times=2)])
    ask(client, "Summarize.", schema=Summary)
    with pytest.raises(UnusedRule, match="1 of 2"):
        client.verify()
    ask(client, "Summarize.", schema=Summary)
    client.verify()
    with pytest.raises(UnexpectedCall):
        ask(client, "Summarize.", schema=Summary)


def test_a_scripted_training_step_makes_exactly_the_learning_calls_expected(maths, tmp_path):
    """One task, G=2, the solver right once and wrong once: one informative group, so two
    summaries, one advantage and one edit call for the solver, and nothing else."""
    summary = json.dumps({"roles": [{"role": "solver", "note": "computed"}], "outcome": "done"})
    add = {"op": "add", "library": "solver", "text": "Compute the sum exactly.", "reason": "the winner did"}
    advantage = json.dumps({"comparison": "c", "deciding_roles": ["solver"], "operations": [add]})
    task = maths.tasks[0]
    first = TrainConfig().sampling(f"e0/s0/{task.id}/0")["seed"]
    client = ScriptedClient(
        [
            Rule(system_has("You are the planner"), "Add the two numbers.", times=2),
            Rule(lambda r: "You are the solver" in r.system and r.seed == first, f"ANSWER: {task.answer}"),
            Rule(system_has("You are the solver"), "ANSWER: -1"),
            Rule(system_has("You are the verifier"), lambda r: "ANSWER: " + r.messages[-1].split()[-1], times=2),
            Rule(stage("Summary"), summary, times=2),
            Rule(stage("Advantage"), advantage, times=1),
            Rule(
                stage("EditBatch"), json.dumps({"edits": [{"op": "add", "text": "Compute the sum exactly."}]}), times=1
            ),
        ]
    )
    result, _, store = train_on_fake(
        maths, tmp_path, client, tasks=1, batch_size=1, group_size=2, promotion={"cadence": "off"}
    )
    client.verify()
    answers = sorted(r["data"]["answer"] for r in journal(tmp_path / "run", "rollout"))
    assert answers == ["-1", task.answer] and result.steps[0].informative == 1 and result.steps[0].mean_reward == 0.5
    assert [l.text for l in store.head("solver").lessons] == ["Compute the sum exactly."]
