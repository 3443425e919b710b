"""The studies as a researcher reads them: every number named with what it is, over how many
tasks, with its interval; the A/B of ``mas eval --compare``; the same numbers in the table, the
JSON, the report and MLflow; and a tracking store that refuses a study costs one line, not the
study."""

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mas.cli.tables import print_transfer
from mas.studies import study_report
from mas.studies.evaluate import EvalResult, compare
from mas.studies.report import write_report
from mas.studies.transfer import Cell, TransferResult, from_trials
from mas.team.scenario import load_scenario
from mas.types.usage import UsageEvent
from tests import inprocess
from tests.test_cli import mas
from tests.test_tracking import NO_MLFLOW, client_of, runs

ODD = "other (v2).json"
"""A library file whose name MLflow takes in no metric name as it is."""


@pytest.fixture(scope="module")
def libraries(tmp_path_factory):
    """Two libraries trained apart on the fake: the A and the B of an A/B."""
    root = tmp_path_factory.mktemp("libs")
    for name, seed in (("maths.json", "0"), (ODD, "5")):
        done = mas("train", "maths", "--model", "fake", "--tasks", "8", "--seed", seed, "--library", str(root / name))
        assert done.returncode == 0, done.stderr
    return root / "maths.json", root / ODD


def test_eval_compare_reports_the_ab_itself_in_its_table_json_and_report(libraries, tmp_path):
    """--compare is an A/B: the paired change of B from A, on the same tasks and seeds, is its
    number (two intervals side by side do not give it), and a script must tell A from B."""
    a, b = libraries
    run_dir = tmp_path / "ab"
    args = ["eval", "maths", "--model", "fake", "--tasks", "8", "--k", "2", "--seed", "3"]
    args += ["--library", str(a), "--compare", str(b), "--run-dir", str(run_dir)]
    done = mas(*args, "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [(r["key"], r["label"]) for r in rows] == [("none", "none"), ("library", "maths.json"), ("compare", ODD)]
    found = {r["key"]: EvalResult.model_validate(r) for r in rows}
    ab = compare(found["compare"], found["library"], seed=3)
    assert rows[2]["vs_library"] == ab.model_dump() and "vs_library" not in rows[1]
    assert rows[1]["vs_none"] == compare(found["library"], found["none"], seed=3).model_dump()
    table = wide(*args)  # resumed: the same evaluations, as a table
    assert "vs maths.json" in table and str(ab) in table
    report = write_report([run_dir], tmp_path / "out").read_text()
    assert f"| {ODD} | maths.json | {ab} |" in report
    assert "[95% bootstrap interval over tasks] (seed 3)" in report


def test_eval_compare_of_a_file_with_any_name_is_logged_to_mlflow(libraries, tmp_path, home):
    """A library file named ``other (v2).json`` made MLflow refuse the metrics: a traceback,
    exit code 1, no table, and the MLflow run left RUNNING."""
    pytest.importorskip("mlflow", reason=NO_MLFLOW)
    a, b = libraries
    args = ["eval", "maths", "--model", "fake", "--tasks", "4", "--library", str(a), "--compare", str(b)]
    done = mas(*args, "--track", "mlflow", "--json", "--run-dir", str(tmp_path / "ab"))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    rows = json.loads(done.stdout)
    (run,) = runs(client_of((home / "mlruns").as_uri()), "eval")
    assert run.info.status == "FINISHED"
    assert run.data.metrics["mean_at_k/other _v2_.json"] == rows[2]["mean_at_k"]["value"]
    assert run.data.metrics["delta_vs_library/other _v2_.json"] == rows[2]["vs_library"]["value"]


def wide(*args) -> str:
    """What ``mas ARGS`` prints on a terminal wide enough that no cell wraps."""
    command = [sys.executable, "-c", "from mas.cli.main import main; main()", *args]
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "COLUMNS": "250"})
    assert done.returncode == 0, done.stderr
    return done.stdout


class Recorder:
    """A tracker that keeps what a study logs."""

    uri = "recorder"

    def __init__(self, fail: bool = False):
        self.logged, self.fail = [], fail

    def study(self, kind, **logged):
        if self.fail:
            raise RuntimeError("the store went away")
        self.logged.append((kind, logged))


def test_mlflow_gets_the_paired_interval_the_table_prints(libraries, tmp_path, home):
    """log_eval read the seed from params that hold it as ``config.seed``: every delta was
    bootstrapped with seed 0 whatever ``--seed`` said, so MLflow's interval was not the table's."""
    pytest.importorskip("mlflow", reason=NO_MLFLOW)
    args = ["eval", "maths", "--model", "fake", "--tasks", "40", "--k", "2", "--seed", "3", "--library", libraries[0]]
    done = mas(*args, "--track", "mlflow", "--json", "--run-dir", str(tmp_path / "ev"))
    assert done.returncode == 0, done.stderr
    none, lib = (EvalResult.model_validate(r) for r in json.loads(done.stdout))
    printed = compare(lib, none, seed=3)  # as the table prints it
    assert printed != compare(lib, none, seed=0)  # the seed matters to this interval
    client = client_of((home / "mlruns").as_uri())
    (run,) = runs(client, "eval")
    logged = json.loads(Path(client.download_artifacts(run.info.run_id, "eval.json", str(tmp_path))).read_text())
    assert (logged[1]["delta_low"], logged[1]["delta_high"]) == (printed.low, printed.high)


