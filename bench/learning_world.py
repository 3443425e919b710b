"""Does the hierarchy learn the right things? A scripted world where the truth is known.

The world: a maths-like team (planner, solver, verifier) on 40 tasks of varied difficulty.
Planted lessons each have a true effect per role on the chance that the team succeeds when
that role's prompt shows them (+0.10 to +0.15 for a lesson that helps, -0.10 to -0.20 for one
that harms): some help one role, some several, some none, some harm. Effects add up to a
ceiling (0.95), so they saturate near the top, and two of the solver's lessons are redundant:
either alone helps, both together help no more. None of this is what the estimator assumes.

The learning calls are noisy, like a real model's: the proposer names a wrong role 30% of the
time, proposes harmful lessons, neutral ones, paraphrases and negations, and now and then a
delete of a random lesson; the editor drops one add in ten; the equivalence judge errs one time
in ten. The confounds that fooled the old evidence rule are switched on: the summarizer judges
a lesson "applied" in 70% of the winning rollouts that showed it and 30% of the losing ones.

The team's true success with a set of libraries is computed exactly from the world (the mean
over 200 fresh tasks of the success probability with what each role's prompt would show at
inference), never sampled. Reported, side by side in one run, for the randomized evidence
(mas as it is) and for the old rule (lessons always shown; a lesson "helps" a role when the
mean numeric advantage of the rollouts judged to apply it has a one-sided normal bound above
zero over 5 uses; private lessons only ever reach their own role; near-duplicates by shared
words):

- share of the achievable gain reached after 3 epochs of 40 tasks at default settings:
  (final - no library) / (best library within budget - no library);
- promotion precision and recall against the planted cross-role lessons;
- false promotions in the null world (every effect zero, confounds on), over 20 seeds;
- epochs until a harmful private lesson, planted in the solver's library at the start, leaves.

Goals (issue 26): share >= 0.95, precision >= 0.95, recall >= 0.70, false promotions in <= 1
of 20 null-world seeds, the harmful lesson gone within 2 epochs.

Printed beside recall: the recall reachable with each run's own evidence, that is the planted
cross-role lessons that mas's estimate, tested once at the end of the run and knowing every twin,
shows helping each of their roles, at the level of mas's last look and with all of alpha at one
look (``reachable``). It says how much the data held: at 40 tasks, 0.72 with all of alpha at one
look, so recall 0.8 is out of reach of any test of this estimate at this error rate.

The planted world runs 24 seeds: recall is a share of 3 lessons a seed, and over 6 seeds its
standard error was 0.12 (it is printed beside it); over 24 seeds it is about 0.05, so a
difference between two rows below 0.1 needs more seeds (``--seeds``, ``--null-seeds``): mas's
recall was 0.67 on seeds 0-23 and 0.59 on 24-95. The worlds draw every number from the call's
seed, not its prompt (``hard_world.draw``): two rows of one seed that show different lessons
draw the same numbers for the same calls, so their paired difference is theirs, not two draws
of the world's chance. A row's own luck on a seed is another matter: mas's run seed
(``settings={"seed": ...}``) draws the exposures, the task order and every call anew on the same
world.
``--more-data`` adds mas at 80 tasks an epoch and with groups of 8 rollouts, the rest
unchanged: what recall gains from more data.
The seeds run in parallel, one process each.

``--hard`` runs the same table for a world written apart from the estimator
(``bench/hard_world.py``: log-odds effects under a ceiling, effects that vary by task and
drift across epochs, a cross-role interaction, negations that hurt and paraphrases that do
nothing, a judge with systematic errors, a proposer that is mostly wrong and rewords lessons
(into their negations too), grader noise), beside today's world (mas only: the old rule is
left out to save time). Its rows are the hard world with each of the judge's four errors
(always "same", "same" for pairs sharing many words, never "same", "same" for a lesson and its
paraphrase that drops the condition), 12 planted and 20 null seeds each. Its cross-role
lessons are its own truth's (helping two roles on average over tasks at the end), and its
goals: share >= 0.8, precision >= 0.9, false promotions in <= 1 of 20 null seeds, no lesson
left in any library that truly harms a role it reaches (recall stated, no goal). One flag per
feature (``--log-odds``, ``--by-task``, ``--drift``, ``--interaction``, ``--twins``,
``--proposer``, ``--grader-noise``, ``--rewords``, ``--judge``; ``--no-...`` turns one off
under ``--hard``, and 0 the two shares).

    .venv/bin/python bench/learning_world.py               # the full run (about 10 minutes on 2 cores)
    .venv/bin/python bench/learning_world.py --more-data   # and with more data (about 35 minutes)
    .venv/bin/python bench/learning_world.py --paper       # and at the paper's size, 100 tasks (about 40 minutes)
    .venv/bin/python bench/learning_world.py --quick       # fewer seeds
    .venv/bin/python bench/learning_world.py --seeds 96 --null-seeds 40 --no-today   # more (about 40 minutes)
    .venv/bin/python bench/learning_world.py --hard        # today's world and the hard world (15-40 minutes)
    .venv/bin/python bench/learning_world.py --hard --no-drift --judge never   # one feature off, one judge
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import re
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import hard_lessons
import today_rule
from hard_world import HARD, JUDGES, HardWorld, Switches, draw

from mas.config import ExposurePolicy, PromotionPolicy, TrainConfig, ablated
from mas.library import evidence, hierarchy, promotion
from mas.library.inject import role_block
from mas.library.logs import SideFiles
from mas.library.store import LibraryStore
from mas.models.fake import FakeClient, Request, shown
from mas.team.scenario import Scenario, load_role
from mas.train import train
from mas.types.evidence import Effect, PromotionMove
from mas.types.lessons import GLOBAL, Lesson, Version
from mas.types.tasks import Task

ROLES = ("planner", "solver", "verifier")
BASE = 0.1
"""Chance of success of the team with no lesson, on a task of average difficulty."""
FLOOR, CEILING = 0.02, 0.95


@dataclass(frozen=True)
class Planted:
    key: str
    texts: tuple[str, ...]
    """The canonical text, then paraphrases (same lesson, other words)."""
    negation: str
    """A text that says the opposite: a different lesson, which does not help."""
    effect: dict[str, float] = field(default_factory=dict)


PLANTED = [
    Planted(
        "expression",
        (
            "When a task has several operations, write the whole expression with parentheses before computing.",
            "Before computing anything, set down the full expression, parentheses included, if the task combines operations.",
            "For multi-step arithmetic, first write out the complete expression with its brackets, then compute.",
        ),
        "When a task has several operations, compute each part in your head without writing the expression.",
        {"planner": 0.15, "solver": 0.15},
    ),
    Planted(
        "estimate",
        (
            "When a result comes back, compare it with a rough estimate before passing it on.",
            "Check every returned result against a quick mental estimate before you hand it over.",
            "Before passing a result on, make sure it is close to a rough estimate of the answer.",
        ),
        "When a result comes back, pass it on at once without comparing it with any estimate.",
        {"solver": 0.15, "verifier": 0.15},
    ),
    Planted(
        "units",
        (
            "When quantities come with units, keep each unit next to its number at every step.",
            "Carry the unit of every quantity along with its number through each step.",
            "At each step, write every number together with its unit.",
        ),
        "When quantities come with units, drop the units and work with bare numbers.",
        {},
    ),
    Planted(
        "reread",
        (
            "When the question asks for a specific quantity, reread it before giving the final answer.",
            "Before the final answer, read the question again to confirm which quantity it asks for.",
            "Reread the question just before answering, to be sure of the quantity wanted.",
        ),
        "When the question asks for a specific quantity, answer without rereading it.",
        {"planner": 0.15, "verifier": 0.15},
    ),
    Planted(
        "order",
        (
            "When several steps depend on each other, do them in the order the question states them.",
            "Follow the order the question gives when its steps depend on one another.",
            "Keep dependent steps in the sequence the question lays out.",
        ),
        "When several steps depend on each other, do the easiest one first whatever the question says.",
        {"solver": 0.12},
    ),
    Planted(
        "calculator",
        (
            "When a product or a quotient has more than one digit on each side, use the calculator.",
            "Use the calculator for any product or quotient of multi-digit numbers.",
            "Multi-digit products and quotients go to the calculator, not to mental arithmetic.",
        ),
        "When a product has more than one digit on each side, compute it mentally instead of with the calculator.",
        {"solver": 0.12},
    ),
    Planted(
        "plan",
        (
            "When the task has more than two steps, number the steps of the plan.",
            "Number each step of the plan whenever the task takes more than two steps.",
            "Write plans of three or more steps as a numbered list.",
        ),
        "When the task has more than two steps, write the plan as one paragraph without numbers.",
        {},
    ),
    Planted(
        "reverse",
        (
            "When checking a result, redo the last operation in reverse.",
            "To check a result, undo the last operation and see whether you get back the input.",
            "Verify by running the final operation backwards.",
        ),
        "When checking a result, trust it without redoing any operation.",
        {"verifier": 0.12},
    ),
    Planted(
        "aloud",
        (
            "When the numbers are small, say each one aloud before using it.",
            "Name each small number out loud before you use it.",
            "Say small numbers aloud before working with them.",
        ),
        "When the numbers are small, never say them aloud.",
        {},
    ),
    Planted(
        "color",
        (
            "When the plan is long, highlight its key words in your head.",
            "Mentally highlight the key words of a long plan.",
            "In a long plan, keep its key words highlighted in mind.",
        ),
        "When the plan is long, do not highlight anything.",
        {},
    ),
    Planted(
        "guess",
        (
            "When a result is slow to compute, give the first number that comes to mind.",
            "If computing takes long, answer with whatever number comes to mind first.",
            "Answer with your first guess when a computation would take long.",
        ),
        "When a result is slow to compute, never guess a number.",
        {"planner": -0.1, "solver": -0.2, "verifier": -0.1},
    ),
    Planted(
        "skip",
        (
            "When the solver sounds confident, skip the check.",
            "Skip checking when the result is stated with confidence.",
            "A confident result needs no check: skip it.",
        ),
        "When the solver sounds confident, still check the result.",
        {"verifier": -0.15},
    ),
]
CROSS_ROLE = {p.key for p in PLANTED if sum(v > 0 for v in p.effect.values()) >= 2}
HARMFUL = next(p for p in PLANTED if p.key == "guess")
REDUNDANT = ("calculator", "order")
"""Two lessons doing one job for the solver: together they help no more than one of them."""


class World:
    """The team, the proposer, the editor, the summarizer and the judge, all in one scripted
    responder; the world's state is per rollout (keyed by its seed), never global."""

    def __init__(self, seed: int, *, null: bool = False):
        self.rng, self.null = random.Random(seed), null
        self.identity: dict[str, tuple[str, bool]] = {}
        for p in PLANTED:
            for text in p.texts:
                self.identity[_norm(text)] = (p.key, False)
            self.identity[_norm(p.negation)] = (p.key, True)
        self.effects = {p.key: ({} if null else dict(p.effect)) for p in PLANTED}
        self.difficulty: dict[str, float] = {}
        self.seen: dict[int, dict[str, list[str]]] = {}

    # -- the truth

    def gain(self, role: str, texts: list[str]) -> float:
        keys = [self.identity[_norm(t)] for t in texts if _norm(t) in self.identity]
        plain = {k for k, negated in keys if not negated}
        total = sum(self.effects[k].get(role, 0.0) for k in plain)
        if role == "solver" and set(REDUNDANT) <= plain and not self.null:
            total -= min(self.effects[k].get(role, 0.0) for k in REDUNDANT)
        return total

    def success(self, task: str, shown_by_role: dict[str, list[str]]) -> float:
        chance = BASE + self.difficulty.get(task, 0.0) + sum(self.gain(r, t) for r, t in shown_by_role.items())
        return min(CEILING, max(FLOOR, chance))

    # -- the scripted model

    def respond(self, request: Request):
        if request.schema is not None:
            return json.dumps(self._learning(request))
        role = re.search(r"You are the (\w+)", request.system).group(1)
        task = request.messages[0]
        self.seen.setdefault(request.seed, {})[role] = shown(request.system)
        if role != "verifier":
            return f"{role} did its part."
        chance = self.success(task, self.seen.pop(request.seed))
        number = re.search(r"\d+", task).group(0)
        return f"ANSWER: {number if draw(request, 'outcome') < chance else '0'}"

    def _learning(self, request: Request) -> dict:
        name = request.schema.__name__
        body = "\n".join(request.messages)
        if name == "Summary":
            return self._summary(request, body)
        if name == "Advantage":
            return self._advantage(request, body)
        if name == "EditBatch":
            return self._edit(request, body)
        if name == "Equivalence":
            return self._equivalence(request, body)
        raise ValueError(name)

    def _summary(self, request: Request, body: str) -> dict:
        won = "(reward 1)" in body
        roles = []
        for section in body.split("\n## ")[1:]:
            role = section.split("\n", 1)[0].strip()
            listed = re.search(r"^Lessons shown: (.*)$", section, re.M)
            ids = [i for i in listed.group(1).split(", ") if i != "none"] if listed else []
            applied = [i for i in ids if draw(request, f"judged {role} {i}") < (0.7 if won else 0.3)]
            roles.append({"role": role, "steps": ["did its part"], "applied": applied})
        return {"roles": roles, "outcome": "right" if won else "wrong"}

    def _advantage(self, request: Request, body: str) -> dict:
        u = partial(draw, request)
        kind = u("kind")
        helpful = [p for p in PLANTED if any(v > 0 for v in p.effect.values())]
        if kind < 0.6:
            p, negated = helpful[int(u("p") * len(helpful))], False
        elif kind < 0.75:
            p, negated = [q for q in PLANTED if not q.effect][int(u("n") * 2)], False
        elif kind < 0.88:
            p, negated = [q for q in PLANTED if any(v < 0 for v in q.effect.values())][int(u("h") * 2)], False
        else:
            p, negated = helpful[int(u("g") * len(helpful))], True
        text = p.negation if negated else p.texts[int(u("t") * len(p.texts))]
        helped = [r for r, v in p.effect.items() if v > 0]
        role = helped[int(u("r") * len(helped))] if helped and u("right") < 0.7 else ROLES[int(u("w") * 3)]
        ops = [{"op": "add", "library": role, "text": text, "reason": "the winners did this"}]
        ids = re.findall(r"^\[(\S+)\] ", body, re.M)
        if ids and u("delete") < 0.1:
            ops.append({"op": "delete", "id": ids[int(u("d") * len(ids))], "reason": "the losers followed it"})
        return {"comparison": "scripted", "lessons": "scripted", "deciding_roles": [role], "operations": ops}

    def _edit(self, request: Request, body: str) -> dict:
        adds = re.findall(r"^- add: (.+?)(?: \(why: .*\))?$", body, re.M)
        edits = [{"op": "add", "text": t} for i, t in enumerate(adds) if draw(request, f"drop {i}") >= 0.1]
        edits += [{"op": "delete", "id": i} for i in re.findall(r"^- delete \[(\S+)\]", body, re.M)]
        return {"edits": edits or [{"op": "keep"}]}

    def _equivalence(self, request: Request, body: str) -> dict:
        a, b = re.findall(r"^Lesson [AB]: (.+)$", body, re.M)
        same = self.identity.get(_norm(a), (a, False)) == self.identity.get(_norm(b), (b, False))
        if draw(request, "judge errs") < 0.1:
            same = not same
        return {"reason": "scripted", "same": same, "merged": a if same else ""}

    # -- measuring a library

    def true_success(self, heads: dict[str, Version], tasks: list[Task]) -> float:
        total = 0.0
        for task in tasks:
            prompts = {r: [l.text for l in _lessons(heads, r, task.question)] for r in ROLES}
            total += self.success(task.question, prompts)
        return total / len(tasks)

    def best(self, tasks: list[Task]) -> float:
        return self._mean(tasks, self._best_lessons())

    def _best_lessons(self) -> dict[str, list[str]]:
        return {
            r: [
                p.texts[0]
                for p in PLANTED
                if self.effects[p.key].get(r, 0) > 0 and not (r == "verifier" and p.key == REDUNDANT[1])
            ]
            for r in ROLES
        }

    def _mean(self, tasks: list[Task], lessons: dict[str, list[str]]) -> float:
        return sum(self.success(t.question, lessons) for t in tasks) / len(tasks)

    def cross_role_effects(self, tasks: list[Task]) -> tuple[float, float]:
        """The true effect of a planted cross-role lesson on one of its roles, averaged over
        them: alone (against no library), and in the best library (against that library
        without it), where the ceiling leaves it next to nothing to add."""
        lessons = self._best_lessons()
        best, nothing = self._mean(tasks, lessons), self._mean(tasks, {})
        alone, within = [], []
        for p in PLANTED:
            for role in (r for r, v in p.effect.items() if v > 0 and p.key in CROSS_ROLE):
                only = {r: [p.texts[0]] if r == role else [] for r in ROLES}
                alone.append(self._mean(tasks, only) - nothing)
                less = {r: [x for x in texts if not (r == role and x == p.texts[0])] for r, texts in lessons.items()}
                within.append(best - self._mean(tasks, less))
        return sum(alone) / len(alone), sum(within) / len(within)


