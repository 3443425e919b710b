"""Twins: lessons judged to say the same thing are one treatment. They are randomized with
one coin, their evidence is one class's, they are judged after every step, and a "same" is
confirmed before it counts."""

import asyncio
import importlib.util
import json
import random
import sys
from pathlib import Path

import pytest

from mas.config import ExposurePolicy, PromotionPolicy, TrainConfig
from mas.library import evidence, exposure, hierarchy
from mas.library.logs import SideFiles, StepKey
from mas.library.similar import Judge, _key, classes, negates, overlap
from mas.library.store import LibraryStore
from mas.models.fake import FakeClient
from mas.train import train
from mas.types.lessons import Lesson, Provenance, Version
from mas.types.replies import Equivalence
from mas.types.usage import UsageEvent

BENCH = Path(__file__).resolve().parents[1] / "bench" / "learning_world.py"


def event(shown, reward, *, task, rollout, randomized):
    return UsageEvent(
        run="r", epoch=0, step=0, task_id=task, rollout=rollout, role="solver", shown=list(shown),
        randomized=list(randomized), reward=reward, advantage=0.0,
    )  # fmt: skip


def copies_shown_at_random(seed=0, tasks=60):
    """Two copies of one lesson, each shown to half the rollouts by its own coin; the team
    succeeds more often when either copy is shown (0.8 against 0.2), never more for both."""
    rng = random.Random(seed)
    events = []
    for task in range(tasks):
        for i in range(6):
            shown = [lesson for lesson in ("solver/0001", "solver/0002") if rng.random() < 0.5]
            reward = float(rng.random() < (0.8 if shown else 0.2))
            events.append(event(shown, reward, task=str(task), rollout=i, randomized=["solver/0001", "solver/0002"]))
    return events


def shown_to_two_of_five(rows, *, tasks, seed):
    """Usage events of ``tasks`` groups of five per (role, lesson, effect) of ``rows``: the lesson
    shown to two rollouts drawn at random, the chance of success 0.3 plus ``effect`` when shown."""
    rng, events = random.Random(seed), []
    for task in range(tasks):
        for role, lesson, effect in rows:
            shown = set(rng.sample(range(5), 2))
            events += [
                UsageEvent(run="r", epoch=0, step=0, task_id=f"{lesson.id}:{task}", rollout=i, role=role,
                           shown=[lesson.id] if i in shown else [], randomized=[lesson.id],
                           reward=float(rng.random() < 0.3 + (effect if i in shown else 0)), advantage=0.0)
                for i in range(5)
            ]  # fmt: skip
    return events


def two_libraries(tmp_path, first: Lesson, second: Lesson) -> LibraryStore:
    store = LibraryStore(tmp_path / "lib.json")
    store.commit([
        Version(library=lesson.id.partition("/")[0], number=1, next_id=2, lessons=[lesson]) for lesson in (first, second)
    ])  # fmt: skip
    return store


def test_two_copies_shown_side_by_side_get_the_class_effect():
    events = copies_shown_at_random()
    apart = evidence.estimate(events)
    # Alone, each copy's contrast is diluted by the other copy standing in for it half the time.
    assert apart[("solver", "solver/0001")].effect < 0.45
    twins = {"solver/0001": "solver/0001", "solver/0002": "solver/0001"}
    together = evidence.estimate(events, classes=twins)
    one, two = together[("solver", "solver/0001")], together[("solver", "solver/0002")]
    assert one == two.model_copy(update={"lesson": "solver/0001"})  # both members carry the class's evidence
    assert one.effect == pytest.approx(0.6, abs=0.08)  # the whole effect: any copy shown against none
    assert one.lcb > apart[("solver", "solver/0001")].ucb - 0.2


def test_a_class_counts_one_contrast_per_group():
    events = [
        event(["solver/0001", "solver/0002"], 1.0, task="a", rollout=0, randomized=["solver/0001", "solver/0002"]),
        event([], 0.0, task="a", rollout=1, randomized=["solver/0001", "solver/0002"]),
    ]
    e = evidence.estimate(events, classes={"solver/0001": "solver/0001", "solver/0002": "solver/0001"})
    assert e[("solver", "solver/0001")].contrasts == 1 and e[("solver", "solver/0001")].effect == 1.0