def test_a_store_that_refuses_a_finished_study_costs_one_line(libraries, capsys, monkeypatch, tmp_path):
    """The study is done and journaled: its table is printed, the command ends well, and one
    line says how to log it again."""
    pytest.importorskip("mlflow", reason=NO_MLFLOW)
    from mas.tracking import Tracker

    monkeypatch.setattr(Tracker, "study", lambda self, kind, **kw: Recorder(fail=True).study(kind))
    run_dir = tmp_path / "ev"
    args = ["eval", "maths", "--model", "fake", "--tasks", "2", "--library", libraries[0], "--run-dir", run_dir]
    code, out, err = inprocess.cli([*args, "--track", "mlflow"], capsys, monkeypatch)
    assert code == 0 and "Mean@1" in out, (code, out, err)
    (line,) = [x for x in err.splitlines() if x.startswith("tracking:")]
    assert "did not take the eval (the store went away)" in line and f"--run-dir {run_dir}" in line


def usage(task: str, role: str, lesson: str, shown: bool, reward: float, rollout: int) -> UsageEvent:
    return UsageEvent(
        run="r", epoch=0, step=0, task_id=task, rollout=rollout, role=role, shown=[lesson] if shown else [],
        randomized=[lesson], chance={lesson: 0.5}, reward=reward, advantage=0.0,
    )  # fmt: skip


def test_a_transfer_cell_from_one_task_has_no_interval_rather_than_a_certain_one(monkeypatch):
    """From trials, a cell whose contrasts come from one task printed "+0.50 [+0.00,+0.00]": an
    interval of width zero that does not even hold its estimate; a cell no lesson was tried in
    printed "+0.00 [+0.00,+0.00]", a measured null that nothing measured."""
    events = [usage("t1", "verifier", "solver/0001", i < 2, 1.0 if i < 2 else 0.0, i) for i in range(4)]
    events += [
        usage(t, "solver", "solver/0001", i < 2, float(i < 2 or t == "t2"), i) for t in ("t1", "t2") for i in range(4)
    ]
    result = from_trials(["planner", "solver", "verifier"], events)
    cells = {(c.source, c.target): c for c in result.cells}
    one = cells["solver", "verifier"]
    assert one.delta > 0 and one.low is None and one.high is None and one.tasks == 1
    assert cells["solver", "solver"].tasks == 2 and cells["solver", "solver"].low is not None
    assert cells["planner", "solver"].delta is None and cells["planner", "solver"].tasks == 0
    assert result.baseline is None and result.k is None  # trials have neither: a 0 there reads as a measure
    printed = render(result, monkeypatch)
    assert "[+0.00,+0.00]" not in printed and "no trials" in printed
    assert f"{one.delta:+.2f} (no interval) n=1" in printed


def test_a_role_without_lessons_is_said_not_shown_as_a_measured_zero(monkeypatch):
    cells = [
        Cell(source="solver", target="verifier", lessons=2, delta=0.1, low=-0.05, high=0.25, tasks=6),
        Cell(source="verifier", target="solver", lessons=0, delta=0.0, low=0.0, high=0.0, tasks=0),
    ]
    printed = render(TransferResult(baseline=0.5, tasks=6, k=2, cells=cells), monkeypatch)
    assert "+0.10 [-0.05,+0.25]" in printed and "no lessons" in printed and "+0.00" not in printed


def render(result: TransferResult, monkeypatch) -> str:
    """The matrix as printed, on a console wide enough that no cell wraps."""
    from rich.console import Console

    from mas.cli import tables

    console = Console(file=io.StringIO(), width=300)
    monkeypatch.setattr(tables, "out", console)
    roles = ["planner", "solver", "verifier"] if result.source == "trials" else ["solver", "verifier"]
    print_transfer(roles, result, as_json=False)
    return console.file.getvalue()


def test_an_ablation_says_how_many_tasks_it_scored_and_what_its_brackets_are(tmp_path):
    """The title repeated --test-tasks (1000) where the scenario holds 100 held-out tasks, and
    nothing said what the brackets were."""
    held_out = len(load_scenario("maths").held_out)
    args = ["ablate", "maths", "--model", "fake", "--variants", "no library", "--test-tasks", "1000"]
    done = mas(*args, "--run-dir", str(tmp_path / "abl"))
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert f"8 training tasks, {held_out} held-out" in text and "1000" not in text
    assert "[95% bootstrap interval over tasks]" in text and "paired difference" in text


