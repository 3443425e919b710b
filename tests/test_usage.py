"""Usage events, randomized exposure, the evidence estimator, and the usage graph."""

import math
import random

import networkx as nx
import pytest

from mas.config import ExposurePolicy, PromotionPolicy
from mas.library import evidence, exposure, graph, promotion
from mas.library.logs import StepKey, StepLog
from mas.step.context import Context
from mas.step.usage import numeric_advantages, usage_events
from mas.types.evidence import Effect
from mas.types.lessons import Lesson, Provenance, Version
from mas.types.replies import RoleSteps, Summary
from mas.types.rollouts import Group, RoleTrace, Rollout
from mas.types.tasks import Task
from mas.types.usage import UsageEvent

SHOWN = ["global/0001", "solver/0001", "solver/0002"]


def test_numeric_advantage_is_grpo_s():
    assert numeric_advantages([1, 0, 0, 1]) == [1, -1, -1, 1]
    assert numeric_advantages([1, 1, 1]) == [0, 0, 0]
    assert numeric_advantages([1, 0, 0, 0])[0] == pytest.approx(3 / 3**0.5)


def rollout(index, reward, shown, randomized=()):
    trace = RoleTrace(role="solver", system_message="You are the solver.", shown=shown, randomized=list(randomized))
    return Rollout(task_id="t", index=index, traces=[trace], answer="1", reward=reward)


def test_events_record_what_was_shown_randomized_and_judged():
    group = Group(
        task=Task(id="t", question="?"),
        rollouts=[rollout(0, 1.0, SHOWN, ["solver/0002"]), rollout(1, 0.0, SHOWN[:2], ["solver/0002"])],
    )
    summaries = [
        Summary(roles=[RoleSteps(role="solver", steps=["n"], applied=["solver/0002", "solver/0077"])], outcome="ok"),
        Summary(roles=[RoleSteps(role="solver", steps=["n"], applied=["solver/0002"])], outcome="bad"),
    ]
    ctx = Context(None, None, None, None, None, {}, Provenance(run="r", epoch=0, step=3))
    first, second = usage_events(ctx, group, summaries)
    assert first.shown == SHOWN and first.randomized == ["solver/0002"]
    assert first.judged == ["solver/0002"] and second.judged == []  # only lessons it was shown count
    assert (first.advantage, second.advantage) == (1.0, -1.0)


def test_a_version_1_usage_event_reads_as_shown_and_not_randomized():
    old = {"schema_version": 1, "run": "r", "epoch": 0, "step": 0, "task_id": "t", "rollout": 0, "role": "solver",
           "in_prompt": ["solver/0001"], "cited": ["solver/0001"], "judged": [], "reward": 1.0, "advantage": 0.5}  # fmt: skip
    event = UsageEvent.model_validate(old)
    assert event.shown == ["solver/0001"] and event.randomized == [] and event.schema_version == 2


def event(role, shown, reward, *, task="t", rollout=0, step=0, randomized=("L",)):
    return UsageEvent(
        run="r", epoch=0, step=step, task_id=task, rollout=rollout, role=role, shown=list(shown),
        randomized=list(randomized), reward=reward, advantage=0.0,
    )  # fmt: skip


def test_log_is_append_only_once_per_step_and_survives_a_torn_line(tmp_path):
    log = StepLog(tmp_path / "lib.usage.jsonl", UsageEvent)
    log.append(StepKey("r", 0, 0), [event("solver", ["solver/0001"], 1.0)])
    log.append(StepKey("r", 0, 0), [event("solver", ["solver/0001"], 1.0)])  # a resumed step: ignored
    with log.path.open("a") as f:
        f.write('{"run": "r", "epoch": 0, "step": 1, "ev')
    assert len(list(log.items())) == 1
    log.append(StepKey("r", 0, 1), [event("planner", ["planner/0001"], 0.0)])
    assert [e.role for e in log.items()] == ["solver", "planner"]


def test_a_step_is_recorded_once_whatever_its_run_is_called_and_a_torn_tail_is_cut_alone(tmp_path):
    log = StepLog(tmp_path / "lib.usage.jsonl", UsageEvent)
    odd = 'run "7", \\ épreuve'
    log.append(StepKey(odd, 0, 0), [event("solver", ["solver/0001"], 1.0)])
    log.append(StepKey("r", 0, 0), [event("solver", ["solver/0001"], 0.0)])  # another run's step 0
    log.append(StepKey(odd, 0, 0), [event("solver", ["solver/0001"], 1.0)])  # not the last line: still known
    assert [e.reward for e in log.items()] == [1.0, 0.0]
    body = log.path.read_bytes()
    with log.path.open("ab") as f:
        f.write(b"\n\n" + body.splitlines()[0][:-9])  # a crash mid-line, after blank lines
    log.append(StepKey(odd, 0, 1), [event("planner", ["planner/0001"], 0.5)])
    assert log.path.read_bytes().startswith(body.rstrip(b"\n"))
    assert [e.reward for e in log.items()] == [1.0, 0.0, 0.5]
    assert log.has_step(StepKey(odd, 0, 1)) and not log.has_step(StepKey(odd, 1, 1))


