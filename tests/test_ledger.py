"""The evidence kept between reads (``ledger.Ledger``) and the step logs' index of steps:
each line is read once, what was read agrees with a pass over the whole log, and a log that
was replaced or cut short is read again from its start."""

import asyncio
import importlib.util
import random
import sys
from pathlib import Path

from mas.config import PromotionPolicy, TrainConfig
from mas.library import evidence
from mas.library.ledger import Ledger
from mas.library.logs import StepKey, StepLog
from mas.library.store import LibraryStore
from mas.models.fake import FakeClient
from mas.train import train
from mas.types.usage import UsageEvent

BENCH = Path(__file__).resolve().parents[1] / "bench" / "learning_world.py"

LESSONS = [f"solver/000{i}" for i in range(1, 6)]


def step_events(step: int, rng: random.Random) -> list[UsageEvent]:
    """One step's groups: four tasks, five rollouts each, three lessons randomized per group."""
    out = []
    for task in range(4):
        randomized = rng.sample(LESSONS, 3)
        for rollout in range(5):
            shown = [l for l in randomized if rng.random() < 0.5] + ["global/0001"]
            out.append(
                UsageEvent(
                    run="r",
                    epoch=0,
                    step=step,
                    task_id=f"t{task + step % 3}",
                    rollout=rollout,
                    role="solver",
                    shown=shown,
                    randomized=randomized,
                    reward=float(rng.random() < 0.3 + 0.2 * ("solver/0001" in shown)),
                    advantage=0.0,
                )  # fmt: skip
            )
    return out


def same(a: dict, b: dict) -> bool:
    keys = {k for k, t in a.items() if t.contrasts} | {k for k, t in b.items() if t.contrasts}
    return all(
        (a[k].per_task, a[k].contrasts, a[k].exposures, a[k].wealth, a[k].peak)
        == (b[k].per_task, b[k].contrasts, b[k].exposures, b[k].wealth, b[k].peak)
        for k in keys
    )


def test_the_ledger_agrees_with_a_whole_pass_as_steps_are_appended(tmp_path):
    log = StepLog(tmp_path / "lib.usage.jsonl", UsageEvent)
    ledger, rng = Ledger(log), random.Random(1)
    twins = {"solver/0002": "solver/0002", "solver/0003": "solver/0002"}
    lineage = {"solver/0005": "global/0009"}
    for step in range(6):
        log.append(StepKey("r", 0, step), step_events(step, rng))
        for way in ({}, {"lineage": lineage}, {"classes": twins}, {"lineage": lineage, "classes": twins}):
            kept = ledger.contrasts(**way)
            assert same(kept, evidence.contrasts(log, **way)), (step, way)
            assert kept[("solver", "solver/0003")] is kept[("solver", "solver/0002")] if "classes" in way else True
    assert ledger.estimate(classes=twins) == evidence.estimate(log, classes=twins)


def test_what_the_ledger_handed_out_does_not_change_when_it_reads_on(tmp_path):
    log = StepLog(tmp_path / "lib.usage.jsonl", UsageEvent)
    ledger, rng = Ledger(log), random.Random(2)
    log.append(StepKey("r", 0, 0), step_events(0, rng))
    first = ledger.contrasts()
    before = {
        k: (dict((t, list(s)) for t, s in v.per_task.items()), v.contrasts, list(v.wealth)) for k, v in first.items()
    }
    log.append(StepKey("r", 0, 1), step_events(1, rng))
    later = ledger.contrasts()
    assert later[("solver", "solver/0001")].contrasts > first[("solver", "solver/0001")].contrasts
    after = {
        k: (dict((t, list(s)) for t, s in v.per_task.items()), v.contrasts, list(v.wealth)) for k, v in first.items()
    }
    assert after == before


def held(tallies: dict) -> dict:
    """What a reader holds of ``tallies``, copied to the last list."""
    return {k: ({t: list(x) for t, x in v.per_task.items()}, v.contrasts, list(v.wealth)) for k, v in tallies.items()}


def test_a_step_counted_ahead_agrees_with_it_recorded_and_changes_nothing_kept(tmp_path):
    """``ahead``: the evidence with a step's events not yet recorded is what it will be once
    they are, and what the ledger holds (and handed out before) does not move."""
    log = StepLog(tmp_path / "lib.usage.jsonl", UsageEvent)
    ledger, rng = Ledger(log), random.Random(4)
    twins = {"solver/0002": "solver/0002", "solver/0003": "solver/0002"}
    for step in range(3):
        log.append(StepKey("r", 0, step), step_events(step, rng))
    kept = ledger.contrasts(classes=twins)
    before = held(kept)
    coming = step_events(3, rng)
    ahead = ledger.ahead(coming, classes=twins)
    assert held(kept) == before
    assert same(ledger.contrasts(classes=twins), kept)
    log.append(StepKey("r", 0, 3), coming)
    assert ahead == ledger.estimate(classes=twins) == evidence.estimate(log, classes=twins)
    assert ahead != evidence.estimate(list(log.items())[: -len(coming)], classes=twins)


def test_each_line_is_read_once_however_the_evidence_is_counted(tmp_path, monkeypatch):
    log = StepLog(tmp_path / "lib.usage.jsonl", UsageEvent)
    ledger, rng = Ledger(log), random.Random(3)
    parsed = []
    real = StepLog._parse
    monkeypatch.setattr(StepLog, "_parse", lambda self, raw: parsed.append(raw) or real(self, raw))
    for step in range(10):
        log.append(StepKey("r", 0, step), step_events(step, rng))
        for _ in range(3):
            ledger.contrasts()
            ledger.contrasts({"solver/0005": "global/0009"})
    # one parse per line for the evidence, whatever the ways of counting (10), and one for the
    # index of steps, which each append reads up to itself (9: the last line is not read back)
    assert len(parsed) == 10 + 9


