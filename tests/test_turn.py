"""A lesson whose effect turns leaves at the run's end; a steady one stays.

The world: the solver's prompt starts with two lessons. One adds 0.3 to the team's chance of
success (0.25 without either) when the solver reads it, in every epoch. The other adds 0.35 in
the first two epochs and takes 0.2 away in the third (a rule that held for the early tasks and
not for the later ones). Over the whole run the second still leans towards helping, so the end
rule by its bound alone (``end_level``) keeps it; its last third of steps (the third epoch)
shows it harming, below what it did before, and it leaves, with why in the prunings log. With
``turn_level`` None it stays.

A second world (``Shared``): one lesson helps the solver and the verifier for two epochs and
harms both in the third. Promoted to the global library while it helped, it is demoted at the
run's end, the turns in the demotion's reason; with ``turn_level`` None it stays global.
"""

import asyncio
import json
import math
import re

from mas.config import PromotionPolicy, TrainConfig
from mas.library import promotion
from mas.library.evidence import Tally
from mas.library.ledger import Ledger
from mas.library.logs import StepKey, StepLog
from mas.library.store import LibraryStore
from mas.models.fake import FakeClient, Request, shown
from mas.team.scenario import Scenario, load_role
from mas.train import train
from mas.types.evidence import Effect
from mas.types.lessons import Lesson, Version
from mas.types.tasks import Task
from mas.types.usage import UsageEvent

STEADY = "Write the final number with its units before replying."
TURNS = "Round every intermediate result to a whole number."
TASKS, GROUP = 12, 6


class World:
    def __init__(self):
        self.answers = 0

    def respond(self, request: Request) -> str:
        if request.schema is not None:
            return json.dumps(self.learning(request.schema.__name__))
        role = re.search(r"You are the (\w+)", request.system).group(1)
        if role == "solver":
            epoch = self.answers // (TASKS * GROUP)  # the verifier answers once a rollout
            lessons = shown(request.system)
            turn = (0.35 if epoch < 2 else -0.2) * (TURNS in lessons)
            chance = 0.25 + 0.3 * (STEADY in lessons) + turn
            return "ANSWER: {}".format(
                re.search(r"\d+", request.messages[0]).group(0) if request.unit("o") < chance else 0
            )
        if role == "verifier":
            self.answers += 1
            solved = re.findall(r"ANSWER: (\d+)", "\n".join(request.messages))
            return f"ANSWER: {solved[-1] if solved else 0}"
        return f"{role} did its part."

    def learning(self, schema: str) -> dict:
        if schema == "Summary":
            return {"roles": [], "outcome": "scripted"}
        if schema == "Advantage":
            return {"comparison": "scripted", "lessons": "scripted", "deciding_roles": [], "operations": []}
        if schema == "EditBatch":
            return {"edits": [{"op": "keep"}]}
        return {"reason": "scripted", "same": False, "merged": ""}


def train_in(tmp_path, world: World, libraries: list[Version], log: str, seed: int = 1, **policy) -> tuple:
    """Three epochs of the world's team from ``libraries``: the heads after, and the moves of
    ``<library>.<log>.jsonl`` with their epoch."""
    roles = [load_role(r) for r in ("planner", "solver", "verifier")]
    tasks = [Task(id=f"t{i:02d}", question=f"Report the number {i + 10}.", answer=str(i + 10)) for i in range(TASKS)]
    store = LibraryStore(tmp_path / "lib.json")
    store.commit(libraries)
    config = TrainConfig(epochs=3, seed=seed, group_size=GROUP, batch_size=TASKS, promotion=PromotionPolicy(**policy))
    scenario = Scenario("turn", roles, tasks, "numeric", test_tasks=[])
    asyncio.run(train(scenario, client=FakeClient(world.respond), store=store, run_dir=tmp_path / "run", config=config))
    logged = [json.loads(line) for line in (tmp_path / f"lib.{log}.jsonl").read_text().splitlines() if line]
    return store.heads(), [move | {"epoch": step["epoch"]} for step in logged for move in step["items"]]


