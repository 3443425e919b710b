"""Prompt caching: the share of a step's prompt tokens that repeat a prefix already sent earlier
in the step, with prompts ordered stable-first, against the order they had before (issue 14).

Goals, for one step (16 tasks, G = 5, the maths team) at 20 lessons per role:
  - team calls: >= 0.7 of their prompt tokens repeat an earlier prefix, for each role;
  - learning calls (summary, advantage, edit): >= 0.5.

A provider's prefix cache (OpenAI, DeepSeek, vLLM, llama.cpp) bills or computes those tokens
far more cheaply. Each request is laid out as a chat template does (tools, then each message in
turn) and cut into the embedded SmolLM2-135M's tokens; a call's repeated share is its longest
prefix that an earlier call of the step already sent. The fake client answers (instantly), so
the same step is measured with the stable order and with the order before, side by side.

The libraries: 20 lessons per role and 5 global ones ("When ..., ..." sentences). A past run's
usage log gives each role's first 15 lessons, and the global ones, a randomized effect above 0
over 8 tasks (established); the last 5 of each role are new, under evaluation. Everything else
is the default: every lesson, established or new, is shown to half the rollouts of a group
(``ExposurePolicy.retest`` 1.0 since issue 26: the retests are what an established lesson's
evidence grows by, and recall rose with them), 300 tokens of private lessons per prompt,
picked per task by BM25. So by design most of a role's lessons vary from rollout to rollout,
and the stable prefix ends at the first of them (after the role's prompt and the global
lessons). The shares are also given with established lessons retested in 30% of the groups
(``retest`` 0.3, the default before issue 26), for what the default costs in cache hits.

``--embedded`` also times one small step (2 tasks, G = 3, 32-token replies) on the embedded
server with each order, alternately: llama.cpp keeps the KV cache of the previous request and
re-evaluates only what follows the prefix the next request shares with it.
Run: .venv/bin/python bench/prefix.py [--embedded]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from string import Template

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mas import templates
from mas import texts as texts_module
from mas.config import ExposurePolicy, PromotionPolicy, TrainConfig
from mas.library import inject
from mas.library.edits import apply
from mas.library.hierarchy import record
from mas.library.store import LibraryStore
from mas.models.fake import FakeClient, Request
from mas.models.tokens import tokenizer
from mas.team.scenario import load_scenario
from mas.train import train
from mas.types.lessons import GLOBAL, Add, Provenance, Version
from mas.types.usage import UsageEvent

TASKS, G, LESSONS, GLOBALS, NEW, TEAM_GOAL, LEARNING_GOAL = 16, 5, 20, 5, 5, 0.7, 0.5
CONDITIONS = [
    "When the task has several numbers, list each one with its unit before combining them",
    "When a quantity is given as a fraction of another, compute the base quantity first",
    "When the question asks for a total, add the parts only after checking each part",
    "When a rate is given per hour, convert every time to hours before multiplying",
    "When a percentage change is described, apply it to the original amount, not the new one",
    "When two steps depend on each other, write the intermediate result down before going on",
    "When the plan names an operation, use exactly that operation in the expression",
    "When a result looks too large or too small, redo the last operation in reverse",
]
ACTIONS = ["and state the result in a short sentence.", "then check the units of the answer.",
           "and pass the whole expression to the calculator.", "then compare with a rough estimate."]  # fmt: skip


# -- the libraries and their evidence


def texts(n: int, salt: int) -> list[str]:
    return [
        f"{CONDITIONS[(i + salt) % len(CONDITIONS)]} (case {salt}.{i}), {ACTIONS[i % len(ACTIONS)]}" for i in range(n)
    ]


def setup(folder: Path, roles: list[str]) -> LibraryStore:
    store = LibraryStore(folder / "lib.json")
    sizes = {GLOBAL: GLOBALS, **dict.fromkeys(roles, LESSONS)}
    store.commit([
        apply(Version(library=name, number=0, lessons=[], next_id=1),
              [Add(op="add", text=t) for t in texts(size, i)])[0]
        for i, (name, size) in enumerate(sizes.items())
    ])  # fmt: skip
    return store


def established(store: LibraryStore, roles: list[str], count: int) -> None:
    """A past run's usage log: the first ``count`` lessons of each role (and every global one)
    shown to half of each group's rollouts on 8 tasks, which won exactly when shown."""
    heads = store.heads()
    events = []
    for role in roles:
        ids = [l.id for l in heads[role].lessons[:count]] + [l.id for l in heads[GLOBAL].lessons]
        for task in range(8):
            for rollout in range(4):
                events.append(UsageEvent(
                    run="past", epoch=0, step=0, task_id=f"past-{task}", rollout=rollout, role=role,
                    shown=ids if rollout % 2 == 0 else [], randomized=ids, reward=float(rollout % 2 == 0),
                    advantage=1.0 if rollout % 2 == 0 else -1.0,
                ))  # fmt: skip
    record(store, Provenance(run="past", epoch=0, step=0), usage=events, quarantined=[], refused=[])