# -- the estimator ---------------------------------------------------------------------------


def test_contrasts_compare_shown_with_not_shown_within_a_group_and_cluster_by_task():
    """One lesson: least squares within groups weighs each group's contrast by the spread of
    its exposure (the sum of squares of the centred indicator, n_shown * n_hidden / n)."""
    events = [
        # task a, step 0: shown 1.0 vs not shown 0.0 -> +1, weight 1/2
        event("solver", ["L"], 1.0, task="a", rollout=0), event("solver", [], 0.0, task="a", rollout=1),
        # task a, step 1: shown 0.0 and 1.0 vs not shown 1.0 -> -0.5, weight 2/3
        event("solver", ["L"], 0.0, task="a", rollout=0, step=1), event("solver", ["L"], 1.0, task="a", rollout=1, step=1),
        event("solver", [], 1.0, task="a", rollout=2, step=1),
        # task b: everyone shown: no contrast
        event("solver", ["L"], 1.0, task="b", rollout=0), event("solver", ["L"], 0.0, task="b", rollout=1),
        # task c: not randomized: no contrast
        event("solver", ["L"], 1.0, task="c", randomized=()), event("solver", [], 0.0, task="c", rollout=1, randomized=()),
        # task d: shown 1.0 vs 1.0 -> 0, weight 1/2
        event("solver", ["L"], 1.0, task="d"), event("solver", [], 1.0, task="d", rollout=1),
    ]  # fmt: skip
    e = evidence.estimate(events)[("solver", "L")]
    assert (e.tasks, e.contrasts, e.exposures) == (2, 3, 4)
    assert e.effect == pytest.approx((1 / 2 * 1 + 2 / 3 * -0.5 + 1 / 2 * 0) / (1 / 2 + 2 / 3 + 1 / 2))  # 0.1
    # The cluster jackknife: task a (weight 7/6, score 1/6) left out moves it by 0.1, task d
    # (1/2, 0) by -0.05 / (7/6); the spread is below the floor of two tasks.
    moves = [(1 / 6 - 7 / 6 * 0.1) / (5 / 3 - 7 / 6), (0 - 1 / 2 * 0.1) / (5 / 3 - 1 / 2)]
    assert moves[0] == pytest.approx(0.1)
    assert e.se == pytest.approx(max(math.sqrt(sum(m * m for m in moves) / 2), evidence.SD_FLOOR / math.sqrt(2)))
    assert e.trial  # "L" is no library of the solver's


def test_a_task_seen_in_three_groups_weighs_three_times_one_seen_once():
    events = []
    for step in range(3):  # task a, three epochs: shown 1.0 against not shown 0.0
        events += [
            event("solver", ["L"], 1.0, task="a", step=step),
            event("solver", [], 0.0, task="a", rollout=1, step=step),
        ]
    events += [
        event("solver", ["L"], 0.0, task="b"),
        event("solver", [], 1.0, task="b", rollout=1),
    ]  # once, the other way
    e = evidence.estimate(events)[("solver", "L")]
    assert (e.tasks, e.contrasts) == (2, 4)
    assert e.effect == pytest.approx((3 * 1 - 1) / 4)  # a mean of the two tasks' means would say 0


def per_task_mean(events, lesson="solver/0001"):
    """The estimator before: each task's mean contrast, then their mean."""
    by_group, by_task = {}, {}
    for x in events:
        by_group.setdefault((x.step, x.task_id), []).append(x)
    for (_, task), members in by_group.items():
        shown = [x.reward for x in members if lesson in x.shown]
        hidden = [x.reward for x in members if lesson not in x.shown]
        if shown and hidden:
            by_task.setdefault(task, []).append(sum(shown) / len(shown) - sum(hidden) / len(hidden))
    means = [sum(v) / len(v) for v in by_task.values()]
    return sum(means) / len(means)


def test_the_estimate_is_unbiased_and_steadier_than_the_mean_of_task_means():
    """A lesson adds 0.2 to the chance of success; tasks come back in 1 to 3 epochs (lessons
    come and go) with splits of 1 to 4 of 5 rollouts. Over many such runs both estimators
    centre on 0.2, and this one varies less."""
    rng = random.Random(11)
    ours, before = [], []
    for _ in range(300):
        events = []
        for task in range(20):
            base = rng.uniform(0.1, 0.6)
            for step in range(rng.choice((1, 1, 1, 3))):
                chosen = set(rng.sample(range(5), rng.randint(1, 4)))
                for i in range(5):
                    reward = float(rng.random() < base + (0.2 if i in chosen else 0.0))
                    events.append(event("solver", ["solver/0001"] if i in chosen else [], reward, task=str(task),
                                        rollout=i, step=step, randomized=["solver/0001"]))  # fmt: skip
        ours.append(evidence.estimate(events)[("solver", "solver/0001")].effect)
        before.append(per_task_mean(events))
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    spread = lambda xs: math.sqrt(sum((x - mean(xs)) ** 2 for x in xs) / (len(xs) - 1))  # noqa: E731
    assert mean(ours) == pytest.approx(0.2, abs=0.015) and mean(before) == pytest.approx(0.2, abs=0.015)
    assert spread(ours) < 0.92 * spread(before)


