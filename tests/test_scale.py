"""Work that must not grow with the history a library file keeps (its logs, its evidence): counted,
never timed. A training step makes a judge four times or more over an equivalence log that only
grows, and folds evidence whose tallies hold every lesson ever shown."""

from __future__ import annotations

import os
import shutil

from mas.library import logs
from mas.library.evidence import Fold, Randomized
from mas.library.similar import Judge


def _judge(path) -> Judge:
    return Judge(path, client=None, overlap=0.3)


def _judged(path, start: int, count: int) -> None:
    """``count`` judgements appended to the log at ``path``, as a judge appends them."""
    judge = _judge(path)
    for i in range(start, start + count):
        judge.overrule(f"When the number {i} shows up, check it twice.", f"Lesson number {i}, read it again.", "r")


def test_a_judge_made_again_parses_only_the_judgements_appended_since(tmp_path, monkeypatch):
    path = tmp_path / "lib.equivalence.jsonl"
    _judged(path, 0, 300)
    parsed = []
    real = logs._judgement
    monkeypatch.setattr(logs, "_judgement", lambda where, record: parsed.append(where) or real(where, record))
    assert len(_judge(path).known) == 300 and len(parsed) == 300
    for _ in range(5):  # a judge per stage of a step: the log read once in all
        assert len(_judge(path).known) == 300
    assert len(parsed) == 300
    _judged(path, 300, 4)
    assert len(_judge(path).known) == 304
    assert len(parsed) == 304  # the four new lines only
    assert parsed[-1] == f"{path}:304"  # numbered as in the file


def test_judgements_read_in_parts_are_those_read_whole(tmp_path):
    """A line cut short (a crash), the next append run into it, a log replaced: as a first reading."""
    path = tmp_path / "lib.equivalence.jsonl"
    _judged(path, 0, 3)
    _judge(path)
    with path.open("a") as f:
        f.write('{"key": "cut sh')  # a crash mid-line
    assert _judge(path).known.keys() == _fresh(path, tmp_path)
    _judged(path, 3, 2)  # the first runs into the cut line: that pair is judged again
    assert _judge(path).known.keys() == _fresh(path, tmp_path) and len(_fresh(path, tmp_path)) == 4
    shorter = tmp_path / "other.jsonl"
    _judged(shorter, 10, 2)
    os.replace(shorter, path)  # another log in its place
    assert _judge(path).known.keys() == _fresh(path, tmp_path) and len(_fresh(path, tmp_path)) == 2


def _fresh(path, tmp_path) -> set[str]:
    copy = tmp_path / f"fresh-{len(list(tmp_path.iterdir()))}.jsonl"
    shutil.copyfile(path, copy)
    return set(_judge(copy).known)


class _Counted(str):
    """A lesson id that counts its comparisons (a dict finds the very same object without one)."""

    compared = 0

    def __eq__(self, other):
        _Counted.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_the_tallies_of_twins_cost_no_pass_over_every_lesson_ever_shown_per_twin():
    """``Fold.tallies`` gives each member of a class its class's tally: one pass over the tallies
    in all, not one per member (2,000 lessons shown over a library's life, 200 twins: 400,000)."""
    lessons = [_Counted(f"solver/{i:04d}") for i in range(1, 2001)]
    groups = [
        Randomized(f"t{i}", "solver", (lesson,), (frozenset([lesson]), frozenset()), (frozenset(),) * 2, (1.0, 0.0))
        for i, lesson in enumerate(lessons)
    ]
    classes = {lessons[i]: lessons[i - i % 2] for i in range(200)}  # 100 pairs of twins
    fold = Fold({}, classes)
    fold.add(groups)
    _Counted.compared = 0
    tallies = fold.tallies()
    assert _Counted.compared < 2000
    assert tallies[("solver", lessons[1])] is tallies[("solver", lessons[0])]  # twins: one tally
    assert tallies[("solver", lessons[3])] is tallies[("solver", lessons[2])]
    assert tallies[("solver", lessons[500])].contrasts == 1 and len(tallies) == 2000


def test_the_evidence_kept_of_a_usage_log_holds_each_lesson_id_once(tmp_path):
    """A ledger keeps the randomized groups of the whole usage log (``Ledger``), which grows with
    every rollout a library ever had: each id is kept once, not once per rollout that showed it
    (as sets of ids parsed anew, 3 KB a rollout and role; 8 times the log on disk)."""
    import gc
    import tracemalloc

    from mas.library.ledger import Ledger
    from mas.library.logs import StepKey, StepLog
    from mas.types.usage import UsageEvent

    log = StepLog(tmp_path / "lib.usage.jsonl", UsageEvent)
    pool = [f"solver/{i:04d}" for i in range(1, 401)]
    events = 0
    for step in range(8):
        items = [
            UsageEvent(
                run="r",
                epoch=0,
                step=step,
                task_id=f"t{task}",
                rollout=r,
                role="solver",
                shown=[i for k, i in enumerate(pool[base : base + 4]) if (r >> k) & 1] + pool[base + 4 : base + 20],
                randomized=pool[base : base + 4],
                reward=float(r == 1),
                advantage=0.0,
            )  # fmt: skip
            for task in range(10)
            for r in range(4)
            if (base := step * 40 + task * 4) >= 0
        ]
        log.append(StepKey("r", 0, step), items)
        events += len(items)
    ledger = Ledger(log)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        groups = ledger.groups()
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(groups) == 80
    assert kept < 1000 * events, f"{kept / events:.0f} bytes a rollout and role"
    assert groups[0].shown[0][-1] is groups[1].shown[0][-5]  # one copy of an id
