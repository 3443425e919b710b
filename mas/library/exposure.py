"""Randomized exposure: which lessons each rollout of a group shows to each role.

Stage: rollout (which lessons each rollout shows, at random: what the evidence is made of).

A lesson under evaluation for a role is shown to a random part of the group's rollouts and
withheld from the others, so that the group itself measures what the lesson does (see
``evidence.py``). A fixed number of the group's rollouts is drawn, without replacement, so every
rollout had the same chance, and that chance is recorded with it (``RoleTrace.chance``). What
is under evaluation, for each role:

- every lesson of its prompt with something left to decide (``settled``): it has not yet shown
  that it helps the role, or it is the role's own and its trials in the other roles are open;
- the lessons with nothing left to decide, in a ``retest`` share of the groups (all of them by
  default: below);
- lessons of other roles' libraries (transfer trials), the strongest where they are first, from
  the step after they are written until their trial here has settled that they cannot help;
  in the places they leave free, lessons that left their library whose trial here was going
  well (``ExposurePolicy.departed``).

Shares: half the rollouts (``share`` 0.5) see a lesson under evaluation: an even split makes
the contrast of a group most precise. Why every lesson stays under evaluation by default
(``retest`` 1): lessons overlap, and when the lessons that help are shown to every rollout the
team comes near what it can do, so a lesson tried beside them has little left to add and its
contrast says little (bench/learning_world.py: a ceiling, as real failure modes are fixed by
more than one lesson). Keeping each lesson at one half keeps the others measurable: in the
learning world, recall of the planted cross-role lessons 0.44 with the settled lessons shown to
all in 70% of the groups, 0.60 with every lesson at one half (bench/README.md). The price is a
prompt cache that reuses less of each role's prompt (bench/prefix.py), and rollouts that show
a half library while training; at inference every lesson is shown.

The retests of a step, when ``retest`` is below 1, are nested: each step ranks a role's lessons
at random, each group draws a cut, and a group retests the settled lessons ranked above its
cut, so every group shows its stable lessons in the step's order and a prompt cache reuses them
across the step's tasks.

Lessons judged to say the same thing (a class of twins, ``similar.classes``) are one lesson
here: one coin shows all of them or none of them, and a trial of a lesson whose twin the role
already has is no trial of its own.

Each choice is a hash of the run's seed and the step, task, role and lesson (the first lesson
of its class): a resumed run makes the same choices, and the rollouts record what they showed
(``RoleTrace.shown``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable
from typing import NamedTuple

from mas.config import ExposurePolicy, PromotionPolicy, seed_of
from mas.library.promotion import cannot_help, helps
from mas.types.evidence import Effect
from mas.types.lessons import GLOBAL, Lesson, Version


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
    chance: dict[str, float] = {}
    """Each randomized lesson's chance of being shown in a rollout of the group (recorded)."""
    classes: dict[str, str] = {}
    """Randomized lessons drawn as one class with their twins: lesson -> the class, named by its
    first member in this prompt."""


def established(effect: Effect | None, policy: PromotionPolicy) -> bool:
    return effect is not None and helps(effect, policy)


def settled(role: str, lesson: str, effects: dict[tuple[str, str], Effect], policy: PromotionPolicy, roles) -> bool:
    """Nothing is left to decide about showing ``lesson`` to ``role``: it has shown it helps
    here, and, for a lesson of the role's own library, each other role's trial of it has shown
    that it helps there too or cannot (until then, its promotion is open)."""
    if not established(effects.get((role, lesson)), policy):
        return False
    decided = lambda e: e is not None and (helps(e, policy) or cannot_help(e, policy))  # noqa: E731
    return not lesson.startswith(f"{role}/") or all(decided(effects.get((r, lesson))) for r in roles if r != role)


def trial_lessons(
    role: str,
    heads: dict[str, Version],
    effects: dict[tuple[str, str], Effect],
    *,
    most: int,
    promotion: PromotionPolicy,
    same: Callable[[Lesson, Lesson], bool] = lambda a, b: False,
    departed: Iterable[Lesson] = (),
    reached: float | None = None,
) -> list[Lesson]:
    """Up to ``most`` private lessons of other roles to try on ``role``, the strongest where they
    are first (by their e-value there), from the step after they are written: a lesson's second
    role needs as many groups as its first, and waiting for it to look promising first left the
    trial too little time. Never one whose trial here has settled that it cannot help
    (``promotion.cannot_help``), one the role already has in other words (its own copy carries
    that evidence), or two that say the same thing.

    The places the libraries' lessons leave free go to lessons that left their library
    (``departed``) whose trial here has reached an e-value of ``reached`` (None: none go on),
    the strongest here first; never in the role a lesson left, nor in one that saw its twin
    leave (that role's own evidence is the newer)."""
    own = heads.get(role, Version.empty(role)).lessons

    def open_here(lesson: Lesson) -> bool:
        here = effects.get((role, lesson.id))
        return not (here is not None and cannot_help(here, promotion)) and not any(same(lesson, m) for m in own)

    found = []
    for version in heads.values():
        if version.library in (GLOBAL, role):
            continue
        for lesson in version.lessons:
            if open_here(lesson):
                where = effects.get((version.library, lesson.id))
                found.append((0, where.e_value if where else 1.0, lesson))
    left = [lesson for lesson in departed if lesson.library == role]
    for lesson in departed if reached is not None else ():
        here = effects.get((role, lesson.id))
        went_well = here is not None and here.e_value >= reached
        if went_well and lesson.library != role and open_here(lesson) and not any(same(lesson, m) for m in left):
            found.append((1, here.e_value, lesson))  # after every library's lesson
    found.sort(key=lambda item: (item[0], -item[1], item[2].id))
    chosen: list[Lesson] = []
    for *_, lesson in found:
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
    promotion: PromotionPolicy,
    group_size: int,
    key: tuple,
    classes: dict[str, str] | None = None,
    roles: tuple[str, ...] = (),
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
        if not any(m in injected for m in members) or not settled(role, members[0], effects, promotion, roles)
    }
    retested = sorted((u for u in units if u not in evaluated and rank[u] >= cut), key=lambda u: (rank[u], u))
    randomized_units = retested + [u for u in units if u in evaluated]  # the order the prompt shows them in
    shown = {unit: _chosen(group_size, policy.share, key, role, unit) for unit in randomized_units}
    randomized = [m for unit in randomized_units for m in units[unit]]
    where = {m: unit for unit in randomized_units for m in units[unit]}
    stable = tuple(sorted(set(injected) - set(randomized), key=lambda m: (rank[classes.get(m, m)], m)))
    chance = {m: _chance(group_size, policy.share, shown[where[m]]) for m in randomized}
    drawn = {m: units[unit][0] for m, unit in where.items() if len(units[unit]) > 1}  # named by a member here
    return [
        RoleExposure(
            hidden=frozenset(lesson for lesson in injected if lesson in where and i not in shown[where[lesson]]),
            trials=tuple(lesson for lesson in trials if lesson.id in where and i in shown[where[lesson.id]]),
            randomized=tuple(randomized),
            stable=stable,
            chance=chance,
            classes=drawn,
        )
        for i in range(group_size)
    ]


def _chance(size: int, share: float, shown: set[int]) -> float:
    """A rollout's chance of being shown: the count drawn over the group (one rollout alone:
    the share)."""
    return len(shown) / size if size > 1 else share


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
