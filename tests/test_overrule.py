"""A model that deletes or rewords lessons is overruled by the evidence only where it shows, or leans towards, help.

The world: the solver's prompt starts with two lessons, one that raises the team's chance of
success from 0.15 to 0.85 and one that does nothing. After its first dozen groups the advantage
model asks to delete every solver lesson it sees, the way a weak model deletes what the losers
of one group happened to be shown. The lesson shown to help stays and each refused delete is
kept with its evidence; the one that does nothing goes; with ``overrule`` off both go. A model
that rewords both lessons instead is refused the same way for the first (new words are a new
lesson, without the old words' evidence), and the second's new words take the next id.
"""

import asyncio
import json
import re

from mas.config import PromotionPolicy, TrainConfig
from mas.library.store import LibraryStore
from mas.models.fake import FakeClient, Request, shown
from mas.step.edit import defence
from mas.team.scenario import Scenario, load_role
from mas.train import train
from mas.types.evidence import Effect
from mas.types.lessons import Lesson, Version
from mas.types.tasks import Task

HELPS = "Write every intermediate result down before using it."
NOTHING = "Keep each reply to a few short sentences."
REWORDED = {
    "solver/0001": "Name the units of every number first.",
    "solver/0002": "Say which operation each step uses.",
}
MODIFY = r"^- modify \[(\S+)\] to: (.+?)(?: \(why: .*\))?$"


class World:
    def __init__(self, op: str = "delete", after: int = 12):
        self.groups, self.op, self.after = 0, op, after
        self.solver_saw: dict[int, list[str]] = {}

    def respond(self, request: Request) -> str:
        if request.schema is not None:
            return json.dumps(self.learning(request.schema.__name__, "\n".join(request.messages)))
        role = re.search(r"You are the (\w+)", request.system).group(1)
        if role == "solver":
            self.solver_saw[request.seed] = shown(request.system)
        if role != "verifier":
            return f"{role} did its part."
        chance = 0.85 if HELPS in self.solver_saw.pop(request.seed, []) else 0.15
        number = re.search(r"\d+", request.messages[0]).group(0)
        return f"ANSWER: {number if request.unit('outcome') < chance else '0'}"

    def learning(self, schema: str, body: str) -> dict:
        if schema == "Summary":
            return {"roles": [], "outcome": "scripted"}
        if schema == "Advantage":
            self.groups += 1
            ids = sorted(set(re.findall(r"\b(solver/\d{4})\b", body))) if self.groups > self.after else []
            ops = [{"op": self.op, "id": i, "reason": "the losers followed it"} for i in ids]
            if self.op == "modify":  # new words for each
                ops = [op | {"text": REWORDED[op["id"]]} for op in ops if op["id"] in REWORDED]
            return {"comparison": "scripted", "lessons": "scripted", "deciding_roles": ["solver"], "operations": ops}
        if schema == "EditBatch":
            edits = [{"op": "delete", "id": i} for i in dict.fromkeys(re.findall(r"^- delete \[(\S+)\]", body, re.M))]
            edits += [{"op": "modify", "id": i, "text": t} for i, t in re.findall(MODIFY, body, re.M)]
            return {"edits": edits or [{"op": "keep"}]}
        return {"reason": "scripted", "same": False, "merged": ""}


def run(
    tmp_path, overrule: bool, op: str = "delete", *, after: int = 12, batch_size: int = 4
) -> tuple[dict[str, str], list[dict]]:
    roles = [load_role(r) for r in ("planner", "solver", "verifier")]
    tasks = [Task(id=f"t{i:02d}", question=f"Report the number {i + 10}.", answer=str(i + 10)) for i in range(16)]
    scenario = Scenario("overrule", roles, tasks, "numeric", test_tasks=[])
    store = LibraryStore(tmp_path / "lib.json")
    lessons = [Lesson(id="solver/0001", text=HELPS), Lesson(id="solver/0002", text=NOTHING)]
    store.commit([Version(library="solver", number=1, next_id=3, lessons=lessons)])
    policy = PromotionPolicy(overrule=overrule)
    config = TrainConfig(epochs=2, seed=3, group_size=6, batch_size=batch_size, promotion=policy)
    world = World(op, after)
    asyncio.run(train(scenario, client=FakeClient(world.respond), store=store, run_dir=tmp_path / "run", config=config))
    assert world.groups > after  # the edits were asked for
    refused = [json.loads(line) for line in (tmp_path / "lib.rejected.jsonl").read_text().splitlines() if line]
    return gone(store), refused


