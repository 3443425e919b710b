"""Promotion, pruning and the evidence they stand on, in the scripted learning world of
``bench/learning_world.py`` (a smaller run of it: the benchmark itself reports the figures).

The world plants lessons with known effects per role, a noisy proposer, and the confounds
that fooled the old evidence rule (a summarizer that judges lessons "applied" more often in
winning rollouts). The null world keeps the confounds and takes every effect away.
"""

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "learning_world.py"


@pytest.fixture(scope="module")
def world():
    spec = importlib.util.spec_from_file_location("learning_world", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["learning_world"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("seed", range(100, 106))
def test_nothing_is_promoted_in_a_world_where_no_lesson_does_anything(world, seed):
    outcome = world.run(seed, null=True, tasks=24)
    assert outcome.promoted == []
    # Nor does the benchmark's bound on recall, at mas's own level.
    assert outcome.reachable[world.LEVELS[0]] == 0


def test_the_old_rule_is_fooled_by_the_same_null_world(world):
    """The null world is not trivially safe: judging by who applied what, as mas did before,
    promotes lessons that do nothing."""
    assert any(world.run(seed, null=True, old=True, tasks=24).promoted for seed in range(100, 103))


def test_in_the_planted_world_promotions_are_right_and_the_harmful_lesson_leaves(world):
    outcomes = [world.run(seed) for seed in range(3)]
    for outcome in outcomes:
        assert set(outcome.promoted) <= world.CROSS_ROLE  # never a lesson that helps one role or none
        assert outcome.harmful_gone is not None and outcome.harmful_gone <= 2
    # One seed's share swings between about 0.5 and 1.0 with any change of path; their mean does not.
    assert sum(o.share for o in outcomes) / len(outcomes) > 0.6
    # The recall reachable with a run's own evidence: the planted lessons are there to find, and
    # a looser level finds at least as many.
    strict, lenient = world.LEVELS
    assert sum(o.reachable[lenient] for o in outcomes) >= 3
    assert all(o.reachable[strict] <= o.reachable[lenient] <= len(world.CROSS_ROLE) for o in outcomes)
