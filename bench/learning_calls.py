"""Learning calls and tokens of one training step, on the fake client.

Goals, for one step of TrainConfig(tasks=16, batch_size=16, group_size=5) on libraries that
earlier steps have filled:
  - at most G+1 learning calls (summary + advantage) per informative group; the reference
    implementation makes K*(G+2)+r per step (K informative groups, r=1);
  - at most one edit call per library per step;
  - each library read in full once per informative group (its advantage prompt: the semantic
    advantage needs the current lessons, METHOD.md section 1.5) and at most once more in the
    step (its own edit prompt), and never in a summary prompt;
  - summary prompts carry only lessons that the step's rollouts were shown (to say which ones
    each role applied), never the rest of a library.
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
from mas.team.scenario import load_scenario
from mas.testing import journal
from mas.train import train
from mas.types.lessons import GLOBAL, Add, Budget, Version

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
    print("libraries before the step:", {n: len(v.lessons) for n, v in heads.items()})

    client = FakeClient()
    # Prompts get 40 tokens of private lessons: some lessons are shown to no rollout of the step.
    config = TrainConfig(tasks=16, batch_size=16, group_size=G, seed=2, budget=Budget(inject_tokens=40))
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
    reads = {  # prompts holding every lesson line of a library, per stage
        stage: {
            name: sum(all(line in text_of(r) for line in ls) for r in by_schema.get(stage, []))
            for name, ls in lines.items()
        }
        for stage in ("Summary", "Advantage", "EditBatch")
    }
    shown = {i for r in journal(work / "step", "rollout") for t in r["data"]["traces"] for i in t["shown"]}
    every = {l.id: l.text for v in heads.values() for l in v.lessons}
    unshown = [i for i in every if i not in shown]
    leaks = sum(any(f"[{i}] {every[i]}" in text_of(r) for i in unshown) for r in by_schema.get("Summary", []))
    print(f"\nlearning calls per informative group: {per_group:.2f} (summary {summary}, advantage {advantage})")
    print(f"edit calls this step: {edit} (libraries: {len(heads)})")
    print(
        f"learning calls this step: mas {ours} vs reference K*(G+2)+r = {reference}: ratio {ours / max(reference, 1):.3f}"
    )
    for stage, counts in reads.items():
        print(f"{stage} prompts holding each whole library: {counts}")
    print(f"summary prompts carrying a lesson no rollout was shown ({len(unshown)} such lessons): {leaks} of {summary}")

    goals = {
        f"summary+advantage per group <= G+1 = {G + 1}": k > 0 and per_group <= G + 1,
        "edit calls <= one per library": edit <= len(heads),
        "mas learning calls <= reference K*(G+2)+r": ours <= reference,
        "each library read once per informative group (advantage) and at most once per step (edit)": bool(lines)
        and all(n == advantage for n in reads["Advantage"].values())
        and all(n <= 1 for n in reads["EditBatch"].values()),
        "summary prompts carry only lessons shown, never the rest of a library": summary > 0 and unshown and leaks == 0,
    }
    for name, ok in goals.items():
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    shutil.rmtree(work, ignore_errors=True)
    return 0 if all(goals.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
