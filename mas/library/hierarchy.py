"""The stages after apply: record usage, keep libraries within budget, and the promotion pass
(promote, demote, prune on the randomized evidence).

Stage: record usage and evidence (judge new pairs, prune, budgets, promote/demote).

Each works on the library file (``LibraryStore``) and the logs beside it (``SideFiles``), and
each is safe to run again after a crash: usage is recorded once per step, a budget pass only
acts on a library over its cap, and a promotion pass logs its moves before it commits them,
so a resumed pass carries out the moves it logged instead of planning new ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from autogen_core.models import ChatCompletionClient

from mas.config import PromotionPolicy
from mas.library import evidence, people, promotion, similar
from mas.library.budget import retirements, tokens
from mas.library.edits import apply
from mas.library.evidence import Tally
from mas.library.logs import StepKey
from mas.library.promotion import Same
from mas.library.screened import usable
from mas.library.similar import Judge
from mas.library.store import LibraryStore
from mas.meter import Meter
from mas.types.evidence import Effect, PromotionMove
from mas.types.lessons import GLOBAL, Budget, Lesson, Provenance, Version
from mas.types.refusals import QuarantineItem, RefusedEdit
from mas.types.usage import UsageEvent


@dataclass(frozen=True)
class Snapshot:
    """What the decisions of a step read, taken at once: the libraries, the equivalence
    verdicts known, the lineage of promoted lessons, the classes of twins, and the randomized
    evidence counted with them. The decisions (``promotion``) are functions of it; reading it
    again after a change costs only what changed (``SideFiles.evidence``)."""

    heads: dict[str, Version]
    judge: Judge
    lineage: dict[str, str]
    classes: dict[str, str]
    """Lesson id -> its class of twins (``similar.classes``): randomized and counted as one."""
    tallies: dict[tuple[str, str], Tally]
    effects: dict[tuple[str, str], Effect]

    @property
    def same(self) -> Same:
        """Judged to say the same thing, by the verdicts known (no model call)."""
        return self.judge.known_same


def snapshot(store: LibraryStore, policy: PromotionPolicy, judge: Judge | None = None) -> Snapshot:
    """The step's evidence as the library and its side files hold it now (``judge``: one with
    verdicts of its own, else those kept beside the library)."""
    side = store.side
    judge = judge or Judge(side.equivalence, client=None, overlap=policy.overlap)
    heads = store.heads()
    known = lineage(store)
    lessons = [l for v in heads.values() for l in v.lessons]
    twins = similar.classes(lessons, judge.known_same, judge.near(lessons))
    tallies = side.evidence.contrasts(known, twins)
    return Snapshot(heads, judge, known, twins, tallies, evidence.effects(tallies, twins))


def departed(store: LibraryStore, now: Snapshot) -> list[Lesson]:
    """The private lessons that were once in a library and have left it, not by promotion or
    a merge (those live on as another lesson) nor by a person's hand (``mas library remove``), in
    their last words that pass the screen."""
    out: dict[str, Lesson] = {}
    removed = people.removed_ids(store)
    for library in store.libraries():
        if library == GLOBAL:
            continue
        here = {lesson.id for lesson in store.head(library, screened=False).lessons} | removed
        for version in store.versions(library):
            out.update((l.id, l) for l in usable(version).lessons if l.id not in here and l.id not in now.lineage)
    return list(out.values())


def step_key(provenance: Provenance) -> StepKey:
    return StepKey(provenance.run, provenance.epoch, provenance.step)


def record(
    store: LibraryStore,
    provenance: Provenance,
    *,
    usage: list[UsageEvent],
    quarantined: list[QuarantineItem],
    refused: list[RefusedEdit],
) -> None:
    """The step's usage events, quarantined lessons and refused edits, in their logs (once)."""
    key = step_key(provenance)
    store.side.usage.append(key, usage)
    store.side.quarantine.append(key, quarantined)
    store.side.rejected.append(key, refused)


def lineage(store: LibraryStore) -> dict[str, str]:
    return promotion.lineage(list(store.side.promotions.items()))


def effects(store: LibraryStore, policy: PromotionPolicy) -> dict[tuple[str, str], Effect]:
    """The randomized evidence so far, per (role, lesson), a class of twins counted as one."""
    return snapshot(store, policy).effects