def gone(store: LibraryStore) -> dict[str, str]:
    """Lesson text -> the stage of the version that removed it (``edit``: the model's delete)."""
    out, before = {}, {}
    for version in store.versions("solver"):
        now = {l.id: l.text for l in version.lessons}
        out.update({text: version.provenance.stage for i, text in before.items() if i not in now})
        before = now
    return out


def test_a_delete_of_a_lesson_shown_to_help_is_refused_with_its_evidence(tmp_path):
    removed, refused = run(tmp_path, overrule=True)
    assert HELPS not in removed
    assert removed.get(NOTHING) == "edit"  # the model's delete of a lesson not shown to help is applied
    overruled = [r for r in refused if "overrule" in json.dumps(r)]
    assert overruled, "the refused deletes are kept with their reason"
    assert all("solver/0001" in json.dumps(r) and "e-value" in json.dumps(r) for r in overruled)


def test_with_overrule_off_the_model_deletes_what_it_likes(tmp_path):
    removed, refused = run(tmp_path, overrule=False)
    assert removed.get(HELPS) == "edit"
    assert not any("overrule" in json.dumps(r) for r in refused)


def test_the_delete_asked_for_in_a_lessons_first_step_meets_that_steps_evidence(tmp_path):
    """All 16 tasks in one step, and the model asks to delete from its first group on: the
    step's own rollouts randomized the lessons, so their contrasts refuse the delete of the
    one that helps, though no step before has measured it."""
    removed, refused = run(tmp_path, overrule=True, after=0, batch_size=16)
    assert HELPS not in removed
    assert removed.get(NOTHING) == "edit"
    first = [r for r in refused if r["epoch"] == 0 and "overrule" in json.dumps(r)]
    assert first and all("solver/0001" in json.dumps(r) for r in first)


def test_a_modify_that_changes_the_words_of_a_lesson_shown_to_help_is_refused(tmp_path):
    """New words are a new lesson (a new id, its own evidence): a modify retires the old words,
    so the evidence that refuses their delete refuses it too; the lesson that does nothing is
    reworded under the library's next id."""
    removed, refused = run(tmp_path, overrule=True, op="modify")
    assert HELPS not in removed
    assert removed.get(NOTHING) == "edit"
    overruled = [item for r in refused for item in r["items"] if "overrule the modify" in item["reason"]]
    assert overruled and all(item["edit"]["id"] == "solver/0001" for item in overruled)
    held = {
        (lesson.id, lesson.text) for v in LibraryStore(tmp_path / "lib.json").versions("solver") for lesson in v.lessons
    }
    assert ("solver/0003", REWORDED["solver/0002"]) in held and ("solver/0002", REWORDED["solver/0002"]) not in held
    removed, _ = run(tmp_path / "off", overrule=False, op="modify")
    assert removed.get(HELPS) == "edit"


def evidence(tasks: int, effect: float, se: float, e_value: float = 2.0) -> Effect:
    return Effect(
        role="solver", lesson="solver/0001", tasks=tasks, contrasts=tasks, exposures=2 * tasks,
        effect=effect, lcb=effect - 2 * se, ucb=effect + 2 * se, se=se, e_value=e_value, e_now=e_value,
    )  # fmt: skip


def test_a_delete_is_refused_where_the_run_end_would_keep_the_lesson():
    """``overrule_level``: evidence that leans towards helping over ``min_tasks`` tasks refuses the
    delete though the e-value is far from 1/alpha; a small estimate in its noise, or evidence
    from too few tasks, does not; with the level None only the test that promotes refuses."""
    policy = PromotionPolicy()  # min_tasks 5, alpha 0.1, overrule_level 0.2
    leaning = evidence(tasks=8, effect=0.10, se=0.05)  # 80% bound: 0.10 - 0.90 * 0.05 > 0
    assert "leans towards helping the solver" in defence(leaning, policy)
    assert defence(evidence(tasks=8, effect=0.03, se=0.05), policy) is None  # bound below zero
    assert defence(evidence(tasks=4, effect=0.30, se=0.05), policy) is None  # too young to be judged
    assert defence(evidence(tasks=8, effect=-0.10, se=0.01), policy) is None
    assert defence(leaning, policy.model_copy(update={"overrule_level": None})) is None
    shown = evidence(tasks=8, effect=0.10, se=0.05, e_value=12.0)
    assert "shows it helps the solver (e-value 12" in defence(shown, policy.model_copy(update={"overrule_level": None}))
