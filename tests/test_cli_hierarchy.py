"""mas promote, mas graph export and mas transfer from the command line."""

import json
import random
import shutil

import networkx as nx
import pytest

from mas.library.logs import SideFiles, StepKey
from mas.library.store import LibraryStore
from mas.types.evidence import PromotionMove
from mas.types.lessons import Lesson, Version
from mas.types.usage import UsageEvent
from tests.test_cli import mas

HELPS_TWO = "When a result comes back, compare it with a rough estimate before passing it on."
NEUTRAL = "When the numbers are small, say each one aloud before using it."


@pytest.fixture(scope="module")
def evidence(tmp_path_factory):
    """A library whose usage log holds randomized evidence: the solver's lesson helps the
    solver and, in transfer trials, the verifier; the planner's does nothing."""
    store = LibraryStore(tmp_path_factory.mktemp("evidence") / "lib.json")
    store.commit(
        [
            Version(library="solver", number=1, next_id=2, lessons=[Lesson(id="solver/0001", text=HELPS_TWO)]),
            Version(library="planner", number=1, next_id=2, lessons=[Lesson(id="planner/0001", text=NEUTRAL)]),
        ]
    )
    rng = random.Random(1)
    events = []
    for task in range(30):
        for role, lesson, lift in (
            ("solver", "solver/0001", 0.5),
            ("verifier", "solver/0001", 0.5),
            ("planner", "planner/0001", 0.0),
        ):
            for i in range(4):
                shown = i < 2
                reward = float(rng.random() < 0.3 + lift * shown)
                events.append(
                    UsageEvent(run="r", epoch=0, step=task, task_id=f"t{task}", rollout=i, role=role,
                               shown=[lesson] if shown else [], randomized=[lesson], reward=reward, advantage=0.0)
                )  # fmt: skip
    SideFiles(store.path).usage.append(StepKey("r", 0, 0), events)
    return store.path


def test_promote_dry_run_then_for_real(evidence, tmp_path):
    for side in evidence.parent.glob("lib.*"):
        shutil.copy(side, tmp_path / side.name)
    evidence = tmp_path / "lib.json"
    before = evidence.read_text()
    dry = mas("promote", str(evidence), "--dry-run")
    assert dry.returncode == 0 and "promote" in dry.stdout and "dry run" in dry.stdout
    assert evidence.read_text() == before
    done = mas("promote", str(evidence))
    assert done.returncode == 0, done.stderr
    store = LibraryStore(evidence)
    assert [l.text for l in store.head("global").lessons] == [HELPS_TWO]
    assert store.head("solver").lessons == [] and [l.text for l in store.head("planner").lessons] == [NEUTRAL]
    move = next(SideFiles(evidence).promotions.items())
    assert move.kind == "promote" and move.roles == ["solver", "verifier"] and move.into == "global/0001"
    assert "no lesson meets" in mas("promote", str(evidence), "--dry-run").stdout


def test_transfer_from_trials(evidence):
    done = mas("transfer", "maths", "--library", str(evidence), "--from-trials", "--json")
    assert done.returncode == 0, done.stderr
    cells = {(c["source"], c["target"]): c for c in json.loads(done.stdout)["cells"]}
    assert cells[("solver", "verifier")]["low"] > 0 and cells[("solver", "solver")]["low"] > 0
    assert cells[("planner", "planner")]["low"] < 0 < cells[("planner", "planner")]["high"]
    assert cells[("solver", "planner")]["lessons"] == 0


@pytest.mark.parametrize("fmt", ["graphml", "html"])
def test_graph_export(evidence, fmt, tmp_path):
    target = tmp_path / f"g.{fmt}"
    done = mas("graph", "export", str(evidence), "--format", fmt, "--output", str(target))
    assert done.returncode == 0, done.stderr
    text = target.read_text()
    assert "solver/0001" in text and (
        "<graphml" in text if fmt == "graphml" else "<svg" in text and "<script" not in text
    )
    if fmt == "graphml":
        graph = nx.read_graphml(target)
        edge = graph.edges["role:verifier", "lesson:solver/0001"]
        assert edge["kind"] == "trial" and edge["helps"] and edge["tasks"] == 30
        assert all("label" in d for _, d in graph.nodes(data=True))


def test_transfer_json(tmp_path):
    lib = tmp_path / "lib.json"
    assert (
        mas(
            "train",
            "maths",
            "--model",
            "fake",
            "--tasks",
            "8",
            "--library",
            str(lib),
            "--run-dir",
            str(tmp_path / "run"),
        ).returncode
        == 0
    )
    done = mas("transfer", "maths", "--model", "fake", "--tasks", "6", "--library", str(lib), "--json")
    result = json.loads(done.stdout)
    assert len(result["cells"]) == 9 and result["tasks"] == 6
    assert all(c["low"] <= c["delta"] <= c["high"] for c in result["cells"])


@pytest.mark.parametrize(
    "args, message",
    [
        (["promote", "nope"], "no such library file"),
        (["graph", "export", "{lib}", "--format", "pdf"], "'--format'"),
        (["train", "maths", "--model", "fake", "--inject", "some"], "'--inject'"),
        (["train", "maths", "--model", "fake", "--promote-every", "week"], "'--promote-every'"),
        (["transfer", "maths", "--model", "fake", "--library", "{tmp}/none.json"], "none.json: no such library file"),
    ],
)
def test_bad_input(evidence, tmp_path, args, message):
    done = mas(*[a.format(lib=evidence, tmp=tmp_path) for a in args])
    assert done.returncode == 2 and message in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_graphml_labels_kinds_moves_and_no_tasks(evidence, tmp_path):
    """Every node labelled, every edge of a kind, moves as node attributes; --no-tasks leaves
    out the task nodes and their exposure edges."""
    for side in evidence.parent.glob("lib.*"):
        shutil.copy(side, tmp_path / side.name)
    lib = tmp_path / "lib.json"
    assert mas("promote", str(lib)).returncode == 0  # solver/0001 -> global/0001
    reason = "not shown to help after 30 tasks"
    SideFiles(lib).prunings.append(
        StepKey("r", 0, 1),
        [PromotionMove(kind="prune", text=NEUTRAL, lessons=["planner/0001"], evidence=[], reason=reason)],
    )

    def exported(*flags):
        target = tmp_path / f"g{len(flags)}.graphml"
        done = mas("graph", "export", str(lib), "--format", "graphml", "--output", str(target), *flags)
        assert done.returncode == 0, done.stderr
        return nx.read_graphml(target)

    full, lean = exported(), exported("--no-tasks")
    for graph in (full, lean):
        assert all(d.get("label") and d.get("kind") in ("role", "lesson", "task") for _, d in graph.nodes(data=True))
        assert graph.nodes["lesson:solver/0001"]["promoted_to"] == "global/0001"
        assert graph.nodes["lesson:global/0001"]["promoted_from"] == "solver/0001"
        assert graph.nodes["lesson:planner/0001"]["pruned"] == reason
    kinds = {d["kind"] for *_, d in lean.edges(data=True)}
    assert "evidence" in kinds and kinds <= {"evidence", "trial"}
    assert {d["kind"] for *_, d in full.edges(data=True)} == kinds | {"exposure"}
    tasks = [n for n, d in full.nodes(data=True) if d["kind"] == "task"]
    assert len(tasks) == 30 and full.nodes[tasks[0]]["label"] == tasks[0].removeprefix("task:")
    assert not any(d["kind"] == "task" for _, d in lean.nodes(data=True))