def _norm(text: str) -> str:
    return " ".join(text.lower().split()).rstrip(".")


def _lessons(heads: dict[str, Version], role: str, question: str) -> list[Lesson]:
    block = role_block(heads, role, task=question)
    by_id = {l.id: l for v in heads.values() for l in v.lessons}
    return [by_id[i] for i in block.shown]


def scenario(world: World, n: int, *, seed: int, prefix: str = "w") -> Scenario:
    rng = random.Random(seed)
    tasks = []
    for i in range(n):
        question = f"Report the number {rng.randint(10, 999)} ({prefix}{i})."
        world.difficulty[question] = rng.uniform(-0.15, 0.15)
        tasks.append(Task(id=f"{prefix}{i:03d}", question=question, answer=re.search(r"\d+", question).group(0)))
    return Scenario("world", [load_role(r) for r in ROLES], tasks, "numeric", test_tasks=[])


# -- the old rule, kept here to compare with ---------------------------------------------------


def old_rule_moves(store: LibraryStore, *, min_uses: int = 5, z: float = 1.645) -> list[PromotionMove]:
    """Promotions by the rule mas used before randomized exposure: judged uses, mean numeric
    advantage, a normal bound, private lessons only for their own role, clusters by words."""
    heads = store.heads()
    sums: dict[tuple[str, str], list[float]] = {}
    for e in SideFiles(store.path).usage.items():
        for lesson in e.judged:
            sums.setdefault((e.role, lesson), []).append(e.advantage)

    def bound(values: list[float]) -> tuple[float, float]:
        n = len(values)
        mean = sum(values) / n
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else math.inf
        return mean, mean - z * sd / math.sqrt(n)

    private = [(v.library, l) for v in heads.values() if v.library != GLOBAL for l in v.lessons]
    clusters: list[list[tuple[str, Lesson]]] = []
    for item in private:
        for cluster in clusters:
            if any(_jaccard(item[1].text, other.text) >= 0.6 for _, other in cluster):
                cluster.append(item)
                break
        else:
            clusters.append([item])
    moves = []
    for cluster in clusters:
        helped = []
        for role in sorted({r for r, _ in cluster}):
            values = [a for r, l in cluster if r == role for a in sums.get((role, l.id), [])]
            if len(values) >= min_uses and bound(values)[1] > 0:
                helped.append(role)
        if len(helped) >= 2:
            moves.append(
                PromotionMove(
                    kind="promote",
                    text=cluster[0][1].text,
                    lessons=[l.id for _, l in cluster],
                    evidence=[],
                    roles=helped,
                )
            )
    return moves


