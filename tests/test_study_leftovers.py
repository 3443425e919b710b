"""Leftovers of the studies' audit: a report of studies alone is titled as one; a transfer stopped
before its baseline says it has none rather than "baseline 0.000"; an ablation's reference row
carries no change from itself; an import names the file it read without the importer's folders."""

import asyncio
import json

from mas.config import EvalConfig
from mas.library.store import LibraryStore
from mas.models.fake import FakeClient
from mas.studies import job
from mas.studies.evaluate import compare
from mas.studies.report import write_report
from mas.studies.transfer import transfer, unmeasured
from mas.team.scenario import load_scenario
from mas.types.lessons import Lesson, Provenance, Source, Version
from tests.inprocess import cli
from tests.test_cli import mas
from tests.test_import import ours, theirs  # noqa: F401 (fixtures)
from tests.test_report import make_run
from tests.test_study_report import evaluation
from tests.test_study_usability import wide


def title(report) -> str:
    return report.read_text().splitlines()[0]


def test_a_report_of_studies_alone_is_a_study_report(tmp_path):
    """It was titled "# Training report" with no training in it."""
    study = evaluation(tmp_path, FakeClient(), EvalConfig(tasks=2))
    assert title(write_report([study], tmp_path / "out")) == "# Study report"
    run = make_run(tmp_path, "trained", tasks=4, epochs=1)
    assert title(write_report([study, run], tmp_path / "both")) == "# Training report"


def test_a_report_of_either_title_is_replaced_as_one_mas_wrote(tmp_path):
    """The new title is known as mas's own, and so is the old one an older mas gave studies."""
    study = evaluation(tmp_path, FakeClient(), EvalConfig(tasks=2))
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").write_text("# Training report\n\nRuns: `study`\n")  # an older mas's report of a study
    assert title(write_report([study], out)) == "# Study report"
    run = make_run(tmp_path, "trained", tasks=4, epochs=1)
    assert title(write_report([run], out)) == "# Training report"  # over the study report
    assert title(write_report([study], out)) == "# Study report"


def stopped_before_anything(monkeypatch) -> None:
    """Every study's budget is spent before its first evaluation: a stop before the baseline
    (Ctrl-C there leaves no result to print; a budget cannot stop it so early from the CLI)."""

    def over(self):
        self.stopped = "budget: $0.0000 spent of $0; run the same command with a larger --budget-usd to go on"
        return True

    monkeypatch.setattr(job.Study, "over", over)


def test_a_transfer_stopped_before_its_baseline_has_none(monkeypatch, tmp_path):
    stopped_before_anything(monkeypatch)
    maths = load_scenario("maths")
    lesson = Lesson(id="solver/0001", text="When quantities have units, convert them to one unit first.")
    heads = {"solver": Version(library="solver", number=1, lessons=[lesson], next_id=2)}
    result = asyncio.run(transfer(maths, client=FakeClient(), heads=heads, config=EvalConfig(tasks=2)))
    assert result.baseline is None and result.cells == [] and result.tasks == 0 and result.stopped
    assert "not measured" in unmeasured(result)
    assert unmeasured(result.model_copy(update={"baseline": 0.0})) is None  # a measured baseline of 0 is one


def test_a_transfer_stopped_by_its_budget_announces_no_run_it_does_not_start():
    """The budget is spent by the baseline: "eval: <label>" was printed for the next run too."""
    from mas.cost import Price

    maths = load_scenario("maths")
    lesson = Lesson(id="solver/0001", text="When quantities have units, convert them to one unit first.")
    heads = {"solver": Version(library="solver", number=1, lessons=[lesson], next_id=2)}
    started: list[str] = []
    result = asyncio.run(
        transfer(
            maths, client=FakeClient(), heads=heads, config=EvalConfig(tasks=2, budget_usd=0.01),
            price=Price(prompt=1000.0, completion=2000.0), on_run=started.append,
        )
    )  # fmt: skip
    assert result.stopped and result.baseline is not None
    assert all(c.lessons == 0 for c in result.cells)  # cells with nothing to add need no run
    assert started == ["current libraries"]


