"""A lesson that helps a role it was not written for ends the run in that role.

The world: the solver's prompt starts with three lessons. One raises the team's chance of
success from 0.15 to 0.30 when the solver reads it and by 0.60 more when the *planner* reads
it; one lowers the chance to 0.05 when the planner reads it; one does nothing anywhere. The
model proposes no edits, and a promotion needs three roles, so no promotion carries the first
to the planner; its small effect on the solver is lost in the noise of 12 tasks. After the run's
last step it is in the planner's library, with its trial's evidence in the prunings log; the
two others are adopted by no role. With ``adopt_level`` None the planner ends with nothing.

A second world: the model deletes two of the solver's lessons after the first epoch, one that
does nothing for the solver and much for the planner, and the one that harms the planner. The
planner's trials showed the first helps it: after the last step the planner adopts it, not the
second; with ``adopt_departed`` off, the planner ends with neither. When the model deletes them
after the first two steps, the planner's trial of the first goes on after it left (its e-value
there had reached 3, ``ExposurePolicy.departed``) until it shows that it helps; with the trials
stopped when a lesson leaves, or when the model deletes them after one step (the trial leaned
towards helping, below an e-value of 3), it is adopted by no role.
"""

import asyncio
import json
import re

from mas.config import ExposurePolicy, PromotionPolicy, TrainConfig
from mas.library import hierarchy
from mas.library.store import LibraryStore
from mas.models.fake import FakeClient, Request, shown
from mas.team.scenario import Scenario, load_role
from mas.train import train
from mas.types.lessons import Lesson, Version
from mas.types.tasks import Task

HELPS = "Split the question into the quantities it asks for before any arithmetic."
PLANNER_HARMS = "Skip planning and hand the question straight to the solver."
NOTHING = "Keep each reply to a few short sentences."


PLANNER_ONLY = "List the quantities the question names before choosing an operation."


class World:
    def __init__(self, deletes: int | None = None):
        self.saw: dict[tuple[str, int], list[str]] = {}
        self.deletes, self.answers = deletes, 0
        self.summaries: list[tuple[int, str]] = []  # (answers before it, its prompt)

    def respond(self, request: Request) -> str:
        if request.schema is not None:
            return json.dumps(self.learning(request.schema.__name__, "\n".join(request.messages)))
        role = re.search(r"You are the (\w+)", request.system).group(1)
        if role != "verifier":
            self.saw[(role, request.seed)] = shown(request.system)
            return f"{role} did its part."
        planner, solver = (self.saw.pop((r, request.seed), []) for r in ("planner", "solver"))
        chance = 0.15 + 0.15 * (HELPS in solver) + 0.6 * (HELPS in planner) + 0.6 * (PLANNER_ONLY in planner)
        chance = 0.05 if PLANNER_HARMS in planner else chance
        self.answers += 1
        number = re.search(r"\d+", request.messages[0]).group(0)
        return f"ANSWER: {number if request.unit('outcome') < chance else '0'}"

    def learning(self, schema: str, body: str) -> dict:
        if schema == "Summary":
            self.summaries.append((self.answers, body))
            return {"roles": [], "outcome": "scripted"}
        if schema == "Advantage":
            later = self.deletes is not None and self.answers > self.deletes  # answers so far
            deletes = [{"op": "delete", "id": i, "reason": "scripted"} for i in ("solver/0001", "solver/0002")]
            return {
                "comparison": "scripted",
                "lessons": "scripted",
                "deciding_roles": [],
                "operations": deletes if later else [],
            }
        if schema == "EditBatch":
            deletes = [{"op": "delete", "id": i} for i in re.findall(r"^- delete \[(\S+)\]", body, re.M)]
            return {"edits": deletes or [{"op": "keep"}]}
        return {"reason": "scripted", "same": False, "merged": ""}