def _jaccard(a: str, b: str) -> float:
    x, y = set(re.findall(r"[a-z]+", a.lower())), set(re.findall(r"[a-z]+", b.lower()))
    return len(x & y) / len(x | y) if x | y else 0.0


# -- one run -----------------------------------------------------------------------------------


@dataclass
class Outcome:
    share: float
    promoted: list[str]
    """Planted keys of the promoted lessons ("?" for a text the world does not know)."""
    harmful_gone: int | None
    """The epoch after which the planted harmful lesson had left the solver's library (1-based)."""
    judging: float = 0.0
    """Equivalence judgements (model calls) per training step, with the promotion passes'."""
    reachable: dict[str, int] = field(default_factory=dict)
    """Test -> planted cross-role lessons that one test at that level, on the evidence the
    run gathered and knowing every twin, would have found helping each of their roles."""
    cross: frozenset[str] = frozenset()
    """The world's cross-role lessons (the hard world's from its own truth at the end)."""
    harmful_left: int = 0
    """Lessons in the final libraries that truly harm a role they reach."""
    bad_merges: int = 0
    adopted: int = 0
    """Lessons a role adopted from another's trial at the run's end (``PromotionPolicy.adopt_level``)."""
    """Promoted lessons still in the global library that merged lessons of different truth."""