def test_bounds_are_student_t_at_a_fixed_level():
    assert evidence.t_quantile(0.975, 10) == pytest.approx(2.228, abs=1e-3)
    assert evidence.t_quantile(0.95, 3) == pytest.approx(2.353, abs=1e-3)
    rng = random.Random(0)
    events = []
    for task in range(12):
        for i in range(4):
            shown = i % 2 == 0
            reward = float(rng.random() < (0.8 if shown else 0.3))
            events.append(event("solver", ["solver/0001"] if shown else [], reward, task=str(task), rollout=i,
                                randomized=["solver/0001"]))  # fmt: skip
    e = evidence.estimate(events)[("solver", "solver/0001")]
    assert e.lcb > 0 and e.ucb - e.effect == pytest.approx(evidence.t_quantile(1 - evidence.LEVEL, 11) * e.se)


def test_the_e_value_is_the_bettors_mean_wealth_at_its_peak():
    """One group, both shown rollouts won and the three others lost: a contrast of 1, so each
    bettor's wealth is 1 + its stake; then a group the other way round takes it down again."""
    won = [event("solver", ["L"], 1.0, rollout=i) for i in range(2)] + [
        event("solver", [], 0.0, rollout=i) for i in range(2, 5)
    ]
    e = evidence.estimate(won)[("solver", "L")]
    assert e.e_value == pytest.approx(sum(1 + b for b in evidence.BETS) / len(evidence.BETS))
    lost = [event("solver", ["L"], 0.0, rollout=i, step=1) for i in range(2)] + [
        event("solver", [], 1.0, rollout=i, step=1) for i in range(2, 5)
    ]
    again = evidence.estimate(won + lost)[("solver", "L")]
    assert again.e_value == e.e_value  # the largest it has been, not where it is now
    assert again.e_now == pytest.approx(sum((1 + b) * (1 - b) for b in evidence.BETS) / len(evidence.BETS))


def test_evidence_past_the_largest_float_is_read_and_decides():
    """A library's usage log carries its evidence from run to run: 1,300 groups of a lesson that
    always wins took the e-value past the largest float, and every read of it raised."""
    won = evidence.Tally()
    for i in range(3000):
        won.add(f"t{i}", 0.25, 0.25, contrast=1.0)
    e = evidence.effect_of("solver", "solver/0001", won)
    assert math.isfinite(e.e_value) and e.e_value == e.e_now > 1e290
    assert promotion.helps(e, PromotionPolicy(), now=True) and e.model_dump_json()
    won.add("t", 0.25, -0.25, contrast=-1.0)  # one loss still moves where it stands, as a log
    assert max(won.wealth) > 690 and evidence.effect_of("solver", "solver/0001", won).e_now > 1e290


def null_run(rng, *, groups=60, adaptive=False):
    """A lesson that does nothing, shown to part of each group of five (``adaptive``: to one or
    four rollouts when the e-value so far is high, as a design reacting to its data might;
    it looks every five groups)."""
    events, tally_e = [], 1.0
    for g in range(groups):
        base = rng.uniform(0.1, 0.9)
        count = (1 if tally_e > 2 else 4) if adaptive else rng.choice((2, 3))
        chosen = set(rng.sample(range(5), count))
        events += [
            event("solver", ["solver/0001"] if i in chosen else [], float(rng.random() < base), task=str(g % 20),
                  rollout=i, step=g, randomized=["solver/0001"])
            for i in range(5)
        ]  # fmt: skip
        if adaptive and g % 5 == 4:
            tally_e = evidence.estimate(events)[("solver", "solver/0001")].e_value
    return evidence.estimate(events)[("solver", "solver/0001")]


@pytest.mark.parametrize("adaptive", [False, True])
def test_a_lesson_that_does_nothing_seldom_ever_reaches_one_over_alpha(adaptive):
    """Ville's inequality: the e-value of a lesson that does nothing ever reaches 1/alpha with
    chance at most alpha, however often it is looked at and however exposure reacts to it.
    A t test checked after every group, as the e-value is, passes its level several times over."""
    rng = random.Random(7)
    runs = [null_run(rng, adaptive=adaptive) for _ in range(300 if not adaptive else 120)]
    for alpha in (0.1, 0.2):
        assert sum(r.e_value >= 1 / alpha for r in runs) / len(runs) <= alpha
    assert sum(r.e_value >= 1 for r in runs) > len(runs) / 4  # a bettor that never bets would pass trivially


