"""A full library takes a new lesson in the place of one whose estimate is below zero.

The world: the solver's library starts full (two lessons, ``max_lessons`` 2): one that raises
the team's chance of success from 0.3 to 0.8, one that lowers it by 0.2. From its fifth group
(the second step) on, the advantage model proposes one new lesson and never deletes: the way
a weak model adds to a library it was told is full. With ``make_room`` the harmful lesson
leaves by the edit that takes the new one, in the step that first proposes it, and the
prunings log says why, with its evidence; the lesson that helps stays. Off, that add is
refused ("library is full"), and the new lesson waits until a prune leaves a place.
"""

import asyncio
import json
import re
from types import SimpleNamespace

from mas.config import PromotionPolicy, TrainConfig
from mas.library import promotion
from mas.library.logs import SideFiles
from mas.library.store import LibraryStore
from mas.models.fake import FakeClient, Request, shown
from mas.step.edit import made_room
from mas.team.scenario import Scenario, load_role
from mas.train import train
from mas.types.evidence import Effect
from mas.types.lessons import Add, Lesson, Version
from mas.types.tasks import Task

HELPS = "Write every intermediate result down before using it."
HARMS = "Answer with the first number that comes to mind."
NEW = "Read the question twice before answering."


class World:
    def __init__(self):
        self.groups = 0
        self.solver_saw: dict[int, list[str]] = {}

    def respond(self, request: Request) -> str:
        if request.schema is not None:
            return json.dumps(self.learning(request.schema.__name__, "\n".join(request.messages)))
        role = re.search(r"You are the (\w+)", request.system).group(1)
        if role == "solver":
            self.solver_saw[request.seed] = shown(request.system)
        if role != "verifier":
            return f"{role} did its part."
        saw = self.solver_saw.pop(request.seed, [])
        chance = (0.8 if HELPS in saw else 0.3) - (0.2 if HARMS in saw else 0)
        number = re.search(r"\d+", request.messages[0]).group(0)
        return f"ANSWER: {number if request.unit('outcome') < chance else '0'}"

    def learning(self, schema: str, body: str) -> dict:
        if schema == "Summary":
            return {"roles": [], "outcome": "scripted"}
        if schema == "Advantage":
            self.groups += 1
            ops = [{"op": "add", "library": "solver", "text": NEW, "reason": "the winners did this"}]
            ops = ops if self.groups > 4 else []
            return {"comparison": "scripted", "lessons": "scripted", "deciding_roles": ["solver"], "operations": ops}
        if schema == "EditBatch":
            adds = re.findall(r"^- add: (.+?)(?: \(why: .*\))?$", body, re.M)
            return {"edits": [{"op": "add", "text": t} for t in dict.fromkeys(adds)] or [{"op": "keep"}]}
        return {"reason": "scripted", "same": False, "merged": ""}


def run(tmp_path, make_room: bool) -> tuple[LibraryStore, list[dict]]:
    roles = [load_role(r) for r in ("planner", "solver", "verifier")]
    tasks = [Task(id=f"t{i:02d}", question=f"Report the number {i + 10}.", answer=str(i + 10)) for i in range(16)]
    scenario = Scenario("room", roles, tasks, "numeric", test_tasks=[])
    store = LibraryStore(tmp_path / "lib.json")
    lessons = [Lesson(id="solver/0001", text=HELPS), Lesson(id="solver/0002", text=HARMS)]
    store.commit([Version(library="solver", number=1, next_id=3, lessons=lessons)])
    policy = PromotionPolicy(make_room=make_room)
    config = TrainConfig(epochs=2, seed=3, group_size=6, batch_size=4, max_lessons=2, promotion=policy)
    world = World()
    asyncio.run(train(scenario, client=FakeClient(world.respond), store=store, run_dir=tmp_path / "run", config=config))
    assert world.groups > 4  # the adds were proposed
    refused = [json.loads(line) for line in (tmp_path / "lib.rejected.jsonl").read_text().splitlines() if line]
    return store, refused


