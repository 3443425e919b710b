"""`--track mlflow`: runs logged to a real MLflow file store and to `mlflow server` on loopback,
read back through MLflow's own client."""

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from mas.config import TrainConfig
from mas.library.store import LibraryStore
from mas.models.fake import FakeClient
from mas.testing import journal
from mas.train import train
from tests.test_cli import mas, snapshot

NO_MLFLOW = "the mlflow extra is not installed (pip install -e '.[mlflow]')"
TRAIN = ["train", "maths", "--model", "fake", "--tasks", "8", "--epochs", "2", "--track", "mlflow"]
FILES = {
    "run.json", "library/maths.json", "library/maths.md", "graph/maths.graphml", "graph/maths.html",
    "report/report.md", "report/reward.png", "report/library.png", "report/tool_calls.png", "report/promotions.png",
}  # fmt: skip


@pytest.fixture(autouse=True)
def quiet_mlflow(monkeypatch):
    """No tracking URI from the machine's environment, and no MLflow telemetry."""
    for name in ("MAS_TRACKING_URI", "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.setenv("DO_NOT_TRACK", "true")


def client_of(uri: str):
    mlflow = pytest.importorskip("mlflow", reason=NO_MLFLOW)
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    return mlflow.MlflowClient(tracking_uri=uri)


def runs(client, kind: str):
    experiment = client.get_experiment_by_name("maths")
    return [r for r in client.search_runs([experiment.experiment_id]) if r.data.tags.get("mas.kind") == kind]


def artifacts(client, run_id: str, path: str | None = None) -> set[str]:
    out = set()
    for item in client.list_artifacts(run_id, path):
        out |= artifacts(client, run_id, item.path) if item.is_dir else {item.path}
    return out


def check_training(client, run_dir: Path):
    """The training run as logged: its settings, every step's metrics, its files."""
    (run,) = runs(client, "train")
    assert run.info.status == "FINISHED" and run.info.run_name == run_dir.name
    settings = json.loads((run_dir / "run.json").read_text())
    params = run.data.params
    assert params["scenario"] == "maths" and params["config.group_size"] == str(settings["config"]["group_size"])
    assert params["config.budget.inject"] == "relevant" and params["model"] == "fake"
    steps = sorted((r["data"] for r in journal(run_dir, "step")), key=lambda s: (s["epoch"], s["step"]))
    history = sorted(client.get_metric_history(run.info.run_id, "reward"), key=lambda m: m.step)
    assert [(m.step, m.value) for m in history] == [(i, s["mean_reward"]) for i, s in enumerate(steps)]
    informative = client.get_metric_history(run.info.run_id, "informative_groups")
    assert sorted(m.value for m in informative) == sorted(s["informative"] for s in steps)
    tokens = client.get_metric_history(run.info.run_id, "role_tokens/solver")
    assert sum(m.value for m in tokens) == sum(s["role_tokens"]["solver"] for s in steps) > 0
    assert {"role_cost_usd/solver", "edits", "refused_edits", "failures", "failed_rollouts"} <= set(run.data.metrics)
    assert artifacts(client, run.info.run_id) >= FILES
    return run


def test_train_logs_to_a_local_file_store_and_a_resume_continues_the_same_run(tmp_path, home):
    run_dir = tmp_path / "run"
    done = mas(*TRAIN, "--run-dir", str(run_dir))
    assert done.returncode == 0, done.stderr
    client = client_of((home / "mlruns").as_uri())
    run = check_training(client, run_dir)
    library = Path(client.download_artifacts(run.info.run_id, "library/maths.json", str(tmp_path)))
    assert library.read_text() == (home / "libraries" / "maths.json").read_text()
    again = mas(*TRAIN, "--run-dir", str(run_dir))  # every step done: nothing new, nothing twice
    assert again.returncode == 0, again.stderr
    check_training(client, run_dir)


def test_eval_ablate_and_transfer_log_their_tables(tmp_path, home):
    assert mas("train", "maths", "--model", "fake", "--tasks", "8").returncode == 0
    for command in (
        ["eval", "maths", "--tasks", "4", "--k", "2"],
        ["transfer", "maths", "--from-trials"],
        ["ablate", "maths", "--variants", "full", "--tasks", "4", "--test-tasks", "4", "--run-dir", tmp_path / "a"],
    ):
        done = mas(*command, "--model", "fake", "--track", "mlflow", "--json")
        assert done.returncode == 0, done.stderr
        printed = json.loads(done.stdout)
        (run,) = runs(client_of((home / "mlruns").as_uri()), command[0])
        client = client_of((home / "mlruns").as_uri())
        logged = json.loads(
            Path(client.download_artifacts(run.info.run_id, f"{command[0]}.json", str(tmp_path))).read_text()
        )
        assert run.info.status == "FINISHED" and run.data.params["scenario"] == "maths"
        if command[0] == "eval":
            assert [row["mean_at_k"] for row in logged] == [r["mean_at_k"]["value"] for r in printed]
            assert run.data.metrics["mean_at_k/none"] == printed[0]["mean_at_k"]["value"]
            assert run.data.params["config.k"] == "2"
        elif command[0] == "transfer":
            assert logged == printed["cells"] and "delta/solver/planner" in run.data.metrics
        else:
            assert [row["variant"] for row in logged] == ["no library", "full"]
            assert run.data.metrics["mean_at_k/full"] == printed[1]["mean_at_k"]["value"]
            assert run.data.params["train.tasks"] == "4"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(tmp_path):
    """`mlflow server` on 127.0.0.1 at a free port, its store and artifacts in tmp_path."""
    pytest.importorskip("mlflow", reason=NO_MLFLOW)
    port, folder = free_port(), tmp_path / "server"
    folder.mkdir()
    command = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    command += [
        "--backend-store-uri",
        f"sqlite:///{folder / 'mlflow.db'}",
        "--artifacts-destination",
        str(folder / "art"),
    ]
    process = subprocess.Popen(command, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    uri, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 180
    while True:
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=2) as answer:
                if answer.status == 200:
                    break
        except OSError:
            pass
        assert process.poll() is None and time.monotonic() < deadline, "mlflow server did not start"
        time.sleep(0.5)
    yield uri
    process.terminate()
    process.wait(timeout=30)


def test_train_and_eval_log_to_a_server_on_loopback(tmp_path, server, monkeypatch):
    monkeypatch.setenv("MAS_TRACKING_URI", server)
    run_dir = tmp_path / "run"
    done = mas(*TRAIN, "--run-dir", str(run_dir))
    assert done.returncode == 0, done.stderr
    client = client_of(server)
    check_training(client, run_dir)
    done = mas("eval", "maths", "--model", "fake", "--tasks", "4", "--track", "mlflow")
    assert done.returncode == 0, done.stderr
    (run,) = runs(client, "eval")
    assert {"eval.json", "eval.md"} <= artifacts(client, run.info.run_id) and "mean_at_k/maths.json" in run.data.metrics


def test_steps_the_store_did_not_take_are_logged_at_the_end(maths, tmp_path, home, monkeypatch, capsys):
    """Live logging fails (the store refuses every step as it ends): training goes on, and
    the end of the run logs every step once."""
    pytest.importorskip("mlflow", reason=NO_MLFLOW)
    from mas.track_run import TrainingRun
    from mas.tracking import Tracker, open_tracker

    real = Tracker.metrics

    def refuse_live(self, run_id, values, step, *, synchronous=True):
        if not synchronous:
            raise OSError("the store went away")
        return real(self, run_id, values, step)

    monkeypatch.setattr(Tracker, "metrics", refuse_live)
    tracked = TrainingRun(open_tracker("maths"), tmp_path / "run", steps_per_epoch=2, roles=maths.role_names)
    store = LibraryStore(tmp_path / "lib.json")
    config = TrainConfig(tasks=8, epochs=2)
    asyncio.run(
        train(maths, client=FakeClient(), store=store, run_dir=tmp_path / "run", config=config, on_step=tracked.step)
    )
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("tracking:")]
    assert len(said) == 1 and "the store went away" in said[0] and "logged again at its end" in said[0]
    tracked.stop("FINISHED", store)
    client = client_of((home / "mlruns").as_uri())
    (run,) = runs(client, "train")
    assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "reward")) == [0, 1, 2, 3]