def test_a_role_own_twin_of_another_roles_lesson_is_its_own_evidence_not_a_trial():
    events = [
        event(["solver/0001"], 1.0, task="a", rollout=0, randomized=["solver/0001"]),
        event([], 0.0, task="a", rollout=1, randomized=["solver/0001"]),
        event(["planner/0003"], 1.0, task="b", rollout=0, randomized=["planner/0003"]),
        event([], 0.0, task="b", rollout=1, randomized=["planner/0003"]),
    ]
    twins = {"planner/0003": "planner/0003", "solver/0001": "planner/0003"}
    e = evidence.estimate(events, classes=twins)
    assert e[("solver", "planner/0003")].tasks == 2 and not e[("solver", "planner/0003")].trial
    assert evidence.estimate(events)[("solver", "planner/0003")].trial  # alone, it is a trial


def test_classes_are_groups_of_mutual_twins_and_one_wrong_verdict_does_not_chain_them():
    lessons = [Lesson(id=f"solver/000{i}", text=t) for i, t in enumerate(["a1", "a2", "b1", "b2", "c"], 1)]
    pairs = {("a1", "a2"), ("b1", "b2"), ("a2", "b1")}  # a2 ~ b1 is the judge's mistake
    same = lambda x, y: (x.text, y.text) in pairs or (y.text, x.text) in pairs  # noqa: E731
    found = classes(lessons, same)
    assert found["solver/0001"] == found["solver/0002"] == "solver/0001"
    assert found["solver/0003"] == found["solver/0004"] == "solver/0003"  # b1 did not join a1's class
    assert "solver/0005" not in found


def test_exposure_shows_a_class_with_one_coin_and_a_trial_twin_with_it():
    injected = ["global/0001", "solver/0001", "solver/0002", "solver/0003"]
    trial = Lesson(id="planner/0004", text="A twin from the planner.")
    twins = {m: "global/0001" for m in ("global/0001", "solver/0002", "planner/0004")}
    for t in range(40):
        plan = exposure.plan(
            injected, [trial], role="solver", effects={}, policy=ExposurePolicy(), promotion=PromotionPolicy(), group_size=5,
            key=(0, "e0/s0", f"t{t}"), classes=twins,
        )  # fmt: skip
        for p in plan:
            shown = {"global/0001" not in p.hidden, "solver/0002" not in p.hidden, bool(p.trials)}
            assert len(shown) == 1  # the class is shown whole or not at all
        assert 0 < sum("global/0001" in p.hidden for p in plan) < 5
        assert set(plan[0].randomized) == {*injected, "planner/0004"}
        # a lesson without a twin keeps the coin it had before classes existed
        alone = exposure.plan(["solver/0001"], [], role="solver", effects={}, policy=ExposurePolicy(), promotion=PromotionPolicy(),
                              group_size=5, key=(0, "e0/s0", f"t{t}"))  # fmt: skip
        assert [("solver/0001" in p.hidden) for p in alone] == [("solver/0001" in p.hidden) for p in plan]


class Scripted:
    """An equivalence judge whose answer for a pair depends on the order it is asked in."""

    def __init__(self, answers):
        self.answers, self.asked = list(answers), []

    def respond(self, request):
        first, second = (
            line.split(": ", 1)[1] for line in request.messages[0].splitlines() if line.startswith("Lesson")
        )
        if negates(first) or negates(second):  # a canary: this judge tells a lesson from its negation
            return json.dumps({"reason": "scripted", "same": False, "merged": ""})
        self.asked.append((first, second))
        return json.dumps({"reason": "scripted", "same": self.answers.pop(0), "merged": ""})


@pytest.mark.parametrize(
    "answers, same, calls",
    [([False], False, 1), ([True, True], True, 2), ([True, False, False], False, 3), ([True, False, True], True, 3)],
)
def test_a_same_verdict_is_asked_again_the_other_way_round(tmp_path, answers, same, calls):
    judge_model = Scripted(answers)
    judge = Judge(tmp_path / "eq.jsonl", client=FakeClient(judge_model.respond), overlap=0.3)
    a, b = Lesson(id="solver/0001", text="Check the units."), Lesson(id="solver/0002", text="Keep the units right.")
    assert asyncio.run(judge.same(a, b)) is same
    assert len(judge_model.asked) == calls
    if calls > 1:
        assert judge_model.asked[1] == (b.text, a.text)
    again = Judge(tmp_path / "eq.jsonl", client=None, overlap=0.3)
    assert again.known_same(a, b) is same  # kept beside the library: never asked again


