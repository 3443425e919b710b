"""The usage graph: derived from usage events, never the source of truth.

Nodes are ``role:<name>``, ``lesson:<id>`` and ``task:<id>``. An edge role -> lesson holds
what happened when the role applied the lesson: ``uses``, ``mean`` advantage, and a one-sided
confidence bound on that mean (``lcb``/``ucb``, normal approximation). An edge lesson -> task
counts the uses on that task.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable

import networkx as nx

from mas.types import Evidence, UsageEvent, Version

Z = 1.645
"""One-sided 95% normal quantile: a lesson helps a role when mean - Z * se > 0."""


def evidence_of(uses: int, total: float, squares: float) -> Evidence:
    """From the count, sum and sum of squares of the advantages (one use: no bound)."""
    mean = total / uses if uses else 0.0
    half = math.inf
    if uses > 1:
        half = Z * math.sqrt(max(0.0, (squares - uses * mean * mean) / (uses - 1)) / uses)
    return Evidence(uses=uses, mean=mean, lcb=mean - half, ucb=mean + half)


def build(events: Iterable[UsageEvent], heads: dict[str, Version] | None = None) -> nx.DiGraph:
    """Aggregate events in plain dicts (one pass), then add one edge per pair."""
    sums: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    tasks: dict[tuple[str, str], int] = defaultdict(int)
    for event in events:
        if not (event.cited or event.judged):
            continue  # most events apply nothing
        role, task, advantage = event.role, event.task_id, event.advantage
        square = advantage * advantage
        for lesson in event.applied:
            s = sums[(role, lesson)]
            s[0] += 1
            s[1] += advantage
            s[2] += square
            tasks[(lesson, task)] += 1
    graph = nx.DiGraph()
    for (role, lesson), (uses, total, squares) in sums.items():
        e = evidence_of(int(uses), total, squares)
        graph.add_node(f"role:{role}", kind="role", name=role)
        graph.add_node(f"lesson:{lesson}", kind="lesson", name=lesson)
        graph.add_edge(
            f"role:{role}", f"lesson:{lesson}", uses=e.uses, mean=e.mean, lcb=e.lcb, ucb=e.ucb, sum=total, sumsq=squares
        )
    for (lesson, task), uses in tasks.items():
        graph.add_node(f"task:{task}", kind="task", name=task)
        graph.add_edge(f"lesson:{lesson}", f"task:{task}", uses=uses)
    for version in (heads or {}).values():
        for lesson in version.lessons:
            graph.add_node(
                f"lesson:{lesson.id}", kind="lesson", name=lesson.id, text=lesson.text, library=version.library
            )
    return graph


def evidence(graph: nx.DiGraph, lesson: str, role: str) -> Evidence:
    data = graph.get_edge_data(f"role:{role}", f"lesson:{lesson}")
    return evidence_of(data["uses"], data["sum"], data["sumsq"]) if data else evidence_of(0, 0.0, 0.0)


def pooled(graph: nx.DiGraph, lessons: Iterable[str], role: str | None = None) -> Evidence:
    """The evidence of several lesson ids together, for one role or for all roles."""
    uses, total, squares = 0, 0.0, 0.0
    for lesson in lessons:
        node = f"lesson:{lesson}"
        if node not in graph:
            continue
        for source, _, data in graph.in_edges(node, data=True):
            if role is None or source == f"role:{role}":
                uses, total, squares = uses + data["uses"], total + data["sum"], squares + data["sumsq"]
    return evidence_of(uses, total, squares)


def roles_helped(graph: nx.DiGraph, lesson: str, *, min_uses: int = 1) -> list[str]:
    """Roles for which applying the lesson came with a reliably positive advantage."""
    node = f"lesson:{lesson}"
    if node not in graph:
        return []
    return sorted(
        graph.nodes[r]["name"] for r, _, d in graph.in_edges(node, data=True) if d["uses"] >= min_uses and d["lcb"] > 0
    )


def conflicts(graph: nx.DiGraph, *, min_uses: int = 1) -> list[tuple[str, list[str], list[str]]]:
    """Lessons that reliably help some roles and reliably hurt others: (lesson, helped, hurt)."""
    out = []
    for node, data in graph.nodes(data=True):
        if data.get("kind") != "lesson":
            continue
        edges = [(graph.nodes[r]["name"], d) for r, _, d in graph.in_edges(node, data=True) if d["uses"] >= min_uses]
        helped = sorted(r for r, d in edges if d["lcb"] > 0)
        hurt = sorted(r for r, d in edges if d["ucb"] < 0)
        if helped and hurt:
            out.append((data["name"], helped, hurt))
    return sorted(out)
