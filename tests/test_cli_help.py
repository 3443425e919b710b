"""The help of every command: defaults shown, choices listed, plain flag shapes, --version."""

import json
import subprocess
import sys
from importlib.metadata import version

import pytest
import typer
from typer.testing import CliRunner

from mas.cli.main import app
from mas.cli.options import docstring
from mas.config import EvalConfig, ExposurePolicy, PromotionPolicy, TrainConfig
from mas.types.base import Settings
from mas.types.lessons import Budget
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


def test_the_listing_is_each_commands_own_help():
    """``mas --help`` lists the commands from the table in ``mas.cli.main``, importing none of
    them: its page is the one a group holding the real commands prints, at any width."""
    eager = typer.core.TyperGroup(
        name=ROOT.name, commands=dict(ROOT.commands), params=ROOT.params, help=ROOT.help, rich_markup_mode=None
    )
    assert list(eager.commands) == ROOT.list_commands(None)
    assert all(command.name == name for name, command in eager.commands.items())
    for width in (50, 80, 120, 1000):
        lazy, real = (group.get_help(group.context_class(group, terminal_width=width)) for group in (ROOT, eager))
        assert lazy == real


def loaded_by(*args: str) -> set[str]:
    """The modules ``mas ARGS`` has imported when it ends."""
    code = (
        "import sys\nfrom mas.cli.main import main\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(*sys.modules, file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    assert done.stdout, done.stderr
    return set(done.stderr.split())


def test_help_imports_no_command_and_no_settings_model():
    """``mas --help`` starts in about the time of ``import typer``: it imports neither a
    command's module nor pydantic (the settings models, the store) nor rich's console."""
    loaded = loaded_by("--help")
    assert {m for m in loaded if m.startswith("mas")} <= {
        "mas",
        "mas.cli",
        "mas.cli.main",
        "mas.cli.interrupt",
        "mas.errors",
    }
    assert not {m for m in loaded if m.split(".")[0] in ("pydantic", "pydantic_core", "tinydb", "filelock")}
    assert "rich.console" not in loaded


def test_library_show_imports_no_settings_and_no_team(tmp_path):
    """``mas library show`` reads and validates a library file; it imports neither the options
    and settings of the commands that run the team, nor autogen, nor a lock (it only reads)."""
    from mas.library.edits import apply
    from mas.library.store import LibraryStore
    from mas.types.lessons import Add, Version

    store = LibraryStore(tmp_path / "lib.json")
    store.commit([apply(Version.empty("solver"), [Add(op="add", text="Check the units before the sum.")])[0]])
    loaded = loaded_by("library", "show", str(store.path))
    assert "mas.library.store" in loaded and "mas.types.lessons" in loaded
    unwanted = {"mas.config", "mas.cli.options", "mas.cli.sources", "mas.cli.commands", "mas.cli.promote"}
    assert not loaded & unwanted
    assert not {m for m in loaded if m.split(".")[0] in ("autogen_core", "autogen_agentchat", "filelock", "networkx")}


@pytest.mark.parametrize("model", [TrainConfig, EvalConfig, Budget, PromotionPolicy, ExposurePolicy])
def test_every_settings_field_has_its_docstring(model):
    """Each field's help is the docstring under it, inherited fields' too, read from the source
    by the CLI (pydantic reads none: ``Settings``)."""
    for name, field in model.model_fields.items():
        assert docstring(model, name).strip(), (model.__name__, name)
        assert field.description is None  # reading them at import costs every command
    assert docstring(TrainConfig, "seed") == "Fixes task order and the sampling seed of every model call."
    assert docstring(Budget, "inject") == "``relevant``: BM25 ranking against the task; ``all``: id order."
    assert docstring(TrainConfig, "fresh").startswith("Start from empty libraries: the run first adds")
    assert "\n" in docstring(TrainConfig, "fresh")  # cleaned, not joined: help joins the lines


class Knobs(Settings):
    plain: int = 1
    documented: int = 2
    """Two."""


class MoreKnobs(Knobs):
    documented: int = 3


def test_a_docstring_is_read_from_the_class_that_declares_the_field():
    assert docstring(Knobs, "documented") == "Two." and docstring(Knobs, "plain") == ""
    assert docstring(MoreKnobs, "documented") == "" and docstring(MoreKnobs, "plain") == ""


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
