"""The learning worlds draw every number from the call's seed (``bench/hard_world.draw``), so
their law holds only if mas gives every call a seed of its own: a seed shared by two different
calls would draw the same outcome for both. Trains both worlds briefly and checks it."""

import json
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import pytest

from mas.models.fake import Request

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import hard_world as hw
import learning_world as lw


@pytest.mark.parametrize("hard", [False, True])
def test_no_seed_and_salt_is_drawn_by_two_different_calls(monkeypatch, hard):
    prompts = defaultdict(set)  # (seed, salt) -> the prompts that drew it
    draw = hw.draw

    def recorded(request, salt):
        prompts[(request.seed, salt)].add(json.dumps([request.system, request.messages]))
        return draw(request, salt)

    monkeypatch.setattr(lw, "draw", recorded)
    monkeypatch.setattr(hw, "draw", recorded)
    lw.run(3, tasks=40, epochs=2, hard=replace(hw.HARD, judge="honest") if hard else None)
    outcomes = [key for key in prompts if key[1] == "outcome"]
    assert len(outcomes) == 2 * 40 * 5  # every rollout drew its outcome, each with its own seed
    drawn = [salt for _, salt in prompts]
    assert drawn.count("kind") >= 5 and drawn.count("judge errs") >= 5  # advantages and judgements drew too
    shared = {key: len(p) for key, p in prompts.items() if len(p) > 1}
    assert not shared


def test_a_call_draws_the_same_number_whatever_its_prompt_shows():
    bare = Request("You are the solver.", ["What is 2 + 2?"], [], None, seed=7)
    shown = Request("You are the solver.\n- Reread the question.", ["What is 2 + 2?"], [], None, seed=7)
    assert hw.draw(bare, "outcome") == hw.draw(shown, "outcome")
    assert hw.draw(bare, "outcome") != hw.draw(replace(bare, seed=8), "outcome")
    assert hw.draw(bare, "outcome") != hw.draw(bare, "grader")