def run(
    seed: int,
    *,
    null: bool = False,
    old: bool = False,
    tasks: int = 40,
    epochs: int = 3,
    group_size: int = 5,
    hard: Switches | None = None,
    settings: dict | None = None,
) -> Outcome:
    """One seed of today's world, or of the hard world (``bench/hard_world.py``) with ``hard``'s
    switches; ``settings``: changes to mas's training settings (``mas.config.ablated``)."""
    config = ablated(TrainConfig(epochs=epochs, seed=seed, group_size=group_size), settings or {})
    with tempfile.TemporaryDirectory(prefix="world-") as folder:
        if hard is not None:
            return _run_hard(Path(folder), seed, replace(hard, null=null), tasks, config)
        return _run(Path(folder), seed, null=null, old=old, tasks=tasks, config=config)


def _start(folder: Path, text: str) -> LibraryStore:
    """A store whose solver library starts with the planted harmful lesson."""
    store = LibraryStore(folder / "lib.json")
    store.commit([Version(library="solver", number=1, next_id=2, lessons=[Lesson(id="solver/0001", text=text)])])
    return store


def _run(folder: Path, seed: int, *, null: bool, old: bool, tasks: int, config: TrainConfig) -> Outcome:
    world = World(seed, null=null)
    train_scenario = scenario(world, tasks, seed=seed)
    held = scenario(world, 200, seed=seed + 10_000, prefix="h").tasks
    store = _start(folder, HARMFUL.texts[0])
    if old:
        config = config.model_copy(
            update={"exposure": ExposurePolicy(off=True), "promotion": PromotionPolicy(cadence="off")}
        )
    result = asyncio.run(
        train(train_scenario, client=FakeClient(world.respond), store=store, run_dir=folder / "run", config=config)
    )
    judging = sum(s.calls["equivalence"].calls for s in result.steps if "equivalence" in s.calls) / len(result.steps)
    if old:
        moves = old_rule_moves(store)
        versions, moves = promotion.execute(
            moves, store.heads(), provenance=store.head("solver").provenance.model_copy(update={"stage": "promotion"})
        )
        store.commit(versions)
    else:
        moves = [m for _, step in SideFiles(store.path).promotions.steps() for m in step]
    heads = store.heads()
    empty = world.true_success({}, held)
    share = (world.true_success(heads, held) - empty) / max(world.best(held) - empty, 1e-9)
    promoted = [world.identity.get(_norm(m.text), ("?", False))[0] for m in moves if m.kind == "promote"]
    known = lambda text: str(world.identity.get(_norm(text), ("?", False)))  # noqa: E731
    harmful = sum(
        world.gain(role, [lesson.text]) < 0
        for version in heads.values()
        for lesson in version.lessons
        for role in (ROLES if version.library == GLOBAL else [version.library])
    )
    return Outcome(
        share,
        promoted,
        _harmful_gone(store),
        judging,
        {} if old else reachable(world, store),
        frozenset(CROSS_ROLE),
        harmful,
        _bad_merges(store, moves, known),
        sum(s.adopted for s in result.steps),
    )