async def judge_new(
    store: LibraryStore,
    policy: PromotionPolicy,
    *,
    client: ChatCompletionClient | None,
    seed: int = 0,
    temperature: float = 0.0,
    meter: Meter | None = None,
) -> int:
    """After a step: judge every candidate pair of the current libraries not judged yet (in
    practice the lessons the step added, and lessons that just became promising), so that
    twins are randomized and counted as one from the next step on. Verdicts are kept beside
    the library, so a pair costs one model call once. Returns the number of calls made."""
    judge = Judge(
        store.side.equivalence, client=client, overlap=policy.overlap, seed=seed, temperature=temperature, meter=meter
    )
    now = snapshot(store, policy, judge)
    pairs = [(a, b) for a, b in _pairs(now.heads, now.effects, policy, judge) if judge.open(a, b)]
    await judge.judge_all(pairs)
    await judge.look_again(_helping(now.heads, now.effects, policy))
    return len(pairs) if client is not None else 0


def _helping(heads: dict[str, Version], known: dict[tuple[str, str], Effect], policy: PromotionPolicy):
    """Pairs of lessons of two private libraries, each with evidence over ``min_tasks`` tasks
    that showing it helps its own role (an estimate above zero): twins there are what a
    promotion pools."""
    found = [
        l for v in heads.values() if v.library != GLOBAL for l in v.lessons
        if (e := known.get((v.library, l.id))) is not None and e.tasks >= policy.min_tasks and e.effect > 0
    ]  # fmt: skip
    for i, a in enumerate(found):
        for b in found[i + 1 :]:
            if a.id.rpartition("/")[0] != b.id.rpartition("/")[0]:
                yield a, b


def enforce_budgets(
    store: LibraryStore, budget: Budget, provenance: Provenance, policy: PromotionPolicy = PromotionPolicy()
) -> list[Version]:
    """Retire the weakest-evidenced lessons of every library over its cap, by delete edits."""
    heads = store.heads()
    over = [
        v for v in heads.values() if sum(tokens(l.text, budget.tokenizer) for l in v.lessons) > budget.cap(v.library)
    ]
    if not over:
        return []
    known = snapshot(store, policy).effects
    stamp = provenance.model_copy(update={"stage": "budget"})
    versions = []
    for head in over:

        def strength(lesson_id: str, library: str = head.library) -> float:
            found = [e for (role, i), e in known.items() if i == lesson_id and (library == GLOBAL or role == library)]
            return max((e.lcb if e.tasks > 1 else e.effect for e in found), default=0.0)

        deletes = retirements(head, cap=budget.cap(head.library), strength=strength, spec=budget.tokenizer)
        versions.append(apply(head, deletes, provenance=stamp)[0])
    store.commit(versions)
    return versions


def _pairs(heads: dict[str, Version], known: dict[tuple[str, str], Effect], policy: PromotionPolicy, judge: Judge):
    """The pairs worth judging: within a library (a repeat there splits its evidence), and a
    promising lesson against every lesson of the other roles (a trial there, a promotion with
    its copies), and any pair sharing enough words."""
    lessons = [l for v in heads.values() for l in v.lessons]
    promising = {
        l.id for v in heads.values() for l in v.lessons
        if (e := known.get((v.library, l.id))) is not None and e.tasks >= policy.min_tasks and e.effect > 0
    }  # fmt: skip
    for i, a in enumerate(lessons):
        for b in lessons[i + 1 :]:
            if judge.candidate(a, b) or {a.id, b.id} & promising:
                yield a, b


def prune(
    store: LibraryStore,
    policy: PromotionPolicy,
    provenance: Provenance,
    *,
    last: bool = False,
    room: Sequence[PromotionMove] = (),
) -> list[PromotionMove]:
    """After a step: delete the private lessons whose evidence no longer supports them, and
    log each with its evidence in ``<library>.prunings.jsonl``. After the run's ``last`` step
    no more evidence will come: every lesson tried on ``min_tasks`` tasks whose evidence does
    not lean towards helping leaves, and every younger one when the lessons tried before do not
    help on average (``PromotionPolicy.end_level``, ``promotion.prunings``), and every one whose
    effect has turned: below zero in the last third of the steps, and below what it was before
    (``PromotionPolicy.turn_level``, ``promotion.turns``); and a lesson whose
    trial in another role leans towards helping there is added to that role's library
    (``PromotionPolicy.adopt_level``, ``promotion.adoptions``), and so is a lesson that left
    its library (``departed``) whose trial there shows that it helps (``adopt_departed``),
    logged in the same file. ``room``: the lessons the step's edits removed to make room in a
    full library (``PromotionPolicy.make_room``), logged first (their edit version has removed them)."""
    side = store.side
    stamp = provenance.model_copy(update={"stage": "prune"})
    key = step_key(stamp)
    logged = next((moves for done, moves in side.prunings.steps() if done == key), None)
    now = snapshot(store, policy)
    if logged is not None:
        moves = logged
    else:
        turned = _turned(store, policy, now) if last else {}
        planned = promotion.prunings(now.heads, now.tallies, policy, last=last, turned=turned)
        if last:
            adopted = promotion.adoptions(now.heads, now.tallies, policy, now.same, departed(store, now))
            planned += people.adoptable(store, adopted)
        done = promotion.execute(planned, now.heads, provenance=stamp)[1]  # with each adopted lesson's new id
        moves = [*room, *done]
        side.prunings.append(key, moves)
    if moves and not store.has_provenance(stamp.run, stamp.epoch, stamp.step, "prune"):
        store.commit(promotion.execute(moves, now.heads, provenance=stamp)[0])
    return moves