def test_a_full_library_takes_a_new_lesson_in_the_place_of_one_whose_estimate_is_below_zero(tmp_path):
    store, refused = run(tmp_path, make_room=True)
    first = next(v for v in store.versions("solver") if NEW in [lesson.text for lesson in v.lessons])
    assert first.provenance.stage == "edit" and [l.text for l in first.lessons] == [HELPS, NEW]
    assert any(e.op == "delete" and e.id == "solver/0002" for e in first.edits)
    made = [m for m in SideFiles(store.path).prunings.items() if "made room" in m.reason]
    assert [m.lessons for m in made] == [["solver/0002"]]
    assert made[0].evidence[0].effect < 0 and made[0].evidence[0].tasks >= PromotionPolicy().min_tasks
    assert "full library (2 lessons)" in made[0].reason
    assert not any("library is full" in json.dumps(r) for r in refused)
    assert HELPS in [lesson.text for lesson in store.head("solver").lessons]


def test_without_make_room_the_new_lesson_is_refused_until_a_prune_leaves_a_place(tmp_path):
    store, refused = run(tmp_path, make_room=False)
    full = [r for r in refused if "library is full" in json.dumps(r)]
    assert full and (full[0]["epoch"], full[0]["step"]) == (0, 1)
    gone = next(v for v in store.versions("solver") if HARMS not in [lesson.text for lesson in v.lessons])
    assert gone.provenance.stage == "prune" and NEW not in [lesson.text for lesson in gone.lessons]
    assert not any("made room" in m.reason for m in SideFiles(store.path).prunings.items())


def effect(lesson: str, tasks: int, estimate: float) -> Effect:
    return Effect(
        role="solver", lesson=lesson, tasks=tasks, contrasts=tasks, exposures=2 * tasks,
        effect=estimate, lcb=estimate - 0.2, ucb=estimate + 0.2, se=0.1,
    )  # fmt: skip


def test_room_gives_up_the_lowest_estimates_below_zero_tried_long_enough():
    lessons = [Lesson(id=f"solver/000{i}", text=f"lesson number {i}") for i in range(1, 6)]
    version = Version(library="solver", number=4, next_id=6, lessons=lessons)
    effects = {
        ("solver", "solver/0001"): effect("solver/0001", 9, -0.05),
        ("solver", "solver/0002"): effect("solver/0002", 3, -0.4),  # too young to judge
        ("solver", "solver/0003"): effect("solver/0003", 12, 0.02),  # above zero
        ("solver", "solver/0004"): effect("solver/0004", 7, -0.12),
        ("planner", "solver/0005"): effect("solver/0005", 20, -0.3),  # a trial in another role
    }
    policy = PromotionPolicy(make_room=True)

    def room(wanted: int, policy: PromotionPolicy = policy) -> list[str]:
        return [m.lessons[0] for m in promotion.room(version, wanted, effects, policy, limit=5)]

    assert room(1) == ["solver/0004"]
    assert room(5) == ["solver/0004", "solver/0001"]
    assert room(0) == [] and room(2, policy.model_copy(update={"make_room": False})) == []


def test_no_lesson_gives_way_where_the_add_would_not_fit_even_so_nor_in_review():
    """A library already past its limit (a lowered ``max_lessons``) gives up its weak lessons only
    if that lets an add in; with edits held for review, a person decides."""
    lessons = [Lesson(id=f"solver/000{i}", text=f"lesson number {i}") for i in range(1, 5)]
    heads = {
        "solver": Version(library="solver", number=4, next_id=5, lessons=lessons),
        "global": Version.empty("global"),
    }
    weak = {("solver", f"solver/000{i}"): effect(f"solver/000{i}", 8, -0.1 * i) for i in range(1, 5)}
    add = [Add(op="add", text="Read the question twice before answering.")]

    def made(effects: dict, review: bool = False) -> list[str]:
        config = TrainConfig(max_lessons=2, review=review, promotion=PromotionPolicy(make_room=True))
        ctx = SimpleNamespace(config=config, heads=heads, effects=effects, room=[])
        deletes = made_room(ctx, "solver", add, [])
        assert [d.id for d in deletes] == [m.lessons[0] for m in ctx.room]
        return [d.id for d in deletes]

    assert made(weak) == ["solver/0004", "solver/0003", "solver/0002"]  # 4 + 1 - 2: three give way
    two = {k: v for k, v in weak.items() if k[1] in ("solver/0001", "solver/0002")}
    assert made(two) == []  # two would leave 3 lessons: the add still would not fit
    assert made(weak, review=True) == []
