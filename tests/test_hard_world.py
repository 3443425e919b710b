"""The hard learning world (``bench/hard_world.py``) does what each of its switches says.

Each check compares the world with the feature on against what it would be with the feature
off, so that it fails when the feature is switched off or broken; none trains mas (the
benchmark does that), so the whole file runs in seconds.
"""

import ast
import math
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from mas.models.fake import Request

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import hard_world as hw  # noqa: E402
from hard_world import HARD, LESSONS_BY_KEY, ROLES, HardWorld, Switches  # noqa: E402

TEXT = {key: lesson.texts[0] for key, lesson in LESSONS_BY_KEY.items()}


def world(**changes) -> HardWorld:
    w = HardWorld(0, replace(HARD, **changes))
    w.questions = [q for _, q, _ in w.make_tasks(40, seed=1)]
    return w


def gain(w: HardWorld, shown: dict[str, list[str]], questions=None) -> float:
    questions = questions or w.questions
    return w.true_success(shown, questions) - w.true_success({}, questions)


def team_call(role: str, task: str, seed: int, texts=(), earlier=()) -> Request:
    block = "\nLessons learned from earlier tasks\n" + "".join(f"- {t}\n" for t in texts) if texts else ""
    return Request(f"You are the {role} of a small team.{block}", [task, *earlier], [], None, seed)


def rollout(w: HardWorld, task: str, seed: int, shown: dict[str, list[str]]) -> bool:
    for role in ROLES[:-1]:
        w.respond(team_call(role, task, seed, shown.get(role, ())))
    answer = w.respond(team_call("verifier", task, seed, shown.get("verifier", ())))
    return answer.split()[-1] != "0"