def test_an_unreachable_store_one_line_exit_2_nothing_written(tmp_path, home, monkeypatch):
    pytest.importorskip("mlflow", reason=NO_MLFLOW)
    (tmp_path / "file").write_text("")
    for uri, said in [
        (f"http://127.0.0.1:{free_port()}", "Connection refused"),
        (str(tmp_path / "file" / "mlruns"), "is not a folder"),
    ]:
        monkeypatch.setenv("MAS_TRACKING_URI", uri)
        for command in (TRAIN, ["eval", "maths", "--model", "fake", "--track", "mlflow"]):
            before = snapshot(home)
            done = mas(*command)
            lines = done.stderr.strip().splitlines()
            assert done.returncode == 2 and len(lines) == 1, done.stderr
            assert uri in lines[0] and "MAS_TRACKING_URI" in lines[0] and said in lines[0]
            assert snapshot(home) == before


def test_without_the_extra_one_line_names_it(home):
    """MLflow made unimportable: the command stops before writing anything, naming the extra."""
    code = "import sys; sys.modules['mlflow'] = None\nfrom mas.cli.main import main; main()"
    done = subprocess.run([sys.executable, "-c", code, *TRAIN], capture_output=True, text=True)
    assert (
        done.returncode == 2
        and done.stderr.strip() == "error: --track mlflow: MLflow is not installed; pip install 'mas[mlflow]'"
    )
    assert snapshot(home) == {}


