"""The usage graph: derived from the randomized evidence, never the source of truth.

Stage: none: evaluation and studies, after training (``mas graph``, read off the evidence).

Nodes: ``role:<name>`` and ``lesson:<id>`` (its text and library; ``gone`` when merged,
demoted or pruned since), and, when asked for, ``task:<id>``. Edges:

- role -> lesson, ``kind`` ``evidence`` (the role's own or the global library) or ``trial``
  (another role's lesson shown to it as a transfer trial): the randomized estimate of what
  showing the lesson to the role does (``effect`` with ``lcb``/``ucb``, over ``tasks`` tasks,
  ``contrasts`` groups, ``exposures`` rollouts) and the summarizer's ``judged`` rate, which is
  a description only;
- lesson -> task, ``kind`` ``exposure``: how many rollouts of the task were shown the lesson.

Every node has a ``label`` (the role's name, the lesson's id, the task's id) and a ``kind``;
every edge a ``kind``. Moves are node attributes: ``promoted_to`` on the private lessons merged
into a global one and ``promoted_from`` on the global lesson; ``demoted_to`` on a global lesson
sent back to its roles and ``demoted_from`` on the private copy; ``merged_into`` on a lesson
merged into one that says the same; ``split_from`` on a lesson judged the same as another whose
own evidence told them apart; ``pruned`` (the reason) on a lesson pruned for its evidence;
``adopted_as`` on a lesson another role adopted after a run's last step (its copies' ids) and
``adopted_from`` on the copy.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

import networkx as nx

from mas.types.evidence import Effect, PromotionMove
from mas.types.lessons import Version
from mas.types.usage import UsageEvent


def build(
    effects: dict[tuple[str, str], Effect],
    heads: dict[str, Version],
    *,
    history: Iterable[Version] = (),
    moves: Iterable[PromotionMove] = (),
    events: Iterable[UsageEvent] | None = None,
) -> nx.DiGraph:
    """The graph of ``effects`` over the current libraries; ``history`` names lessons that are
    gone; ``events`` adds the lesson -> task edges."""
    graph = nx.DiGraph()
    for versions, gone in ((history, True), (heads.values(), False)):  # a current lesson overwrites its past
        for version in versions:
            for lesson in version.lessons:
                graph.add_node(f"lesson:{lesson.id}", kind="lesson", label=lesson.id, text=lesson.text,
                               library=version.library, gone=gone)  # fmt: skip
    for (role, lesson), e in sorted(effects.items()):
        graph.add_node(f"role:{role}", kind="role", label=role)
        if f"lesson:{lesson}" not in graph:
            graph.add_node(
                f"lesson:{lesson}", kind="lesson", label=lesson, text="", library=lesson.rpartition("/")[0], gone=True
            )
        graph.add_edge(f"role:{role}", f"lesson:{lesson}", kind="trial" if e.trial else "evidence", **_numbers(e))
    for move in moves:
        _mark(graph, move)
    if events is not None:
        counts = Counter((lesson, e.task_id) for e in events for lesson in e.shown if lesson in e.randomized)
        for (lesson, task), n in counts.items():
            graph.add_node(f"task:{task}", kind="task", label=task)
            if f"lesson:{lesson}" in graph:
                graph.add_edge(f"lesson:{lesson}", f"task:{task}", kind="exposure", exposures=n)
    return graph


def _mark(graph: nx.DiGraph, move: PromotionMove) -> None:
    """The move's attributes on the lessons it moved (and on the lesson they became)."""
    moved = [graph.nodes[f"lesson:{i}"] for i in move.lessons if f"lesson:{i}" in graph]
    target = graph.nodes[f"lesson:{move.into}"] if move.into and f"lesson:{move.into}" in graph else None
    if move.kind in ("promote", "demote") and move.into:
        for node in moved:
            node[f"{move.kind}d_to"] = move.into
        if target is not None:
            target[f"{move.kind}d_from"] = ", ".join(move.lessons)
    elif move.kind == "merge" and move.into:
        for node in moved:
            node["merged_into"] = move.into
    elif move.kind == "split":
        for node in moved[:1]:
            node["split_from"] = move.lessons[1]
    elif move.kind == "prune":
        for node in moved:
            node["pruned"] = move.reason or "pruned"
    elif move.kind == "adopt" and move.into:
        for node in moved:
            node["adopted_as"] = ", ".join(filter(None, (node.get("adopted_as"), move.into)))
        if target is not None:
            target["adopted_from"] = move.lessons[0]


def _numbers(e: Effect) -> dict:
    """The edge attributes of an effect; an unbounded side (too few tasks) is left out, since
    GraphML has no infinity."""
    out = {
        "tasks": e.tasks, "contrasts": e.contrasts, "exposures": e.exposures, "effect": round(e.effect, 4),
        "judged": round(e.judged, 4), "helps": e.lcb > 0, "hurts": e.ucb < 0,
    }  # fmt: skip
    out.update({k: round(v, 4) for k, v in (("lcb", e.lcb), ("ucb", e.ucb)) if math.isfinite(v)})
    return out


def roles_helped(graph: nx.DiGraph, lesson: str) -> list[str]:
    """Roles for which showing the lesson reliably helped."""
    node = f"lesson:{lesson}"
    if node not in graph:
        return []
    return sorted(graph.nodes[r]["label"] for r, _, d in graph.in_edges(node, data=True) if d.get("helps"))
