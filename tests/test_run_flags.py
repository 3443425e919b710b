"""The run flags: declared once (``mas.cli.flags``), taken with the same help and defaults by
every command that calls a model, and acting in each."""

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

from mas.cli import flags
from tests.fault_server import FaultServer
from tests.test_cli import mas
from tests.test_cli_help import ALL, help_of
from tests.test_team_file import cli

RUN_FLAGS = [
    "--model", "--base-url", "--api-key", "--model-config", "--learner-config", "--trust", "--reasoning",
    "--concurrency", "--call-timeout", "--retries", "--budget-usd", "--prices", "--executor", "--ray-address",
    "--workers", "--track",
]  # fmt: skip
"""What governs model calls (the issue's list, with the key and the reasoning switch), the
modules a team or model config file may name (``--trust``), where rollouts run (``--executor``
and Ray's options) and the run's tracking (``--track``)."""
MODEL_COMMANDS = {("train",), ("eval",), ("ablate",), ("transfer",), ("promote",)}
CLI = Path(flags.__file__).parent


def flags_in(text: str) -> list[str]:
    return [flag for flag in RUN_FLAGS if re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text)]


@pytest.mark.parametrize("path, command", ALL, ids=[" ".join(p) for p, _ in ALL])
def test_a_command_that_calls_a_model_takes_every_run_flag(path, command):
    """Walks every command's --help: one that calls a model lists every run flag; any other
    lists none (a flag it would silently ignore)."""
    listed = flags_in(help_of(*path))
    assert listed == (RUN_FLAGS if path in MODEL_COMMANDS else []), path


OWN_HELP = {(("promote",), "--model")}
"""A flag whose help is the command's own: ``mas promote`` judges with no model unless one is named."""


def help_records(flags: list[str]) -> dict[str, set]:
    """The help records (help text and default) each of ``flags`` has across every command."""
    records = {}
    for path, command in ALL:
        ctx = command.context_class(command, info_name=" ".join(path))
        for param in command.params:
            if set(param.opts) & set(flags) and (path, param.opts[0]) not in OWN_HELP:
                records.setdefault(param.opts[0], set()).add(param.get_help_record(ctx))
    return records


def test_every_run_flag_has_one_help_and_one_default():
    records = help_records(RUN_FLAGS)
    assert sorted(records) == sorted(RUN_FLAGS)
    assert all(len(seen) == 1 for seen in records.values()), {k: v for k, v in records.items() if len(v) > 1}
    assert "[default: 120.0]" in next(iter(records["--call-timeout"]))[1]


def test_promote_says_it_needs_no_model():
    text = " ".join(help_of("promote").split())
    model = text[text.index("--model <str>") : text.index("--base-url <str>")]
    assert model.endswith("[default: (none: only the judgements made in training)] "), model


def test_no_command_reaches_a_model_but_through_the_run_flags():
    """Only ``mas.cli.flags`` (through ``mas.cli.sources``) opens a model: a command that calls
    one must take ``RunFlags``, so it has every flag."""
    for module in CLI.glob("*.py"):
        if module.name in ("flags.py", "sources.py"):
            continue
        text = module.read_text()
        assert not re.search(r"\bopen_client\b|\bmodels\(|load_model_config", text), module.name


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    lib = tmp_path_factory.mktemp("lib") / "lib.json"
    done = mas(
        "train", "maths", "--model", "fake", "--tasks", "8", "--library", str(lib), "--run-dir", str(lib.parent / "run")
    )
    assert done.returncode == 0, done.stderr
    return lib


STUDIES = {
    "eval": ["eval", "maths", "--tasks", "2", "--library", "{lib}"],
    "transfer": ["transfer", "maths", "--tasks", "2", "--library", "{lib}"],
    "ablate": ["ablate", "maths", "--variants", "full", "--tasks", "2", "--group-size", "2", "--test-tasks", "2"],
    "train": ["train", "maths", "--tasks", "2", "--group-size", "2", "--library", "{tmp}/lib.json"],
}


def requests(study, server, tmp_path, capsys, monkeypatch, trained, *extra) -> int:
    """The requests the endpoint got for one run of ``study`` with ``extra`` flags."""
    before = server.requests
    run = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
    args = [a.format(lib=trained, tmp=run) for a in STUDIES[study]]
    endpoint = ["--model", "openai:fake-model", "--base-url", server.url, "--api-key", "sk-test-0000"]
    code, _, err = cli([*args, *endpoint, "--run-dir", run, *extra], capsys, monkeypatch)
    assert code == 0, err
    return server.requests - before


