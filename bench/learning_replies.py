"""How often do the embedded model's learning replies validate, stage by stage?

SmolLM2-135M almost never answers a maths task right, so an honest run of `mas train maths
--preset quick` has no group with winners and losers and makes no learning call at all. To
see the learning stages on the real model anyway, this run plants one winner per group: the
verifier's reply in one rollout of each group is replaced by the right answer, and
everything else (the other turns, every summary, advantage and edit call) is the model's
own. It reports, per stage, the calls made and the share whose reply validated against the
stage's schema, and prints the lessons written.

    .venv/bin/python bench/learning_replies.py [--tasks 4] [--group-size 3]

No goal: a figure to follow from release to release (the model writes weak lessons).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autogen_core.models import CreateResult, RequestUsage, SystemMessage

from mas.config import train_config
from mas.library.store import LibraryStore
from mas.models.clients import open_client
from mas.models.wrappers import Delegating
from mas.team.scenario import load_scenario
from mas.train import train


class PlantedWinner(Delegating):
    """The verifier of one rollout per task (the first to speak; a rollout's calls share its
    seed) answers right."""

    def __init__(self, inner, answers: dict[str, str]):
        super().__init__(inner)
        self.answers, self.winners = answers, {}

    async def create(self, messages, *, extra_create_args={}, json_output=None, **kwargs):
        system = " ".join(str(m.content) for m in messages if isinstance(m, SystemMessage))
        task = next((q for q in self.answers if any(q in str(m.content) for m in messages)), None)
        if json_output is None and "You are the verifier" in system and task is not None:
            seed = extra_create_args.get("seed")
            if self.winners.setdefault(task, seed) == seed:
                usage = RequestUsage(prompt_tokens=0, completion_tokens=0)
                content = f"ANSWER: {self.answers[task]}"
                return CreateResult(finish_reason="stop", content=content, usage=usage, cached=False)
        return await self.inner.create(messages, extra_create_args=extra_create_args, json_output=json_output, **kwargs)


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=3)
    args = parser.parse_args()
    scenario = load_scenario("maths")
    answers = {t.question: t.answer for t in scenario.tasks}
    config = train_config("quick", tasks=args.tasks, group_size=args.group_size)
    with tempfile.TemporaryDirectory(prefix="mas-replies-") as folder:
        store = LibraryStore(Path(folder) / "maths.json")
        async with open_client("local") as client:
            result = await train(
                scenario, client=PlantedWinner(client, answers), store=store, run_dir=Path(folder) / "run",
                config=config, model_name="local",
            )  # fmt: skip
        records = [json.loads(line) for line in (Path(folder) / "run" / "journal.jsonl").read_text().splitlines()]
        report = result.steps[0]
        print(f"groups {report.groups}, informative {report.informative}, failed rollouts {report.failed_rollouts}")
        for stage in ("summary", "advantage", "edit"):
            replies = [r["data"] for r in records if r["kind"] == stage]
            ok = sum(bool(r.get("ok")) for r in replies)
            share = f"{ok / len(replies):.2f}" if replies else "n/a"
            print(f"{stage:<10} calls {len(replies):>3}  validated {ok:>3}  share {share}")
        for refused in report.refused_operations:
            print("refused operation:", refused)
        print("refused edits:", dict(report.rejected), "quarantined:", report.quarantined)
        for version in store.heads().values():
            for lesson in version.lessons:
                print(f"  {lesson.id}: {lesson.text}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