def test_a_t_test_checked_after_every_group_is_fooled_where_the_e_value_is_not():
    rng = random.Random(3)
    peeked = 0
    for _ in range(100):
        events = []
        for g in range(60):
            chosen = set(rng.sample(range(5), 2))
            events += [
                event("solver", ["L"] if i in chosen else [], float(rng.random() < 0.5), task=str(g), rollout=i, step=g)
                for i in range(5)
            ]
            if g % 5 < 4:
                continue
            e = evidence.estimate(events)[("solver", "L")]
            if e.effect - evidence.t_quantile(0.9, e.tasks - 1) * e.se > 0:
                peeked += 1
                break
    assert peeked > 15  # a 10% test, looked at twelve times


def test_a_lesson_that_helps_reaches_one_over_alpha():
    rng = random.Random(5)
    found = 0
    for _ in range(40):
        events = []
        for g in range(60):
            chosen = set(rng.sample(range(5), 2))
            base = rng.uniform(0.1, 0.7)
            events += [
                event("solver", ["L"] if i in chosen else [], float(rng.random() < base + (0.2 if i in chosen else 0)),
                      task=str(g % 30), rollout=i, step=g)
                for i in range(5)
            ]  # fmt: skip
        found += evidence.estimate(events)[("solver", "L")].e_value >= 10
    assert found >= 30


def test_the_estimator_is_calibrated_in_a_world_where_nothing_matters():
    """Rewards independent of exposure: the t statistics of many lessons look like t."""
    rng = random.Random(1)
    stats = []
    for _ in range(200):
        events = []
        for task in range(15):
            chosen = set(rng.sample(range(5), 2 + (rng.random() < 0.5)))
            for i in range(5):
                events.append(
                    event(
                        "solver",
                        ["solver/0001"] if i in chosen else [],
                        float(rng.random() < 0.5),
                        task=str(task),
                        rollout=i,
                        randomized=["solver/0001"],
                    )
                )
        e = evidence.estimate(events)[("solver", "solver/0001")]
        stats.append(e.effect / e.se)
    share = sum(abs(t) > evidence.t_quantile(0.975, 14) for t in stats) / len(stats)
    assert 0.01 <= share <= 0.1


# -- exposure --------------------------------------------------------------------------------


def effect(role, lesson, lcb, tasks=10):
    return Effect(
        role=role,
        lesson=lesson,
        tasks=tasks,
        contrasts=tasks,
        exposures=tasks,
        effect=lcb + 0.1,
        lcb=lcb,
        ucb=lcb + 0.2,
        e_value=100.0 if lcb > 0 else 1.0,
    )


def tally(contrasts: list[float]) -> evidence.Tally:
    """One group per task, split 2 / 3 (weight 6/5), whose contrast is the task's value."""
    out = evidence.Tally()
    for i, d in enumerate(contrasts):
        out.add(f"t{i}", 1.2, 1.2 * d)
    return out


def test_a_promotion_asks_each_role_where_its_evidence_stands_now():
    """A lesson whose trial in the planner crossed 1/alpha early and has fallen back since (a
    chance crossing, or help that stopped) is not promoted when its own role crosses later;
    it is when both stand at 1/alpha at the same pass. The rule before counted the peak."""

    def betting(contrasts):
        out = evidence.Tally()
        for i, d in enumerate(contrasts):
            out.add(f"t{i}", 1.2, 1.2 * d, d)
        return out

    heads = {
        "solver": Version(library="solver", number=1, next_id=2, lessons=[Lesson(id="solver/0001", text="check units")])
    }
    own = betting([0.5] * 12)
    fell = betting([0.9] * 6 + [-0.3] * 30)
    stands = betting([0.9] * 6 + [0.1] * 30)
    assert own.e_now >= 10 and fell.e_value >= 10 > fell.e_now and stands.e_now >= 10
    promoted = lambda trial, **change: promotion.plan(  # noqa: E731
        heads, {("solver", "solver/0001"): own, ("planner", "solver/0001"): trial},
        PromotionPolicy().model_copy(update=change), same=lambda a, b: False,
    )  # fmt: skip
    assert not promoted(fell)
    assert [m.roles for m in promoted(stands)] == [["planner", "solver"]]
    assert [m.roles for m in promoted(fell, standing=False)] == [["planner", "solver"]]


