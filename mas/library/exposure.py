"""Randomized exposure: which lessons each rollout of a group shows to each role.

A lesson under evaluation for a role is shown to a random part of the group's rollouts and
withheld from the others, so that the group itself measures what the lesson does (see
``evidence.py``). What is under evaluation, for each role:

- every lesson of its prompt that has not yet shown that it helps the role ("evaluating");
- a lesson that has shown it helps ("established") only now and then (``retest``, per step),
  so that its evidence keeps growing and a lesson that stops helping can leave;
- a few promising lessons of other roles' libraries (transfer trials), shown only to a random
  part of the rollouts, never to all.

Lessons judged to say the same thing (a class of twins, ``similar.classes``) are one lesson
here: one coin shows all of them or none of them, and a trial of a lesson whose twin the role
already has is no trial of its own.

Each choice is a hash of the run's seed and the step, task, role and lesson (the first lesson
of its class): a resumed run makes the same choices, and the rollouts record what they showed
(``RoleTrace.shown``).

Shares: half the rollouts (``share`` 0.5) see an evaluating lesson: an even split makes the
contrast of a group most precise. An established lesson is evaluated again in about a third of
the groups (``retest``): the rest of the time every rollout gets it, which is what the lesson
has earned, and what keeps the stable part of the prompt stable for prompt caching
(``inject.render_block`` puts it first). The retests of a step are nested: each step ranks a
role's lessons at random, each group draws a cut, and a group retests the established lessons
ranked above its cut. So every group shows its stable lessons in the step's order, each
group's a prefix of the next one's, and a prompt cache reuses them across the step's tasks
(bench/prefix.py: team calls 0.63 -> 0.70 of their tokens); yet the groups of a step still
retest different lessons. (One draw for the whole step would keep that part the same too, but
then the contrasts of a step's tasks all share one context, which the interval, clustered by
task, does not allow for: in the learning-world benchmark it promoted lessons that help one
role only.)
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import NamedTuple

from mas.config import ExposurePolicy, seed_of
from mas.types import GLOBAL, Effect, Lesson, Version


class RoleExposure(NamedTuple):
    """What one role's prompt shows in one rollout, beyond the plain injection."""

    hidden: frozenset[str]
    """Injected lessons withheld from this rollout."""
    trials: tuple[Lesson, ...]
    """Lessons of other roles shown in this rollout."""
    randomized: tuple[str, ...]
    """The lessons whose showing to this role is randomized in this group, in the order the
    prompt shows them: the established ones retested here in the step's order, then the rest."""
    stable: tuple[str, ...]
    """Injected lessons every rollout of the group shows, in the step's order (they go first
    in the prompt, in this order)."""


def established(effect: Effect | None, min_tasks: int) -> bool:
    return effect is not None and effect.tasks >= min_tasks and effect.lcb > 0


def trial_lessons(
    role: str,
    heads: dict[str, Version],
    effects: dict[tuple[str, str], Effect],
    *,
    most: int,
    min_tasks: int,
    same: Callable[[Lesson, Lesson], bool] = lambda a, b: False,
) -> list[Lesson]:
    """Up to ``most`` private lessons of other roles that look promising where they are
    (positive effect over at least ``min_tasks`` tasks), best first, to try on ``role``;
    never one the role already has in other words (its own copy carries that evidence), and
    never two that say the same thing."""
    own = heads.get(role, Version.empty(role)).lessons
    found = []
    for version in heads.values():
        if version.library in (GLOBAL, role):
            continue
        for lesson in version.lessons:
            where = effects.get((version.library, lesson.id))
            if (
                where is not None
                and where.tasks >= min_tasks
                and where.effect > 0
                and not any(same(lesson, m) for m in own)
            ):
                found.append((where.effect, lesson))
    found.sort(key=lambda pair: (-pair[0], pair[1].id))
    chosen: list[Lesson] = []
    for _, lesson in found:
        if len(chosen) < most and not any(same(lesson, c) for c in chosen):
            chosen.append(lesson)
    return chosen


def plan(
    injected: list[str],
    trials: list[Lesson],
    *,
    role: str,
    effects: dict[tuple[str, str], Effect],
    policy: ExposurePolicy,
    min_tasks: int,
    group_size: int,
    key: tuple,
    classes: dict[str, str] | None = None,
) -> list[RoleExposure]:
    """One ``RoleExposure`` per rollout of a group, for one role. ``key`` names the group
    (the run's seed, the step, the task).

    ``classes`` maps a lesson to its class of lessons judged to say the same thing: a class is
    randomized as one lesson (one coin; a rollout shows all of its members or none), so that
    the contrast measures the class, not one copy beside another that stands in for it."""
    if policy.off:
        return [RoleExposure(frozenset(), (), (), tuple(sorted(injected)))] * group_size
    classes = classes or {}
    units: dict[str, list[str]] = {}
    for lesson in [*injected, *(t.id for t in trials)]:
        units.setdefault(classes.get(lesson, lesson), []).append(lesson)
    step = key[:-1]  # the run's seed and the step: the same for every group of the step
    rank = {unit: _unit(*step, role, unit, "rank") for unit in units}
    cut = _cut(policy.retest, *key, role)
    evaluated = {
        unit
        for unit, members in units.items()
        if not any(m in injected for m in members) or not established(effects.get((role, members[0])), min_tasks)
    }
    retested = sorted((u for u in units if u not in evaluated and rank[u] >= cut), key=lambda u: (rank[u], u))
    randomized_units = retested + [u for u in units if u in evaluated]  # the order the prompt shows them in
    shown = {unit: _chosen(group_size, policy.share, key, role, unit) for unit in randomized_units}
    randomized = [m for unit in randomized_units for m in units[unit]]
    where = {m: unit for unit in randomized_units for m in units[unit]}
    stable = tuple(sorted(set(injected) - set(randomized), key=lambda m: (rank[classes.get(m, m)], m)))
    return [
        RoleExposure(
            hidden=frozenset(lesson for lesson in injected if lesson in where and i not in shown[where[lesson]]),
            trials=tuple(lesson for lesson in trials if lesson.id in where and i in shown[where[lesson.id]]),
            randomized=tuple(randomized),
            stable=stable,
        )
        for i in range(group_size)
    ]


def _chosen(size: int, share: float, *key: object) -> set[int]:
    """Which rollouts of a group of ``size`` show a lesson: about ``share`` of them, never all
    and never none (so every group gives a contrast), the count rounded at random."""
    rng = random.Random(seed_of(*key, "exposure"))
    if size < 2:
        return {0} if rng.random() < share else set()
    exact = share * size
    count = min(max(math.floor(exact) + (rng.random() < exact - math.floor(exact)), 1), size - 1)
    return set(rng.sample(range(size), count))


def _cut(retest: float, *key: object) -> float:
    """The group's cut: an established lesson whose rank in the step (uniform in [0, 1)) is at
    least the cut is retested. The cut is uniform with mean 1 - ``retest``, so that averaged
    over steps each lesson is retested in a ``retest`` share of the groups."""
    low, high = max(0.0, 1 - 2 * retest), min(1.0, 2 - 2 * retest)
    return low + (high - low) * _unit(*key, "retest")


def _unit(*key: object) -> float:
    return seed_of(*key) / 16**8