def _turned(store: LibraryStore, policy: PromotionPolicy, now: Snapshot) -> dict[tuple[str, str], str]:
    """The (role, lesson) pairs whose effect has turned by now (``promotion.turns``)."""
    if policy.turn_level is None:
        return {}
    return promotion.turns(*store.side.evidence.windows(lineage=now.lineage, classes=now.classes), policy)


async def promote(
    store: LibraryStore,
    policy: PromotionPolicy,
    provenance: Provenance,
    *,
    budget: Budget,
    client: ChatCompletionClient | None = None,
    seed: int = 0,
    temperature: float = 0.0,
    meter: Meter | None = None,
    dry_run: bool = False,
    roles: list[str] | None = None,
    last: bool = False,
) -> list[PromotionMove]:
    """One promotion pass (``roles``: the team's): merges, promotions and demotions from all the randomized evidence
    so far, judging near-duplicates by meaning (``client`` asks the model about pairs not
    judged yet; without it they count as different); log the pass with its evidence in
    ``<library>.promotions.jsonl``, then carry it out, unless ``dry_run``. After the run's
    ``last`` step a global lesson whose effect has turned in a role (``promotion.turns``) counts
    as no help there, and is demoted when that leaves fewer than ``min_roles`` it can help."""
    if dry_run:
        return await _plan(
            store, policy, client=None, seed=seed, temperature=temperature, meter=meter, dry_run=True, roles=roles
        )
    with store.exclusive():  # the library is held for the whole pass
        stamp = provenance.model_copy(update={"stage": "promotion"})
        side = store.side
        key = step_key(stamp)
        logged = next((moves for done, moves in side.promotions.steps() if done == key), None)
        if logged is not None:  # a crash came between the log and the commit
            if not store.has_provenance(stamp.run, stamp.epoch, stamp.step, "promotion"):
                store.commit(promotion.execute(logged, store.heads(), provenance=stamp)[0])
            return logged
        heads = store.heads()
        moves = await _plan(
            store, policy, client=client, seed=seed, temperature=temperature, meter=meter, roles=roles, last=last
        )  # fmt: skip
        versions, moves = promotion.execute(moves, heads, provenance=stamp)
        side.promotions.append(key, moves)  # logged first, keyed by the step: see above
        store.commit(versions)
        enforce_budgets(store, budget, stamp, policy)
        return moves


async def _plan(
    store: LibraryStore,
    policy: PromotionPolicy,
    *,
    client,
    seed,
    temperature,
    meter,
    dry_run=False,
    roles=None,
    last=False,
) -> list[PromotionMove]:
    """Merges within libraries, then promotions and demotions."""
    side = store.side
    judge = Judge(
        side.equivalence, client=client, overlap=policy.overlap, seed=seed, temperature=temperature, meter=meter
    )  # fmt: skip
    heads, known = store.heads(), lineage(store)
    await judge.judge_all(_pairs(heads, side.evidence.estimate(lineage=known), policy, judge))
    undone = promotion.splits(heads, side.evidence.contrasts(), policy, judge.known_same)
    texts = {l.id: l.text for v in heads.values() for l in v.lessons}
    for move in undone:  # the rollouts overrule the judge, from this pass on
        judge.overrule(move.text, texts[move.lessons[1]], move.reason, keep=not dry_run)
    now = snapshot(store, policy, judge)
    moves = undone + promotion.merges(heads, now.tallies, policy, judge.known_same)
    merged = {i for m in moves for i in m.lessons}
    kept = {
        name: v.model_copy(update={"lessons": [l for l in v.lessons if l.id not in merged]})
        for name, v in heads.items()
    }
    own = side.evidence.contrasts(lineage=known)
    turned = _turned(store, policy, now) if last else {}
    return moves + promotion.plan(kept, now.tallies, policy, same=judge.known_same, roles=roles, own=own, turned=turned)
