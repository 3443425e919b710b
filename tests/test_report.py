"""The training report: real runs on the fake client to Markdown and PNG plots."""

import asyncio
import json
import re

import pytest

from mas.config import PromotionPolicy, TrainConfig
from mas.errors import UserError
from mas.library.logs import SideFiles, StepKey
from mas.library.store import LibraryStore
from mas.models.fake import FakeClient
from mas.studies.report import PLOTS, write_report
from mas.team.scenario import load_scenario
from mas.train import train
from mas.types.evidence import PromotionMove
from mas.types.lessons import Lesson, Provenance, Version

PNG = b"\x89PNG\r\n\x1a\n"


def make_run(root, name, **config):
    """A real training run in ``root/name`` with its own library ``root/name.json``."""
    store = LibraryStore(root / f"{name}.json")
    config = TrainConfig(**{"tasks": 8, "epochs": 2, **config})
    asyncio.run(
        train(
            load_scenario("maths"),
            client=FakeClient(),
            store=store,
            run_dir=root / name,
            config=config,
            model_name="fake",
        )
    )
    return root / name


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return make_run(root, "alpha"), make_run(root, "beta", seed=1)


def check_plots(out):
    for name in PLOTS:
        data = (out / f"{name}.png").read_bytes()
        assert data.startswith(PNG) and len(data) > 10_000, name


def test_one_run_gives_a_report_with_its_plots_and_tables(runs, tmp_path):
    alpha = runs[0]
    journal = (alpha / "journal.jsonl").read_bytes()
    path = write_report([alpha], tmp_path / "out")
    assert path == tmp_path / "out" / "report.md"
    text = path.read_text()
    assert (
        "## Run `alpha`" in text and "scenario **maths**, model **fake**, epochs 2, group size 5, batch size 4" in text
    )
    for name, title in PLOTS.items():
        assert f"![{title}]({name}.png)" in text
    check_plots(tmp_path / "out")
    rows = re.findall(r"^\| (\d) \| (\d\.\d{3}) \| (\d+)/8 \|", text, re.M)
    assert [r[0] for r in rows] == ["0", "1"]
    assert "## Comparison" not in text
    head = LibraryStore(alpha.parent / "alpha.json").head("solver")
    assert head.lessons and all(lesson.text in text for lesson in head.lessons)
    assert "### Promotions and demotions\n\n_None._" in text
    assert (alpha / "journal.jsonl").read_bytes() == journal  # the run is only read


def test_two_runs_are_compared(runs, tmp_path):
    text = write_report(list(runs), tmp_path / "out").read_text()
    comparison = text.split("## Comparison")[1].split("## Plots")[0]
    assert (
        "| run | scenario | model | final-epoch reward | lessons | model calls | total tokens | wall seconds |"
        in comparison
    )
    assert "| `alpha` | maths | fake |" in comparison and "| `beta` | maths | fake |" in comparison
    assert "## Run `alpha`" in text and "## Run `beta`" in text
    check_plots(tmp_path / "out")


def test_runs_with_the_same_directory_name_get_distinct_labels(tmp_path):
    first, second = (
        make_run(tmp_path / "a", "run", tasks=4, epochs=1),
        make_run(tmp_path / "b", "run", tasks=4, epochs=1),
    )
    text = write_report([first, second], tmp_path / "out").read_text()
    assert "`run (1)`" in text and "`run (2)`" in text


def test_a_directory_that_is_not_a_run_raises_and_writes_nothing(runs, tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "run.json").write_text("{}")
    for bad in [tmp_path / "empty", tmp_path / "half", tmp_path / "absent"]:
        with pytest.raises(UserError, match=re.escape(str(bad))) as caught:
            write_report([runs[0], bad], tmp_path / "out")
        assert "\n" not in str(caught.value)
        assert not (tmp_path / "out").exists()


