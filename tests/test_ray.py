"""Rollouts on Ray (``--executor ray``): a run is byte for byte a local run, a worker killed
mid-step loses only its rollouts, a worker that cannot reach the endpoint fails its rollouts.

Every test here starts a local Ray instance on 127.0.0.1 with 2 workers (the ``ray`` extra;
``.ci/run`` installs it). Without Ray they are skipped, saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from autogen_core import FunctionCall

from mas.config import EvalConfig, TrainConfig
from mas.errors import UserError
from mas.library.store import LibraryStore
from mas.models.clients import open_client
from mas.models.fake import FakeClient
from mas.studies.evaluate import evaluate
from mas.team.scenario import load_scenario
from mas.testing import descendants
from mas.tools import isolation
from mas.train import train
from tests.test_cli import mas

pytestmark = [
    pytest.mark.ray,
    pytest.mark.timeout(600),
    pytest.mark.skipif(
        importlib.util.find_spec("ray") is None, reason="needs Ray, the ray extra: pip install -e '.[ray]'"
    ),
]

SIDE_FILES = ["lib.json", "lib.usage.jsonl", "lib.promotions.jsonl", "lib.prunings.jsonl", "lib.equivalence.jsonl"]
SIDE_FILES += ["lib.quarantine.jsonl", "lib.rejected.jsonl"]


def records(run: Path) -> list[str]:
    """The journal's records, sorted (concurrent rollouts end in any order, here as in a local
    run), each step report without its wall time."""
    out = []
    for line in (run / "journal.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["kind"] == "step":
            record["data"].pop("seconds")
        out.append(json.dumps(record, sort_keys=True))
    return sorted(out)


def test_a_run_on_ray_is_byte_for_byte_a_local_run(tmp_path):
    """``mas train`` then ``mas eval`` on the fake, in this process and on 2 Ray workers: the
    same library file and logs, byte for byte, the same journal records and the same table."""
    for where, extra in (("local", []), ("ray", ["--executor", "ray", "--workers", "2"])):
        folder = tmp_path / where
        common = ["--model", "fake", "--library", str(folder / "lib.json"), *extra]
        done = mas("train", "maths", "--tasks", "8", "--epochs", "2", "--run-dir", str(folder / "run"), *common)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        done = mas("eval", "maths", "--tasks", "4", "--k", "2", "--run-dir", str(folder / "eval"), "--json", *common)
        assert done.returncode == 0 and not done.stderr, done.stderr
        (folder / "table.json").write_text(done.stdout)
    local, ray = tmp_path / "local", tmp_path / "ray"
    assert json.loads((local / "lib.json").read_text())  # lessons were learned: something to compare
    for name in [*SIDE_FILES, "table.json"]:
        assert (local / name).read_bytes() == (ray / name).read_bytes(), name
    for run in ("run", "eval"):
        assert records(local / run) == records(ray / run), run
    assert Counter(json.loads(line)["kind"] for line in (ray / "run/journal.jsonl").open())["call"] > 0


@pytest.fixture(scope="module")
def ray_instance():
    """One local Ray instance for the tests that drive ``RayExecutor`` themselves."""
    from mas.executors.ray_driver import import_ray

    ray = import_ray(local=True)
    ray.init(address="local", num_cpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False)
    yield ray
    ray.shutdown()


async def _train(maths, folder: Path, *, executor=None, on_rollout=lambda n: None):
    config = TrainConfig(tasks=4, group_size=4, epochs=1)
    async with open_client("fake:0.3") as client:
        return await train(
            maths, client=client, store=LibraryStore(folder / "lib.json"), run_dir=folder / "run", config=config,
            executor=executor, on_rollout=on_rollout,
        )  # fmt: skip


def test_a_worker_killed_mid_step_loses_only_its_rollouts(ray_instance, maths, tmp_path):
    """kill -9 of a worker once the step's first rollout is done (each takes about a second):
    the rollouts it held go to the other worker, the step ends with every rollout valid and
    journaled once, and the libraries are those of a local run."""
    from mas.executors.ray_driver import RayExecutor

    asyncio.run(_train(maths, tmp_path / "local"))

    async def on_ray():
        async with RayExecutor(maths, functools.partial(open_client, "fake:0.3"), workers=2) as executor:
            killed = []

            def kill(n: int) -> None:
                if not killed:
                    killed.append(executor.pids[0])
                    os.kill(executor.pids[0], signal.SIGKILL)

            result = await _train(maths, tmp_path / "ray", executor=executor, on_rollout=kill)
            return result, executor

    result, executor = asyncio.run(on_ray())
    assert executor.lost == 1 and executor.retried >= 1
    assert result.steps[0].failed_rollouts == 0
    journal = [json.loads(line) for line in (tmp_path / "ray/run/journal.jsonl").read_text().splitlines()]
    keys = Counter((r["kind"], r["key"]) for r in journal)
    assert [k for k, n in keys.items() if n > 1] == []  # every rollout, and every call, journaled once
    assert sum(kind == "rollout" for kind, _ in keys) == 16
    for name in SIDE_FILES:
        assert (tmp_path / "local" / name).read_bytes() == (tmp_path / "ray" / name).read_bytes(), name


def test_a_worker_that_cannot_reach_the_endpoint_fails_its_rollouts(ray_instance, maths):
    """Nothing listens at the endpoint's port: each rollout fails with the connection error,
    counted, within the client's retries, and the evaluation ends."""
    from mas.executors.ray_driver import RayExecutor

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    opener = functools.partial(
        open_client, "openai:m", base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-test-0000", call_timeout=2,
        retries=1,
    )  # fmt: skip

    async def on_ray():
        async with RayExecutor(maths, opener, workers=2) as executor:
            started = time.monotonic()
            result = await evaluate(
                maths, client=FakeClient(), heads=None, config=EvalConfig(tasks=3, k=2), executor=executor
            )
            return result, time.monotonic() - started, await executor.endpoint_counts()

    result, seconds, counts = asyncio.run(on_ray())
    assert result.calls["rollout"].failures == 6 and result.mean_at_k.value == 0.0
    assert seconds < 60
    assert counts.failures == 6 and counts.faults.get("connection", 0) == 12  # each call tried twice