def test_after_the_last_step_only_lessons_whose_evidence_leans_towards_helping_stay():
    """A run's last step keeps a private lesson tried on ``min_tasks`` tasks only if an 80%
    lower bound on its effect is above zero: a clear help stays; a small, noisy one and one
    below zero leave; one never tried, or on fewer tasks, stays (written too late to be
    judged). With ``end_level`` None, the rule before: only an estimate below zero leaves."""
    rng = random.Random(3)
    contrasts = {
        "solver/0001": [0.3 + rng.uniform(-0.2, 0.2) for _ in range(12)],  # helps
        "solver/0002": [0.62, -0.58] * 6,  # +0.02, leans neither way
        "solver/0004": [-0.1 + rng.uniform(-0.3, 0.3) for _ in range(12)],  # below zero
        "solver/0005": [-0.2, 0.1, -0.3],  # 3 tasks: too young to judge
    }
    lessons = [Lesson(id=f"solver/000{i}", text=f"lesson {i}") for i in range(1, 6)]  # 0003: never tried
    heads = {
        "solver": Version(library="solver", number=3, next_id=6, lessons=lessons),
        "global": Version(library="global", number=1, next_id=2, lessons=[Lesson(id="global/0001", text="g")]),
    }
    tallies = {("solver", lesson): tally(values) for lesson, values in contrasts.items()}
    noisy = evidence.effect_of("solver", "solver/0002", tallies[("solver", "solver/0002")])
    assert noisy.effect > 0 and not evidence.likely_helps(noisy)
    policy = PromotionPolicy()
    pruned = lambda policy, last: {m.lessons[0] for m in promotion.prunings(heads, tallies, policy, last=last)}  # noqa: E731
    assert pruned(policy, True) == {"solver/0002", "solver/0004"}
    assert not {"solver/0001", "solver/0003", "solver/0005"} & (pruned(policy, False) | pruned(policy, True))
    assert pruned(policy.model_copy(update={"end_level": None}), True) == {"solver/0004"}
    reasons = {m.lessons[0]: m.reason for m in promotion.prunings(heads, tallies, policy, last=True)}
    assert "80% lower bound over 12 tasks is not above zero" in reasons["solver/0002"]
    # At 0.5 the bound is the estimate: the small, noisy lesson with a positive estimate stays.
    assert pruned(policy.model_copy(update={"end_level": 0.5}), True) == {"solver/0004"}


def test_after_the_last_step_a_role_adopts_the_lessons_its_trials_lean_towards():
    """A private lesson whose trial in another role leans towards helping there (80% lower bound
    above zero over ``min_tasks`` tasks, an e-value of 3 or more) is added to that role, unless the role or the global
    library has it already, in the same words or as a judged twin (of two twins, the stronger
    trial goes); a trial that leans neither way, one on too few tasks, and a role's own lessons
    are not adopted."""
    rng = random.Random(7)

    def helps(mean=0.3):
        out = evidence.Tally()
        for i in range(12):
            d = mean + rng.uniform(-0.2, 0.2)
            out.add(f"t{i}", 1.2, 1.2 * d, d)  # with the bettors' stakes: an e-value
        return out

    lesson = lambda i, name: Lesson(id=i, text=f"Lesson {name}.")  # noqa: E731
    heads = {
        "solver": Version(library="solver", number=1, next_id=8, lessons=[lesson(f"solver/000{i}", x) for i, x in
                                                                          enumerate("abcdefg", start=1)]),
        "planner": Version(library="planner", number=1, next_id=3, lessons=[lesson("planner/0001", "c"),
                                                                            lesson("planner/0002", "d twin")]),
        "verifier": Version(library="verifier", number=1, next_id=2, lessons=[lesson("verifier/0001", "g twin")]),
        "global": Version(library="global", number=1, next_id=2, lessons=[lesson("global/0001", "e")]),
    }  # fmt: skip
    tallies = {
        ("planner", "solver/0001"): helps(),  # adopted by the planner
        ("critic", "solver/0001"): helps(),  # and by the critic, a role with no library yet
        ("planner", "solver/0002"): tally([0.62, -0.58] * 6),  # +0.02: leans neither way
        ("planner", "solver/0003"): helps(),  # the planner has it in the same words
        ("planner", "solver/0004"): helps(),  # the planner has its twin
        ("planner", "solver/0005"): helps(),  # the global library has it
        ("planner", "solver/0006"): tally([0.5, 0.4, 0.6]),  # 3 tasks
        ("solver", "solver/0007"): helps(),  # its own role
        ("planner", "solver/0007"): helps(0.6),  # the planner takes it, not its weaker twin below
        ("planner", "verifier/0001"): helps(),
    }
    twins = {frozenset(("Lesson d.", "Lesson d twin.")), frozenset(("Lesson g.", "Lesson g twin."))}
    same = lambda a, b: a.text == b.text or frozenset((a.text, b.text)) in twins  # noqa: E731
    moves = promotion.adoptions(heads, tallies, PromotionPolicy(), same)
    assert sorted((m.lessons[0], m.roles[0]) for m in moves) == [
        ("solver/0001", "critic"), ("solver/0001", "planner"), ("solver/0007", "planner"),
    ]  # fmt: skip
    assert all(m.kind == "adopt" and m.evidence[0].role == m.roles[0] and m.evidence[0].trial for m in moves)
    versions, done = promotion.execute(moves, heads, provenance=Provenance(run="r", epoch=0, step=1))
    after = {v.library: [l.text for l in v.lessons] for v in versions}
    assert after == {"planner": ["Lesson c.", "Lesson d twin.", "Lesson g.", "Lesson a."], "critic": ["Lesson a."]}
    assert sorted(m.into for m in done) == ["critic/0001", "planner/0003", "planner/0004"]
    assert promotion.adoptions(heads, tallies, PromotionPolicy(adopt_level=None), same) == []
    assert promotion.adoptions(heads, tallies, PromotionPolicy(adopt_e_value=10**9), same) == []