def test_the_command_says_the_baseline_was_not_measured(ours, monkeypatch, capsys, tmp_path):  # noqa: F811
    stopped_before_anything(monkeypatch)
    args = ["transfer", "maths", "--model", "fake", "--library", ours, "--tasks", "2"]
    code, out, err = cli([*args, "--run-dir", tmp_path / "t"], capsys, monkeypatch)
    assert code == 0, err
    assert "baseline 0.000" not in out and "change on" not in out  # no matrix of changes against it
    assert "the baseline (the current libraries) was not measured" in out and "stopped early: budget" in out
    code, out, err = cli([*args, "--run-dir", tmp_path / "j", "--json"], capsys, monkeypatch)
    assert code == 0, err
    printed = json.loads(out)
    assert printed["baseline"] is None and printed["cells"] == [] and "not measured" in err


def test_the_ablation_reference_has_no_change_from_itself(tmp_path):
    """ "no library" had delta 0 [0, 0] (and a variant asked before it its own 0 [0, 0])."""
    run_dir = tmp_path / "abl"
    args = ["ablate", "maths", "--model", "fake", "--variants", "full,no library", "--tasks", "4", "--test-tasks", "6"]
    done = mas(*args, "--json", "--run-dir", str(run_dir))
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [r["variant"] for r in rows] == ["full", "no library"]  # in the order asked
    keys = ["variant", "mean_at_k", "delta", "lessons", "cost_usd", "k", "tasks"]
    assert [list(r) for r in rows] == [keys, keys]
    full, reference = rows
    assert reference["delta"] is None
    found = _evaluations(run_dir)
    paired = compare(found["full"], found["no library"], seed=0)
    assert full["delta"] == paired.model_dump() and paired.value != 0
    table = wide(*args, "--run-dir", str(run_dir))  # resumed: the same rows, as a table
    (line,) = [line for line in table.splitlines() if "no library " in line and "│" in line]
    cells = [c.strip() for c in line.split("│")[1:-1]]
    assert cells[0] == "no library" and cells[2] == ""  # nothing in "vs no library"
    assert str(paired) in table


def _evaluations(run_dir) -> dict:
    from mas.studies import study_report

    return dict(study_report.load(run_dir, json.loads((run_dir / "run.json").read_text())).evaluations)


def test_an_import_names_the_file_without_the_importers_folders(ours, theirs, monkeypatch, capsys, tmp_path):  # noqa: F811
    """The provenance held the file's absolute path: the importer's home folder, in a file shared
    with others, naming nothing on their machines."""
    monkeypatch.chdir(tmp_path)
    code, _, err = cli(["library", "import", theirs, "--into", ours, "--role", "verifier"], capsys, monkeypatch)
    assert code == 0, err
    assert LibraryStore(ours).head("verifier").provenance.source.file == "theirs/maths.json"  # under the folder
    monkeypatch.chdir(tmp_path / "ours")
    code, _, err = cli(["library", "import", theirs, "--into", ours, "--role", "solver"], capsys, monkeypatch)
    assert code == 0, err
    assert LibraryStore(ours).head("solver").provenance.source.file == "maths.json"  # outside it: its name
    assert str(tmp_path) not in ours.read_text()


def test_a_library_with_an_absolute_import_path_still_loads(tmp_path, capsys, monkeypatch):
    path, old = tmp_path / "old.json", "/home/someone/theirs/maths.json"
    source = Source(file=old, sha256="0" * 64, at="2026-01-01T00:00:00+00:00", library="solver", version=1)
    provenance = Provenance(run="import-20260101-000000", epoch=0, step=0, stage="import", source=source)
    lesson = Lesson(id="solver/0001", text="When quantities have units, convert them to one unit first.")
    LibraryStore(path).commit([Version(library="solver", number=1, lessons=[lesson], next_id=2, provenance=provenance)])
    assert LibraryStore(path).head("solver").provenance.source.file == old
    code, out, err = cli(["library", "show", path], capsys, monkeypatch)
    assert code == 0 and old in out, err
