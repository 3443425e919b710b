"""Randomized evidence: does showing a lesson to a role help that role's team?

Stage: evidence (what pruning and promotion decide on; the rollout's exposure plans with it).

Within a group (G rollouts of one task), each lesson under evaluation was shown to a random
part of the rollouts (``exposure.py``): a fixed number of them, drawn without replacement, so
every rollout of the group had the same chance, recorded with it. Comparing the rollouts that
were shown it with those that were not, within the group, cancels the task's difficulty;
nothing the model says (a citation, a summarizer's judgement) enters it.

**The test** that decides (promotion, and which lessons count as established) is an
e-process per (role, lesson), the wealth of a bettor. In each group where the lesson's showing
was randomized, its contrast D (the mean reward of the rollouts shown it minus that of the
others) has mean zero, or below, when showing the lesson does not raise the reward: the
difference of means under complete randomization is unbiased for the group's own average
effect. A bettor who stakes a fixed fraction lambda of their wealth on D in every group holds
prod (1 + lambda D), a nonnegative supermartingale under that null, and so is the average of a
few such bettors (``BETS``). By Ville's inequality the chance that it *ever* reaches 1/alpha
is at most alpha: it is checked after every step, and looking costs nothing. ``e_value`` is
the largest it has been, ``e_now`` where it stands. (Rewards within [0, 1], as every built-in
reward is, keep D in [-1, 1]; a reward of your own beyond them is divided by the group's
range, which is valid for the sharp null that showing the lesson changes no reward.)

Betting spends evidence differently from a t test: what early groups showed is kept, where an
estimate pooled over the run is worn down when a later, fuller library leaves a lesson less to
add. On the same runs of the learning world (bench/README.md), at equal rates of false passes
(about 2% of the (role, lesson) pairs that do nothing), the bettor checked after every group
passed 53% of the planted helpful pairs, one t test at the end of the run 49%.

**The estimate** is least squares of the reward on the lesson's indicator, centred within each
group (a fixed effect per group): each group's contrast weighs by the spread of its exposure,
n_shown * n_hidden / n, the inverse of the contrast's variance. So a task seen in three epochs
weighs three times one seen once, and a group split 2 / 3 more than one split 1 / 4. (The mean
over tasks of each task's mean contrast, used before, gave every task one vote: in the
learning-world benchmark, the mean t of the planted helpful lessons was 2.0 with it and 2.2
with these weights. A joint fit of all lessons randomized in the same rollouts gained nothing
once its interval was made honest: with about 85 lessons over 40 tasks, its residuals
understated its standard error by about 30%.)

**The interval** around it is clustered by task: each task's groups, across epochs, form one
cluster, and the variance is the cluster jackknife (how far the estimate moves when one task
is left out), so one task seen three times does not count as three. It is Student t with one
degree of freedom less than the tasks, at the fixed level ``LEVEL`` on each side, and its
standard error is at least ``SD_FLOOR`` over the root of the tasks. It describes where the
effect lies, and it is what pruning and demotion read (their error is to lose a lesson, not
to promote one): it is not adjusted for looking after every step.

**Lessons judged to say the same thing** (a class of twins) are one treatment: a rollout is
shown the class when it showed any member, and exposure shows them with one coin.

The evidence of a usage log is kept between reads by ``ledger.Ledger``; the quantiles of
Student's t are ``student.py``'s.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from mas.library.logs import StepLog
from mas.library.student import t_quantile
from mas.types.evidence import Effect
from mas.types.usage import UsageEvent

SD_FLOOR = 0.2
"""Smallest per-task standard deviation an interval assumes: with 0/1 rewards, a handful of
identical contrasts says little, and a zero spread must not make a bound exact."""

Key = tuple[str, str]
"""(role, lesson): the lesson as shown to that role."""


BETS = (0.2, 0.4, 0.6, 0.8)
"""The fractions of their wealth the bettors stake on each group's contrast (their average is
the e-process). A contrast of 0/1 rewards in a group of five has a standard deviation of about
0.45, so a lesson adding 0.1 to 0.15 grows fastest at fractions of 0.5 to 0.7; the grid covers
smaller and larger effects at a cost of at most log 4 in wealth."""

LEVEL = 0.05
"""One-sided level of each side of the interval (a 90% interval)."""


@dataclass
class Tally:
    """The evidence of one (role, lesson): per task, the sum over its groups of the squared
    centred exposure (``weight``) and of its product with the centred reward (``score``); and
    the bettors' wealth, group by group."""

    per_task: dict[str, list[float]] = field(default_factory=dict)
    """task -> [weight, score]."""
    contrasts: int = 0
    exposures: int = 0
    judged: int = 0
    wealth: list[float] = field(default_factory=lambda: [0.0] * len(BETS))
    """The log of each bettor's wealth."""
    peak: float = 0.0
    """The log of the largest e-value so far (the bettors' mean wealth)."""

    def add(self, task: str, weight: float, score: float, contrast: float | None = None) -> None:
        sums = self.per_task.setdefault(task, [0.0, 0.0])
        sums[0] += weight
        sums[1] += score
        if contrast is not None:
            self.wealth = [w + math.log1p(bet * contrast) for w, bet in zip(self.wealth, BETS)]
            self.peak = max(self.peak, _log_mean_exp(self.wealth))

    def copy(self) -> Tally:
        return Tally(
            {task: list(sums) for task, sums in self.per_task.items()}, self.contrasts, self.exposures, self.judged,
            list(self.wealth), self.peak,
        )  # fmt: skip

    @property
    def e_value(self) -> float:
        return _exp(self.peak)

    @property
    def e_now(self) -> float:
        return _exp(_log_mean_exp(self.wealth))


