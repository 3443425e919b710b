"""Randomized evidence: does showing a lesson to a role help that role's team?

Within a group (G rollouts of one task), each lesson under evaluation was shown to a random
part of the rollouts (``exposure.py``). Comparing the rollouts that were shown it with those
that were not, within the group, cancels the task's difficulty; nothing the model says (a
citation, a summarizer's judgement) enters it.

**The estimate** is least squares of the reward on the lesson's indicator, centred within
each group (a fixed effect per group): each group's contrast (mean reward shown minus not
shown) weighs by the spread of its exposure, n_shown * n_hidden / n, the inverse of the
contrast's variance. So a task seen in three epochs weighs three times one seen once, and a
group split 2 / 3 more than one split 1 / 4. (The mean over tasks of each task's mean
contrast, used before, gave every task one vote: in the learning-world benchmark, the mean t
of the planted helpful lessons was 2.0 with it and 2.2 with these weights, the null's spread
unchanged. A joint fit of all lessons randomized in the same rollouts, which could take the
other lessons' effects out of each one's noise, gained nothing once its interval was made
honest: with about 85 lessons over 40 tasks, its residuals understated its standard error by
about 30%.)

**Lessons judged to say the same thing** (a class of twins) are one treatment: a rollout is
shown the class when it showed any member, and exposure shows them with one coin.

**The interval** is clustered by task: each task's groups, across epochs, form one cluster,
and the variance is the cluster jackknife (how far the estimate moves when one task is left
out), so one task seen three times does not count as three. It is Student t with one degree
of freedom less than the tasks, and its standard error is at least ``SD_FLOOR`` over the
root of the tasks.

**Looks.** Training looks at the evidence again after every epoch, so the level of the bounds
is spent across looks, and the levels of all looks sum to alpha (a union bound: the bounds
hold at every look at once). The schedule is fixed before any data: the first ``horizon``
looks (the passes of a planned run, 3 by default) share 4/5 of alpha in proportion to their
number, so the last has the most (it sees the most data); every later look spends from the
remaining fifth at 6 / (pi^2 k^2) for its k-th look past the horizon. (Spending 6 / (pi^2 t^2)
from the first look on gave look 3 a level of 0.0034 where it now has 0.02: in the learning
world the third look then found 1 of 18 planted cross-role lessons instead of 6, with no
false promotion in either. Exact group-sequential boundaries, which take into account that
look 3 holds look 2's data, would give look 3 a level of 0.03 and spend alpha fully: in the
learning world they found no more planted lessons and twice the null world's false
promotions; the union bound's slack is what keeps the null world clean.)

    >>> round(t_quantile(0.975, 10), 3)
    2.228
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mas.types import Effect, UsageEvent

if TYPE_CHECKING:
    from mas.library.logs import StepLog

SD_FLOOR = 0.2
"""Smallest per-task standard deviation an interval assumes: with 0/1 rewards, a handful of
identical contrasts says little, and a zero spread must not make a bound exact."""

Key = tuple[str, str]
"""(role, lesson): the lesson as shown to that role."""


@dataclass
class _Tally:
    """The evidence of one (role, lesson), per task: the sum over its groups of the squared
    centred exposure (``weight``) and of its product with the centred reward (``score``)."""

    per_task: dict[str, list[float]] = field(default_factory=dict)
    """task -> [weight, score]."""
    contrasts: int = 0
    exposures: int = 0
    judged: int = 0

    def add(self, task: str, weight: float, score: float) -> None:
        sums = self.per_task.setdefault(task, [0.0, 0.0])
        sums[0] += weight
        sums[1] += score


def plausibly_helps(e: Effect, level: float = 0.2) -> bool:
    """Whether a lenient one-sided bound (``level``, not spent) still admits help: the test
    that keeps a lesson whose small effect a strict bound cannot yet confirm."""
    return e.tasks < 2 or e.effect - t_quantile(1 - level, e.tasks - 1) * e.se > 0


RESERVE = 0.2
"""Share of alpha kept for the looks after the horizon."""


def spent(alpha: float, look: int, horizon: int = 3) -> float:
    """The level of look ``look`` (1, 2, ...): the looks' levels sum to ``alpha``.

    >>> [round(spent(0.05, t), 4) for t in (1, 2, 3, 4, 5)]
    [0.0067, 0.0133, 0.02, 0.0061, 0.0015]
    """
    look = max(look, 1)
    if look <= horizon:
        return (1 - RESERVE) * alpha * 2 * look / (horizon * (horizon + 1))
    return RESERVE * alpha * 6 / (math.pi**2 * (look - horizon) ** 2)


def contrasts(
    events: Iterable[UsageEvent] | StepLog,
    lineage: dict[str, str] | None = None,
    classes: dict[str, str] | None = None,
) -> dict[Key, _Tally]:
    """Per (role, lesson): its evidence in the groups where its showing to the role was
    randomized, by task. ``lineage`` maps an old lesson id to the id it lives on as (a
    promoted lesson keeps the evidence of the private lesson it came from).

    ``classes`` maps a lesson id (after lineage) to the class of lessons judged to say the same
    thing (``similar.classes``): a class is one treatment. In a group, a rollout counts as shown
    the class when it showed any member, so two copies shown side by side do not each look
    useless while the other stands in for it. Every member of a class gets the class's tally.

    ``events`` may be a usage log (``StepLog``): its steps are then tallied one at a time, so
    the pass holds one step's events however long the run (a group never spans two steps)."""
    lineage, classes = lineage or {}, classes or {}

    def unit(lesson: str) -> str:
        lesson = _current(lesson, lineage)
        return classes.get(lesson, lesson)

    tallies: dict[Key, _Tally] = defaultdict(_Tally)
    steps = events.steps() if hasattr(events, "steps") else [(None, events)]
    for _, step in steps:
        groups: dict[tuple, list[UsageEvent]] = defaultdict(list)
        for event in step:
            if event.randomized:
                groups[(event.run, event.epoch, event.step, event.task_id, event.role)].append(event)
        for (*_, task, role), members in groups.items():
            _tally(tallies, task, role, members, unit)
    for member, u in classes.items():
        for role in {role for role, key in list(tallies) if key == u}:
            tallies[(role, member)] = tallies[(role, u)]
    return tallies