# -- the order before issue 14, for the side-by-side baseline


def legacy_render_block(shared, own, *, stable=None, varying=()):
    sections, shown = [], []
    for title, lessons in (("For the whole team:", shared), ("For your role:", own)):
        if lessons:
            ordered = sorted(lessons, key=lambda l: (stable is not None and l.id not in stable, l.id))
            shown += [lesson.id for lesson in ordered]
            sections.append(title + "\n" + "\n".join(f"- {lesson.text}" for lesson in ordered))
    return inject.Block(inject.HEADER + "\n" + "\n".join(sections), shown) if sections else inject.Block("", [])


LEGACY_TEMPLATES = {
    "advantage.user": "Task: $question\nCorrect answer: $truth\n\nCurrent lessons:\n$libraries\n\n$attempts\n",
    "summary.user": "Task: $question\nCorrect answer: $truth\nTeam answer: $answer (reward $reward)\n\n$lessons$traces\n",
}
TEXTS: dict[str, str] = {}
"""Every lesson's text by id, for the legacy summary trace (set by ``one_step``)."""


def legacy_trace(t):
    head = [f"## {t.role}", "Lessons shown: " + ("none" if not t.shown else "")]
    head += [f"  [{i}] {TEXTS[i]}" for i in t.shown if i in TEXTS]
    return "\n".join(head + TRACE(t).split("\n")[2:])


TRACE = texts_module.trace


@contextlib.contextmanager
def legacy_order():
    """Prompts as they were: the global lessons under evaluation before the role's stable ones,
    the task before the libraries in the advantage prompt, the team's answer before the traces
    and each role's lessons in its trace in the summary prompt, and the edit prompt naming its
    library in its first line."""
    saved = inject.render_block, templates.template, texts_module.trace, texts_module.shown_lessons
    edit_system = templates.template("edit.system").template
    edit_system = edit_system.replace("The list you keep: $library.\nWho reads it: $reader\n\n", "")
    edit_system = edit_system.replace(
        "You keep a list of lessons of one member of a team of AI agents (named at the end).",
        "You keep the list of lessons of one member of a team of AI agents: $library.",
    ).replace("What the team does: $objective\n", "What the team does: $objective\n\nWho reads this list: $reader\n")
    legacy = {**{k: Template(v) for k, v in LEGACY_TEMPLATES.items()}, "edit.system": Template(edit_system)}
    inject.render_block = legacy_render_block
    templates.template = lambda name: legacy.get(name) or saved[1](name)
    texts_module.trace, texts_module.shown_lessons = legacy_trace, lambda *args: ""
    try:
        yield
    finally:
        inject.render_block, templates.template, texts_module.trace, texts_module.shown_lessons = saved


# -- measuring


class Prefixes:
    """Token sequences sent so far, as a trie: ``add`` returns how many leading tokens of a
    new sequence an earlier one already had."""

    def __init__(self) -> None:
        self.root: dict = {}

    def add(self, tokens: list) -> int:
        node, hit, matching = self.root, 0, True
        for t in tokens:
            child = node.get(t)
            if child is None:
                child, matching = node.setdefault(t, {}), False
            elif matching:
                hit += 1
            node = child
        return hit


def layout(r: Request) -> str:
    """The request as a chat template lays it out: tools first, then each message in turn."""
    parts = [f"<tools>{','.join(r.tools)}</tools>"] if r.tools else []
    parts += [f"<|im_start|>system\n{r.system}<|im_end|>"]
    parts += [f"<|im_start|>user\n{m}<|im_end|>" for m in r.messages]
    return "\n".join(parts)


def kind(r: Request) -> str:
    if r.schema is not None:
        return r.schema.__name__
    return r.system.split("You are the ", 1)[1].split()[0] if "You are the " in r.system else "other"


def shares(requests: list[Request]) -> dict[str, tuple[int, int]]:
    """Per role (team calls) and per learning stage: (tokens repeating an earlier prefix, tokens)."""
    encode, seen, out = tokenizer("embedded").encode, Prefixes(), {}
    for r in requests:
        tokens = encode(layout(r))
        hit = seen.add(tokens)
        done = out.setdefault(kind(r), [0, 0])
        done[0] += hit
        done[1] += len(tokens)
    return {k: (a, b) for k, (a, b) in out.items()}


def one_step(scenario, store_path: Path, work: Path, *, client=None, config=None) -> tuple[list[Request], float]:
    store = LibraryStore(store_path)
    TEXTS.update({l.id: l.text for v in store.heads().values() for l in v.lessons})
    client = client or FakeClient()
    config = config or TrainConfig(
        tasks=TASKS, batch_size=TASKS, group_size=G, max_lessons=LESSONS + 4, promotion=PromotionPolicy(cadence="off")
    )
    start = time.perf_counter()
    asyncio.run(train(scenario, client=client, store=store, run_dir=work, config=config))
    return getattr(client, "requests", []), time.perf_counter() - start