LOG_E_MAX = 690.0
"""The log of the largest e-value reported (about 1e299): the wealth itself is kept as a log
and grows on, but a float holds no more (1,300 groups of a lesson that always wins overflowed
it, and the usage log of a library carries its evidence from run to run)."""


def _exp(log: float) -> float:
    return math.exp(min(log, LOG_E_MAX))


def _log_mean_exp(logs: list[float]) -> float:
    top = max(logs)
    return top + math.log(sum(math.exp(x - top) for x in logs) / len(logs))


def plausibly_helps(e: Effect, margin: float, level: float = 0.2) -> bool:
    """Whether a lenient one-sided upper bound (``level``) still admits that showing it helps
    by more than ``margin``: what keeps a lesson whose small effect no bound can yet confirm.
    (A lower bound here, as before, asked a lesson to prove itself after ``max_tasks`` tasks:
    in the learning world a third of the planted helpful lessons failed that at 20 tasks.)"""
    return e.tasks < 2 or e.effect + t_quantile(1 - level, e.tasks - 1) * e.se > margin


def likely_helps(e: Effect, level: float = 0.2) -> bool:
    """Whether a lenient one-sided lower bound (``level``) is above zero: what a lesson must
    show by a run's end to stay (``PromotionPolicy.end_level``). Not a test that it helps (the
    e-value is), only that its evidence leans that way beyond its noise."""
    return e.tasks >= 2 and e.effect - t_quantile(1 - level, e.tasks - 1) * e.se > 0


def contrasts(
    events: Iterable[UsageEvent] | StepLog,
    lineage: dict[str, str] | None = None,
    classes: dict[str, str] | None = None,
) -> dict[Key, Tally]:
    """Per (role, lesson): its evidence in the groups where its showing to the role was
    randomized, by task. ``lineage`` maps an old lesson id to the id it lives on as (a
    promoted lesson keeps the evidence of the private lesson it came from).

    ``classes`` maps a lesson id (after lineage) to the class of lessons judged to say the same
    thing (``similar.classes``): a class is one treatment. In a group, a rollout counts as shown
    the class when it showed any member, so two copies shown side by side do not each look
    useless while the other stands in for it. Every member of a class gets the class's tally.

    ``events`` may be a usage log (``StepLog``): its steps are then tallied one at a time, so
    the pass holds one step's events however long the run (a group never spans two steps)."""
    fold = Fold(lineage or {}, classes or {})
    steps = events.steps() if isinstance(events, StepLog) else [(None, events)]
    for _, step in steps:
        fold.add(groups_of(step))
    return fold.tallies()


@dataclass(frozen=True, slots=True)
class Randomized:
    """One group's randomized evidence for one role, all a tally needs of its usage events:
    per rollout, the lessons shown, those judged applied, and the reward."""

    task: str
    role: str
    randomized: tuple[str, ...]
    shown: tuple[tuple[str, ...], ...]
    judged: tuple[tuple[str, ...], ...]
    rewards: tuple[float, ...]


def groups_of(step: Iterable[UsageEvent], kept: dict | None = None) -> list[Randomized]:
    """The groups of one step's events in which some lesson's showing was randomized. ``kept``
    keeps one copy of each lesson id and of each list of ids (many rollouts show the same): a
    ledger holds the groups of a whole usage log, and as sets of ids parsed anew for each
    rollout they took 3 KB a rollout and role, 8 times the log's size on disk."""
    kept = {} if kept is None else kept

    def one(ids: list[str]) -> tuple[str, ...]:
        listed = tuple(kept.setdefault(i, i) for i in ids)
        return kept.setdefault(listed, listed)

    members: dict[tuple, list[UsageEvent]] = defaultdict(list)
    for event in step:
        if event.randomized:
            members[(event.run, event.epoch, event.step, event.task_id, event.role)].append(event)
    return [
        Randomized(
            task,
            role,
            one(events[0].randomized),
            tuple(one(e.shown) for e in events),
            tuple(one(e.judged) for e in events),
            tuple(e.reward for e in events),
        )  # fmt: skip
        for (*_, task, role), events in members.items()
    ]