def run(tmp_path, **policy) -> tuple[list[str], list[dict]]:
    lessons = [Lesson(id=f"solver/000{i}", text=text) for i, text in enumerate((STEADY, TURNS), start=1)]
    library = Version(library="solver", number=1, next_id=3, lessons=lessons)
    heads, moves = train_in(tmp_path, World(), [library], "prunings", **policy)
    return [l.text for l in heads["solver"].lessons], moves


def test_a_lesson_that_turned_leaves_and_a_steady_one_stays(tmp_path):
    kept, moves = run(tmp_path)
    assert kept == [STEADY]
    [move] = [m for m in moves if m["kind"] == "prune"]
    assert move["text"] == TURNS and move["reason"].startswith("it turned: -")
    assert move["evidence"][0]["effect"] > 0  # over the whole run it still looks helpful


def test_without_the_test_for_a_turn_it_stays(tmp_path):
    kept, moves = run(tmp_path, turn_level=None)
    assert kept == [STEADY, TURNS]
    assert [m for m in moves if m["kind"] == "prune"] == []


def effect(value: float, tasks: int, se: float = 0.05) -> Effect:
    return Effect(
        role="solver", lesson="solver/0001", tasks=tasks, contrasts=tasks, exposures=tasks, effect=value, se=se,
        lcb=-1, ucb=1,
    )  # fmt: skip


def test_a_turn_is_a_late_estimate_below_zero_and_below_the_early_one():
    policy = PromotionPolicy()  # min_tasks 5, turn_level 0.2: z 0.84
    key = ("solver", "solver/0001")
    turned = promotion.turns({key: effect(0.10, 10)}, {key: effect(-0.02, 5)}, policy)
    assert list(turned) == [key] and "-0.020 over 5 tasks" in turned[key]
    assert promotion.turns({key: effect(-0.03, 10)}, {key: effect(-0.02, 5)}, policy) == {}  # no lower than before
    assert promotion.turns({key: effect(0.10, 10)}, {key: effect(-0.02, 4)}, policy) == {}  # too few tasks late
    assert promotion.turns({key: effect(0.10, 4)}, {key: effect(-0.02, 5)}, policy) == {}  # too few tasks early
    drop = 0.12 / math.hypot(0.05, 0.05)  # the difference in standard errors: turned at 0.84, not at 2
    assert drop > 0.84 and promotion.turns({key: effect(0.10, 10)}, {key: effect(-0.02, 5)}, policy) != {}
    assert promotion.turns({key: effect(0.10, 10)}, {key: effect(-0.02, 5)}, PromotionPolicy(turn_level=0.02)) == {}
    assert promotion.turns({key: effect(0.10, 10)}, {key: effect(-0.02, 5)}, PromotionPolicy(turn_level=None)) == {}


def events(step: int, shown_to: list[bool], rewards: list[float]) -> list[UsageEvent]:
    return [
        UsageEvent(
            run="r",
            epoch=0,
            step=step,
            task_id=f"t{step}",
            role="solver",
            rollout=i,
            shown=["solver/0001"] * s,
            randomized=["solver/0001"],
            reward=r,
            advantage=0.0,
        )  # fmt: skip
        for i, (s, r) in enumerate(zip(shown_to, rewards))
    ]


def test_the_windows_are_the_last_third_of_the_steps_and_those_before(tmp_path):
    log = StepLog(tmp_path / "lib.usage.jsonl", UsageEvent, tmp_path / "lib.json")
    ledger = Ledger(log)
    helps, harms = (
        ([True, True, False, False], [1.0, 1.0, 0.0, 0.0]),
        ([True, True, False, False], [0.0, 0.0, 1.0, 1.0]),
    )
    for step, (shown_to, rewards) in enumerate([helps, helps]):
        log.append(StepKey("r", 0, step), events(step, shown_to, rewards))
    assert ledger.windows() == ({}, {})  # two steps: no last third
    log.append(StepKey("r", 0, 2), events(2, *harms))
    early, late = ledger.windows()
    key = ("solver", "solver/0001")
    assert (early[key].tasks, early[key].effect, late[key].tasks, late[key].effect) == (2, 1.0, 1, -1.0)
    for step in (3, 4, 5):
        log.append(StepKey("r", 0, step), events(step, *harms))
    early, late = ledger.windows()  # six steps: the last two
    assert (early[key].tasks, early[key].effect, late[key].tasks, late[key].effect) == (4, 0.0, 2, -1.0)