def test_the_pairs_of_a_step_are_judged_together_and_kept_in_their_order(tmp_path):
    """One pair after another left the endpoint idle at the end of every step."""
    in_flight = []

    def respond(request):
        lessons = [line.split(": ", 1)[1] for line in request.messages[0].splitlines() if line.startswith("Lesson")]
        if any(negates(t) for t in lessons):  # a canary, asked before the batch
            return json.dumps({"reason": "scripted", "same": False, "merged": ""})
        in_flight.append(len(client.requests) - client.calls)  # sent, not answered yet
        return json.dumps({"reason": "scripted", "same": all("units" in t for t in lessons), "merged": ""})

    client = FakeClient(respond, latency=0.05)
    judge = Judge(tmp_path / "eq.jsonl", client=client, overlap=0.3)
    texts = ["Check the units.", "Keep the units right.", "Name the unknown.", "Write the unknown down."]
    a, b, c, d = (Lesson(id=f"solver/000{i}", text=t) for i, t in enumerate(texts, 1))
    pairs = [(a, b), (c, d), (a, c), (b, a)]  # the last is the first the other way round: asked once
    asyncio.run(judge.judge_all(pairs))
    assert in_flight[0] == 3  # every pair's first call out at once
    assert len(client.requests) == 2 + 4  # two canaries; a "same" is confirmed the other way round: 2 + 1 + 1
    kept = [json.loads(line)["a"] for line in (tmp_path / "eq.jsonl").read_text().splitlines()][2:]
    assert kept == [a.text, c.text, a.text]
    assert judge.known_same(b, a) and not judge.known_same(c, d) and not judge.known_same(a, c)