def train_hard(folder: Path, seed: int, switches: Switches, tasks: int, config: TrainConfig):
    """Train mas on one seed of the hard world in ``folder``: the world, the store, the
    held-out questions and the training result."""
    world = HardWorld(seed, switches, epochs=config.epochs, group_size=config.group_size)
    rows = [Task(id=i, question=q, answer=a) for i, q, a in world.make_tasks(tasks, seed=seed)]
    held = [q for _, q, _ in world.make_tasks(200, seed=seed + 10_000, prefix="h")]
    train_scenario = Scenario("world", [load_role(r) for r in ROLES], rows, "numeric", test_tasks=[])
    store = _start(folder, hard_lessons.HARMFUL.texts[0])
    client = FakeClient(world.respond, record=False)
    result = asyncio.run(train(train_scenario, client=client, store=store, run_dir=folder / "run", config=config))
    return world, store, held, result


def _run_hard(folder: Path, seed: int, switches: Switches, tasks: int, config: TrainConfig) -> Outcome:
    """One seed of the hard world; its truth is the world's own."""
    world, store, held, result = train_hard(folder, seed, switches, tasks, config)
    judging = sum(s.calls["equivalence"].calls for s in result.steps if "equivalence" in s.calls) / len(result.steps)
    moves = [m for _, step in SideFiles(store.path).promotions.steps() for m in step]
    heads = store.heads()
    show = lambda role, question: [l.text for l in _lessons(heads, role, question)]  # noqa: E731
    empty = world.true_success({}, held)
    share = (world.true_success(show, held) - empty) / max(world.best(held) - empty, 1e-9)
    placed = [(l.text, list(ROLES) if v.library == GLOBAL else [v.library]) for v in heads.values() for l in v.lessons]
    return Outcome(
        share,
        [world.key(m.text) for m in moves if m.kind == "promote"],
        _harmful_gone(store),
        judging,
        cross=frozenset(world.cross_role(held)),
        harmful_left=len(world.harmful(show, placed, held)),
        bad_merges=_bad_merges(store, moves, world.key),
        adopted=sum(s.adopted for s in result.steps),
    )


def _bad_merges(store: LibraryStore, moves: list[PromotionMove], key) -> int:
    """Promoted lessons still in the global library at the end that merged lessons the world
    says differ (a negation, a paraphrase without the condition, another lesson): the merges
    an always-"same" judge makes, which the evidence should have undone."""
    texts = {l.id: l.text for library in store.libraries() for v in store.versions(library) for l in v.lessons}
    head = store.heads().get(GLOBAL)
    kept = {_norm(l.text) for l in head.lessons} if head else set()
    return sum(
        len({key(texts[i]) for i in m.lessons if i in texts}) > 1 and _norm(m.text) in kept
        for m in moves
        if m.kind == "promote"
    )


REACHABLE = ("e-value", "one t test")
"""The tests of the reachable bound: mas's own (the e-value reaching 1/alpha), and a single
t test at the end with all of alpha (0.05, one-sided) spent on it."""