def test_after_the_last_step_a_lesson_that_left_is_adopted_only_where_its_trial_shows_it_helps():
    """A lesson that left its library during the run (pruned, or deleted by an edit) is adopted
    by a role whose trial shows that it helps there, its e-value standing at 1/alpha; not on a
    trial that only leans towards helping (what adopts a lesson still in a library), nor on one
    that crossed 1/alpha and has fallen back (help that stopped), nor into a role that had it
    and saw it leave, nor with ``adopt_departed`` off."""

    def trial(*means: float):
        out = evidence.Tally()
        for i, d in enumerate(means):
            out.add(f"t{i}", 1.2, 1.2 * d, d)  # with the bettors' stakes: an e-value
        return out

    lesson = lambda i: Lesson(id=i, text=f"Lesson {i}.")  # noqa: E731
    heads = {"solver": Version(library="solver", number=9, next_id=5, lessons=[lesson("solver/0004")])}
    departed = [lesson(f"solver/000{i}") for i in (1, 2, 3, 5)] + [
        Lesson(id="planner/0002", text="Lesson solver/0005.")
    ]
    tallies = {
        ("planner", "solver/0005"): trial(*[0.5] * 12),  # the planner had it and saw it leave
        ("planner", "solver/0001"): trial(*[0.5] * 12),  # shown to help the planner
        ("planner", "solver/0002"): trial(*[0.3] * 12),  # leans towards helping, e-value below 10
        ("planner", "solver/0003"): trial(*[0.5] * 12, *[-0.3] * 12),  # crossed early, fell back
        ("planner", "solver/0004"): trial(*[0.3] * 12),  # still in the solver's library: the lenient bar
    }
    effects = {key: evidence.effect_of(*key, t) for key, t in tallies.items()}
    assert effects[("planner", "solver/0001")].e_now >= 10 > effects[("planner", "solver/0002")].e_value >= 3
    assert effects[("planner", "solver/0003")].e_value >= 10 > effects[("planner", "solver/0003")].e_now
    assert evidence.likely_helps(effects[("planner", "solver/0003")])
    same = lambda a, b: a.text == b.text  # noqa: E731
    moves = promotion.adoptions(heads, tallies, PromotionPolicy(), same, departed)
    assert sorted((m.lessons[0], m.roles[0]) for m in moves) == [("solver/0001", "planner"), ("solver/0004", "planner")]
    revived = next(m for m in moves if m.lessons[0] == "solver/0001")
    assert revived.reason.startswith("it left solver; its trial in planner shows it helps there")
    off = PromotionPolicy(adopt_departed=False)
    assert [m.lessons[0] for m in promotion.adoptions(heads, tallies, off, same, departed)] == ["solver/0004"]


@pytest.mark.parametrize(
    "record, promoted, leave",
    [
        ("helps", [], False),
        ("harms", [], True),
        ("none", [], False),
        ("harms", [0.6, 0.5], False),  # the lessons promoted carry their evidence into the global library
    ],
)
def test_after_the_last_step_a_young_lesson_stays_only_if_the_lessons_tried_before_help_on_average(
    record, promoted, leave
):
    """A lesson written too late to be judged is a draw from what the team's proposer writes:
    when the lessons tried before it do not help on average, it leaves at the run's end; when
    they do, or none was tried long enough (a run of one step), it stays. The record counts each
    lesson in a role that reads it as its own, those that left and those promoted (a global
    lesson, in every role) too, and not a private lesson's trials in the other roles."""
    rng = random.Random(5)
    noisy = lambda mean: [mean + rng.uniform(-0.2, 0.2) for _ in range(12)]  # noqa: E731
    tried = {"helps": [0.3, 0.2, -0.1], "harms": [-0.2, -0.15, 0.1], "none": []}[record]
    tallies = {("planner", f"planner/000{i}"): tally(noisy(mean)) for i, mean in enumerate(tried, start=1)}
    tallies |= {(role, "global/0001"): tally(noisy(mean)) for role, mean in zip(["planner", "verifier"], promoted)}
    tallies[("solver", "planner/0001")] = tally(noisy(-0.5 if leave else 0.5))  # a trial: not counted
    tallies[("solver", "solver/0002")] = tally([0.4, -0.3, 0.2])  # 3 tasks: too young
    lessons = [Lesson(id="solver/0001", text="never tried"), Lesson(id="solver/0002", text="tried on 3 tasks")]
    best = max(range(len(tried)), key=tried.__getitem__, default=None)
    kept = [Lesson(id=f"planner/000{best + 1}", text="still here")] if tried else []  # the others left before
    heads = {
        "solver": Version(library="solver", number=2, next_id=3, lessons=lessons),
        "planner": Version(library="planner", number=4, next_id=4, lessons=kept),
        "global": Version(library="global", number=1, next_id=2, lessons=[Lesson(id="global/0001", text="g")]),
    }
    policy = PromotionPolicy()

    gone = {m.lessons[0]: m.reason for m in promotion.prunings(heads, tallies, policy, last=True)}
    young = {"solver/0001", "solver/0002"}
    assert young & set(gone) == (young if leave else set())
    for other, last in [(policy, False), (policy.model_copy(update={"end_level": None}), True)]:
        assert not young & {m.lessons[0] for m in promotion.prunings(heads, tallies, other, last=last)}
    if leave:
        assert (
            "(0 tasks), and the 3 lessons tried on 5 tasks or more do not help on average (-0.0" in gone["solver/0001"]
        )


