"""Usage events, the usage log, and the usage graph's queries."""

import pytest

from mas.library import graph
from mas.library.logs import StepKey, StepLog
from mas.stages import Context, numeric_advantages, usage_events
from mas.types import Group, Provenance, RoleSteps, RoleTrace, Rollout, Summary, Task, Turn, UsageEvent

SHOWN = ["global/0001", "solver/0001", "solver/0002"]


def test_numeric_advantage_is_grpo_s():
    assert numeric_advantages([1, 0, 0, 1]) == [1, -1, -1, 1]
    assert numeric_advantages([1, 1, 1]) == [0, 0, 0]
    assert numeric_advantages([1, 0, 0, 0])[0] == pytest.approx(3 / 3**0.5)


def rollout(index, reward, said):
    trace = RoleTrace(role="solver", system_message="You are the solver.", shown=SHOWN, turns=[Turn(content=said)])
    return Rollout(task_id="t", index=index, traces=[trace], answer="1", reward=reward)


def events(group, summaries, *, run, epoch, step):
    ctx = Context(None, None, None, None, None, {}, Provenance(run=run, epoch=epoch, step=step))
    return usage_events(ctx, group, summaries)


def test_events_record_what_was_shown_and_judged_within_the_prompt():
    group = Group(
        task=Task(id="t", question="?"),
        rollouts=[
            rollout(0, 1.0, "Using [solver/0001] and [planner/0009]."),
            rollout(1, 0.0, "No lesson used."),
        ],
    )
    summaries = [
        Summary(roles=[RoleSteps(role="solver", steps=["n"], applied=["solver/0002", "solver/0077"])], outcome="ok"),
        Summary(roles=[RoleSteps(role="solver", steps=["n"], applied=[])], outcome="bad"),
    ]
    first, second = events(group, summaries, run="r", epoch=0, step=3)
    assert first.in_prompt == ["global/0001", "solver/0001", "solver/0002"]
    assert first.cited == [] and first.judged == ["solver/0002"]  # ids not in the prompt are dropped
    assert (first.advantage, second.advantage) == (1.0, -1.0) and second.applied == []


def event(role, lessons, advantage, task="t"):
    return UsageEvent(
        run="r",
        epoch=0,
        step=0,
        task_id=task,
        rollout=0,
        role=role,
        in_prompt=lessons,
        cited=lessons,
        reward=0,
        advantage=advantage,
    )


def test_log_is_append_only_once_per_step_and_survives_a_torn_line(tmp_path):
    log = StepLog(tmp_path / "lib.usage.jsonl", UsageEvent)
    log.append(StepKey("r", 0, 0), [event("solver", ["solver/0001"], 1.0)])
    log.append(StepKey("r", 0, 0), [event("solver", ["solver/0001"], 1.0)])  # a resumed step: ignored
    with log.path.open("a") as f:
        f.write('{"run": "r", "epoch": 0, "step": 1, "ev')
    assert len(list(log.items())) == 1
    log.append(StepKey("r", 0, 1), [event("planner", ["planner/0001"], -1.0)])
    assert [e.role for e in log.items()] == ["solver", "planner"]


def test_graph_queries():
    evs = [event("solver", ["global/0001"], a) for a in (1.0, 0.8, 1.2, 0.9)]
    evs += [event("planner", ["global/0001"], a) for a in (-1.0, -0.8, -1.1, -0.9)]
    evs += [event("verifier", ["global/0001"], a, task=f"t{i}") for i, a in enumerate((1.0, -1.0))]
    g = graph.build(evs)
    e = graph.evidence(g, "global/0001", "solver")
    assert e.uses == 4 and e.mean == pytest.approx(0.975) and 0 < e.lcb < e.mean < e.ucb
    assert graph.roles_helped(g, "global/0001") == ["solver"]
    assert graph.conflicts(g) == [("global/0001", ["solver"], ["planner"])]
    assert graph.pooled(g, ["global/0001"]).uses == 10
    assert g.edges["lesson:global/0001", "task:t"]["uses"] == 8
    assert graph.evidence(g, "solver/0042", "solver").uses == 0
