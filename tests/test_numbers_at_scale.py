"""Numbers at scale and at their edges: what long runs, large libraries and odd measurements
reach, and what once crashed or decided wrongly there."""

from __future__ import annotations

import asyncio
import math

import pytest
from autogen_core.models import UserMessage

import mas
from mas.domains.maths import extract_answer
from mas.errors import EndpointError, UserError
from mas.library.budget import retirements
from mas.library.edits import lesson_id, strip_lesson_ids
from mas.models.endpoint import Adapted
from mas.models.limiter import AdaptiveLimit
from mas.types.lessons import Lesson, Version
from tests.test_custom_team import respond, writer_and_checker


def test_lesson_ids_past_four_digits_are_stripped_from_answers():
    """``strip_lesson_ids`` matched exactly four digits: past ``solver/9999`` a library's ids
    have five (``lesson_id``), were left in the transcript, and the maths extractor read the
    id's number as the team's answer."""
    assert lesson_id("solver", 12345) == "solver/12345"
    assert strip_lesson_ids("ANSWER: Paris [searcher/10002]", ["global", "searcher"]) == "ANSWER: Paris "
    assert extract_answer(strip_lesson_ids("I followed [solver/12345] and checked it.", ["solver"])) is None
    assert extract_answer(strip_lesson_ids("Per global/123456789, it is 7.", ["global", "solver"])) == "7"


def test_budget_retires_the_older_of_equal_lessons_past_id_9999():
    """``retirements`` broke ties by the id's text ("the older lesson goes first"): past
    ``solver/9999`` that put ``solver/10000``, the newer, first, and it was retired instead."""
    old, new = Lesson(id="solver/9999", text="Check the units."), Lesson(id="solver/10000", text="Check the sign.")
    version = Version(library="solver", number=1, lessons=[new, old], next_id=10001)
    deletes = retirements(version, cap=4, strength=lambda lesson: 0.0)  # room for one of them
    assert [d.id for d in deletes] == ["solver/9999"]


def test_adaptive_limit_survives_calls_timed_at_zero():
    """A call timed at zero seconds (below the clock's resolution, or a Ray worker's latency
    rounded to six decimals) made a window's median 0: the next window divided by it
    (ZeroDivisionError in ``AdaptiveLimit._returned``), and the floor of 0 read every later
    call as a queue."""
    now = [0.0]
    limit = AdaptiveLimit(clock=lambda: now[0])
    for _ in range(200):
        assert limit.try_acquire()
        limit.release(0.0)
    for _ in range(200):  # then real replies, steady at 50 ms: no queue, no cut
        assert limit.try_acquire()
        now[0] += 0.05
        limit.release(0.05)
    assert limit.allowed >= 2


class _Unavailable(Exception):
    status_code = 503


class _Down:
    """An endpoint that answers 503 to every call."""

    model_info = {"vision": False, "function_calling": True, "json_output": True, "family": "x"}

    async def create(self, *args, **kwargs):
        raise _Unavailable("service unavailable")


def test_backoff_after_a_thousand_retries_is_a_number():
    """The backoff was ``backoff * 2 ** (attempt - 1)``: at the 1,025th attempt (a long outage
    and a large --retries) 2 ** 1024 is past any float, and the call raised OverflowError instead
    of waiting ``backoff_max`` and, once the retries were spent, an ``EndpointError``."""
    client = Adapted(_Down(), schema_in_format=False, text_tools=False, name="down", retries=1100, backoff=0.0,
                     backoff_max=0.0)  # fmt: skip
    with pytest.raises(EndpointError, match="gave up after 1101 attempts"):
        asyncio.run(client.create([UserMessage(content="hi", source="user")]))
    assert client.counts.attempts == 1101


@pytest.mark.parametrize("bad", [math.nan, 1e308], ids=["nan", "largest-float"])
def test_a_custom_reward_of_nan_stops_the_run_with_a_message(tmp_path, bad):
    """A ``custom_scenario`` reward (the Python API; ``--reward`` is checked where it loads) that
    returned NaN went into the group's statistics: after the step's rollouts and learning calls,
    ``numeric_advantages`` raised AttributeError ('float' object has no attribute 'numerator')
    from ``statistics.pstdev``; 1e308 made the group's mean overflow."""
    scenario = writer_and_checker(4, reward=lambda task, answer: bad if answer == task.answer else 0.0)
    store = mas.LibraryStore(tmp_path / "lib.json")
    with pytest.raises(UserError, match="expected a finite number"):
        asyncio.run(mas.train(scenario, client=mas.FakeClient(respond), store=store, run_dir=tmp_path / "run"))