class Shared(World):
    """TURNS helps the solver and the verifier alike for two epochs and harms both in the
    third: the team's chance is 0.3, and 0.3 more (then 0.3 less) for each of the two roles
    shown TURNS; the solver says in its answer whether it was shown it."""

    def respond(self, request: Request) -> str:
        if request.schema is not None:
            return json.dumps(self.learning(request.schema.__name__))
        role = re.search(r"You are the (\w+)", request.system).group(1)
        shown_to = TURNS in shown(request.system)
        if role == "solver":
            number = re.search(r"\d+", request.messages[0]).group(0)
            return f"ANSWER: {number}" + " (rounded)" * shown_to
        if role == "verifier":
            epoch = self.answers // (TASKS * GROUP)
            self.answers += 1
            talk = "\n".join(request.messages)
            turn = 0.3 if epoch < 2 else -0.3
            chance = 0.3 + turn * (shown_to + ("(rounded)" in talk))
            answer = re.findall(r"ANSWER: (\d+)", talk)[-1]
            return f"ANSWER: {answer if request.unit('v') < chance else 0}"
        return f"{role} did its part."


def run_shared(tmp_path, **policy) -> tuple[dict[str, list[str]], list[dict]]:
    libraries = [
        Version(library=r, number=1, next_id=2, lessons=[Lesson(id=f"{r}/0001", text=TURNS)])
        for r in ("solver", "verifier")
    ]
    heads, moves = train_in(tmp_path, Shared(), libraries, "promotions", **policy)
    return {name: [l.text for l in v.lessons] for name, v in heads.items()}, moves


def test_a_global_lesson_that_turned_is_demoted(tmp_path):
    """Promoted while it helped both roles, the lesson is taken out of the global library after
    the last step, with the turns in the demotion's reason; with ``turn_level`` None it stays
    global (the outcome holds on each of the 5 of 12 coin seeds in which it is promoted)."""
    kept, moves = run_shared(tmp_path)
    assert [(m["kind"], m["epoch"]) for m in moves] == [("promote", 1), ("demote", 2)]
    assert "solver: it turned: -" in moves[1]["reason"] and "verifier: it turned: -" in moves[1]["reason"]
    assert moves[1]["roles"] == [] and kept["global"] == []
    kept, moves = run_shared(tmp_path / "off", turn_level=None)
    assert [(m["kind"], m["epoch"]) for m in moves] == [("promote", 1)] and kept["global"] == [TURNS]


def test_a_turn_takes_a_role_from_those_a_global_lesson_can_help():
    heads = {"global": Version(library="global", number=1, next_id=2, lessons=[Lesson(id="global/0001", text="g")])}
    tallies = {}
    for role in ("solver", "verifier"):
        tallies[(role, "global/0001")] = out = Tally()
        for i in range(12):
            out.add(f"t{i}", 1.2, 0.6, 0.5)
    turn = "it turned: -0.1 over 6 tasks in the last third of the steps, +0.5 over 6 before"

    def moves(*turned: str):
        return promotion.plan(
            heads, tallies, PromotionPolicy(), same=lambda a, b: False, roles=["solver", "verifier"],
            turned={(role, "global/0001"): turn for role in turned},
        )  # fmt: skip

    assert moves() == []
    [demoted] = moves("solver")
    assert demoted.kind == "demote" and demoted.roles == ["verifier"]
    assert demoted.reason == f"can help at most 1 of the 2 roles it needs; solver: {turn}"
    assert [m.roles for m in moves("solver", "verifier")] == [[]]