@pytest.mark.parametrize("study", STUDIES)
def test_retries_and_call_timeout_act_in_every_command(study, trained, tmp_path, capsys, monkeypatch):
    """Every request refused (429, no wait): each call is tried 1 + --retries times. Every
    reply slow (3 s): a call cut at --call-timeout never gets one."""
    with FaultServer({"429": 1.0}) as server:
        once = requests(study, server, tmp_path, capsys, monkeypatch, trained, "--retries", "0")
        thrice = requests(study, server, tmp_path, capsys, monkeypatch, trained, "--retries", "2")
    assert once > 0 and thrice == 3 * once
    with FaultServer({"slow": 1.0}, slow_seconds=3.0) as server:
        cut = requests(study, server, tmp_path, capsys, monkeypatch, trained, "--retries", "0", "--call-timeout", "0.3")
    assert cut == once  # each call cut once and never answered: the team stops where it did on the 429s


def test_a_budget_stops_a_study_cleanly_and_a_larger_one_goes_on(trained, tmp_path, capsys, monkeypatch):
    prices = tmp_path / "prices.toml"
    prices.write_text('[prices]\n"fake" = [1000.0, 2000.0]\n')
    args = ["eval", "maths", "--model", "fake", "--tasks", "3", "--library", trained, "--prices", prices]
    args += ["--run-dir", tmp_path / "run", "--json"]
    code, out, err = cli([*args, "--budget-usd", "0.01"], capsys, monkeypatch)
    assert code == 0 and "stopped early: budget" in err
    assert [r["library"] for r in json.loads(out)] == ["none"]  # the library's evaluation was not started
    code, out, err = cli([*args, "--budget-usd", "100"], capsys, monkeypatch)
    assert code == 0 and "stopped" not in err
    results = json.loads(out)
    assert [r["library"] for r in results][0] == "none" and len(results) == 2


def test_executor_ray_without_ray_names_the_extra(capsys, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if the extra were not installed: ``import ray`` fails
    run = tmp_path / "run"
    code, out, err = cli(
        ["eval", "maths", "--model", "fake", "--executor", "ray", "--run-dir", run], capsys, monkeypatch
    )
    assert code == 2 and err.strip().splitlines() == ["error: --executor ray needs Ray: pip install -e '.[ray]'"]
    assert not run.exists()
    code, _, err = cli(["eval", "maths", "--model", "fake", "--executor", "other"], capsys, monkeypatch)
    assert code == 2 and "'other' is not one of 'local', 'ray'" in err


@pytest.mark.parametrize("flag", [["--workers", "2"], ["--ray-address", "127.0.0.1:6379"]])
def test_ray_options_go_with_executor_ray(flag, capsys, monkeypatch):
    code, _, err = cli(["train", "maths", "--model", "fake", *flag], capsys, monkeypatch)
    assert code == 2 and f"{flag[0]} goes with --executor ray" in err


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs Ray, the ray extra: pip install -e '.[ray]'")
def test_executor_ray_refuses_the_embedded_model(capsys, monkeypatch):
    code, _, err = cli(["train", "maths", "--executor", "ray"], capsys, monkeypatch)
    assert code == 2 and "the embedded model serves this process only" in err


TWINS = [
    "Check the units of every quantity before adding them.",
    "Before adding quantities, check the units of every one.",
    "Write the whole expression with its parentheses before computing.",
    "Before computing, write the whole expression with parentheses.",
]


def judging_calls(tmp_path, name: str, *extra: str) -> tuple[int, str]:
    """The model calls of ``mas promote`` on a fresh copy of a library of near-twins."""
    from mas.library.store import LibraryStore
    from mas.types.lessons import Lesson, Version
    from tests.test_study_crash import calls
    from tests.test_study_runs import run_counting

    store = LibraryStore(tmp_path / name / "lib.json")
    lessons = [Lesson(id=f"solver/{i:04d}", text=text) for i, text in enumerate(TWINS, 1)]
    store.commit([Version(library="solver", number=1, next_id=len(TWINS) + 1, lessons=lessons)])
    done = run_counting(["promote", str(store.path), *extra], tmp_path / f"{name}.calls")
    return sum(calls(tmp_path / f"{name}.calls").values()), done.stdout


def test_promote_judges_with_the_model_it_is_given_within_its_budget(tmp_path):
    prices = tmp_path / "prices.toml"
    prices.write_text('[prices]\n"fake" = [1000.0, 2000.0]\n')
    assert judging_calls(tmp_path, "plain")[0] == 0  # no model named: only earlier judgements count
    judged, said = judging_calls(tmp_path, "judged", "--model", "fake", "--concurrency", "1", "--prices", str(prices))
    assert judged > 1 and "judging cost $" in said
    capped, _ = judging_calls(
        tmp_path, "capped", "--model", "fake", "--concurrency", "1", "--prices", str(prices), "--budget-usd", "0.0001"
    )
    assert capped == 1  # the first call spends the budget; no other is made


def test_a_preset_may_choose_the_executor(monkeypatch):
    """``executor`` is a setting like any other: a preset may set it, the command line overrides it."""
    from mas import config

    monkeypatch.setitem(config.PRESETS, "cluster", {"executor": "ray", "workers": 4})
    chosen = config.train_config("cluster", workers=2)
    assert (chosen.executor, chosen.workers, chosen.ray_address) == ("ray", 2, None)
