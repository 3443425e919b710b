"""mas ablate: every variant trains and evaluates on the same tasks and seeds."""

import asyncio

from mas.config import EvalConfig, TrainConfig
from mas.cost import Price
from mas.library.store import LibraryStore
from mas.models.fake import FakeClient
from mas.studies.ablate import VARIANTS, ablate


def test_every_variant_runs_and_is_compared_with_no_library(maths, tmp_path):
    rows = asyncio.run(ablate(
        maths, client=FakeClient(), run_dir=tmp_path,
        train_config=TrainConfig(tasks=8), eval_config=EvalConfig(tasks=6),
    )).rows  # fmt: skip
    assert [r.variant for r in rows] == list(VARIANTS)
    assert rows[0].lessons == 0 and rows[0].delta is None  # the reference: no change from itself
    by_name = {r.variant: r for r in rows}
    assert by_name["direct lessons"].lessons == 2 * len(maths.roles)  # written outright, no loop
    assert LibraryStore(tmp_path / "global-only" / "lib.json").head("global").lessons
    assert not LibraryStore(tmp_path / "global-only" / "lib.json").head("solver").lessons
    assert (tmp_path / "group-size-1" / "run" / "run.json").read_text().count('"group_size": 1') == 1


def test_a_budget_stops_the_ablation_and_a_larger_one_goes_on_without_calling_again(maths, tmp_path):
    price = Price(prompt=1000.0, completion=2000.0)  # dollars per million tokens
    train_config = TrainConfig(tasks=4, group_size=2)

    def run(budget_usd, client, folder=tmp_path):
        return asyncio.run(ablate(
            maths, client=client, run_dir=folder, variants=["no library", "full"], price=price,
            train_config=train_config, eval_config=EvalConfig(tasks=3, budget_usd=budget_usd),
        ))  # fmt: skip

    first = FakeClient()
    stopped = run(0.0001, first)
    assert [r.variant for r in stopped.rows] == ["no library"] and stopped.stopped.startswith("budget: $")
    assert not (tmp_path / "full" / "run").exists()  # the budget was spent before the variant began
    second = FakeClient()
    done = run(1000.0, second)
    assert [r.variant for r in done.rows] == ["no library", "full"] and done.stopped is None
    assert done.rows[0] == stopped.rows[0] and done.cost_usd > stopped.cost_usd > 0
    whole = FakeClient()
    assert run(None, whole, tmp_path / "whole") == done
    assert first.calls + second.calls == whole.calls  # what the first run did was read back, not asked again