def reachable(world: World, store: LibraryStore) -> dict[str, int]:
    """How many planted cross-role lessons the run's own randomized evidence shows helping
    every one of their roles, with the world's knowledge of twins (every paraphrase of a
    lesson, in any library, counted as one treatment), after the run: by mas's own test, and
    by one t test at the end at 0.05.

    It is what mas's evidence could show with the data the run gathered, had it found every
    twin itself. A lesson the t test misses is one that no single test of this estimate at
    0.05 could promote from these data. (An early look can still pass a lesson whose effect the
    later, fuller libraries wear down, so the bound holds on average, not seed by seed.)"""
    twins = {}
    for library in store.libraries():
        for lesson in (l for version in store.versions(library) for l in version.lessons):
            key, negated = world.identity.get(_norm(lesson.text), ("", True))
            if key in CROSS_ROLE and not negated:
                twins[lesson.id] = key
    tallies = evidence.contrasts(SideFiles(store.path).usage, classes=twins)  # a defaultdict
    policy = PromotionPolicy()

    def helps(role: str, key: str, test: str) -> bool:
        e = evidence.effect_of(role, key, tallies[(role, key)], 0.05)
        return promotion.helps(e, policy) if test == REACHABLE[0] else e.tasks >= policy.min_tasks and e.lcb > 0

    cross = [p for p in PLANTED if p.key in CROSS_ROLE]
    return {
        test: sum(all(helps(role, p.key, test) for role, v in p.effect.items() if v > 0) for p in cross)
        for test in REACHABLE
    }


def coverage(world: World, store: LibraryStore, questions: dict[str, str]) -> list[tuple[Effect, float]]:
    """Each (role, lesson) estimate of the run's end with at least five tasks, beside the
    world's exact truth for it: in every group where its showing to the role was randomized,
    the mean over the group's rollouts of the chance of success with the lesson (and its twins)
    in the role's prompt minus that without, the groups weighed as the estimate weighs them
    (n_shown * n_hidden / n). ``questions`` maps a task id to its question."""
    policy = PromotionPolicy()
    lineage, twins = hierarchy.lineage(store), hierarchy.snapshot(store, policy).classes
    texts = {l.id: l.text for name in store.libraries() for v in store.versions(name) for l in v.lessons}
    unit = lambda lesson: twins.get(evidence._current(lesson, lineage), evidence._current(lesson, lineage))  # noqa: E731
    members: dict[str, set[str]] = {}
    for lesson in texts:
        members.setdefault(unit(lesson), set()).add(texts[lesson])
    truth: dict[tuple[str, str], list[float]] = {}
    for _, step in SideFiles(store.path).usage.steps():
        rollouts: dict[tuple, dict[str, list[str]]] = {}
        groups: dict[tuple, list] = {}
        for e in step:
            rollouts.setdefault((e.task_id, e.rollout), {})[e.role] = [texts[i] for i in e.shown if i in texts]
            if e.randomized:
                groups.setdefault((e.task_id, e.role), []).append(e)
        for (task, role), events in groups.items():
            for u in {unit(i) for i in events[0].randomized}:
                shown = sum(any(unit(i) == u for i in e.shown) for e in events)
                if not 0 < shown < len(events):
                    continue
                gaps = []
                for e in events:
                    prompts = rollouts[(task, e.rollout)]
                    without = [t for t in prompts[role] if t not in members[u]]
                    on = world.success(questions[task], {**prompts, role: without + sorted(members[u])})
                    gaps.append(on - world.success(questions[task], {**prompts, role: without}))
                weight = shown * (len(events) - shown) / len(events)
                sums = truth.setdefault((role, u), [0.0, 0.0])
                sums[0] += weight * sum(gaps) / len(gaps)
                sums[1] += weight
    estimates = evidence.estimate(SideFiles(store.path).usage, lineage=lineage, classes=twins)
    return [
        (estimates[key], total / weight)
        for key, (total, weight) in truth.items()
        if key in estimates and estimates[key].tasks >= 5
    ]


def _harmful_gone(store: LibraryStore) -> int | None:
    for version in store.versions("solver"):
        if "solver/0001" not in {l.id for l in version.lessons} and version.provenance:
            return version.provenance.epoch + 1
    return None


CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class Arm(NamedTuple):
    label: str
    old: bool = False
    tasks: int = 40
    group_size: int = 5
    hard: Switches | None = None
    """The hard world's switches (``bench/hard_world.py``); None: today's world."""
    seeds: int | None = None
    """Planted seeds of this arm, when not the run's default."""
    variant: str = ""
    """A name of ``VARIANTS``: settings that differ from mas's defaults."""
    batch_size: int | None = None
    """Tasks per step, when not mas's default (4)."""


ARMS = [Arm("randomized (mas)"), Arm("old rule", old=True)]
VARIANTS: dict[str, dict] = {
    "e-values, settled to all": {"exposure": {"retest": 0.3, "trials": 3}, "promotion": {"max_tasks": 100}},
    "e-values, all at 1/2": {"exposure": {"trials": 3}, "promotion": {"max_tasks": 100}},
    "e-values, all at 1/2, 8 trials": {"promotion": {"max_tasks": 100}},
}
"""The variants tried for issue 26 (``--variants``), each as its changes to mas's settings
(``mas.config.ablated``), in the order they were tried: e-values checked after every step with
settled lessons shown to all in 70% of the groups and 3 transfer trials; every lesson kept at
one half; 8 trials; and mas's defaults (idle lessons pruned after 20 tasks)."""
MORE_DATA = [Arm("mas, 80 tasks", tasks=80), Arm("mas, groups of 8", group_size=8)]
"""What more data buys, at the same settings otherwise (``--more-data``): twice the tasks an
epoch, or groups of 8 rollouts instead of 5."""
PAPER = [Arm("mas, --preset paper", tasks=100, batch_size=50), Arm("mas, 100 tasks, batch 4", tasks=100)]
"""The paper's size (``--paper``): 100 tasks an epoch, as ``mas train --preset paper`` runs them
(steps of 50 tasks), and in mas's default steps of 4; goals of issue 26: recall >= 0.90,
precision >= 0.95, false promotions in <= 1 of 20 null seeds."""
HARD_JUDGES = ("overlap", "same", "never", "action")
"""The judge's systematic errors, one row of the hard world each under ``--hard``."""
FEATURES = ("log_odds", "by_task", "drift", "interaction", "twins", "proposer")


