"""`mas report`: what was refused and what failed, per step and by kind; a study's run folder
rendered as a training run's (one row per evaluation, what failed per evaluation)."""

import asyncio
import re

from mas.config import EvalConfig, TrainConfig
from mas.models.fake import FakeClient
from mas.studies import job
from mas.studies.ablate import ablate
from mas.studies.report import PLOTS, write_report
from mas.team.scenario import load_scenario
from mas.train import finished
from tests.test_report import check_plots, make_run


def row(text: str, *first: str) -> str:
    """The table row of ``text`` that starts with the cells ``first``."""
    start = "| " + " | ".join(first) + " |"
    found = [line for line in text.splitlines() if line.startswith(start)]
    assert len(found) == 1, (start, found)
    return found[0]


def section(text: str, heading: str) -> str:
    return text.split(heading, 1)[1].split("\n## ", 1)[0]


def test_each_step_shows_the_edits_refused_by_kind(tmp_path):
    run = make_run(tmp_path, "refusing", tasks=8, epochs=2)
    steps = finished(run)
    refusing = [s for s in steps if s.rejected]
    assert refusing, "the fake world refuses some edits (duplicates) in these settings"
    text = section(write_report([run], tmp_path / "out").read_text(), "### Refused and failed, per step")
    for s in steps:
        refused = sum(len(v) for v in s.rejected.values())
        cells = row(text, str(s.epoch), str(s.step)).split(" | ")
        assert cells[2] == "nothing" if not refused else cells[2].startswith(f"{refused} edit")
    reasons = {r.reason for s in refusing for v in s.rejected.values() for r in v}
    assert any(reason.startswith("duplicate of") for reason in reasons) and "duplicate of a lesson: " in text


def test_each_step_shows_the_rollouts_failed_by_kind(tmp_path):
    store_run = tmp_path / "slow"
    config = TrainConfig(tasks=2, group_size=2, rollout_timeout=0.2)
    from mas.library.store import LibraryStore
    from mas.train import train

    asyncio.run(
        train(
            load_scenario("maths"), client=FakeClient(latency=0.5), store=LibraryStore(tmp_path / "slow.json"),
            run_dir=store_run, config=config,
        )
    )  # fmt: skip
    text = write_report([store_run], tmp_path / "out").read_text()
    assert row(text, "0", "0", "nothing").endswith("| 4 rollouts (timeout 4) |")


def evaluation(tmp_path, client, config: EvalConfig):
    maths = load_scenario("maths")
    recorded = job.settings("eval", maths, model="fake", config=config, libraries={"none": None})
    study = job.Study(maths, client=client, journal=job.open_journal(tmp_path / "study", recorded))
    asyncio.run(study.evaluate("none", None, config))
    return tmp_path / "study"


def test_a_study_renders_as_a_training_run(tmp_path):
    study = evaluation(tmp_path, FakeClient(latency=0.5), EvalConfig(tasks=3, k=2, rollout_timeout=0.2))
    journal = (study / "journal.jsonl").read_bytes()
    text = write_report([study], tmp_path / "out").read_text()
    assert "## Run `study`" in text and "an evaluation" in text and "k 2, 3 held-out tasks" in text
    assert re.search(
        r"^\| none \| none \| 0\.00 \[0\.00,0\.00\] \| 0\.00 \[0\.00,0\.00\] \| \d+ \| \d+ \| 6 \|$", text, re.M
    )
    failed = section(text, "### Refused and failed, per evaluation")
    assert row(failed, "none") == "| none | nothing | 6 rollouts (timeout 6) |"
    assert "_No training runs: nothing to plot._" in text
    assert not any((tmp_path / "out" / f"{name}.png").exists() for name in PLOTS)
    assert (study / "journal.jsonl").read_bytes() == journal  # the study is only read


def test_a_study_and_a_training_run_in_one_report(tmp_path):
    study = evaluation(tmp_path, FakeClient(), EvalConfig(tasks=2))
    run = make_run(tmp_path, "trained", tasks=4, epochs=1)
    text = write_report([study, run], tmp_path / "out").read_text()
    assert "Runs: `study`, `trained`" in text and "## Run `study`" in text and "## Run `trained`" in text
    assert "| none | nothing | nothing |" in text  # the study's evaluation: nothing failed
    check_plots(tmp_path / "out")  # the training run's


def test_an_ablation_brings_the_training_runs_of_its_variants(tmp_path):
    maths = load_scenario("maths")
    asyncio.run(
        ablate(
            maths, client=FakeClient(), run_dir=tmp_path / "abl", variants=["no library", "full"],
            train_config=TrainConfig(tasks=4, group_size=2), eval_config=EvalConfig(tasks=2),
        )
    )  # fmt: skip
    text = write_report([tmp_path / "abl"], tmp_path / "out").read_text()
    assert "Runs: `abl`, `abl/full`" in text and "an ablation" in text
    assert row(section(text, "## Run `abl`").split("### Refused")[0], "full", "solver v1 (1)")
    assert "### Refused and failed, per step" in section(text, "## Run `abl/full`")
    check_plots(tmp_path / "out")