def test_mlflow_is_imported_only_when_asked(home):
    code = "import sys\nfrom mas.cli.main import main\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
    code += "print('mlflow' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code, "train", "maths", "--model", "fake", "--tasks", "4"],
        capture_output=True,
        text=True,
    )
    assert done.stdout.strip().splitlines()[-1] == "False", done.stderr


def test_a_resumed_study_logs_to_its_own_mlflow_run(tmp_path, home):
    """A study's MLflow run is tagged with its run folder: the same command again (everything
    read back) updates that run instead of logging a second one."""
    assert mas("train", "maths", "--model", "fake", "--tasks", "8").returncode == 0
    run_dir = tmp_path / "eval"
    command = ["eval", "maths", "--model", "fake", "--tasks", "4", "--run-dir", run_dir, "--track", "mlflow", "--json"]
    first, again = mas(*command), mas(*command)
    assert first.returncode == again.returncode == 0, first.stderr + again.stderr
    assert json.loads(first.stdout) == json.loads(again.stdout)
    client = client_of((home / "mlruns").as_uri())
    (run,) = runs(client, "eval")
    assert run.info.status == "FINISHED" and run.info.run_name == "eval"
    assert run.data.tags["mas.run_dir"] == str(run_dir.resolve())


def test_promote_logs_its_moves(tmp_path, home):
    assert mas("train", "maths", "--model", "fake", "--tasks", "8", "--promote-every", "off").returncode == 0
    done = mas("promote", "maths", "--dry-run", "--track", "mlflow")
    assert done.returncode == 0, done.stderr
    client = client_of((home / "mlruns").as_uri())
    (run,) = runs(client, "promote")
    logged = json.loads(Path(client.download_artifacts(run.info.run_id, "promote.json", str(tmp_path))).read_text())
    assert run.info.status == "FINISHED" and run.data.params["dry_run"] == "true"
    assert run.data.params["library"] == str((home / "libraries" / "maths.json").resolve())
    kinds = {k: int(v) for k, v in run.data.metrics.items() if k.startswith("moves/")}
    assert set(kinds) == {"moves/promote", "moves/demote", "moves/prune", "moves/merge", "moves/split"}
    assert sum(kinds.values()) == len(logged) and all(
        row["kind"] in ("promote", "demote", "prune", "merge") for row in logged
    )
