"""The stages after apply: record usage, keep libraries within budget, promote and demote.

Each works on the library file (``LibraryStore``) and the logs beside it (``SideFiles``), and
each is safe to run again after a crash: usage is recorded once per step, a budget pass only
acts on a library over its cap, and a promotion pass is skipped when its provenance is
already there.
"""

from __future__ import annotations

from mas.library import graph as usage_graph
from mas.library.budget import Budget, retirements, tokens
from mas.library.edits import apply
from mas.library.logs import SideFiles, StepKey
from mas.library.promotion import PromotionPolicy, execute, plan
from mas.library.store import LibraryStore
from mas.types import GLOBAL, PromotionMove, Provenance, QuarantineItem, UsageEvent, Version


def step_key(provenance: Provenance) -> StepKey:
    return StepKey(provenance.run, provenance.epoch, provenance.step)


def record_usage(store: LibraryStore, events: list[UsageEvent], provenance: Provenance) -> None:
    SideFiles(store.path).usage.append(step_key(provenance), events)


def record_quarantine(store: LibraryStore, refused: list[QuarantineItem], provenance: Provenance) -> None:
    SideFiles(store.path).quarantine.append(step_key(provenance), refused)


def enforce_budgets(store: LibraryStore, budget: Budget, provenance: Provenance) -> list[Version]:
    """Retire the weakest-evidenced lessons of every library over its cap, by delete edits."""
    heads = store.heads()
    over = [v for v in heads.values() if sum(tokens(l.text) for l in v.lessons) > budget.cap(v.library)]
    if not over:
        return []
    graph = usage_graph.build(SideFiles(store.path).usage.items())
    stamp = provenance.model_copy(update={"stage": "budget"})
    versions = []
    for head in over:
        role = None if head.library == GLOBAL else head.library

        def strength(lesson_id: str, role: str | None = role) -> float:
            e = usage_graph.pooled(graph, [lesson_id], role)
            return e.lcb if e.uses > 1 else (e.mean if e.uses else 0.0)

        deletes = retirements(head, cap=budget.cap(head.library), strength=strength)
        versions.append(apply(head, deletes, provenance=stamp)[0])
    store.commit(versions)
    return versions


def promote(
    store: LibraryStore, policy: PromotionPolicy, provenance: Provenance, *, budget: Budget, dry_run: bool = False
) -> list[PromotionMove]:
    """Plan promotions and demotions from all the evidence so far; carry them out unless
    ``dry_run``; log each with its evidence in ``<library>.promotions.jsonl``.

    The moves are logged before they are committed, keyed by the step: a crash between the two
    leaves them logged, and the pass run again (its provenance is not in the library yet)
    commits them without logging them twice. The library is held for the whole pass."""
    if dry_run:
        return _plan(store, policy)
    with store.exclusive():
        stamp = provenance.model_copy(update={"stage": "promotion"})
        if store.has_provenance(stamp.run, stamp.epoch, stamp.step, "promotion"):
            return []
        moves = _plan(store, policy)
        if not moves:
            return moves
        SideFiles(store.path).promotions.append(step_key(stamp), moves)
        store.commit(execute(moves, store.heads(), similarity=policy.similarity, provenance=stamp))
        enforce_budgets(store, budget, stamp)
        return moves


def _plan(store: LibraryStore, policy: PromotionPolicy) -> list[PromotionMove]:
    heads = store.heads()
    return plan(usage_graph.build(SideFiles(store.path).usage.items(), heads), heads, policy)