def test_ray_address_joins_a_running_cluster(ray_instance, tmp_path):
    """``--ray-address``: ``mas eval`` joins this test's Ray instance (on 127.0.0.1, where Ray
    left to itself reaches for the machine's address and waits forever), runs there, and leaves
    it running. Nothing answering at the address is one line, at once."""
    address = ray_instance.get_runtime_context().gcs_address
    assert address.startswith("127.0.0.1:")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}  # as a new shell has it

    def on(address: str, run: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", "from mas.cli.main import main; main()", "eval", "maths", "--model", "fake",
             "--no-library", "--tasks", "2", "--run-dir", str(tmp_path / run), "--executor", "ray",
             "--ray-address", address, "--workers", "1", "--json"],
            capture_output=True, text=True, env=env, timeout=300,
        )  # fmt: skip

    done = on(address, "eval")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0]["k"] == 1
    assert ray_instance.is_initialized() and ray_instance.cluster_resources().get("CPU") == 2
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = on(f"127.0.0.1:{port}", "nowhere")
    assert done.returncode == 2 and done.stderr.splitlines() == [
        f"error: --ray-address 127.0.0.1:{port}: nothing answers there (Connection refused)"
    ]


def test_a_fixed_limit_holds_for_the_endpoint_across_workers(ray_instance, maths, tmp_path):
    """``--concurrency 3`` with 2 workers: the endpoint never has more than 3 calls at once,
    the workers' and this process's learning calls together, and it had more than 1."""
    from mas.executors.ray_driver import RayExecutor
    from tests.fault_server import FaultServer

    with FaultServer().pace(0.2, 100) as server:
        opener = functools.partial(open_client, "openai:m", base_url=server.url, api_key="sk-test-0000")

        async def on_ray():
            async with (
                opener() as client,
                RayExecutor(maths, opener, workers=2, concurrency=3) as executor,
            ):
                config = TrainConfig(tasks=4, group_size=4, concurrency=3)
                store = LibraryStore(tmp_path / "lib.json")
                done = await train(maths, client=client, store=store, run_dir=tmp_path / "run", config=config,
                                   executor=executor)  # fmt: skip
                assert executor.in_flight == 0  # what the progress bar shows: every slot given back
                return done

        result = asyncio.run(on_ray())
    assert result.steps[0].failed_rollouts == 0
    assert 1 < server.peak <= 3


