"""The least time a training step's model calls can take: what efficiency is measured against.

With ``slots`` calls served at once and ``latency`` seconds each, everything up to the
advantages takes at least ceil(calls / slots) rounds, and at least the chain of one informative
group: 3 rollout calls (the maths team's roles in turn), its summaries, its advantage. The
edit calls wait for every advantage of the step, and the equivalence calls (twins judged after
every step, ``mas.library.hierarchy.judge_new``) for the edits: each is at least one more
round, after the rest, however many slots there are.
"""

from __future__ import annotations

import math

TAIL = ("edit", "equivalence")
"""Stages whose calls wait for all the step's earlier calls, in this order."""


def step_bound(calls: dict[str, int], informative: int, slots: int, latency: float) -> float:
    """Seconds: ``calls`` per stage (``StepReport.calls``), ``informative`` groups."""
    tail = [stage for stage in TAIL if calls.get(stage)]
    body = sum(n for stage, n in calls.items() if stage not in tail)
    depth = 3 + (2 if informative else 0)
    return (max(depth, math.ceil(body / slots)) + len(tail)) * latency