def run(
    tmp_path, adopt_level: float | None, deletes: int | None = None, exposure=None, world=None, **policy
) -> tuple[LibraryStore, list[dict]]:
    """``deletes``: the model deletes the solver's lessons once the team has given more than this many
    answers (72: the first epoch, 12 tasks x 6 rollouts)."""
    roles = [load_role(r) for r in ("planner", "solver", "verifier")]
    tasks = [Task(id=f"t{i:02d}", question=f"Report the number {i + 10}.", answer=str(i + 10)) for i in range(12)]
    scenario = Scenario("adopt", roles, tasks, "numeric", test_tasks=[])
    store = LibraryStore(tmp_path / "lib.json")
    texts = [PLANNER_ONLY, PLANNER_HARMS] if deletes is not None else [HELPS, PLANNER_HARMS, NOTHING]
    lessons = [Lesson(id=f"solver/000{i}", text=text) for i, text in enumerate(texts, start=1)]
    store.commit([Version(library="solver", number=1, next_id=len(texts) + 1, lessons=lessons)])
    config = TrainConfig(
        epochs=2,
        seed=3,
        group_size=6,
        promotion=PromotionPolicy(adopt_level=adopt_level, min_roles=3, **policy),
        exposure=exposure or ExposurePolicy(),
    )
    world = world or World(deletes)
    asyncio.run(train(scenario, client=FakeClient(world.respond), store=store, run_dir=tmp_path / "run", config=config))
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


def test_a_lesson_the_model_deleted_ends_the_run_in_the_role_its_trial_shows_it_helps(tmp_path):
    store, moves = run(tmp_path, adopt_level=0.2, deletes=72)
    assert texts(store, "solver") == []  # both deleted by the model's edits
    assert texts(store, "planner") == [PLANNER_ONLY]
    (adopted,) = [m for m in moves if m["kind"] == "adopt"]
    assert adopted["lessons"] == ["solver/0001"] and adopted["roles"] == ["planner"]
    assert adopted["evidence"][0]["e_now"] >= 10 and adopted["reason"].startswith("it left solver")


def test_with_adopt_departed_off_a_deleted_lesson_stays_gone(tmp_path):
    store, moves = run(tmp_path, adopt_level=0.2, deletes=72, adopt_departed=False)
    assert texts(store, "solver") == texts(store, "planner") == []


def test_a_trial_that_went_well_goes_on_after_its_lesson_left_until_it_shows_the_lesson_helps(tmp_path):
    world = World(deletes=24)  # deleted after two steps of 4 tasks
    store, moves = run(tmp_path, adopt_level=0.2, deletes=24, world=world)
    assert texts(store, "solver") == [] and texts(store, "planner") == [PLANNER_ONLY]
    (adopted,) = [m for m in moves if m["kind"] == "adopt"]
    assert adopted["lessons"] == ["solver/0001"] and adopted["reason"].startswith("it left solver")
    assert adopted["evidence"][0]["tasks"] == 12 > 8  # tried on tasks it met after it left
    later = [body for answers, body in world.summaries if answers > 48]  # the steps after it left
    assert later and all(f"[solver/0001] {PLANNER_ONLY}" in body for body in later)  # its words, not its id alone


def test_with_the_trials_stopped_when_a_lesson_leaves_no_role_adopts_it(tmp_path):
    store, moves = run(tmp_path, adopt_level=0.2, deletes=24, exposure=ExposurePolicy(departed=None))
    assert texts(store, "planner") == [] and not [m for m in moves if m["kind"] == "adopt"]
    assert hierarchy.effects(store, PromotionPolicy())[("planner", "solver/0001")].tasks == 8


def test_a_trial_that_only_leaned_towards_helping_stops_when_its_lesson_leaves(tmp_path):
    store, moves = run(tmp_path, adopt_level=0.2, deletes=0)  # deleted after the first step
    planner = hierarchy.effects(store, PromotionPolicy())[("planner", "solver/0001")]
    assert planner.tasks == 4 and planner.effect > 0.3 and planner.e_value < 3
    assert texts(store, "planner") == [] and not [m for m in moves if m["kind"] == "adopt"]
