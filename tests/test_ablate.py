"""mas ablate: every variant trains and evaluates on the same tasks and seeds."""

import asyncio

from mas.config import EvalConfig, TrainConfig
from mas.library.store import LibraryStore
from mas.models.fake import FakeClient
from mas.studies.ablate import VARIANTS, ablate


def test_every_variant_runs_and_is_compared_with_no_library(maths, tmp_path):
    rows = asyncio.run(ablate(
        maths, client=FakeClient(), run_dir=tmp_path,
        train_config=TrainConfig(tasks=8), eval_config=EvalConfig(tasks=6),
    )).rows  # fmt: skip
    assert [r.variant for r in rows] == list(VARIANTS)
    assert rows[0].lessons == 0 and rows[0].delta.value == 0
    by_name = {r.variant: r for r in rows}
    assert by_name["direct lessons"].lessons == 2 * len(maths.roles)  # written outright, no loop
    assert LibraryStore(tmp_path / "global-only" / "lib.json").head("global").lessons
    assert not LibraryStore(tmp_path / "global-only" / "lib.json").head("solver").lessons
    assert (tmp_path / "group-size-1" / "run" / "run.json").read_text().count('"group_size": 1') == 1
