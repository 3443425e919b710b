"""Promotion, demotion and pruning, decided by the randomized evidence (``evidence.py``).

Stage: evidence (prune, promote/demote).

After every step (``cadence``), on all the evidence so far:

- **promote**: a private lesson moves to the global library when it is shown to help at
  least ``min_roles`` roles: for each role, the e-process of its own randomized contrasts
  (transfer trials for the other roles) stands at 1/alpha or above now, over at least
  ``min_tasks`` tasks. An e-process may be checked as often as one likes: the chance that it
  ever reaches 1/alpha for a role the lesson does not help is at most alpha. Asking each role
  where its e-process stands now, not the highest it has been (``PromotionPolicy.standing``),
  keeps that chance and asks more: a chance crossing in one role must coincide with the
  evidence of the others. The private lessons judged equivalent to it are merged into it
  (deleted), and the new global lesson keeps their evidence (its lineage).
- **demote**: a global lesson that can no longer help ``min_roles`` roles goes back to the
  private libraries of the roles it still helps, or leaves.
- **prune**: a private lesson whose evidence no longer supports it for its own role leaves.
  An add to a full library takes the place of one whose estimate is below zero (``room``).
- **adopt**, after a run's last step: a private lesson whose transfer trial in another role
  leans towards helping there is added to that role's library (``adoptions``).

"Can no longer help" is not "proven harmful": a lesson leaves when its upper bound falls
below ``margin``, or when after ``max_tasks`` tasks not even a lenient bound admits help.
Removing needs no protection against looking often: its error is to lose a lesson that helps
a little, and it is kept rare by pruning on the lenient rule one lesson at a time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from statistics import NormalDist

from mas.config import PromotionPolicy
from mas.library.edits import apply, lesson_id
from mas.library.evidence import Tally, effect_of, likely_helps, plausibly_helps
from mas.library.similar import normal
from mas.types.evidence import Effect, PromotionMove
from mas.types.lessons import GLOBAL, Add, Delete, Edit, Lesson, Provenance, Version

Same = Callable[[Lesson, Lesson], bool]


def plan(
    heads: dict[str, Version],
    tallies: dict[tuple[str, str], Tally],
    policy: PromotionPolicy,
    *,
    same: Same,
    roles: list[str] | None = None,
    own: dict[tuple[str, str], Tally] | None = None,
    turned: dict[tuple[str, str], str] | None = None,
) -> list[PromotionMove]:
    """The moves the evidence justifies now. ``roles``: the team's (else the roles with a
    library or with evidence; a role not counted could not stop a demotion). ``own``: each
    lesson's evidence as itself (its lineage, no twins), which says whose text a promotion
    takes; without it, ``tallies``. ``turned``: the (role, lesson) pairs whose effect has
    turned (``turns``, after a run's last step): a global lesson counts as no help there."""
    known = {v.library for v in heads.values() if v.library != GLOBAL} | {role for role, _ in tallies}
    roles = sorted(known | set(roles or ()))
    demotions = _demotions(heads, tallies, policy, roles, turned or {})
    return _promotions(heads, tallies, own or tallies, policy, same, roles) + demotions


def _promotions(heads, tallies, own, policy, same: Same, roles: list[str]) -> list[PromotionMove]:
    """For each role, the lesson's own randomized evidence: its contrasts where it is, its
    transfer trials elsewhere; for a role that has its own copy in other words (judged the
    same) instead of a trial, that copy's evidence. The copies are merged into the promoted
    lesson (deleted), and it keeps their evidence (its lineage).

    The promoted text is that of the member whose own showing carries the evidence in the
    roles it helps (``_carrier``): twins are shown as one class, so when the judge calls two
    different lessons the same, the class's evidence may be all one member's. (In the learning
    world, the judge calling "do the steps in the order given" the same as "reread the
    question" promoted the first's text on the second's evidence: one wrong promotion and one
    missed.)"""
    shared = heads.get(GLOBAL, Version.empty(GLOBAL)).lessons
    taken: set[str] = set()
    moves = []
    for library in roles:
        for lesson in heads.get(library, Version.empty(library)).lessons:
            if lesson.id in taken or any(same(lesson, g) for g in shared):
                continue
            copies = {
                role: [m for m in heads.get(role, Version.empty(role)).lessons if m.id != lesson.id and same(lesson, m)]
                for role in roles
            }
            evidence = [_evidence(role, lesson, copies[role], tallies, policy) for role in roles]
            helped = [e.role for e in evidence if helps(e, policy, now=policy.standing)]
            if len(helped) < policy.min_roles:
                continue
            members = {m.id: m for m in (lesson, *(m for group in copies.values() for m in group)) if m.id not in taken}
            merged = sorted(members)
            taken.update(merged)
            moves.append(
                PromotionMove(
                    kind="promote",
                    text=_carrier(list(members.values()), helped, own).text,
                    lessons=merged,
                    evidence=evidence,
                    roles=helped,
                    reason=f"shown to help {len(helped)} role{'s' * (len(helped) != 1)} ({', '.join(helped)})",
                )  # fmt: skip
            )
    return moves


def _carrier(members: list[Lesson], roles: list[str], own: dict[tuple[str, str], Tally]) -> Lesson:
    """The member whose own smallest e-value over ``roles`` is the largest (the weakest role
    decides, as it does the promotion), then whose product is; the first on a tie."""

    def logs(m: Lesson) -> list[float]:
        return [own[(r, m.id)].peak if (r, m.id) in own else 0.0 for r in roles]

    return max(members, key=lambda m: (min(logs(m)), sum(logs(m))))


def _evidence(role: str, lesson: Lesson, copies: list[Lesson], tallies, policy: PromotionPolicy) -> Effect:
    own = effect_of(role, lesson.id, tallies.get((role, lesson.id), Tally()))
    if own.tasks >= policy.min_tasks or not copies:
        return own
    return max((effect_of(role, c.id, tallies.get((role, c.id), Tally())) for c in copies), key=lambda e: e.e_value)


def merges(heads: dict[str, Version], tallies, policy: PromotionPolicy, same: Same) -> list[PromotionMove]:
    """Within each library, lessons judged to say the same thing: the one with the better
    evidence stays, the others are merged into it (deleted; their evidence goes with it)."""
    moves = []
    for version in heads.values():
        role = version.library
        gone: set[str] = set()
        for i, a in enumerate(version.lessons):
            for b in version.lessons[i + 1 :]:
                if a.id in gone or b.id in gone or not same(a, b):
                    continue
                ea, eb = (effect_of(role, x.id, tallies.get((role, x.id), Tally())) for x in (a, b))
                keep, drop, e = (a, b, eb) if (ea.tasks, ea.effect) >= (eb.tasks, eb.effect) else (b, a, ea)
                gone.add(drop.id)
                moves.append(
                    PromotionMove(
                        kind="merge",
                        text=drop.text,
                        lessons=[drop.id],
                        evidence=[e],
                        into=keep.id,
                        reason=f"says what {keep.id} says",
                    )  # fmt: skip
                )
    return moves


def _demotions(heads, tallies, policy, roles: list[str], turned: dict[tuple[str, str], str]) -> list[PromotionMove]:
    moves = []
    for lesson in heads.get(GLOBAL, Version.empty(GLOBAL)).lessons:
        evidence = [effect_of(role, lesson.id, tallies.get((role, lesson.id), Tally())) for role in roles]
        unturned = [e for e in evidence if (e.role, lesson.id) not in turned]
        possible = [e.role for e in unturned if not cannot_help(e, policy)]
        if len(possible) < policy.min_roles:
            back = [e.role for e in unturned if helps(e, policy)]
            reason = f"can help at most {len(possible)} of the {policy.min_roles} roles it needs"
            turns_here = [f"{e.role}: {turned[(e.role, lesson.id)]}" for e in evidence if (e.role, lesson.id) in turned]
            moves.append(
                PromotionMove(
                    kind="demote",
                    text=lesson.text,
                    lessons=[lesson.id],
                    evidence=evidence,
                    roles=back,
                    reason="; ".join([reason, *turns_here]),
                )  # fmt: skip
            )
    return moves


def room(
    version: Version, wanted: int, effects: dict[tuple[str, str], Effect], policy: PromotionPolicy, *, limit: int
) -> list[PromotionMove]:
    """The lessons a full private library gives up so that ``wanted`` new ones fit
    (``PromotionPolicy.make_room``): those tried on ``min_tasks`` tasks or more in its role
    whose estimate is below zero, the lowest first, at most ``wanted``, as prune moves that
    say why. ``effects``: the evidence so far (the step's own groups counted)."""
    if not policy.make_room or wanted <= 0:
        return []
    role = version.library
    weak = [
        (e, lesson)
        for lesson in version.lessons
        if (e := effects.get((role, lesson.id))) is not None and e.tasks >= policy.min_tasks and e.effect < 0
    ]
    weak.sort(key=lambda pair: (pair[0].effect, pair[1].id))
    return [
        PromotionMove(
            kind="prune",
            text=lesson.text,
            lessons=[lesson.id],
            evidence=[e],
            reason=f"made room for a new lesson in the full library ({limit} lessons): its estimate over {e.tasks}"
            f" tasks is below zero ({e.effect:+.3f})",
        )
        for e, lesson in weak[:wanted]
    ]


def prunings(
    heads: dict[str, Version],
    tallies: dict[tuple[str, str], Tally],
    policy: PromotionPolicy,
    *,
    last: bool = False,
    turned: dict[tuple[str, str], str] | None = None,
) -> list[PromotionMove]:
    """Every private lesson whose upper bound is below the margin, and at most
    one per library that is not even plausibly helping after ``max_tasks`` tasks: two lessons
    that do the same job each look weak while the other is often shown, and removing one
    lets the other's evidence show again. After a run's ``last`` step no more evidence will
    come: every lesson tried on ``min_tasks`` tasks or more whose evidence does not lean
    towards helping (``policy.end_level``) leaves, and so do the younger ones when the lessons
    tried before them do not help on average (``track_record``); with ``end_level`` None, only
    those whose estimate is below zero. ``turned``: the lessons that also leave then, with
    why (``turns``)."""
    track = track_record(tallies, policy) if last and policy.end_level is not None else None
    turned = turned or {}
    moves = []
    for version in heads.values():
        if version.library == GLOBAL:
            continue
        own = [
            (effect_of(version.library, l.id, tallies.get((version.library, l.id), Tally())), l)
            for l in version.lessons
        ]
        below = [(e, l) for e, l in own if e.tasks >= policy.min_tasks and e.ucb < policy.margin]
        idle = sorted(
            ((e, l) for e, l in own if (e, l) not in below and cannot_help(e, policy) and not helps(e, policy)),
            key=lambda pair: pair[0].ucb,
        )[:1]
        if last:
            idle += [
                (e, l)
                for e, l in own
                if (e, l) not in below + idle and (not _stays(e, policy, track) or (version.library, l.id) in turned)
            ]
        for e, lesson in below + idle:
            reason = _prune_reason(e, policy, track, turned.get((version.library, lesson.id)))
            moves.append(
                PromotionMove(kind="prune", text=lesson.text, lessons=[lesson.id], evidence=[e], reason=reason)
            )
    return moves


def _prune_reason(e: Effect, policy: PromotionPolicy, track: tuple[float, int] | None, turn: str | None) -> str:
    if e.ucb < policy.margin:
        return "upper bound below the margin"
    if cannot_help(e, policy):
        return f"not shown to help in {e.tasks} tasks"
    return turn if turn is not None and _stays(e, policy, track) else _end_reason(e, policy, track)


def turns(
    early: dict[tuple[str, str], Effect], late: dict[tuple[str, str], Effect], policy: PromotionPolicy
) -> dict[tuple[str, str], str]:
    """The (role, lesson) pairs whose effect has turned (``policy.turn_level``), with why: over
    ``min_tasks`` tasks or more in each window (``Ledger.windows``: a run's last third of steps,
    and those before), the late estimate is below zero and below the early one beyond a
    one-sided normal bound on the difference (the two windows' standard errors combined). A
    lesson that helped at first and harms now leaves at the run's end, though its evidence over
    the whole run still leans towards helping. Empty when ``turn_level`` is None."""
    if policy.turn_level is None:
        return {}
    z = NormalDist().inv_cdf(1 - policy.turn_level)
    out = {}
    for key, now in late.items():
        before = early.get(key)
        if before is None or min(before.tasks, now.tasks) < policy.min_tasks or now.effect >= 0:
            continue
        if now.effect - before.effect + z * math.hypot(before.se, now.se) < 0:
            out[key] = (
                f"it turned: {now.effect:+.3f} over {now.tasks} tasks in the last third of the steps,"
                f" {before.effect:+.3f} over {before.tasks} before"
            )
    return out


def adoptions(
    heads: dict[str, Version],
    tallies: dict[tuple[str, str], Tally],
    policy: PromotionPolicy,
    same: Same,
    departed: Iterable[Lesson] = (),
) -> list[PromotionMove]:
    """After a run's last step: each private lesson whose transfer trial in another role leans
    towards helping there (tried on ``min_tasks`` tasks or more, its one-sided lower bound at
    ``adopt_level`` above zero, the rule by which a lesson stays in its own role, and its
    e-value reached ``adopt_e_value``) is added to that role's library, unless the role already
    has it or its twin, or the global library does. The proposer names a wrong role for many
    of its lessons; the trials say which role a lesson helps, and without this it would stay
    where it was written, where the end rule may prune it, while the role it helps ends without
    it. The strongest trial first; one copy per role of lessons judged the same. Each lesson's
    evidence is left as it is: the copy in the new role is the trial's twin (the same words),
    so it is counted as one with it.

    ``departed``: private lessons that left their library during the run (pruned there, or
    deleted by an edit; ``adopt_departed``). Such a lesson is adopted only where its trial
    shows that it helps, by the test a promotion asks of each role (its e-value stands at
    1/alpha), as well as leaning towards helping: a lesson that left is a selection, and its
    trial's evidence stopped when it left. Never into a role that had it (or its twin) and saw
    it leave: that role's own evidence is the newer."""
    if policy.adopt_level is None:
        return []
    roles = sorted(({v.library for v in heads.values()} | {role for role, _ in tallies}) - {GLOBAL})
    shared = heads.get(GLOBAL, Version.empty(GLOBAL)).lessons
    departed = list(departed) if policy.adopt_departed else []
    had = {role: [lesson for lesson in departed if lesson.library == role] for role in roles}
    candidates = [(lesson, False) for v in heads.values() if v.library != GLOBAL for lesson in v.lessons]
    candidates += [(lesson, True) for lesson in departed]
    found = []
    for lesson, left in candidates:
        if any(same(lesson, g) for g in shared):
            continue
        for role in roles:
            e = effect_of(role, lesson.id, tallies.get((role, lesson.id), Tally()))
            if role == lesson.library or not _adoptable(e, policy):
                continue
            if not left or (helps(e, policy, now=True) and not any(same(lesson, m) for m in had[role])):
                found.append((e, lesson, left))
    moves = []
    has = {role: list(heads.get(role, Version.empty(role)).lessons) for role in roles}
    for e, lesson, left in sorted(found, key=lambda item: (-item[0].lcb, item[1].id, item[0].role)):
        if any(same(lesson, m) for m in has[e.role]):
            continue
        has[e.role].append(lesson)
        reason = (
            f"it left {lesson.library}; its trial in {e.role} shows it helps there (e-value {e.e_now:.1f},"
            f" {e.effect:+.3f} over {e.tasks} tasks)"
            if left
            else f"its trial in {e.role} leans towards helping ({e.effect:+.3f} over {e.tasks} tasks)"
        )
        moves.append(
            PromotionMove(
                kind="adopt", text=lesson.text, lessons=[lesson.id], evidence=[e], roles=[e.role], reason=reason
            )
        )
    return moves


def _adoptable(e: Effect, policy: PromotionPolicy) -> bool:
    """``adoptions``' bar (``adopt_level`` is set)."""
    return e.tasks >= policy.min_tasks and e.e_value >= policy.adopt_e_value and likely_helps(e, policy.adopt_level)


def track_record(tallies: dict[tuple[str, str], Tally], policy: PromotionPolicy) -> tuple[float, int] | None:
    """The mean effect of the lessons tried on ``min_tasks`` tasks or more in a role that reads
    them as its own (its private lessons, and the global ones, which carry the evidence of the
    private lessons promoted into them), those still in a library and those that left alike,
    and how many: what a lesson written for this team does, on average, before any evidence of
    its own. Trials in other roles do not count. None when no lesson has been tried that long."""
    effects = [
        effect_of(role, lesson, tally).effect
        for (role, lesson), tally in tallies.items()
        if role != GLOBAL and lesson.rpartition("/")[0] in (role, GLOBAL) and len(tally.per_task) >= policy.min_tasks
    ]
    return (sum(effects) / len(effects), len(effects)) if effects else None


def _stays(e: Effect, policy: PromotionPolicy, track: tuple[float, int] | None) -> bool:
    """Whether a private lesson stays after a run's last step: one tried on ``min_tasks`` tasks
    or more if its evidence leans towards helping; a younger one (written too late to be judged)
    unless the lessons tried before it do not help on average (``track``, their
    ``track_record``): then it is more likely to harm than to help. With no record (nothing
    tried that long yet, as in a first run of one step), it stays."""
    if e.tasks < policy.min_tasks:
        return track is None or track[0] > 0
    return e.effect >= 0 if policy.end_level is None else likely_helps(e, policy.end_level)


def _end_reason(e: Effect, policy: PromotionPolicy, track: tuple[float, int] | None) -> str:
    if policy.end_level is None:
        return f"its estimate over {e.tasks} tasks is below zero at the run's end"
    if e.tasks < policy.min_tasks and track is not None:
        mean, n = track
        return (
            f"written too late to be judged ({e.tasks} tasks), and the {n} lessons tried on"
            f" {policy.min_tasks} tasks or more do not help on average ({mean:+.3f})"
        )
    bound = f"{1 - policy.end_level:.0%} lower bound"
    return f"its {bound} over {e.tasks} tasks is not above zero at the run's end (estimate {e.effect:+.3f})"


SPLIT_LEVEL = 0.002
"""Two-sided level at which the own evidence of two lessons judged the same must differ for
the pair to be split (strict: the pairs are checked after every step)."""


def splits(
    heads: dict[str, Version], raw: dict[tuple[str, str], Tally], policy: PromotionPolicy, same: Same
) -> list[PromotionMove]:
    """Pairs of one library that the judge calls the same (so merged, or drawn as one class)
    whose own randomized evidence says otherwise: in the groups where each was drawn on its own
    (``raw``: each lesson as it was drawn, no lineage, no classes), one did better for the role
    than the other, beyond chance at ``SPLIT_LEVEL``. The judge said "the same"; the rollouts
    decide: the pair is split (not merged, or drawn apart again from the next step). A pair
    drawn as one class since it was judged has the same contrasts in those groups, so only the
    groups before count; texts with the same words are never split."""
    moves = []
    for version in heads.values():
        role = version.library
        if role == GLOBAL:
            continue
        for i, a in enumerate(version.lessons):
            for b in version.lessons[i + 1 :]:
                if normal(a.text) == normal(b.text) or not same(a, b):
                    continue
                ea, eb = (effect_of(role, x.id, raw.get((role, x.id), Tally())) for x in (a, b))
                if min(ea.tasks, eb.tasks) < policy.min_tasks:
                    continue
                z = abs(ea.effect - eb.effect) / math.hypot(ea.se, eb.se)
                if z > NormalDist().inv_cdf(1 - SPLIT_LEVEL / 2):
                    (better, e1), (worse, e2) = sorted(((a, ea), (b, eb)), key=lambda pair: -pair[1].effect)
                    moves.append(
                        PromotionMove(
                            kind="split",
                            text=worse.text,
                            lessons=[worse.id, better.id],
                            evidence=[e2, e1],
                            roles=[role],
                            reason=f"judged the same as {better.id}, but its own evidence ({e2.effect:+.2f}) is not "
                            f"that of {better.id} ({e1.effect:+.2f})",
                        )  # fmt: skip
                    )
    return moves


def helps(e: Effect, policy: PromotionPolicy, *, now: bool = False) -> bool:
    """Shown to help the role: its e-value reached 1/alpha, over at least ``min_tasks`` tasks
    (``now``: and stands there)."""
    return e.tasks >= policy.min_tasks and (e.e_now if now else e.e_value) * policy.alpha >= 1


def cannot_help(e: Effect, policy: PromotionPolicy) -> bool:
    """Its upper bound is below the margin, or after ``max_tasks`` tasks not even a lenient
    bound admits that it helps."""
    if e.tasks < policy.min_tasks:
        return False
    return e.ucb < policy.margin or (e.tasks >= policy.max_tasks and not plausibly_helps(e, policy.margin))


def execute(
    moves: list[PromotionMove], heads: dict[str, Version], *, provenance: Provenance
) -> tuple[list[Version], list[PromotionMove]]:
    """The new library versions that carry out ``moves`` (one per changed library), and the
    moves with the id each lesson got where it went (``into``)."""
    edits: dict[str, list[Edit]] = {}
    next_ids = {name: v.next_id for name, v in heads.items()}
    done = []
    for move in moves:
        into = None
        if move.kind == "promote":
            into = _add(edits, next_ids, GLOBAL, move.text)
            for i in move.lessons:
                edits.setdefault(i.rpartition("/")[0], []).append(Delete(op="delete", id=i))
        elif move.kind == "demote":
            edits.setdefault(GLOBAL, []).append(Delete(op="delete", id=move.lessons[0]))
            for role in move.roles:
                into = _add(edits, next_ids, role, move.text)
        elif move.kind == "adopt":
            into = _add(edits, next_ids, move.roles[0], move.text)
        elif move.kind == "split":  # no library changes: the judge is overruled (``hierarchy``)
            pass
        else:  # prune, merge
            edits.setdefault(move.lessons[0].rpartition("/")[0], []).append(Delete(op="delete", id=move.lessons[0]))
            into = move.into
        done.append(move.model_copy(update={"into": into}))
    versions = []
    for library, batch in edits.items():
        version, _ = apply(heads.get(library) or Version.empty(library), batch, provenance=provenance)
        if version.edits:
            versions.append(version)
    return versions, done


def _add(edits: dict[str, list[Edit]], next_ids: dict[str, int], library: str, text: str) -> str:
    number = next_ids.get(library, 1)
    next_ids[library] = number + 1
    edits.setdefault(library, []).append(Add(op="add", text=text))
    return lesson_id(library, number)


def lineage(moves: list[PromotionMove]) -> dict[str, str]:
    """Old lesson id -> the id it lives on as, from the promotion log's moves."""
    out = {}
    for move in moves:
        if move.into and move.kind in ("promote", "demote", "merge"):
            for i in move.lessons:
                out[i] = move.into
    return out