def test_exposure_randomizes_new_lessons_and_keeps_established_ones_stable():
    injected = ["solver/0001", "solver/0002"]
    effects = {("solver", "solver/0001"): effect("solver", "solver/0001", 0.2)}  # established
    trial = Lesson(id="planner/0001", text="A planner's lesson on trial.")
    plans = [
        exposure.plan(injected, [trial], role="solver", effects=effects, policy=ExposurePolicy(retest=0.0),
                      promotion=PromotionPolicy(),
                      group_size=5, key=(0, "e0/s0", f"t{i}"))
        for i in range(50)
    ]  # fmt: skip
    for plan in plans:
        assert plan[0].randomized == ("solver/0002", "planner/0001") and plan[0].stable == ("solver/0001",)
        hidden = [("solver/0002" in p.hidden) for p in plan]
        trials = [bool(p.trials) for p in plan]
        assert 0 < sum(hidden) < 5 and 0 < sum(trials) < 5  # every group gives a contrast
        assert all("solver/0001" not in p.hidden for p in plan)
    again = exposure.plan(injected, [trial], role="solver", effects=effects, policy=ExposurePolicy(retest=0.0),
                      promotion=PromotionPolicy(),
                          group_size=5, key=(0, "e0/s0", "t0"))  # fmt: skip
    assert again == plans[0]  # seeded: a resumed run makes the same choices
    retested = exposure.plan(injected, [], role="solver", effects=effects, policy=ExposurePolicy(retest=1.0),
                             promotion=PromotionPolicy(),
                             group_size=5, key=(0, "e0/s0", "t0"))  # fmt: skip
    assert "solver/0001" in retested[0].randomized


def test_retests_in_a_step_are_nested_so_every_group_shows_its_stable_lessons_in_one_order():
    """A prompt cache reuses a prefix across the groups of a step only if their stable parts
    agree: each group's stable lessons are a prefix of the step's order. Averaged over steps,
    each established lesson is still retested in about ``retest`` of the groups."""
    injected = [f"solver/{i:04d}" for i in range(1, 13)]
    effects = {("solver", i): effect("solver", i, 0.2) for i in injected}  # all established
    retested, groups, varied = {i: 0 for i in injected}, 0, 0
    for step in range(200):
        orders, stables = [], set()
        for task in range(8):
            plan = exposure.plan(injected, [], role="solver", effects=effects, policy=ExposurePolicy(retest=0.3),
                                 promotion=PromotionPolicy(),
                                 group_size=5, key=(0, f"e0/s{step}", f"t{task}"))  # fmt: skip
            orders.append(plan[0].stable + plan[0].randomized)  # the order the prompt shows them in
            stables.add(plan[0].stable)
            for i in plan[0].randomized:
                retested[i] += 1
            groups += 1
            assert set(plan[0].stable) | set(plan[0].randomized) == set(injected)
        assert len(set(orders)) == 1, step  # one order in the step, whatever each group retests
        varied += len(stables) > 1
    assert varied > 180  # the groups of a step mostly retest different lessons (not one draw per step)
    shares = [n / groups for n in retested.values()]
    assert 0.2 < min(shares) and max(shares) < 0.4 and abs(sum(shares) / len(shares) - 0.3) < 0.03


def test_a_lesson_that_helps_stays_under_evaluation_while_its_promotion_is_open():
    """The solver's lesson helps the solver; its trial on the planner is open, so it is still
    shown to half of each group; once the planner's trial settles (it cannot help there) it is
    retested only in the ``retest`` share of the groups. By default every group retests it."""
    own = "solver/0001"
    helps = {("solver", own): effect("solver", own, 0.2)}
    settled = {**helps, ("planner", own): effect("planner", own, -0.4)}
    roles = ("planner", "solver")

    def share(effects, policy):
        plans = [
            exposure.plan([own], [], role="solver", effects=effects, policy=policy, promotion=PromotionPolicy(),
                          group_size=5, key=(0, f"e0/s{i}", "t"), roles=roles)[0]
            for i in range(200)
        ]  # fmt: skip
        return sum(own in p.randomized for p in plans) / len(plans)

    assert share(helps, ExposurePolicy(retest=0.3)) == 1.0
    assert 0.2 < share(settled, ExposurePolicy(retest=0.3)) < 0.4
    assert share(settled, ExposurePolicy()) == 1.0