def _job(job: tuple[Arm, int, bool]) -> Outcome:
    arm, seed, null = job
    settings = VARIANTS.get(arm.variant, {}) | ({"batch_size": arm.batch_size} if arm.batch_size else {})
    return run(
        seed, null=null, old=arm.old, tasks=arm.tasks, group_size=arm.group_size, hard=arm.hard, settings=settings
    )


def hard_arms(args: argparse.Namespace) -> list[Arm]:
    """The hard world's rows: every feature on with ``--hard``, else the features named; one
    row per judge asked for (under ``--hard`` without ``--judge``, all four of its errors)."""
    named = {f: getattr(args, f) for f in FEATURES if getattr(args, f) is not None}
    if not (args.hard or named or args.judge or args.grader_noise is not None or args.rewords is not None):
        return []
    switches = replace(HARD if args.hard else Switches(), **named)
    if args.grader_noise is not None:
        switches = replace(switches, grader_noise=args.grader_noise)
    if args.rewords is not None:
        switches = replace(switches, rewords=args.rewords)
    judges = args.judge or (HARD_JUDGES if args.hard else (switches.judge,))
    on = [f for f in FEATURES if getattr(switches, f)]
    on += (["grader noise"] if switches.grader_noise else []) + (["rewords"] if switches.rewords else [])
    name = "hard" if len(on) == len(FEATURES) + 2 else "+".join(on) or "plain"
    return [Arm(f"{name}, judge {j}", hard=replace(switches, judge=j), seeds=args.hard_seeds) for j in judges]


def summarize(outcomes: list[Outcome], nulls: list[Outcome], old: bool) -> dict:
    """One row of the table from the planted and null seeds of an arm."""
    promoted = [k for o in outcomes for k in o.promoted]
    right = sum(k in o.cross for o in outcomes for k in o.promoted)
    found = [len(set(o.promoted) & o.cross) / len(o.cross) for o in outcomes]
    return {
        "share": statistics.fmean(o.share for o in outcomes),
        "precision": right / len(promoted) if promoted else float("nan"),
        "recall": statistics.fmean(found),
        "se": statistics.stdev(found) / math.sqrt(len(found)) if len(found) > 1 else 0.0,
        "null": sum(bool(o.promoted) for o in nulls),
        "nulls": len(nulls),
        "harmful": max((o.harmful_gone or 99) for o in outcomes),
        "left": sum(o.harmful_left > 0 for o in outcomes),
        "merges": sum(o.bad_merges for o in outcomes + nulls),
        "promoted": len(promoted),
        "judging": statistics.fmean(o.judging for o in outcomes + nulls),
        "reachable": {
            test: statistics.fmean(o.reachable[test] / len(o.cross) for o in outcomes)
            for test in (() if old or not outcomes[0].reachable else REACHABLE)
        },
        "seeds": len(outcomes),
    }