def test_a_killed_driver_resumes_on_ray(tmp_path):
    """kill -9 of ``mas train --executor ray`` once some rollouts are journaled: its Ray
    instance goes with it (Ray's two agents last, about a minute: they give up on the dead
    instance's control store), and the same command resumes the run and ends with the
    libraries a local run has."""
    command = ["train", "maths", "--model", "fake:0.2", "--tasks", "8", "--group-size", "4"]

    def files(folder: Path) -> list[str]:
        return [*command, "--library", str(folder / "lib.json"), "--run-dir", str(folder / "run")]

    assert mas(*files(tmp_path / "local")).returncode == 0
    ray = tmp_path / "ray"
    cut = subprocess.Popen(
        [sys.executable, "-c", "from mas.cli.main import main; main()", *files(ray), "--executor", "ray"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    journal, deadline = ray / "run" / "journal.jsonl", time.monotonic() + 120
    while not (journal.exists() and journal.read_text().count('"kind":"rollout"') >= 6):
        assert cut.poll() is None and time.monotonic() < deadline, "the run ended, or never began, before the kill"
        time.sleep(0.1)
    started = descendants(cut.pid)  # its Ray instance: gcs, raylet, workers
    assert started
    os.kill(cut.pid, signal.SIGKILL)
    cut.wait()
    deadline = time.monotonic() + 150
    while (left := [pid for pid in started if _alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.5)
    for pid in left:  # not to leave them to the rest of the suite
        os.kill(pid, signal.SIGKILL)
    assert not left, "Ray processes outlived the killed run"
    done = mas(*files(ray), "--executor", "ray", "--workers", "2")
    assert done.returncode == 0, done.stderr
    for name in SIDE_FILES:
        assert (tmp_path / "local" / name).read_bytes() == (ray / name).read_bytes(), name


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_worker_that_cannot_open_its_client_stops_the_start(ray_instance, maths):
    """The workers open their client as they start: a bad model is the driver's one-line error
    then, not a failure of every rollout, and nothing the start made is left running."""
    from mas.errors import UserError
    from mas.executors.ray_driver import RayExecutor

    async def on_ray():
        executor = RayExecutor(maths, functools.partial(open_client, "nonsense"), workers=2)
        with pytest.raises(UserError, match="--model 'nonsense': expected"):
            await executor.start()

    asyncio.run(on_ray())
    time.sleep(1)
    assert ray_instance.available_resources().get("CPU") == 2  # the workers are gone: their CPUs are free


WRAPPER = """#!/bin/sh
# bwrap, noting first who started it: the nearest ancestor that is not a shell (builtins only:
# the sandbox is started with an empty environment, no PATH)
pid=$PPID
while read -r stat < /proc/$pid/stat; do
    name=${stat#*(}
    case ${name%)*} in sh|bash|dash) ;; *) break ;; esac
    rest=${stat##*) }
    rest=${rest#* }
    pid=${rest%% *}
done
echo $pid >> LOG
exec BWRAP "$@"
"""


@contextlib.asynccontextmanager
async def _coding_model():
    """A fake whose coder runs ``print(6 * 7)`` with the python tool, then answers what it printed."""
    yield FakeClient(_run_the_code)


def _run_the_code(request):
    if request.tool_results:
        return f"ANSWER: {request.tool_results[-1]}"
    return [FunctionCall(id="1", name="python", arguments=json.dumps({"code": "print(6 * 7)"}))]


def test_the_python_tools_sandbox_runs_on_the_worker_that_called_it(ray_instance, tmp_path, monkeypatch):
    """A coder with the python tool, 4 rollouts on 2 Ray workers: every sandbox is started by a
    worker process, each worker starting its own, none by this process, and what the code
    printed is each rollout's answer. bwrap is a wrapper here that notes who started it."""
    from mas.executors import ray_driver
    from mas.executors.ray_driver import RayExecutor

    monkeypatch.setenv(isolation.UNSAFE_ENV, "0")  # isolated, here and on the workers (forwarded)
    try:
        bwrap = isolation.require()
    except UserError as exc:
        pytest.skip(str(exc))  # says why, and the fix
    folder = tmp_path / "coding"
    (folder / "roles").mkdir(parents=True)
    (folder / "scenario.toml").write_text(
        'name = "coding"\nroles = ["coder"]\ntasks = "tasks.jsonl"\ntest_tasks = "test.jsonl"\nreward = "numeric"\n'
    )
    (folder / "tasks.jsonl").write_text('{"id": "t", "question": "6 * 7?", "answer": "42"}\n')
    (folder / "test.jsonl").write_text(
        "".join(f'{{"id": "{n}", "question": "6 * 7?", "answer": "42"}}\n' for n in "ab")
    )
    (folder / "roles" / "coder.toml").write_text(
        'name = "coder"\ndescription = "Computes."\ntools = ["python"]\nsystem_prompt = "You are the coder."\n'
    )
    scenario = load_scenario(str(folder))  # its check of the isolation runs bwrap here: before the wrapper
    started_by, wrapper = tmp_path / "started-by", tmp_path / "bwrap"
    wrapper.write_text(WRAPPER.replace("LOG", str(started_by)).replace("BWRAP", bwrap))
    wrapper.chmod(0o755)
    monkeypatch.setenv(isolation.BWRAP_ENV, str(wrapper))
    # the workers' Ray instance started before it was set: sent to them as the other sandbox settings are
    monkeypatch.setattr(ray_driver, "FORWARDED", (*ray_driver.FORWARDED, isolation.BWRAP_ENV))

    async def on_ray():
        async with RayExecutor(scenario, _coding_model, workers=2) as executor:
            config = EvalConfig(tasks=2, k=2)
            result = await evaluate(scenario, client=FakeClient(), heads=None, config=config, executor=executor)
            pids = [int(line) for line in started_by.read_text().split()] if started_by.exists() else []
            # read while the workers still run (close() ends them)
            commands = {pid: Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0] for pid in set(pids)}
            return result, pids, commands, executor.pids

    result, pids, commands, workers = asyncio.run(on_ray())
    assert [score.answers for score in result.tasks] == [["42", "42"], ["42", "42"]]  # the code ran, and printed
    assert result.tasks[0].tool_calls == {"coder": 1.0}
    assert len(pids) >= 4 and os.getpid() not in pids, pids  # a sandbox per tool call, and each worker's check
    assert set(pids) == set(workers), (pids, workers)  # each worker started its own sandboxes
    assert all(b"ray::RolloutWorker" in command for command in commands.values()), commands