def test_a_log_replaced_or_cut_is_read_again_from_its_start(tmp_path):
    path = tmp_path / "lib.usage.jsonl"
    log = StepLog(path, UsageEvent)
    ledger, rng = Ledger(log), random.Random(4)
    for step in range(3):
        log.append(StepKey("r", 0, step), step_events(step, rng))
    assert ledger.contrasts()[("solver", "solver/0001")].contrasts
    lines = path.read_bytes().splitlines(keepends=True)
    replaced = tmp_path / "other"
    replaced.write_bytes(lines[0])
    replaced.replace(path)  # a new file (as ``repair`` writes one): one step left
    assert same(ledger.contrasts(), evidence.contrasts(log))
    assert log.has_step(StepKey("r", 0, 0)) and not log.has_step(StepKey("r", 0, 2))
    log.append(StepKey("r", 0, 2), step_events(2, rng))  # recorded again, since the log lost it
    assert log.has_step(StepKey("r", 0, 2))
    assert same(ledger.contrasts(), evidence.contrasts(log))


def test_a_torn_last_line_is_not_read_until_it_is_whole(tmp_path):
    path = tmp_path / "lib.usage.jsonl"
    log = StepLog(path, UsageEvent)
    ledger, rng = Ledger(log), random.Random(5)
    log.append(StepKey("r", 0, 0), step_events(0, rng))
    whole = path.read_bytes()
    log.append(StepKey("r", 0, 1), step_events(1, rng))
    torn = path.read_bytes()[: len(whole) + 200]  # a crash in the middle of the second line
    path.write_bytes(torn)
    assert same(ledger.contrasts(), evidence.contrasts(log))
    assert not log.has_step(StepKey("r", 0, 1))
    log.append(StepKey("r", 0, 1), step_events(1, random.Random(6)))  # the torn tail is dropped first
    assert log.has_step(StepKey("r", 0, 1))
    assert same(ledger.contrasts(), evidence.contrasts(log))


def test_a_training_run_reads_each_usage_line_a_bounded_number_of_times(tmp_path, monkeypatch):
    """Before the ledger, every decision of a step read the whole usage log again (about seven
    passes a step, and more with a promotion pass): the lines parsed grew with the square of
    the steps. The learning world (bench/learning_world.py): lessons, twins and promotions."""
    spec = importlib.util.spec_from_file_location("learning_world", BENCH)
    world = importlib.util.module_from_spec(spec)
    sys.modules["learning_world"] = world
    spec.loader.exec_module(world)
    w = world.World(0)
    store = LibraryStore(tmp_path / "lib.json")
    usage = store.side.usage.path
    parsed = []
    real = StepLog._parse
    monkeypatch.setattr(StepLog, "_parse", lambda self, raw: parsed.append(self.path == usage) or real(self, raw))
    config = TrainConfig(epochs=2, seed=0, concurrency=1, promotion=PromotionPolicy(cadence="step"))
    result = asyncio.run(
        train(
            world.scenario(w, 24, seed=0),
            client=FakeClient(w.respond),
            store=store,
            run_dir=tmp_path / "run",
            config=config,
        )
    )
    steps = len(result.steps)
    assert steps >= 10 and sum(r.promoted + r.pruned for r in result.steps)  # the decisions had work to do
    # each line: once for the index of steps, once for the evidence
    assert sum(parsed) <= 2 * steps, (sum(parsed), steps)


def test_a_whole_last_line_without_its_newline_is_read_and_not_recorded_twice(tmp_path):
    path = tmp_path / "lib.usage.jsonl"
    log = StepLog(path, UsageEvent)
    ledger, rng = Ledger(log), random.Random(7)
    log.append(StepKey("r", 0, 0), step_events(0, rng))
    log.append(StepKey("r", 0, 1), step_events(1, rng))
    path.write_bytes(path.read_bytes().rstrip(b"\n"))  # the newline of the last step lost
    fresh = StepLog(path, UsageEvent)
    assert same(Ledger(fresh).contrasts(), evidence.contrasts(log))
    assert fresh.has_step(StepKey("r", 0, 1))
    fresh.append(StepKey("r", 0, 1), step_events(1, rng))
    assert [key.step for key, _ in fresh.steps()] == [0, 1]
    assert same(ledger.contrasts(), evidence.contrasts(log))


def test_a_log_rewritten_in_place_under_the_mark_is_read_again(tmp_path):
    """Same file, no shorter, other lines (an editor that writes in place): not the log the
    kept evidence was read from."""
    path = tmp_path / "lib.usage.jsonl"
    log = StepLog(path, UsageEvent)
    ledger = Ledger(log)
    log.append(StepKey("r", 0, 0), step_events(0, random.Random(8)))
    log.append(StepKey("r", 0, 1), step_events(1, random.Random(8)))
    ledger.contrasts()
    other = StepLog(tmp_path / "other.usage.jsonl", UsageEvent)
    for step in range(3):
        other.append(StepKey("r", 0, step), step_events(step, random.Random(9)))
    with path.open("r+b") as f:  # the same inode, written over from its start
        f.write(other.path.read_bytes())
    assert same(ledger.contrasts(), evidence.contrasts(log))
    assert log.has_step(StepKey("r", 0, 2))
