"""The run flags and the source flags, each declared once here and given, with the same defaults,
to every command that needs them by a decorator. The run flags govern model calls (``train``,
``eval``, ``ablate``, ``transfer``, ``promote``: ``run_flags``); the source flags say where the
scenario comes from (SCENARIO, ``--team``, ``--tasks-file``, ...: ``train``, ``eval``,
``ablate``, ``transfer``: ``source_flags``):

    @app.command("eval")
    @run_flags
    @source_flags
    def eval_command(k: int = ..., source: SourceFlags = None, run: RunFlags = None) -> None:
        spec = source.load(say=print, trust=run.trust)
        async with run.open(clients) as (client, learner): ...

Stage: none: the command line.

The command gets them as one ``RunFlags`` in its parameter ``run`` and one ``SourceFlags`` in
its parameter ``source``, after its own options (the source flags first). A flag added to
``FLAGS`` (and to ``RunFlags``) or to ``SOURCE_FLAGS`` (and to ``SourceFlags``) joins every
such command at once; ``tests/test_run_flags.py`` and ``tests/test_source_flags.py`` check
that each command that calls a model, or loads a scenario, has all of them, and that none does
so another way.
"""

from __future__ import annotations

import functools
import inspect
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, Optional

import typer

from mas.cli.options import given, option
from mas.cli.sources import (
    AnswerField,
    LearnerConfig,
    ModelConfig,
    Models,
    QuestionField,
    Reasoning,
    Reward,
    ScenarioArg,
    TasksFile,
    Team,
    Trust,
    UnsafePython,
    models,
    scenario_from,
)
from mas.cli.tracking import Track
from mas.config import RolloutConfig

if TYPE_CHECKING:
    from collections.abc import Callable

    from mas.config import RolloutConfig as Settings
    from mas.cost import Price
    from mas.team.scenario import Scenario

LOCAL = "local"
"""The model when none is given: the embedded SmolLM2-135M."""
Executor = Literal["local", "ray"]
"""Where rollouts run: ``local``, in this process; ``ray``, on Ray actors (``mas.executors.ray_driver``)."""


@dataclass(frozen=True)
class RunFlags:
    """The run flags as a command gets them; None for a flag left out (its default applies)."""

    model: str | None
    """``--model``: None when not given (``spec`` is then the embedded model)."""
    base_url: str | None
    api_key: str | None
    model_config: Path | None
    learner_config: Path | None
    trust: list[str] | None
    """``--trust``: modules a team or model config file may name, besides autogen's and mas's."""
    reasoning: bool | None
    concurrency: int | None
    call_timeout: float | None
    retries: int | None
    budget_usd: float | None
    prices: Path | None
    executor: Executor | None
    """``--executor``: None when not given (a preset, else ``local``, applies)."""
    ray_address: str | None
    workers: int | None
    track: str | None
    """``--track``: ``mlflow`` to log the run (``mas.cli.tracking``), else None."""

    @property
    def spec(self) -> str:
        return self.model or LOCAL

    @property
    def chosen(self) -> bool:
        """Whether a model was named (``--model`` or ``--model-config``)."""
        return self.model is not None or self.model_config is not None

    def limits(self) -> dict:
        """The settings fields they give (``RolloutConfig``'s), for ``options.settings``."""
        names = ("concurrency", "call_timeout", "retries", "budget_usd", "executor", "ray_address", "workers")
        return {name: getattr(self, name) for name in names}

    def clients(self) -> Models:
        """The clients to open, their config files read and checked now (before anything is written)."""
        return models(
            self.spec, model_config=self.model_config, learner_config=self.learner_config, reasoning=self.reasoning,
            call_timeout=self.call_timeout, retries=self.retries, trust=self.trust,
        )  # fmt: skip

    def open(self, clients: Models):
        """``async with run.open(clients) as (client, learner)``: ``learner`` is None without
        ``--learner-config``."""
        return clients.open(
            base_url=self.base_url, api_key=self.api_key, call_timeout=self.call_timeout, retries=self.retries,
            reasoning=self.reasoning,
        )  # fmt: skip

    def rollouts(self, clients: Models, scenario: Scenario, config: Settings):
        """``async with run.rollouts(clients, scenario, config) as executor``: where the rollouts
        run, as ``config`` says (its ``executor``, from these flags or a preset): None for
        ``local``, else a started ``mas.executors.ray_driver.RayExecutor``."""
        return clients.executor(
            scenario, config, base_url=self.base_url, api_key=self.api_key, call_timeout=self.call_timeout,
            retries=self.retries, reasoning=self.reasoning,
        )  # fmt: skip

    def price(self, clients: Models) -> Price:
        from mas.cost import price_for

        return price_for(clients.label, self.prices)