def test_a_bad_run_json_raises(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_text("not json")
    (tmp_path / "run" / "journal.jsonl").write_text("")
    with pytest.raises(UserError, match="run"):
        write_report([tmp_path / "run"], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_one_epoch_without_informative_groups_or_library_file(tmp_path):
    # One rollout a group and no ground truth: each rollout is its own majority, nothing to learn.
    run = make_run(tmp_path, "flat", tasks=4, epochs=1, group_size=1, ground_truth=False)
    assert not (tmp_path / "flat.json").exists()  # nothing learned, so no library file was written
    text = write_report([run], tmp_path / "out").read_text()
    assert re.search(r"^\| 0 \| \d\.\d{3} \| 0/4 \| 0 \|", text, re.M)
    assert "library file" in text and "is missing" in text
    check_plots(tmp_path / "out")


def test_an_empty_journal_still_reports(tmp_path):
    run = make_run(tmp_path, "short", tasks=4, epochs=1)
    (run / "journal.jsonl").write_text("")
    text = write_report([run], tmp_path / "out").read_text()
    assert "_No finished steps._" in text
    check_plots(tmp_path / "out")


def test_promotions_of_the_run_are_listed_and_others_are_not(tmp_path):
    run = make_run(tmp_path, "prom", tasks=4, epochs=2)
    moves = [
        {
            "kind": "promote",
            "text": "Check every intermediate result once more before going on.",
            "roles": ["planner", "solver"],
            "epoch": 1,
        },
        {
            "kind": "demote",
            "text": "Always answer with the first number that comes to mind.",
            "roles": [],
            "epoch": 0,
            "reason": "can help at most 0 of the 2 roles it needs",
        },
        {
            "kind": "promote",
            "text": "A lesson from another run entirely, not this one.",
            "roles": ["solver"],
            "epoch": 0,
            "run": "other",
        },
    ]
    log = SideFiles(tmp_path / "prom.json").promotions
    for m in moves:
        log.append(StepKey(m.pop("run", "prom"), m.pop("epoch"), 9), [PromotionMove(lessons=[], evidence=[], **m)])
    with log.path.open("a") as f:
        f.write("{cut short")  # what a crash leaves: a line without its newline
    text = write_report([run], tmp_path / "out").read_text()
    assert (
        "- epoch 1: promote “Check every intermediate result once more before going on.” (roles: planner, solver)"
        in text
    )
    assert "that comes to mind.” (roles: none): can help at most 0 of the 2 roles it needs\n" in text  # with why
    assert "another run" not in text
    check_plots(tmp_path / "out")


def lessons_section(text: str, run: str) -> str:
    return text.split(f"## Run `{run}`")[1].split("### Lessons at the end of the run")[1].split("## Run")[0]


def test_a_run_is_reported_from_its_own_library_versions(tmp_path):
    """Two runs on one library, a lesson written by hand before and after: each run's lessons
    are those of its own versions, and its start is the version it continued from."""
    store = LibraryStore(tmp_path / "shared.json")
    before = "When a quantity has a unit, carry the unit through every step of the sum."
    later = "When the answer is a fraction, reduce it before writing the final answer."
    store.commit([Version(library="planner", number=1, next_id=2, lessons=[Lesson(id="planner/0001", text=before)])])
    first = _run_on(store, tmp_path / "first", promotion=PromotionPolicy(end_level=None))  # "before" stays
    assert json.loads((first / "run.json").read_text())["start"] == {"planner": 1}
    mine = store.head("solver")
    head = store.head("planner")
    extra = Lesson(id=f"planner/{head.next_id:04d}", text=later)
    store.commit(
        [
            Version(
                library="planner", number=head.number + 1, next_id=head.next_id + 1, lessons=[*head.lessons, extra],
                provenance=Provenance(run="by-hand", epoch=0, step=0),
            )
        ]
    )  # fmt: skip
    second = _run_on(store, tmp_path / "second", fresh=True)

    text = write_report([first, second], tmp_path / "out").read_text()
    one, two = lessons_section(text, "first"), lessons_section(text, "second")
    assert later not in one and before in one  # nothing from after the run, what it continued from
    assert all(lesson.text in one for lesson in mine.lessons)
    assert f"**planner** v{head.number} (" in one and "v1 at the start, 1 lesson)" in one
    assert before not in two and later not in two  # started fresh: the emptied versions
    assert "v0 at the start" not in two and re.search(r"\*\*planner\*\* v\d+ \(\d+ lessons?; v\d+ at the start, 0", two)
    emptied = [v for v in store.versions("planner") if v.provenance and v.provenance.stage == "fresh"]
    assert len(emptied) == 1 and emptied[0].provenance.run == "second" and not emptied[0].lessons


def _run_on(store, run_dir, **config):
    asyncio.run(
        train(
            load_scenario("maths"), client=FakeClient(), store=store, run_dir=run_dir,
            config=TrainConfig(tasks=8, **config), model_name="fake",
        )
    )  # fmt: skip
    return run_dir


@pytest.mark.parametrize("theirs", ["report.md", "reward.png"])
def test_a_report_replaces_an_earlier_report_and_no_other_file(theirs, runs, tmp_path):
    out = tmp_path / "mydocs"
    out.mkdir()
    (out / theirs).write_text("MY NOTES\n")
    with pytest.raises(UserError, match=f"{theirs}: not a"):
        write_report([runs[0]], out)
    assert (out / theirs).read_text() == "MY NOTES\n" and len(list(out.iterdir())) == 1
    (out / theirs).unlink()
    write_report([runs[0]], out)
    write_report([runs[1]], out)  # an earlier report, and its plots, are replaced
    assert "`beta`" in (out / "report.md").read_text()
