"""Learning calls and tokens of one training step, on the fake client.

Goals, for one step of TrainConfig(tasks=16, batch_size=16, group_size=5) on libraries that
earlier steps have filled:
  - at most G+1 learning calls (summary + advantage) per informative group; the reference
    implementation makes K*(G+2)+r per step (K informative groups, r=1);
  - at most one edit call per library per step;
  - each library read once per step: its lesson lines appear in one learning prompt only
    (the edit prompt of that library);
  - summary prompts never carry a library (no lesson line nor lesson text).
Prompt tokens per stage come from StepReport.calls. The ratio reported is mas's learning
calls over the reference's K*(G+2)+r, side by side in the same step.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
from pathlib import Path

from mas.config import TrainConfig
from mas.library.edits import apply
from mas.library.store import LibraryStore
from mas.models.fake import FakeClient
from mas.scenario import load_scenario
from mas.train import train
from mas.types import GLOBAL, Add, Version

G, R = 5, 1


def text_of(request) -> str:
    return "\n".join([request.system, *request.messages])


def main() -> int:
    scenario = load_scenario("maths")
    work = Path(tempfile.mkdtemp(prefix="mas-bench-"))
    store = LibraryStore(work / "lib.json")
    seed = [f"Lesson {i} of the {{}}: check the numbers of the task before step {i}." for i in range(1, 4)]
    store.commit([
        apply(Version(library=n, number=0, lessons=[], next_id=1), [Add(op="add", text=t.format(n)) for t in seed])[0]
        for n in [GLOBAL, *scenario.role_names]
    ])  # fmt: skip
    warm = TrainConfig(tasks=48, batch_size=16, group_size=G, seed=1)
    asyncio.run(train(scenario, client=FakeClient(), store=store, run_dir=work / "warm", config=warm))
    heads = store.heads()
    lines = {name: [f"[{l.id}] {l.text}" for l in v.lessons] for name, v in heads.items() if v.lessons}
    texts = {name: [l.text for l in v.lessons] for name, v in heads.items() if v.lessons}
    print("libraries before the step:", {n: len(v.lessons) for n, v in heads.items()})

    client = FakeClient()
    config = TrainConfig(tasks=16, batch_size=16, group_size=G, seed=2)
    report = asyncio.run(train(scenario, client=client, store=store, run_dir=work / "step", config=config)).steps[0]
    learning = [r for r in client.requests if r.schema is not None]
    by_schema: dict[str, list] = {}
    for r in learning:
        by_schema.setdefault(r.schema.__name__, []).append(r)
    k = report.informative
    summary, advantage, edit = (len(by_schema.get(n, [])) for n in ("Summary", "Advantage", "EditBatch"))
    reference = k * (G + 2) + R
    ours = summary + advantage + edit

    print(f"\nK={k} informative groups of {report.groups}, G={G}")
    print(f"{'stage':<10} {'calls':>6} {'prompt tok':>11} {'completion':>11} {'tok/call':>9}")
    for stage, c in report.calls.items():
        print(
            f"{stage:<10} {c.calls:>6} {c.prompt_tokens:>11} {c.completion_tokens:>11} {c.prompt_tokens / max(c.calls, 1):>9.0f}"
        )
    per_group = (summary + advantage) / max(k, 1)
    reads = {name: sum(any(line in text_of(r) for line in ls) for r in learning) for name, ls in lines.items()}
    leaks = sum(any(t in text_of(r) for ts in texts.values() for t in ts) for r in by_schema.get("Summary", []))
    print(f"\nlearning calls per informative group: {per_group:.2f} (summary {summary}, advantage {advantage})")
    print(f"edit calls this step: {edit} (libraries: {len(heads)})")
    print(
        f"learning calls this step: mas {ours} vs reference K*(G+2)+r = {reference}: ratio {ours / max(reference, 1):.3f}"
    )
    print(f"learning prompts that read each library: {reads}")
    print(f"summary prompts carrying library text: {leaks} of {summary}")

    goals = {
        f"summary+advantage per group <= G+1 = {G + 1}": k > 0 and per_group <= G + 1,
        "edit calls <= one per library": edit <= len(heads),
        "mas learning calls <= reference K*(G+2)+r": ours <= reference,
        "each library read once per step (edit prompt only)": bool(reads) and all(n <= 1 for n in reads.values()),
        "summary prompts carry no library": summary > 0 and leaks == 0,
    }
    for name, ok in goals.items():
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    shutil.rmtree(work, ignore_errors=True)
    return 0 if all(goals.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