def _tally(tallies: dict, task: str, role: str, members: list[UsageEvent], unit: Callable[[str], str]) -> None:
    """Add one group's evidence (for each lesson or class randomized in it) to ``tallies``."""
    shown_units = [{unit(lesson) for lesson in e.shown} for e in members]
    judged_units = [{unit(lesson) for lesson in e.judged} for e in members]
    rewards = [e.reward for e in members]
    mean = sum(rewards) / len(rewards)
    for u in sorted({unit(lesson) for lesson in members[0].randomized}):
        shown = [u in units for units in shown_units]
        count = sum(shown)
        if not 0 < count < len(shown):
            continue
        share = count / len(shown)
        centred = [s - share for s in shown]
        tally = tallies[(role, u)]
        tally.add(task, sum(c * c for c in centred), sum(c * (r - mean) for c, r in zip(centred, rewards)))
        tally.contrasts += 1
        tally.exposures += count
        tally.judged += sum(u in judged_units[i] for i, s in enumerate(shown) if s)


def estimate(
    events: Iterable[UsageEvent] | StepLog,
    *,
    lineage: dict[str, str] | None = None,
    classes: dict[str, str] | None = None,
    alpha: float = 0.05,
    look: int = 1,
    horizon: int = 3,
) -> dict[Key, Effect]:
    """The effect of every (role, lesson) with randomized evidence, with one-sided bounds at
    the level ``spent(alpha, look, horizon)``. A lesson of a class gets the class's effect,
    which is a trial for a role only when no member of the class is the role's own or global."""
    level = spent(alpha, look, horizon)
    members: dict[str, list[str]] = defaultdict(list)
    for member, unit in (classes or {}).items():
        members[unit].append(member)
    out = {}
    for (role, lesson), tally in contrasts(events, lineage, classes).items():
        e = effect_of(role, lesson, tally, level)
        kin = members.get((classes or {}).get(lesson, ""), [])
        if e.trial and any(not _trial(role, m) for m in kin):
            e = e.model_copy(update={"trial": False})
        out[(role, lesson)] = e
    return out


def _trial(role: str, lesson: str) -> bool:
    return not (lesson.startswith(f"{role}/") or lesson.startswith("global/"))


def effect_of(role: str, lesson: str, tally: _Tally, level: float) -> Effect:
    """``tally`` as an ``Effect``, its bounds one-sided at ``level``."""
    n, total = len(tally.per_task), sum(w for w, _ in tally.per_task.values())
    effect = sum(s for _, s in tally.per_task.values()) / total if total > 0 else 0.0
    if n < 2:
        se, low, high = math.inf, -math.inf, math.inf
    else:
        # The cluster jackknife: leaving task c out moves the estimate by its residual score
        # over the weight of the other tasks.
        moves = [(s - w * effect) / (total - w) for w, s in tally.per_task.values()]
        se = max(math.sqrt(sum(m * m for m in moves) * (n - 1) / n), SD_FLOOR / math.sqrt(n))
        half = t_quantile(1 - level, n - 1) * se
        low, high = effect - half, effect + half
    return Effect(
        role=role, lesson=lesson, tasks=n, contrasts=tally.contrasts, exposures=tally.exposures,
        effect=effect, lcb=low, ucb=high, se=se, trial=_trial(role, lesson),
        judged=tally.judged / tally.exposures if tally.exposures else 0.0,
    )  # fmt: skip


def pooled(role: str, lesson: str, tallies: list[_Tally], level: float) -> Effect:
    """One effect from the evidence of several lessons shown to one role (their weights and
    scores summed task by task)."""
    merged = _Tally()
    for tally in tallies:
        for task, (w, s) in tally.per_task.items():
            merged.add(task, w, s)
        merged.contrasts += tally.contrasts
        merged.exposures += tally.exposures
        merged.judged += tally.judged
    return effect_of(role, lesson, merged, level)


def _current(lesson: str, lineage: dict[str, str]) -> str:
    seen = set()
    while lesson in lineage and lesson not in seen:
        seen.add(lesson)
        lesson = lineage[lesson]
    return lesson


# -- Student's t, from the regularized incomplete beta function (Numerical Recipes 6.4) -----


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (0.5 < p < 1)."""
    low, high = 0.0, 1.0
    while _t_cdf(high, df) < p:
        high *= 2
    for _ in range(80):
        middle = (low + high) / 2
        low, high = (middle, high) if _t_cdf(middle, df) < p else (low, middle)
    return (low + high) / 2


def _t_cdf(t: float, df: int) -> float:
    return 1 - 0.5 * _betainc(df / 2, 0.5, df / (df + t * t))


def _betainc(a: float, b: float, x: float) -> float:
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _continued_fraction(a, b, x) / a
    return 1 - front * _continued_fraction(b, a, 1 - x) / b


def _continued_fraction(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 300):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= d * c
        if abs(d * c - 1) < 1e-12:
            break
    return result