def test_the_report_holds_the_transfer_matrix_the_command_printed(libraries, tmp_path):
    a, _ = libraries
    run_dir = tmp_path / "tr"
    args = ["transfer", "maths", "--model", "fake", "--tasks", "4", "--library", str(a), "--run-dir", str(run_dir)]
    done = mas(*args, "--json")
    assert done.returncode == 0, done.stderr
    cells = json.loads(done.stdout)["cells"]
    report = write_report([run_dir], tmp_path / "out").read_text()
    matrix = report.split("### Transfer matrix", 1)[1]
    for c in cells:
        if c["lessons"]:
            line = next(x for x in matrix.splitlines() if x.startswith(f"| {c['source']} |"))
            roles = ["planner", "solver", "verifier"]
            cell = line.strip("|").split(" | ")[1 + roles.index(c["target"])].strip()
            assert cell == f"{c['delta']:+.2f} [{c['low']:+.2f},{c['high']:+.2f}]"


def test_a_damaged_study_journal_is_named_by_its_line_and_field(libraries, tmp_path):
    """A training run's bad journal line is named (file, line, field); a study's was only "not a
    readable study (bad journal.jsonl)", with nothing to find it by."""
    run_dir = tmp_path / "ev"
    done = mas(
        "eval", "maths", "--model", "fake", "--tasks", "2", "--library", str(libraries[0]), "--run-dir", str(run_dir)
    )
    assert done.returncode == 0, done.stderr
    journal = run_dir / "journal.jsonl"
    lines = journal.read_text().splitlines()
    at = max(i for i, line in enumerate(lines) if json.loads(line)["kind"] == "evaluation")
    record = json.loads(lines[at])
    record["data"]["mean_at_k"] = "oops"
    lines[at] = json.dumps(record)
    journal.write_text("\n".join(lines) + "\n")
    done = mas("report", str(run_dir), "--output", str(tmp_path / "out"))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert f"{journal}:{at + 1}:" in done.stderr and "mean_at_k" in done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "name", ["mean_at_k/other (v2).json", "mean_at_k//maths.json", "delta/../maths.json", "a/./b:c"]
)
def test_every_metric_name_is_one_mlflow_takes(name):
    """Labels become metric names: MLflow refuses odd characters, and names that a path would
    read otherwise (``//``, ``..``), and with one bad name the whole batch."""
    validation = pytest.importorskip("mlflow.utils.validation", reason=NO_MLFLOW)
    from mas.tracking import metric_name

    validation._validate_metric_name(metric_name(name))
    assert metric_name("mean_at_k/maths.json") == "mean_at_k/maths.json"  # a plain name stays as it is


def test_two_library_files_of_one_name_are_told_apart_by_their_folders(tmp_path, monkeypatch):
    """``--library ../libraries/maths.json --compare maths.json`` labelled the second column
    ``/maths.json``: the folder of a bare file name is empty until the path is resolved."""
    from mas.cli.studies import _labels

    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    assert _labels([None, Path("../libraries/maths.json"), Path("maths.json")]) == [
        "none",
        "libraries/maths.json",
        "here/maths.json",
    ]


def test_the_report_tells_two_library_files_of_one_name_apart_as_the_table_does(libraries, tmp_path):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        shutil.copyfile(libraries[0], tmp_path / folder / "maths.json")
    run_dir = tmp_path / "ev"
    args = ["eval", "maths", "--model", "fake", "--tasks", "2", "--run-dir", str(run_dir)]
    done = mas(*args, "--library", str(tmp_path / "a" / "maths.json"), "--compare", str(tmp_path / "b" / "maths.json"))
    assert done.returncode == 0, done.stderr
    report = write_report([run_dir], tmp_path / "out").read_text()
    assert "| a/maths.json | none |" in report and "| b/maths.json | a/maths.json |" in report


def test_an_ablation_as_json_says_over_how_many_tasks_and_rollouts(tmp_path):
    """Its rows gave Mean@k with neither k nor the number of tasks behind it."""
    args = ["ablate", "maths", "--model", "fake", "--variants", "no library", "--test-tasks", "6", "--k", "2"]
    done = mas(*args, "--json", "--run-dir", str(tmp_path / "abl"))
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)
    assert (row["variant"], row["k"], row["tasks"]) == ("no library", 2, 6)


def test_an_ablation_bootstraps_its_paired_change_with_its_seed(tmp_path):
    """Mean@k took --seed, the paired change beside it seed 0: one table, two seeds, and a
    report (which reads the study's seed) that disagreed with it."""
    run_dir = tmp_path / "abl"
    args = [
        "ablate",
        "maths",
        "--model",
        "fake",
        "--variants",
        "full",
        "--tasks",
        "4",
        "--test-tasks",
        "40",
        "--k",
        "2",
    ]
    done = mas(*args, "--seed", "2", "--json", "--run-dir", str(run_dir))
    assert done.returncode == 0, done.stderr
    rows = {r["variant"]: r for r in json.loads(done.stdout)}
    found = dict(study_report.load(run_dir, json.loads((run_dir / "run.json").read_text())).evaluations)
    paired = compare(found["full"], found["no library"], seed=2)
    assert paired != compare(found["full"], found["no library"], seed=0)  # the seed matters to this interval
    assert rows["full"]["delta"] == paired.model_dump()
    report = write_report([run_dir], tmp_path / "out").read_text()
    assert f"| full | no library | {paired} |" in report