class Fold:
    """The tallies of one way of counting (a lineage and classes of twins), group by group."""

    def __init__(self, lineage: dict[str, str], classes: dict[str, str]):
        self.lineage, self.classes = lineage, classes
        self.by_unit: dict[Key, Tally] = {}
        self.count = 0
        """Groups folded in so far."""

    def unit(self, lesson: str) -> str:
        lesson = _current(lesson, self.lineage)
        return self.classes.get(lesson, lesson)

    def copy(self) -> Fold:
        """A fold that goes on from this one's tallies and leaves this one as it is (``add``
        copies a tally before it changes one)."""
        other = Fold(self.lineage, self.classes)
        other.by_unit, other.count = dict(self.by_unit), self.count
        return other

    def add(self, groups: Iterable[Randomized]) -> None:
        touched: set[Key] = set()
        for group in groups:
            _tally(self.by_unit, group, self.unit, touched)
            self.count += 1

    def tallies(self) -> dict[Key, Tally]:
        """Per (role, lesson), every member of a class with its class's tally. ``add`` copies
        a tally before it changes one: what was handed out stays as it was."""
        out: dict[Key, Tally] = defaultdict(Tally, self.by_unit)  # an empty tally for a pair without evidence
        roles: dict[str, list[str]] = defaultdict(list)  # unit -> the roles with evidence on it: one pass, not
        for role, u in self.by_unit:  # one per member of a class (the tallies grow with every lesson ever shown)
            roles[u].append(role)
        for member, u in self.classes.items():
            for role in roles.get(u, ()):
                out[(role, member)] = self.by_unit[(role, u)]
        return out


def _tally(tallies: dict, group: Randomized, unit: Callable[[str], str], touched: set[Key]) -> None:
    """Add one group's evidence (for each lesson or class randomized in it) to ``tallies``; a
    tally this fold has not ``touched`` yet is copied first (a reader may hold it)."""
    role, rewards = group.role, group.rewards
    shown_units = [{unit(lesson) for lesson in shown} for shown in group.shown]
    judged_units = [{unit(lesson) for lesson in judged} for judged in group.judged]
    mean = sum(rewards) / len(rewards)
    scale = max(1.0, max(rewards) - min(rewards))  # rewards beyond [0, 1]: see the module's docstring
    for u in sorted({unit(lesson) for lesson in group.randomized}):
        shown = [u in units for units in shown_units]
        count = sum(shown)
        if not 0 < count < len(shown):
            continue
        share = count / len(shown)
        centred = [s - share for s in shown]
        weight, score = sum(c * c for c in centred), sum(c * (r - mean) for c, r in zip(centred, rewards))
        if (role, u) not in touched:
            touched.add((role, u))
            tallies[(role, u)] = tallies[(role, u)].copy() if (role, u) in tallies else Tally()
        tally = tallies[(role, u)]
        tally.add(group.task, weight, score, score / weight / scale)  # score / weight: mean shown - mean not shown
        tally.contrasts += 1
        tally.exposures += count
        tally.judged += sum(u in judged_units[i] for i, s in enumerate(shown) if s)


def estimate(
    events: Iterable[UsageEvent] | StepLog,
    *,
    lineage: dict[str, str] | None = None,
    classes: dict[str, str] | None = None,
) -> dict[Key, Effect]:
    """The effect of every (role, lesson) with randomized evidence. A lesson of a class gets the
    class's effect, which is a trial for a role only when no member of the class is the role's
    own or global."""
    return effects(contrasts(events, lineage, classes), classes)


def effects(tallies: dict[Key, Tally], classes: dict[str, str] | None = None) -> dict[Key, Effect]:
    """``tallies`` (``contrasts`` with ``classes``) as effects, as ``estimate`` gives them."""
    members: dict[str, list[str]] = defaultdict(list)
    for member, unit in (classes or {}).items():
        members[unit].append(member)
    out = {}
    for (role, lesson), tally in tallies.items():
        e = effect_of(role, lesson, tally)
        kin = members.get((classes or {}).get(lesson, ""), [])
        if e.trial and any(not _trial(role, m) for m in kin):
            e = e.model_copy(update={"trial": False})
        out[(role, lesson)] = e
    return out


def _trial(role: str, lesson: str) -> bool:
    return not (lesson.startswith(f"{role}/") or lesson.startswith("global/"))


def effect_of(role: str, lesson: str, tally: Tally, level: float = LEVEL) -> Effect:
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
        effect=effect, lcb=low, ucb=high, se=se, e_value=tally.e_value, e_now=tally.e_now, trial=_trial(role, lesson),
        judged=tally.judged / tally.exposures if tally.exposures else 0.0,
    )  # fmt: skip


def pooled(role: str, lesson: str, tallies: list[Tally], level: float = LEVEL) -> Effect:
    """One effect from the evidence of several lessons shown to one role (their weights and
    scores summed task by task; the bettors' wealth of one lesson says nothing of the pool)."""
    merged = Tally()
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
