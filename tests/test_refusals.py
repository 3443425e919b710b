"""The end of a run says what was refused and what failed, by kind; `mas library show
--rejected` lists every refused edit with its reason, library, step and run."""

import asyncio
import re

from mas.cli.summary import failed_line, reason_kind, refused_line
from mas.config import TrainConfig
from mas.library.edits import apply, parse_edits
from mas.library.logs import SideFiles
from mas.library.store import LibraryStore
from mas.models.fake import FakeClient
from mas.models.wrappers import Delegating
from mas.train import train
from mas.types.lessons import Add, Delete, Lesson, Modify, Rejected, Version
from mas.types.reports import StepReport
from tests.test_cli import mas


def test_reasons_of_one_kind_count_together():
    v = Version(library="solver", number=1, next_id=3, lessons=[Lesson(id="solver/0001", text="Check the units.")])
    _, refused = apply(
        v,
        [Delete(op="delete", id="solver/0042"), Modify(op="modify", id="solver/0009", text="Check it twice now."),
         Add(op="add", text="Check the units."), Add(op="add", text="Write the sum out first.")],
        limit=1,
    )  # fmt: skip
    _, malformed = parse_edits([{"op": "add", "text": "short"}, {"op": "add"}, {"op": "drop"}])
    kinds = [reason_kind(r.reason) for r in refused + malformed]
    assert kinds[:4] == ["unknown lesson id", "unknown lesson id", "duplicate of a lesson", "library is full"]
    assert all(k and not re.search(r"\d|solver/|'", k) for k in kinds)
    line = refused_line([StepReport(epoch=0, step=0, task_ids=[], groups=1, informative=1, mean_reward=0,
                                    rejected={"solver": refused + malformed})])  # fmt: skip
    assert line.startswith("refused: 7 edits (unknown lesson id: 2, ") and "library is full: 1" in line


class Faulty(Delegating):
    """Summaries come back cut at the token limit, edit batches without any JSON."""

    async def create(self, messages, **kwargs):
        result = await self.inner.create(messages, **kwargs)
        name = getattr(kwargs.get("json_output"), "__name__", "")
        if name == "Summary":
            return result.model_copy(update={"finish_reason": "length"})
        if name == "EditBatch":
            return result.model_copy(update={"content": "I would rather not."})
        return result


def test_failed_calls_are_told_by_stage_and_kind(maths, tmp_path):
    fake = FakeClient()
    result = asyncio.run(
        train(maths, client=Faulty(fake), store=LibraryStore(tmp_path / "lib.json"), run_dir=tmp_path / "run",
              config=TrainConfig(tasks=8))
    )  # fmt: skip
    summaries = sum(1 for r in fake.requests if r.schema is not None and r.schema.__name__ == "Summary")
    edits = sum(1 for r in fake.requests if r.schema is not None and r.schema.__name__ == "EditBatch")
    assert summaries and edits
    line = failed_line(result.steps)
    assert f"{summaries + edits} calls (" in line
    assert f"edit: reply not valid for its schema {edits}" in line
    assert f"summary: reply cut at the token limit {summaries}" in line
    assert failed_line([]) == "failed: nothing" and refused_line([]) == "refused: nothing"


def test_the_end_of_a_run_and_show_rejected(tmp_path):
    lib = tmp_path / "lib.json"
    args = ["train", "maths", "--model", "fake", "--tasks", "8", "--epochs", "2", "--max-lessons", "1", "--seed", "1"]
    done = mas(*args, "--library", str(lib), "--run-dir", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    logged = [(key, item) for key, items in SideFiles(lib).rejected.steps() for item in items]
    assert logged and all(item.stage == "edit" for _, item in logged)
    refused = next(line for line in done.stdout.splitlines() if line.startswith("refused: "))
    assert refused.startswith(f"refused: {len(logged)} edits (") and "library is full: " in refused
    assert refused.endswith(f"see mas library show {lib} --rejected")
    assert "failed: nothing" in done.stdout

    shown = mas("library", "show", str(lib), "--rejected").stdout.splitlines()
    assert len(shown) == 2 * len(logged)
    for (key, item), (what, why) in zip(logged, zip(shown[::2], shown[1::2])):
        assert what.startswith(f"[{item.library}] {item.edit['op']}")
        assert why == f"  refused: {item.reason} (run run, epoch {key.epoch}, step {key.step}, at the edit stage)"
    role = next(item.library for _, item in logged if item.library != "global")
    one = mas("library", "show", str(lib), "--rejected", "--role", role).stdout.splitlines()
    assert one[::2] == [line for line in shown[::2] if line.startswith(f"[{role}]")]

    # a library trained before the log: the refused edits its versions kept
    kept = [r for name in LibraryStore(lib).libraries() for v in LibraryStore(lib).versions(name) for r in v.rejected]
    SideFiles(lib).rejected.path.unlink()
    older = mas("library", "show", str(lib), "--rejected").stdout.splitlines()
    assert kept and len(older) == 2 * len(kept) and all(isinstance(r, Rejected) for r in kept)


def test_failed_rollouts_are_told_by_kind(tmp_path):
    args = ["train", "maths", "--model", "fake:0.2", "--tasks", "2", "--group-size", "2", "--rollout-timeout", "0.05"]
    done = mas(*args, "--library", str(tmp_path / "lib.json"), "--run-dir", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    assert "failed: 4 rollouts (timeout 4)" in done.stdout
