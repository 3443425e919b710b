"""The stages after apply: record usage, keep libraries within budget, promote and demote.

Each works on the library file (``LibraryStore``) and the usage log beside it, and each is
safe to run again after a crash: usage is recorded once per step, a budget pass only acts on
a library over its cap, and a promotion pass is skipped when its provenance is already there.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict

from . import graph as usage_graph
from .budget import Budget, retirements, tokens
from .library import apply
from .promotion import Move, PromotionPolicy, execute, plan
from .store import LibraryStore
from .types import Provenance, UsageEvent, Version
from .usage import QuarantineLog, UsageLog


def record_usage(store: LibraryStore, events: list[UsageEvent], provenance: Provenance) -> None:
    UsageLog.beside(store.path).record(provenance.run, provenance.epoch, provenance.step, events)


def record_quarantine(store: LibraryStore, refused: list[dict], provenance: Provenance) -> None:
    """Each item: ``{"library", "text", "reason"}``."""
    QuarantineLog.beside(store.path).append(provenance.run, provenance.epoch, provenance.step, refused)


def enforce_budgets(store: LibraryStore, budget: Budget, provenance: Provenance) -> list[Version]:
    """Retire the weakest-evidenced lessons of every library over its cap, by delete edits."""
    heads = store.heads()
    over = [v for v in heads.values() if sum(tokens(l.text) for l in v.lessons) > budget.cap(v.library)]
    if not over:
        return []
    graph = usage_graph.build(UsageLog.beside(store.path).events())
    stamp = provenance.model_copy(update={"stage": "budget"})
    versions = []
    for head in over:
        role = head.library

        def strength(lesson_id: str) -> float:
            e = usage_graph.pooled(graph, [lesson_id], None if role == "global" else role)
            return e.lcb if e.uses > 1 else (e.mean if e.uses else 0.0)

        deletes = retirements(head, cap=budget.cap(role), strength=strength)
        versions.append(apply(head, deletes, provenance=stamp)[0])
    store.commit(versions)
    return versions


def promote(
    store: LibraryStore, policy: PromotionPolicy, provenance: Provenance, *, budget: Budget, dry_run: bool = False
) -> list[Move]:
    """Plan promotions and demotions from all the evidence so far; carry them out unless
    ``dry_run``; log each with its evidence in ``<library file>.promotions.jsonl``."""
    stamp = provenance.model_copy(update={"stage": "promotion"})
    if not dry_run and store.has_provenance(stamp.run, stamp.epoch, stamp.step, "promotion"):
        return []
    heads = store.heads()
    moves = plan(usage_graph.build(UsageLog.beside(store.path).events(), heads), heads, policy)
    if dry_run or not moves:
        return moves
    store.commit(execute(moves, heads, similarity=policy.similarity, provenance=stamp))
    _log(store, moves, stamp)
    enforce_budgets(store, budget, stamp)
    return moves


def _log(store: LibraryStore, moves: list[Move], provenance: Provenance) -> None:
    path = store.path.with_suffix(".promotions.jsonl")
    with path.open("a", encoding="utf-8") as f:
        for move in moves:
            record = {"provenance": provenance.model_dump(mode="json"), **asdict(move)}
            f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())