def test_transfer_trials_take_other_roles_lessons_strongest_first_until_settled():
    strong, new, settled = (Lesson(id=f"planner/000{i}", text=t) for i, t in enumerate(("Good.", "New.", "Idle."), 1))
    heads = {
        "planner": Version(library="planner", number=1, next_id=4, lessons=[new, strong, settled]),
        "solver": Version(library="solver", number=1, next_id=2, lessons=[Lesson(id="solver/0001", text="Own.")]),
    }
    effects = {
        ("planner", "planner/0001"): effect("planner", "planner/0001", 0.1),  # helps the planner
        # tried on the solver already, and its upper bound is below the margin: settled there
        ("solver", "planner/0003"): effect("solver", "planner/0003", -0.4),
    }
    policy = PromotionPolicy()
    found = exposure.trial_lessons("solver", heads, effects, most=3, promotion=policy)
    assert [l.id for l in found] == ["planner/0001", "planner/0002"]  # a lesson just written is tried at once
    assert [l.id for l in exposure.trial_lessons("solver", heads, effects, most=1, promotion=policy)] == [
        "planner/0001"
    ]
    assert [l.id for l in exposure.trial_lessons("planner", heads, effects, most=3, promotion=policy)] == [
        "solver/0001"
    ]


def test_a_lesson_that_left_goes_on_with_the_trials_that_went_well_in_the_places_left_free():
    """A lesson that left its library goes on with a transfer trial whose e-value there reached
    ``reached``, after the libraries' own lessons; not with one that only leans towards
    helping below it, nor in the role it left, nor in one that saw its twin leave."""
    kept = Lesson(id="planner/0001", text="Still in the planner's library.")
    heads = {
        "planner": Version(library="planner", number=2, next_id=3, lessons=[kept]),
        "solver": Version(library="solver", number=3, next_id=9, lessons=[]),
    }
    strong, weaker, leaning, settled, twin = (
        Lesson(id=f"verifier/000{i}", text=t) for i, t in enumerate(("A.", "B.", "C.", "D.", "E."), 1)
    )
    gone = Lesson(id="solver/0007", text="The solver's, gone.")
    twin_gone = Lesson(id="solver/0008", text="E, in the solver's words.")

    def trial(lesson, e_value, effect=0.1, role="solver"):
        return Effect(
            role=role, lesson=lesson.id, tasks=8, contrasts=8, exposures=8, effect=effect, lcb=effect - 0.2,
            ucb=effect + 0.2, e_value=e_value, trial=True,
        )  # fmt: skip

    effects = {
        ("solver", strong.id): trial(strong, 8.0),
        ("solver", weaker.id): trial(weaker, 3.0),
        ("solver", leaning.id): trial(leaning, 2.9, effect=0.2),  # leans towards helping, below 3
        ("solver", settled.id): trial(settled, 4.0, effect=-0.5),  # peaked, then settled: cannot help
        ("solver", twin.id): trial(twin, 9.0),
        ("planner", gone.id): trial(gone, 5.0, role="planner"),
    }
    departed = [leaning, weaker, settled, twin, strong, gone, twin_gone]
    same = lambda a, b: {a.id, b.id} == {twin.id, twin_gone.id}  # noqa: E731
    policy = PromotionPolicy()

    def tried(role, most=8, reached=3.0):
        found = exposure.trial_lessons(
            role, heads, effects, most=most, promotion=policy, same=same, departed=departed, reached=reached
        )
        return [l.id for l in found]

    assert tried("solver") == ["planner/0001", strong.id, weaker.id]  # the library's lesson first
    assert tried("solver", most=2) == ["planner/0001", strong.id]  # only in the places left free
    assert tried("solver", reached=None) == ["planner/0001"]  # trials stop when their lesson leaves
    assert tried("planner") == [gone.id]  # never in the role it left: the solver's trial goes on here
    assert tried("solver", reached=2.0) == ["planner/0001", strong.id, weaker.id, leaning.id]


# -- the graph -------------------------------------------------------------------------------


def test_the_graph_holds_the_estimates_and_exports(tmp_path):
    heads = {
        "solver": Version(
            library="solver", number=1, next_id=2, lessons=[Lesson(id="solver/0001", text="Check units.")]
        )
    }
    own = Effect(role="solver", lesson="solver/0001", tasks=9, contrasts=12, exposures=20, effect=0.3, lcb=0.1, ucb=0.5)
    trial = own.model_copy(update={"role": "planner", "tasks": 1, "lcb": -math.inf, "ucb": math.inf, "trial": True})
    effects = {("solver", "solver/0001"): own, ("planner", "solver/0001"): trial}
    events = [event("solver", ["solver/0001"], 1.0, task="t", randomized=["solver/0001"])]
    g = graph.build(effects, heads, events=events)
    own = g.edges["role:solver", "lesson:solver/0001"]
    assert own["kind"] == "evidence" and own["helps"] and own["lcb"] == 0.1 and own["tasks"] == 9
    trial = g.edges["role:planner", "lesson:solver/0001"]
    assert trial["kind"] == "trial" and "lcb" not in trial  # unbounded sides are left out
    assert g.edges["lesson:solver/0001", "task:t"]["exposures"] == 1
    assert graph.roles_helped(g, "solver/0001") == ["solver"]
    nx.write_graphml(g, tmp_path / "g.graphml")  # every attribute is a GraphML type