def print_table(table: dict[str, dict]) -> None:
    print(
        f"{'':<24} {'seeds':>5} {'share':>6} {'precision':>10} {'recall':>12} {'null seeds w/ promotion':>24}"
        f" {'harmful gone by epoch':>22} {'seeds w/ harm left':>19} {'bad merges left':>16} {'judge calls/step':>17}"
    )
    for label, row in table.items():
        if isinstance(row, str):  # a row that could not run, and why
            print(f"{label:<24} {row}")
            continue
        harmful = "never" if row["harmful"] == 99 else str(row["harmful"])
        recall = f"{row['recall']:.2f} +- {row['se']:.2f}"
        null = f"{row['null']}/{row['nulls']} ({row['null'] / row['nulls']:.0%})"
        left = f"{row['left']}/{row['seeds']}" if "left" in row else "n/a"
        judging = f"{row['judging']:.1f}" if "judging" in row else "n/a"
        print(
            f"{label:<24} {row['seeds']:>5} {row['share']:>6.2f} {row['precision']:>10.2f} {recall:>12} {null:>24}"
            f" {harmful:>22} {left:>19} {row.get('merges', 'n/a'):>16} {judging:>17}"
        )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="4 planted and 8 null seeds instead of 24 and 20")
    parser.add_argument("--seeds", type=int, default=24, help="planted seeds of today's world (seeds 0 to N-1)")
    parser.add_argument("--null-seeds", type=int, default=20, help="null seeds of every row (seeds 100 on)")
    parser.add_argument("--more-data", action="store_true", help="also mas with 80 tasks, and with groups of 8")
    parser.add_argument("--workers", type=int, default=CORES, help="runs in parallel (one seed each)")
    parser.add_argument(
        "--variants", action="store_true", help="also the variants of mas tried for issue 26 (no old rule)"
    )
    parser.add_argument("--paper", action="store_true", help="also mas at the paper's size: 100 tasks an epoch")
    parser.add_argument("--no-today", action="store_true", help=f"leave out today's rule (commit {today_rule.TODAY})")
    hard = parser.add_argument_group("the hard world (bench/hard_world.py), beside today's (mas only, no old rule)")
    hard.add_argument("--hard", action="store_true", help="every feature on, one row per judge error")
    for feature in FEATURES:
        hard.add_argument(f"--{feature.replace('_', '-')}", action=argparse.BooleanOptionalAction, default=None)
    hard.add_argument("--judge", choices=JUDGES, action="append", help="a judge of the hard world (repeatable)")
    hard.add_argument("--grader-noise", type=float, help="share of rewards flipped (--hard: 0.05)")
    hard.add_argument("--rewords", type=float, help="share of proposals that also reword a lesson (--hard: 0.2)")
    hard.add_argument("--hard-seeds", type=int, default=12, help="planted seeds of each hard row (null: as today's)")
    args = parser.parse_args()
    if min(args.seeds, args.null_seeds) < 2 or args.seeds > 100:
        parser.error("--seeds takes 2 to 100 (the null seeds start at 100), --null-seeds 2 or more")
    planted_seeds, null_seeds = (range(4), range(8)) if args.quick else (range(args.seeds), range(args.null_seeds))
    extra = hard_arms(args)
    if args.quick:
        extra = [a._replace(seeds=min(a.seeds or 4, 4)) for a in extra]
    variants = [Arm(name, variant=name) for name in VARIANTS] if args.variants else []
    arms = (
        variants
        + ([ARMS[0]] if extra or variants else ARMS)
        + (MORE_DATA if args.more_data else [])
        + (PAPER if args.paper else [])
        + extra
    )
    started = time.perf_counter()
    seeds = {arm: range(arm.seeds) if arm.seeds else planted_seeds for arm in arms}
    jobs = [(arm, s, False) for arm in arms for s in seeds[arm]]
    jobs += [(arm, 100 + s, True) for arm in arms for s in null_seeds]
    with ProcessPoolExecutor(max_workers=max(args.workers, 1)) as pool:
        results = dict(zip(jobs, pool.map(_job, jobs), strict=True))
    table: dict[str, dict | str] = {}
    if not args.no_today:  # the first row: the rule before issue 26, run from the history
        label = f"today's rule ({today_rule.TODAY})"
        table[label] = today_rule.row(len(planted_seeds), len(null_seeds), max(args.workers, 1), frozenset(CROSS_ROLE))
    table |= {
        arm.label: summarize(
            [results[(arm, s, False)] for s in seeds[arm]], [results[(arm, 100 + s, True)] for s in null_seeds], arm.old
        )
        for arm in arms
    }
    print(
        f"planted and null seeds per row as shown, 3 epochs of 40 tasks, default settings (recall +- its standard"
        f" error over the seeds); today's world above, the hard world below: {', '.join(a.label for a in extra)}"
        if extra
        else f"{len(planted_seeds)} planted-world seeds, {len(null_seeds)} null-world seeds, 3 epochs of 40 tasks,"
        " default settings (recall +- its standard error over the seeds)"
    )
    print_table(table)
    print("recall reachable with each run's own evidence (its estimate tested once, at the end, knowing every twin):")
    for label, row in table.items():
        if isinstance(row, dict) and row.get("reachable"):
            tests = ", ".join(f"{share:.2f} by {test}" for test, share in row["reachable"].items())
            print(f"  {label:<18} {tests}")
    mine = table[ARMS[0].label]
    goals = [
        ("share of achievable gain >= 0.95", mine["share"] >= 0.95),
        ("promotion precision >= 0.95", mine["precision"] >= 0.95),
        ("promotion recall >= 0.70", mine["recall"] >= 0.70),
        ("false promotions in <= 1 of 20 null seeds", mine["null"] <= 0.05 * mine["nulls"]),
        ("harmful lesson gone within 2 epochs", mine["harmful"] <= 2),
    ]
    world = World(0)
    alone, within = world.cross_role_effects(scenario(world, 200, seed=10_000, prefix="h").tasks)
    print(
        f"true effect of a planted cross-role lesson on one of its roles: {alone:+.3f} alone,"
        f" {within:+.4f} in the best library (the ceiling)"
    )
    for goal, ok in goals:
        print(f"{'PASS' if ok else 'FAIL'}  {goal}")
    for arm in PAPER if args.paper else []:
        row = table[arm.label]
        print(f"{arm.label}:")
        for goal, ok in (
            ("promotion recall >= 0.90", row["recall"] >= 0.90),
            ("promotion precision >= 0.95", row["precision"] >= 0.95),
            ("false promotions in <= 1 of 20 null seeds", row["null"] <= 0.05 * row["nulls"]),
        ):
            print(f"{'PASS' if ok else 'FAIL'}  {goal}")
            goals.append((goal, ok))
    for arm in extra:
        row = table[arm.label]
        hard_goals = [
            ("share of achievable gain >= 0.8", row["share"] >= 0.8),
            ("promotion precision >= 0.9", row["precision"] >= 0.9),
            ("false promotions in <= 1 of 20 null seeds", row["null"] <= 0.05 * row["nulls"]),
            ("no harmful lesson left in any library at the end", row["left"] == 0),
        ]
        print(f"{arm.label} (recall {row['recall']:.2f} +- {row['se']:.2f}, stated, no goal):")
        for goal, ok in hard_goals:
            print(f"{'PASS' if ok else 'FAIL'}  {goal}")
        goals += hard_goals
    print(f"({time.perf_counter() - started:.0f} s, {len(jobs)} runs on {args.workers} workers)")
    return 0 if all(ok for _, ok in goals) else 1


if __name__ == "__main__":
    sys.exit(main())