FLAGS = {
    "model": (
        str | None,
        typer.Option(LOCAL, "--model", callback=given, help="local (embedded SmolLM2-135M), openai:MODEL, or fake."),
    ),
    "base_url": (Annotated[str | None, typer.Option(help="OpenAI-compatible base URL (or MAS_BASE_URL).")], None),
    "api_key": (
        Annotated[str | None, typer.Option(help="API key (or OPENAI_API_KEY).", show_default=False)],
        None,
    ),
    "model_config": (ModelConfig, None),
    "learner_config": (LearnerConfig, None),
    "trust": (Trust, None),
    "reasoning": (Reasoning, None),
    "concurrency": (int | None, option(RolloutConfig, "concurrency")),
    "call_timeout": (float, option(RolloutConfig, "call_timeout")),
    "retries": (int, option(RolloutConfig, "retries")),
    "budget_usd": (float | None, option(RolloutConfig, "budget_usd")),
    "prices": (
        Annotated[Path | None, typer.Option(help="Price table (TOML).", show_default="the shipped examples")],
        None,
    ),
    "executor": (Optional[Executor], option(RolloutConfig, "executor")),  # noqa: UP045 (typer reads Optional)
    "ray_address": (str | None, option(RolloutConfig, "ray_address")),
    "workers": (int | None, option(RolloutConfig, "workers")),
    "track": (Track, None),
}
"""Each run flag: its type and its default (a ``typer.Option``, or the value of an annotated one)."""
assert list(FLAGS) == [f.name for f in fields(RunFlags)]


@dataclass(frozen=True)
class SourceFlags:
    """The source flags as a command gets them: where its scenario comes from."""

    scenario: str | None
    """SCENARIO: a scenario (a name or a folder) or a .jsonl file (with ``--team``: its tasks)."""
    unsafe_python_tool: bool
    team: Path | None
    tasks_file: Path | None
    reward: str | None
    question_field: str
    answer_field: str

    def load(self, *, say: Callable | None, trust: list[str] | None, test_file: Path | None = None) -> Scenario:
        """The scenario, read and checked now: a bad file or field is a
        ``UserError`` naming it. With ``--unsafe-python-tool``, the python tool of this process
        runs without isolation. ``say``, when given, is told how mas chose a team or reward;
        ``trust`` is ``--trust``."""
        from mas.datasets import Fields
        from mas.tools import isolation

        if self.unsafe_python_tool:  # the python tool reads it where it checks its isolation
            os.environ[isolation.UNSAFE_ENV] = "1"
        return scenario_from(
            self.scenario, team=self.team, tasks_file=self.tasks_file, reward=self.reward,
            fields=Fields(self.question_field, self.answer_field), test_file=test_file, say=say, trust=trust,
        )  # fmt: skip


SOURCE_FLAGS = {
    "scenario": (ScenarioArg, None),
    "unsafe_python_tool": (UnsafePython, False),
    "team": (Team, None),
    "tasks_file": (TasksFile, None),
    "reward": (Reward, None),
    "question_field": (QuestionField, "question"),
    "answer_field": (AnswerField, "answer"),
}
"""Each source flag (and the SCENARIO argument): its type and its default."""
assert list(SOURCE_FLAGS) == [f.name for f in fields(SourceFlags)]


def _given_as(name: str, make: type, flags: dict):
    """A decorator: the command with ``flags`` as options after its own, given to it as one
    ``make(...)`` in its parameter ``name``."""

    def decorate(command):
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != name]
        added = [
            inspect.Parameter(flag, inspect.Parameter.KEYWORD_ONLY, annotation=kind, default=default)
            for flag, (kind, default) in flags.items()
        ]

        @functools.wraps(command)
        def with_flags(**values):
            group = make(**{flag: values.pop(flag) for flag in flags})
            return command(**values, **{name: group})

        with_flags.__signature__ = signature.replace(parameters=[*own, *added])
        with_flags.__annotations__ = {p.name: p.annotation for p in [*own, *added]}
        return with_flags

    return decorate


run_flags = _given_as("run", RunFlags, FLAGS)
"""``command`` with the run flags as options after its own, given to it as one ``RunFlags`` in
its parameter ``run``."""
judge_flags = _given_as(
    "run",
    RunFlags,
    FLAGS | {"model": (str | None, typer.Option(
        LOCAL, "--model", callback=given, show_default="none: only the judgements made in training",
        help="The model that judges which lessons say the same thing: local (embedded SmolLM2-135M), "
        "openai:MODEL, or fake.",
    ))},
)  # fmt: skip
"""``run_flags`` for a command that needs no model unless one is named (``mas promote``): its
``--model`` says so instead of showing the embedded model as its default."""
source_flags = _given_as("source", SourceFlags, SOURCE_FLAGS)
"""``command`` with the SCENARIO argument and the source flags as options after its own, given
to it as one ``SourceFlags`` in its parameter ``source``."""
