"""A lesson that helps a role it was not written for ends the run in that role.

The world: the solver's prompt starts with three lessons. One raises the team's chance of
success from 0.15 to 0.30 when the solver reads it and by 0.60 more when the *planner* reads
it; one lowers the chance to 0.05 when the planner reads it; one does nothing anywhere. The
model proposes no edits, and a promotion needs three roles, so no promotion carries the first
to the planner; its small effect on the solver is lost in the noise of 12 tasks. After the run's
last step it is in the planner's library, with its trial's evidence in the prunings log; the
two others are adopted by no role. With ``adopt_level`` None the planner ends with nothing.
"""

import asyncio
import json
import re

from mas.config import PromotionPolicy, TrainConfig
from mas.library.store import LibraryStore
from mas.models.fake import FakeClient, Request, shown
from mas.team.scenario import Scenario, load_role
from mas.train import train
from mas.types.lessons import Lesson, Version
from mas.types.tasks import Task

HELPS = "Split the question into the quantities it asks for before any arithmetic."
PLANNER_HARMS = "Skip planning and hand the question straight to the solver."
NOTHING = "Keep each reply to a few short sentences."


class World:
    def __init__(self):
        self.saw: dict[tuple[str, int], list[str]] = {}

    def respond(self, request: Request) -> str:
        if request.schema is not None:
            return json.dumps(self.learning(request.schema.__name__))
        role = re.search(r"You are the (\w+)", request.system).group(1)
        if role != "verifier":
            self.saw[(role, request.seed)] = shown(request.system)
            return f"{role} did its part."
        planner, solver = (self.saw.pop((r, request.seed), []) for r in ("planner", "solver"))
        chance = 0.15 + 0.15 * (HELPS in solver) + 0.6 * (HELPS in planner)
        chance = 0.05 if PLANNER_HARMS in planner else chance
        number = re.search(r"\d+", request.messages[0]).group(0)
        return f"ANSWER: {number if request.unit('outcome') < chance else '0'}"

    def learning(self, schema: str) -> dict:
        if schema == "Summary":
            return {"roles": [], "outcome": "scripted"}
        if schema == "Advantage":
            return {"comparison": "scripted", "lessons": "scripted", "deciding_roles": [], "operations": []}
        if schema == "EditBatch":
            return {"edits": [{"op": "keep"}]}
        return {"reason": "scripted", "same": False, "merged": ""}


def run(tmp_path, adopt_level: float | None) -> tuple[LibraryStore, list[dict]]:
    roles = [load_role(r) for r in ("planner", "solver", "verifier")]
    tasks = [Task(id=f"t{i:02d}", question=f"Report the number {i + 10}.", answer=str(i + 10)) for i in range(12)]
    scenario = Scenario("adopt", roles, tasks, "numeric", test_tasks=[])
    store = LibraryStore(tmp_path / "lib.json")
    texts = [HELPS, PLANNER_HARMS, NOTHING]
    lessons = [Lesson(id=f"solver/000{i}", text=text) for i, text in enumerate(texts, start=1)]
    store.commit([Version(library="solver", number=1, next_id=4, lessons=lessons)])
    policy = PromotionPolicy(adopt_level=adopt_level, min_roles=3)
    config = TrainConfig(epochs=2, seed=3, group_size=6, promotion=policy)
    asyncio.run(
        train(scenario, client=FakeClient(World().respond), store=store, run_dir=tmp_path / "run", config=config)
    )
    logged = [json.loads(line) for line in (tmp_path / "lib.prunings.jsonl").read_text().splitlines() if line]
    return store, [move for step in logged for move in step["items"]]


def texts(store: LibraryStore, library: str) -> list[str]:
    head = store.heads().get(library)
    return [l.text for l in head.lessons] if head else []


def test_a_lesson_whose_trial_shows_it_helps_another_role_ends_the_run_there(tmp_path):
    store, moves = run(tmp_path, adopt_level=0.2)
    assert texts(store, "planner") == [HELPS]
    assert HELPS not in texts(store, "verifier") + texts(store, "global")
    adopted = [m for m in moves if m["kind"] == "adopt"]
    assert [(m["lessons"], m["roles"], m["into"]) for m in adopted] == [(["solver/0001"], ["planner"], "planner/0001")]
    (trial,) = adopted[0]["evidence"]
    assert trial["role"] == "planner" and trial["trial"] and trial["tasks"] >= 5 and trial["effect"] > 0.3
    assert "leans towards helping" in adopted[0]["reason"]


def test_with_adoption_off_the_role_a_lesson_helps_ends_without_it(tmp_path):
    store, moves = run(tmp_path, adopt_level=None)
    assert texts(store, "planner") == [] and not [m for m in moves if m["kind"] == "adopt"]
