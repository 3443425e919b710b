"""Promotion: lessons that help several roles move to the global library; demotion undoes it.

A lesson "helps a role" when that role applied it (or a near-duplicate of it in its own
library) at least ``min_uses`` times with a mean advantage whose lower confidence bound is
above zero. A near-duplicate cluster of private lessons that helps at least ``min_roles``
roles is promoted: its best-evidenced text is added to the global library and every private
near-duplicate is deleted (merged into it), all as edits with provenance. A global lesson
whose pooled evidence has an upper bound below zero is demoted: it goes back to the roles it
still helps, or is deleted.
"""

from __future__ import annotations

import re
from typing import Literal

import networkx as nx
from pydantic import Field

from mas.library.edits import apply
from mas.library.graph import evidence, pooled
from mas.types import GLOBAL, Add, Delete, Edit, Frozen, Lesson, PromotionMove, Provenance, Version

_STOP = {"the", "a", "an", "and", "or", "of", "to", "in", "on", "for", "it", "is", "be", "with", "when", "then"}


class PromotionPolicy(Frozen):
    min_roles: int = Field(2, ge=1)
    """k: roles a lesson must help to be promoted."""
    min_uses: int = Field(5, ge=2)
    """n: uses per role before its evidence counts (and before a global lesson can be demoted)."""
    similarity: float = Field(0.6, gt=0, le=1)
    """Word-set Jaccard at or above which two lessons are near-duplicates."""
    cadence: Literal["epoch", "step", "off"] = "epoch"
    """When training runs a promotion pass."""


def plan(graph: nx.DiGraph, heads: dict[str, Version], policy: PromotionPolicy) -> list[PromotionMove]:
    return _promotions(graph, heads, policy) + _demotions(graph, heads, policy)


def _promotions(graph, heads, policy) -> list[PromotionMove]:
    private = [(v.library, lesson) for v in heads.values() if v.library != GLOBAL for lesson in v.lessons]
    used = [(role, lesson) for role, lesson in private if evidence(graph, lesson.id, role).uses > 0]
    moves = []
    for cluster in _clusters(used, policy.similarity):
        per_role = {
            role: pooled(graph, [l.id for r, l in cluster if r == role], role)
            for role in sorted({r for r, _ in cluster})
        }
        helped = [r for r, e in per_role.items() if e.uses >= policy.min_uses and e.lcb > 0]
        if len(helped) >= policy.min_roles:
            best = max(cluster, key=lambda rl: evidence(graph, rl[1].id, rl[0]).lcb)[1]
            moves.append(
                PromotionMove(
                    kind="promote",
                    text=best.text,
                    lessons=sorted(l.id for _, l in cluster),
                    evidence=per_role,
                    roles=helped,
                )
            )
    return moves


def _demotions(graph, heads, policy) -> list[PromotionMove]:
    moves = []
    for lesson in heads.get(GLOBAL, Version.empty(GLOBAL)).lessons:
        overall = pooled(graph, [lesson.id])
        if overall.uses >= policy.min_uses and overall.ucb < 0:
            roles = sorted({graph.nodes[r]["name"] for r, _ in graph.in_edges(f"lesson:{lesson.id}")})
            per_role = {r: evidence(graph, lesson.id, r) for r in roles}
            back = [r for r, e in per_role.items() if e.uses >= policy.min_uses and e.lcb > 0]
            moves.append(
                PromotionMove(
                    kind="demote",
                    text=lesson.text,
                    lessons=[lesson.id],
                    evidence={"all": overall, **per_role},
                    roles=back,
                )
            )
    return moves


def execute(
    moves: list[PromotionMove], heads: dict[str, Version], *, similarity: float, provenance: Provenance
) -> list[Version]:
    """The new library versions that carry out ``moves``: one version per changed library."""
    edits: dict[str, list[Edit]] = {}
    for move in moves:
        if move.kind == "promote":
            shared = heads.get(GLOBAL)
            if not (shared and any(_similar(l.text, move.text) >= similarity for l in shared.lessons)):
                edits.setdefault(GLOBAL, []).append(Add(op="add", text=move.text))
            for v in heads.values():
                if v.library != GLOBAL:
                    gone = [
                        l.id for l in v.lessons if l.id in move.lessons or _similar(l.text, move.text) >= similarity
                    ]
                    edits.setdefault(v.library, []).extend(Delete(op="delete", id=i) for i in gone)
        else:
            edits.setdefault(GLOBAL, []).append(Delete(op="delete", id=move.lessons[0]))
            for role in move.roles:
                edits.setdefault(role, []).append(Add(op="add", text=move.text))
    versions = []
    for library, batch in edits.items():
        head = heads.get(library) or Version.empty(library)
        version, _ = apply(head, _unique(batch), provenance=provenance)
        if version.edits:
            versions.append(version)
    return versions


def _unique(edits: list[Edit]) -> list[Edit]:
    seen, out = set(), []
    for edit in edits:
        key = edit.model_dump_json()
        if key not in seen:
            seen.add(key)
            out.append(edit)
    return out


def _clusters(items: list[tuple[str, Lesson]], threshold: float) -> list[list[tuple[str, Lesson]]]:
    """Near-duplicate groups (single linkage) of the lessons that have any evidence."""
    parent = list(range(len(items)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    words = [_words(lesson.text) for _, lesson in items]
    for i in range(len(items)):
        for j in range(i + 1, len(items)):
            if _jaccard(words[i], words[j]) >= threshold:
                parent[root(i)] = root(j)
    groups: dict[int, list[tuple[str, Lesson]]] = {}
    for i, item in enumerate(items):
        groups.setdefault(root(i), []).append(item)
    return list(groups.values())


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower())) - _STOP


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


def _similar(a: str, b: str) -> float:
    return _jaccard(_words(a), _words(b))