@pytest.fixture(scope="module")
def world():
    spec = importlib.util.spec_from_file_location("learning_world", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["learning_world"] = module
    spec.loader.exec_module(module)
    return module


def world_run(
    world, folder: Path, *, stop_after: int | None = None, on_step=lambda report, store: None, w=None, seed: int = 0
):
    """Train the learning world of ``seed`` for an epoch of 40 tasks; ``stop_after``: the
    process dies at that team call. ``w``: the world to talk to (a new one by default)."""
    w = w or world.World(seed)
    scenario = world.scenario(w, 40, seed=seed)
    calls = 0

    def respond(request):
        nonlocal calls
        if request.schema is None:
            calls += 1
            if stop_after is not None and calls > stop_after:
                raise KeyboardInterrupt  # a crash, not a model error: nothing after it is written
        return w.respond(request)

    store = LibraryStore(folder / "lib.json")
    # Passes at the epoch's end: within the epoch twins live side by side as one class.
    config = TrainConfig(epochs=1, seed=seed, concurrency=1, promotion=PromotionPolicy(cadence="epoch"))
    asyncio.run(
        train(
            scenario,
            client=FakeClient(respond),
            store=store,
            run_dir=folder / "run",
            config=config,
            on_step=lambda report: on_step(report, store),
        )  # fmt: skip
    )
    return store


def test_twins_are_judged_after_every_step_and_shown_as_one_from_the_next(world, tmp_path):
    known = {}  # step -> the classes the step was planned with (those known after the step before)
    store = world_run(
        world,
        tmp_path,
        on_step=lambda report, store: known.setdefault(
            report.step + 1, hierarchy.snapshot(store, PromotionPolicy()).classes
        ),
    )
    assert SideFiles(store.path).equivalence.read_text().splitlines()  # judged within the steps
    coupled = 0
    for e in SideFiles(store.path).usage.items():
        twins = known.get(e.step, {})
        for a in e.randomized:
            for b in e.randomized:
                if a < b and a in twins and twins.get(a) == twins.get(b):
                    coupled += 1
                    assert (a in e.shown) == (b in e.shown), (e.step, a, b)
    assert coupled  # the world's proposer adds paraphrases: some twins were shown together


def test_a_resumed_run_draws_the_same_class_exposures(world, tmp_path):
    whole = world_run(world, tmp_path / "whole", seed=6)  # a seed whose twins are drawn as one by then
    stop = 3 * 5 * 4 * 2 + 7  # in the third step's rollouts, after twins were judged
    # The same world before and after the crash, as an endpoint outlives a run: it remembers
    # what a rollout's planner and solver were shown until its verifier's call, and a resumed
    # rollout replays the calls journaled before the crash without asking it again.
    endpoint = world.World(6)
    with pytest.raises(KeyboardInterrupt):
        world_run(world, tmp_path / "killed", stop_after=stop, w=endpoint, seed=6)
    killed = world_run(world, tmp_path / "killed", w=endpoint, seed=6)
    assert hierarchy.snapshot(whole, PromotionPolicy()).classes  # there were twins to draw for
    mine = [e.model_dump() for e in SideFiles(killed.path).usage.items()]
    assert mine == [e.model_dump() for e in SideFiles(whole.path).usage.items()]
    for name in whole.libraries():
        assert killed.versions(name) == whole.versions(name)


def test_a_promising_lesson_is_judged_against_another_roles_paraphrase_that_shares_few_words(tmp_path):
    """A paraphrase may share almost no words: the planner's proven lesson and the solver's own
    copy of it must reach the judge, become one class, and keep the solver from a trial of the
    planner's copy beside its own (each would dilute the other's contrast)."""
    planner = Lesson(id="planner/0001", text="Write the whole expression with its parentheses before computing.")
    solver = Lesson(id="solver/0001", text="For multi-step arithmetic, first set down every bracket of the formula.")
    other = Lesson(id="solver/0002", text="Name the unknown quantity before solving.")
    assert overlap(planner.text, solver.text) < PromotionPolicy().overlap  # no candidate by words
    store = LibraryStore(tmp_path / "lib.json")
    store.commit([
        Version(library="planner", number=1, next_id=2, lessons=[planner]),
        Version(library="solver", number=1, next_id=3, lessons=[solver, other]),
    ])  # fmt: skip
    events = [
        UsageEvent(
            run="r",
            epoch=0,
            step=0,
            task_id=str(task),
            rollout=i,
            role="planner",
            shown=[planner.id] if i % 2 else [],
            randomized=[planner.id],
            reward=float(i % 2),
            advantage=0.0,
        )  # fmt: skip
        for task in range(6)
        for i in range(4)
    ]
    hierarchy.record(store, Provenance(run="r", epoch=0, step=0), usage=events, quarantined=[], refused=[])
    policy = PromotionPolicy()
    twins = {planner.text, solver.text}

    def respond(request):
        lessons = {line.split(": ", 1)[1] for line in request.messages[0].splitlines() if line.startswith("Lesson")}
        return json.dumps({"reason": "scripted", "same": lessons == twins, "merged": ""})

    client = FakeClient(respond)
    asyncio.run(hierarchy.judge_new(store, policy, client=client))
    asked = [{line for line in r.messages[0].splitlines() if line.startswith("Lesson")} for r in client.requests]
    assert any(planner.text in " ".join(pair) and solver.text in " ".join(pair) for pair in asked)
    found = hierarchy.snapshot(store, policy).classes
    assert found[planner.id] == found[solver.id]
    effects = hierarchy.effects(store, policy)
    assert effects[("planner", planner.id)].effect > 0
    same = hierarchy.snapshot(store, policy).same
    assert exposure.trial_lessons("solver", store.heads(), effects, most=3, promotion=policy, same=same) == []
    # the planner's proven lesson first, and not the solver's copy of it beside it
    assert exposure.trial_lessons("verifier", store.heads(), effects, most=3, promotion=policy, same=same) == [
        planner,
        other,
    ]


def judging(answer):
    """A judge model whose verdict is ``answer(first, second)``."""

    def respond(request):
        first, second = (l.split(": ", 1)[1] for l in request.messages[0].splitlines() if l.startswith("Lesson"))
        return json.dumps({"reason": "scripted", "same": answer(first, second), "merged": ""})

    return FakeClient(respond)


PARAPHRASES = [
    Lesson(id="solver/0001", text="When a result comes back, compare it with a rough estimate."),
    Lesson(id="solver/0002", text="Check every returned result against a quick mental estimate."),
    Lesson(id="solver/0003", text="When the plan is long, highlight its key words."),
]


@pytest.mark.parametrize(
    "answer",
    [
        lambda a, b: True,  # every pair the same
        lambda a, b: overlap(a, b) >= 0.5,  # pairs sharing many words the same (a negation shares most)
    ],
)
def test_a_judge_that_cannot_tell_a_lesson_from_its_negation_merges_nothing(tmp_path, answer):
    judge = Judge(tmp_path / "eq.jsonl", client=judging(answer), overlap=0.3)
    pairs = [(a, b) for i, a in enumerate(PARAPHRASES) for b in PARAPHRASES[i + 1 :]]
    asyncio.run(judge.judge_all(pairs))
    assert not judge.trusted and judge.meter.snapshot()["equivalence"].failures
    assert not any(judge.known_same(a, b) for a, b in pairs)
    assert classes(PARAPHRASES, judge.known_same) == {}
    again = Judge(tmp_path / "eq.jsonl", client=None, overlap=0.3)  # what training and promote read back
    assert not again.trusted and not any(again.known_same(a, b) for a, b in pairs)


def test_a_judge_that_tells_them_apart_is_believed_until_it_stops(tmp_path):
    honest = judging(lambda a, b: "estimate" in a and "estimate" in b and not (negates(a) or negates(b)))
    judge = Judge(tmp_path / "eq.jsonl", client=honest, overlap=0.3)
    asyncio.run(judge.judge_all([(PARAPHRASES[0], PARAPHRASES[1]), (PARAPHRASES[0], PARAPHRASES[2])]))
    assert judge.trusted and judge.known_same(PARAPHRASES[0], PARAPHRASES[1])
    assert not judge.known_same(PARAPHRASES[0], PARAPHRASES[2])
    # Later batches ask a canary each; a judge that starts calling them the same stops counting.
    judge.client = judging(lambda a, b: True)
    for i in range(3):
        extra = Lesson(id=f"planner/000{i + 1}", text=f"When step {i} is done, write down its result.")
        asyncio.run(judge.judge_all([(extra, PARAPHRASES[2])]))
    assert not judge.trusted and not judge.known_same(PARAPHRASES[0], PARAPHRASES[1])


def test_twins_whose_own_evidence_disagrees_are_split_not_merged(tmp_path):
    """The judge called "compute mentally" the same as "reread the question". In the rollouts
    before, where each was drawn on its own, the first helped and the second did nothing: the
    pass splits the pair instead of merging it, logs why, and the judge is overruled for it."""
    from mas.types.lessons import Budget

    reread = Lesson(id="solver/0001", text="Reread the question before the final answer.")
    mental = Lesson(id="solver/0002", text="Compute small products mentally before answering.")
    store = LibraryStore(tmp_path / "lib.json")
    store.commit([Version(library="solver", number=1, next_id=3, lessons=[reread, mental])])
    rng = random.Random(2)
    events = []
    for task in range(20):
        for lesson, effect in ((mental, 0.5), (reread, 0.0)):
            shown = set(rng.sample(range(5), 2))
            events += [
                UsageEvent(run="r", epoch=0, step=0, task_id=f"{lesson.id}{task}", rollout=i, role="solver",
                           shown=[lesson.id] if i in shown else [], randomized=[lesson.id],
                           reward=float(rng.random() < 0.3 + (effect if i in shown else 0)), advantage=0.0)
                for i in range(5)
            ]  # fmt: skip
    side = SideFiles(store.path)
    side.usage.append(StepKey("r", 0, 0), events)
    judged = Judge(side.equivalence, client=None, overlap=0.3)
    for _ in range(2):  # a judge that told lessons from their negations, and called these two the same
        judged._append("canary", reread.text, "Never reread.", Equivalence(reason="x", same=False))
    judged._append(_key(mental.text, reread.text), mental.text, reread.text, Equivalence(reason="x", same=True))
    assert Judge(side.equivalence, client=None, overlap=0.3).known_same(mental, reread)

    stamp = Provenance(run="p", epoch=0, step=0)
    before = sorted((p.name, p.read_bytes()) for p in tmp_path.iterdir())
    planned = asyncio.run(hierarchy.promote(store, PromotionPolicy(), stamp, budget=Budget(), dry_run=True))
    assert [m.kind for m in planned] == ["split"] and planned[0].lessons == [reread.id, mental.id]
    assert sorted((p.name, p.read_bytes()) for p in tmp_path.iterdir()) == before  # a dry run writes nothing

    moves = asyncio.run(hierarchy.promote(store, PromotionPolicy(), stamp, budget=Budget()))
    split = next(m for m in moves if m.kind == "split")
    assert split.evidence[0].effect < split.evidence[1].effect
    assert not any(m.kind == "merge" for m in moves)  # without the split, the judge's "same" merges them
    assert {l.id for l in store.head("solver").lessons} == {reread.id, mental.id}
    assert not Judge(side.equivalence, client=None, overlap=0.3).known_same(mental, reread)
    assert hierarchy.snapshot(store, PromotionPolicy()).classes == {}  # drawn apart from the next step on
    later = stamp.model_copy(update={"step": 1})
    assert not asyncio.run(hierarchy.promote(store, PromotionPolicy(), later, budget=Budget()))  # split once


def test_a_promotion_takes_the_text_whose_own_showing_carries_the_evidence(tmp_path):
    """The judge called the solver's "do the steps in the order given" the same as the
    verifier's "reread the question". Only the second was shown, in the verifier's rollouts and
    in its trial with the planner, and it helped both: the class passes in two roles on its
    evidence alone, and the global lesson must say what was shown, not what its twin says.
    (Taking the first member's text, as before, promoted "order" on reread's evidence.)"""
    from mas.types.lessons import Budget

    order = Lesson(id="solver/0001", text="When several steps depend on each other, do them in the order given.")
    reread = Lesson(id="verifier/0001", text="Reread the question before the final answer.")
    store = two_libraries(tmp_path, order, reread)
    rows = (("solver", order, 0.0), ("verifier", reread, 0.4), ("planner", reread, 0.4))
    events = shown_to_two_of_five(rows, tasks=20, seed=5)
    side = SideFiles(store.path)
    side.usage.append(StepKey("r", 0, 0), events)
    judged = Judge(side.equivalence, client=None, overlap=0.3)
    for _ in range(2):
        judged._append("canary", reread.text, "Never reread.", Equivalence(reason="x", same=False))
    judged._append(_key(order.text, reread.text), order.text, reread.text, Equivalence(reason="x", same=True))

    moves = asyncio.run(
        hierarchy.promote(store, PromotionPolicy(), Provenance(run="p", epoch=0, step=0), budget=Budget())
    )
    promoted = [m for m in moves if m.kind == "promote"]
    assert len(promoted) == 1 and promoted[0].roles == ["planner", "verifier"]
    assert promoted[0].text == reread.text
    assert [l.text for l in store.head("global").lessons] == [reread.text]


@pytest.mark.parametrize(
    "answers, same, calls",
    [([False, True, True], True, 3), ([False, True, False], False, 3), ([False, False], False, 2)],
)
def test_a_different_verdict_gets_a_second_look_both_ways_round(tmp_path, answers, same, calls):
    """A judge that errs on one call in ten misses a tenth of the twins on one look. The
    second look asks twice more, once each way round, and believes "same" only from both."""
    judge_model = Scripted(answers)
    judge = Judge(tmp_path / "eq.jsonl", client=FakeClient(judge_model.respond), overlap=0.3)
    a, b = Lesson(id="solver/0001", text="Check the units."), Lesson(id="verifier/0001", text="Keep the units right.")
    asyncio.run(judge.judge_all([(a, b)]))
    assert not judge.known_same(a, b) and len(judge_model.asked) == 1
    asyncio.run(judge.look_again([(a, b)]))
    assert judge.known_same(a, b) is same and len(judge_model.asked) == calls
    assert judge_model.asked[1] == (b.text, a.text)
    again = Judge(tmp_path / "eq.jsonl", client=FakeClient(judge_model.respond), overlap=0.3)
    assert again.known_same(a, b) is same  # kept beside the library
    asyncio.run(again.look_again([(a, b)]))
    assert len(judge_model.asked) == calls  # one second look a pair


@pytest.mark.parametrize("helping", [True, False])
def test_after_a_step_lessons_of_two_roles_that_each_help_get_the_second_look(tmp_path, helping):
    """Two paraphrases, one in the solver's library and one in the verifier's, each shown to
    help its own role; the judge's first call said "different". The step's judging looks
    again, and they are one class from then on. Without evidence that both help, one call."""
    a = Lesson(id="solver/0001", text="Check the units of every quantity.")
    b = Lesson(id="verifier/0001", text="Make sure each quantity keeps its unit.")
    store = two_libraries(tmp_path, a, b)
    events = shown_to_two_of_five((("solver", a, 0.5), ("verifier", b, 0.5)), tasks=8 if helping else 0, seed=1)
    SideFiles(store.path).usage.append(StepKey("r", 0, 0), events)
    judge_model = Scripted([False, True, True])
    policy = PromotionPolicy(overlap=0.01)  # a pair sharing a word is a candidate
    asyncio.run(hierarchy.judge_new(store, policy, client=FakeClient(judge_model.respond)))
    assert len(judge_model.asked) == (3 if helping else 1)
    assert hierarchy.snapshot(store, policy).classes == ({a.id: a.id, b.id: a.id} if helping else {})