def test_the_world_reads_nothing_of_mas_but_the_fake_clients_protocol():
    for name in ("hard_world.py", "hard_lessons.py"):
        tree = ast.parse((BENCH / name).read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert {m for m in imported if m.split(".")[0] == "mas"} <= {"mas.models.fake"}


@pytest.mark.parametrize("log_odds", [True, False])
def test_effects_add_on_the_log_odds_scale_under_a_ceiling(log_odds):
    w = world(log_odds=log_odds)
    question = w.questions[0]
    before, after = w.success(question, {}), w.success(question, {"planner": [TEXT["expression"]]})
    logit = lambda p: math.log(p / hw.CEILING / (1 - p / hw.CEILING))  # noqa: E731
    # One unit of effect is one logit of the chance relative to the ceiling, on any task.
    assert (logit(after) - logit(before) == pytest.approx(1.0)) is log_odds
    everything = {r: [l.texts[0] for l in hw.LESSONS if l.effect.get(r, 0) > 0] for r in ROLES}
    assert (w.success(question, everything) < hw.CEILING) is log_odds  # approached, never reached


@pytest.mark.parametrize("by_task", [True, False])
def test_the_units_lesson_helps_on_the_tasks_with_units_and_hurts_on_the_rest(by_task):
    w = world(by_task=by_task)
    with_units = [q for q in w.questions if w.tasks[q][1]]
    without = [q for q in w.questions if not w.tasks[q][1]]
    assert len(with_units) == len(without)
    shown = {"solver": [TEXT["units"]]}
    assert (gain(w, shown, with_units) > 0 > gain(w, shown, without)) is by_task


@pytest.mark.parametrize("drift", [True, False])
def test_effects_drift_across_the_epochs_the_world_infers(drift):
    w = world(drift=drift, grader_noise=0.0)
    shown = {"solver": [TEXT["round"]], "verifier": [TEXT["round"]]}
    rates = []
    for epoch in range(3):  # 5 rollouts of each task per epoch: the world counts them
        wins = [rollout(w, q, 1000 * epoch + 10 * i + k, shown) for i, q in enumerate(w.questions) for k in range(5)]
        rates.append(sum(wins) / len(wins))
    # "round" helps the solver and the verifier in the first epoch and hurts them by the last.
    assert (rates[0] > rates[2] + 0.2) is drift
    first = w.effect("total", "planner", units=False, epoch=0)
    assert (first == 0.0 < w.effect("total", "planner", units=False)) is drift


@pytest.mark.parametrize("interaction", [True, False])
def test_the_solvers_order_lesson_helps_only_beside_the_planners_numbered_plan(interaction):
    w = world(interaction=interaction)
    alone = gain(w, {"solver": [TEXT["order"]]})
    planned = {"planner": [TEXT["plan"]]}
    beside = gain(w, {**planned, "solver": [TEXT["order"]]}) - gain(w, planned)
    assert beside > 0
    assert (alone == 0.0) is interaction


@pytest.mark.parametrize("twins", [True, False])
def test_a_negation_hurts_and_a_paraphrase_without_the_condition_does_nothing(twins):
    w = world(twins=twins)
    lesson = LESSONS_BY_KEY["expression"]
    for role in ("planner", "solver"):
        assert gain(w, {role: [lesson.texts[1]]}) == gain(w, {role: [lesson.texts[0]]}) > 0
        assert (gain(w, {role: [lesson.negation]}) < 0) is twins
        assert (gain(w, {role: [lesson.bare]}) == 0.0) is twins
    assert (w.key(lesson.bare) == "expression~bare") is twins


def judge(w: HardWorld, a: str, b: str, salt: int = 0) -> bool:
    from mas.types.replies import Equivalence

    request = Request("judge", [f"Lesson A: {a}\nLesson B: {b}"], [], Equivalence, salt)
    return '"same": true' in w.respond(request)


def test_the_judges_systematic_errors():
    e = LESSONS_BY_KEY["order"]
    unrelated = (e.texts[0], TEXT["color"])
    negation, bare, paraphrase = (e.texts[0], e.negation), (e.texts[0], e.bare), (e.texts[0], e.texts[1])
    always, overlap, never, honest = (world(judge=j) for j in ("same", "overlap", "never", "honest"))
    assert all(judge(always, *pair) for pair in (unrelated, negation, bare, paraphrase))
    # Shared words, not meaning: the negation and the bare paraphrase merge, the real paraphrase does not.
    assert hw.overlap(*negation) >= 0.5 and hw.overlap(*bare) >= 0.5 > hw.overlap(*paraphrase)
    assert [judge(overlap, *pair) for pair in (unrelated, negation, bare, paraphrase)] == [False, True, True, False]
    assert not any(judge(never, *pair) for pair in (unrelated, negation, bare, paraphrase, (e.texts[0],) * 2))
    # The action judge ignores the condition: the bare paraphrase is "the same", the negation is not.
    action = world(judge="action")
    assert [judge(action, *pair) for pair in (unrelated, negation, bare, paraphrase)] == [False, False, True, True]
    assert judge(action, e.bare, e.texts[2]) and not judge(action, e.negation, e.bare)
    # The honest judge errs at random, one call in ten: asking again (another seed) finds the truth.
    calls = [judge(honest, *pair, salt) for pair in (unrelated, negation, paraphrase) for salt in range(100)]
    assert 0.8 < (sum(not c for c in calls[:200]) + sum(calls[200:])) / 300 < 0.97


@pytest.mark.parametrize("proposer", [True, False])
def test_the_proposer_rarely_proposes_a_helpful_lesson_and_names_the_wrong_role_half_the_time(proposer):
    from mas.types.replies import Advantage

    w = world(proposer=proposer)
    helpful = right = 0
    for seed in range(2000):
        reply = w._advantage(Request("advantage", ["Task: x"], [], Advantage, seed), "")
        op = reply["operations"][0]
        roles = w.helpful_roles(w.key(op["text"]))
        helpful += bool(roles)
        right += op["library"] in roles
    share, role_right = helpful / 2000, right / max(helpful, 1)
    assert (abs(share - 0.2) < 0.04 and abs(role_right - 0.5) < 0.07) is proposer


@pytest.mark.parametrize("rewords", [0.2, 0.0])
def test_the_proposer_rewords_a_listed_lesson_into_its_paraphrase_its_bare_form_or_its_negation(rewords):
    from mas.types.replies import Advantage, EditBatch

    w = world(rewords=rewords)
    lesson = LESSONS_BY_KEY["expression"]
    body = f"Current lessons:\nglobal (every role):\n(none)\n\nsolver:\n[solver/0003] {lesson.texts[0]}\n"
    kinds = []
    for seed in range(2000):
        ops = w._advantage(Request("advantage", [body], [], Advantage, seed), body)["operations"]
        modifies = [op for op in ops if op["op"] == "modify"]
        assert all(op["id"] == "solver/0003" and w.key(op["text"]).startswith("expression") for op in modifies)
        assert all(op["text"] != lesson.texts[0] for op in modifies)
        kinds += [w.key(op["text"]).partition("~")[2] or "paraphrase" for op in modifies]
    assert abs(len(kinds) / 2000 - rewords) < 0.03
    if rewords:  # drawn alike from the other four wordings: two paraphrases, the bare one, the negation
        shares = {kind: kinds.count(kind) / len(kinds) for kind in ("paraphrase", "bare", "not")}
        assert abs(shares["paraphrase"] - 0.5) < 0.08 and all(abs(shares[k] - 0.25) < 0.08 for k in ("bare", "not"))
    # The editor takes the modify proposed, whatever its reason.
    proposed = f"Proposed changes:\n- modify [solver/0003] to: {lesson.negation} (why: said better)\n"
    edits = w._edit(Request("edit", [proposed], [], EditBatch, 0), proposed)["edits"]
    assert edits == [{"op": "modify", "id": "solver/0003", "text": lesson.negation}]
    # A text not planted has no other wording to turn into.
    assert w.wordings("Say please.") == [] and len(w.wordings(lesson.texts[0])) == 4


@pytest.mark.parametrize("noise", [0.05, 0.0])
def test_the_grader_flips_about_one_reward_in_twenty(noise):
    noisy, clean = world(grader_noise=noise), world(grader_noise=0.0)
    shown = {"planner": [TEXT["expression"]]}
    seeds = range(4000)
    flips = sum(
        rollout(noisy, noisy.questions[s % 40], s, shown) != rollout(clean, clean.questions[s % 40], s, shown)
        for s in seeds
    )
    assert (0.04 < flips / len(seeds) < 0.06) is (noise > 0)


def test_the_truth_of_the_hard_world():
    w = world()
    questions = [q for _, q, _ in w.make_tasks(200, seed=2, prefix="h")]
    # Helping two roles on average at the end: not the task-varying one, nor the one that fades.
    assert w.cross_role(questions) == {"expression", "estimate", "reread", "total"}
    best = w.best_library(questions)
    assert TEXT["order"] in best["solver"] and TEXT["plan"] in best["planner"]
    assert TEXT["units"] not in best["solver"] and TEXT["round"] not in best["solver"]
    value = w.best(questions)
    for role in ROLES:  # no single change of the best library does better
        for text in (*TEXT.values(), *best[role]):
            changed = {**best, role: [t for t in best[role] if t != text] + ([text] if text not in best[role] else [])}
            assert w.true_success(changed, questions) <= value + 1e-12
    # Harm is judged in the library's own context: near the ceiling of the best one it hides.
    negation = LESSONS_BY_KEY["expression"].negation
    for context, found in ((best, []), ({"solver": [TEXT["expression"]]}, [negation])):
        shown = {**context, "solver": [*context["solver"], negation, TEXT["aloud"]]}
        assert w.harmful(shown, [(t, ["solver"]) for t in shown["solver"]], questions) == found


def test_the_null_world_has_no_effect_and_the_same_proposer():
    null, planted = HardWorld(0, replace(HARD, null=True)), HardWorld(0, HARD)
    questions = [q for _, q, _ in null.make_tasks(40, seed=1)]
    everything = {r: [t for l in hw.LESSONS for t in (*l.texts, l.negation)] for r in ROLES}
    assert null.true_success(everything, questions) == null.true_success({}, questions) == null.best(questions)
    assert null.cross_role(questions) == set()
    assert null._helps == planted._helps


def test_switches_refuse_an_unknown_judge():
    with pytest.raises(ValueError, match="judge"):
        Switches(judge="lenient")
