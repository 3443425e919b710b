"""The help of every command: defaults shown, choices listed, plain flag shapes, --version."""

import json
from importlib.metadata import version

import pytest
import typer
from typer.testing import CliRunner

from mas.cli.main import app
from tests.test_cli import mas

ROOT = typer.main.get_command(app)


def commands(group=ROOT, path=()):
    """Every command under ``mas``, with its path (``("library", "show")``)."""
    for name, command in group.commands.items():
        if hasattr(command, "commands"):  # a group (typer vendors click: no isinstance)
            yield from commands(command, (*path, name))
        else:
            yield (*path, name), command


ALL = list(commands())
assert len(ALL) > 10


def help_of(*path: str) -> str:
    done = CliRunner().invoke(app, [*path, "--help"], terminal_width=100)
    assert done.exit_code == 0, done.output
    return done.output


def test_train_is_listed_first_and_version_is_printed():
    listed = help_of().split("Commands:")[1].split()
    assert listed[0] == "train"
    done = CliRunner().invoke(app, ["--version"])
    assert done.exit_code == 0 and done.output.strip() == f"mas {version('mas')}"


@pytest.mark.parametrize("path, command", ALL, ids=[" ".join(p) for p, _ in ALL])
def test_defaults_are_shown_and_flags_are_plain(path, command):
    text = help_of(*path)
    assert "--no-no-" not in text and "``" not in text
    ctx = command.context_class(command, info_name=" ".join(path))
    for param in command.params:
        if param.param_type_name != "option" or param.name in ("help", "show_version"):
            continue
        assert all(not flag.startswith("--no-no") for flag in param.opts + param.secondary_opts)
        record = param.get_help_record(ctx)
        assert record is not None, param.name
        has_default = param.default is not None and not (param.is_flag and param.default is False)
        if isinstance(param.show_default, str) or (has_default and param.show_default is not False):
            assert "default:" in record[1], (path, param.name, record)
            if not isinstance(param.show_default, str):  # a plain value, not "(a description)"
                assert "default: (" not in record[1], (path, param.name, record)
        choices = param.type_descriptor.choices
        if choices:
            assert "|".join(map(str, choices)) in record[0], (path, param.name, record)


def test_descriptive_defaults_survive_rendering():
    """Bracketed text is not taken for markup: the default library file is on the page."""
    train = " ".join(help_of("train").split())
    assert "libraries/SCENARIO.json" in train and "runs/SCENARIO-TIME" in train
    assert "<relevant|all>" in train and "<epoch|step|off>" in train and "<quick|paper>" in train
    assert "--ground-truth / --no-ground-truth" in train
    assert "(the paper uses 3). [default: 1; x>=1]" in train
    assert "<markdown|prompt>" in help_of("library", "export")
    assert "<html|graphml>" in help_of("graph", "export")


def test_a_preset_fills_what_the_command_line_leaves_out(tmp_path):
    """Defaults are shown in help, yet a preset still replaces them; an option given wins."""

    def config(*extra):
        run = tmp_path / f"run{len(extra)}"
        args = ["train", "maths", "--model", "fake", "--preset", "quick", "--run-dir", str(run), *extra]
        done = mas(*args, "--library", str(tmp_path / f"lib{len(extra)}.json"))
        assert done.returncode == 0, done.stderr
        return json.loads((run / "run.json").read_text())["config"]

    quick = config()
    assert (quick["tasks"], quick["group_size"], quick["epochs"]) == (4, 3, 1)
    given = config("--group-size", "2", "--batch-size", "4")
    assert (given["tasks"], given["group_size"]) == (4, 2)