def measure(
    scenario, count: int, folder: Path, label: str, *, retest: float | None = None
) -> dict[str, dict[str, tuple[int, int]]]:
    """The shares of one step in the stable order and in the order before, from the same state;
    ``retest``: the share of groups that retest an established lesson (None: the default)."""
    base = folder / f"state-{label}"
    base.mkdir()
    established(setup(base, scenario.role_names), scenario.role_names, count)
    out = {}
    for order in ("stable", "before"):
        copy = folder / f"{label}-{order}"
        shutil.copytree(base, copy)
        with legacy_order() if order == "before" else contextlib.nullcontext():
            config = None
            if retest is not None:
                config = TrainConfig(
                    tasks=TASKS, batch_size=TASKS, group_size=G, max_lessons=LESSONS + 4,
                    promotion=PromotionPolicy(cadence="off"), exposure=ExposurePolicy(retest=retest),
                )  # fmt: skip
            requests, _ = one_step(scenario, copy / "lib.json", copy / "run", config=config)
        out[order] = shares(requests)
    return out


def report(result: dict[str, dict[str, tuple[int, int]]], roles: list[str]) -> dict[str, float]:
    stages = ("Summary", "Advantage", "EditBatch")
    print(f"{'':<12} {'stable order':>22} {'order before':>22}")
    figures = {}
    for name in [*roles, "team calls", *stages, "learning calls"]:
        cells = []
        for order in ("stable", "before"):
            got = result[order]
            members = roles if name == "team calls" else stages if name == "learning calls" else [name]
            hit, total = (sum(got.get(m, (0, 0))[i] for m in members) for i in (0, 1))
            share = hit / total if total else 0.0
            figures[f"{order}/{name}"] = share
            cells.append(f"{share:>6.3f} of {total:>8,} tok")
        print(f"{name:<12} {cells[0]:>22} {cells[1]:>22}")
    return figures


async def embedded_steps(scenario, base: Path, folder: Path, rounds: int) -> dict[str, list[float]]:
    from mas.models.clients import open_client

    config = TrainConfig(
        tasks=2, batch_size=2, group_size=3, max_tokens=32, max_lessons=LESSONS + 4, rollout_timeout=1800,
        promotion=PromotionPolicy(cadence="off"),
    )  # fmt: skip
    walls: dict[str, list[float]] = {"stable": [], "before": []}
    async with open_client("local") as client:
        for r in range(rounds):
            for order in ("stable", "before")[:: 1 if r % 2 else -1]:
                copy = folder / f"embedded-{order}-{r}"
                shutil.copytree(base, copy)
                with legacy_order() if order == "before" else contextlib.nullcontext():
                    start = time.perf_counter()
                    store = LibraryStore(copy / "lib.json")
                    await train(scenario, client=client, store=store, run_dir=copy / "run", config=config)
                    walls[order].append(time.perf_counter() - start)
                print(f"round {r + 1} {order:<6} {walls[order][-1]:.1f} s", flush=True)
    return walls


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--embedded", action="store_true", help="also time a small step on the embedded server")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    scenario = load_scenario("maths")
    roles = scenario.role_names
    folder = Path(tempfile.mkdtemp(prefix="mas-prefix-"))
    try:
        print(f"one step: {TASKS} tasks, G={G}, {LESSONS} lessons per role ({LESSONS - NEW} established), "
              f"{GLOBALS} global; tokens of {tokenizer('embedded').label}\n")  # fmt: skip
        main_result = measure(scenario, LESSONS - NEW, folder, "main")
        figures = report(main_result, roles)
        print("\nestablished lessons retested in 30% of the groups (retest 0.3, the default before issue 26):")
        report(measure(scenario, LESSONS - NEW, folder, "retest", retest=0.3), roles)
        if args.embedded:
            print("\nthe embedded server, one step of 2 tasks, G=3, 32-token replies:")
            walls = asyncio.run(embedded_steps(scenario, folder / "state-main", folder, args.rounds))
            stable, before = statistics.median(walls["stable"]), statistics.median(walls["before"])
            print(f"wall: stable order {stable:.1f} s, order before {before:.1f} s: {stable / before:.2f}x")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    goals = {
        **{f"{role}: repeated share >= {TEAM_GOAL}": figures[f"stable/{role}"] >= TEAM_GOAL for role in roles},
        f"learning calls: repeated share >= {LEARNING_GOAL}": figures["stable/learning calls"] >= LEARNING_GOAL,
    }
    print()
    for name, ok in goals.items():
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    return 0 if all(goals.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
