"""Where a command's team, tasks and models come from, for ``train``, ``eval``, ``ablate`` and
``transfer``: a scenario, a bare task file or an autogen team file; a ``--model`` spec or
autogen model config files (``--model-config``, ``--learner-config``).

Stage: none: the command line.

Everything here is read and checked before a command writes anything: a bad file is a
``UserError`` naming it (and its field), so the command ends with one line and exit code 2.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mas.errors import UserError
from mas.tools import isolation

if TYPE_CHECKING:  # imported where used: declaring the commands must stay fast
    from autogen_core.models import ChatCompletionClient

    from mas.datasets import Fields
    from mas.models.config_file import Configured
    from mas.team.scenario import Scenario

ScenarioArg = Annotated[
    str | None,
    typer.Argument(
        metavar="SCENARIO",
        help="A scenario (maths, multihop, a folder) or a .jsonl file (with --team: the tasks).",
        show_default=False,
    ),
]
Team = Annotated[
    Path | None,
    typer.Option(
        "--team",
        help="An autogen team file (what team.dump_component() or AutoGen Studio writes; JSON or YAML): "
        "its AssistantAgents are the roles.",
        show_default=False,
    ),
]
TasksFile = Annotated[
    Path | None, typer.Option("--tasks-file", help="The tasks of --team (JSONL); or give them as SCENARIO.")
]
Reward = Annotated[
    str | None,
    typer.Option(
        "--reward",
        help="With --team: numeric, symbolic, qa, or module:function / file.py:function taking (task, answer) "
        "and returning a number (given the team's final message).",
        show_default="guessed from the answers",
    ),
]
QuestionField = Annotated[str, typer.Option("--question-field", help="The question's field in task files.")]
AnswerField = Annotated[
    str, typer.Option("--answer-field", help="The answer's field in task files (a \\boxed{} solution is read).")
]
UnsafePython = Annotated[
    bool,
    typer.Option(
        "--unsafe-python-tool",
        help=f"Run the python tool without isolation (no bubblewrap needed; same as {isolation.UNSAFE_ENV}=1): "
        "model-written code can read, write and reach whatever you can.",
    ),
]
ModelConfig = Annotated[
    Path | None,
    typer.Option(
        "--model-config",
        help="An autogen model client config (what client.dump_component() writes; JSON or YAML), in place of --model.",
        show_default=False,
    ),
]
LearnerConfig = Annotated[
    Path | None,
    typer.Option(
        "--learner-config",
        help="A model config for the learning calls (summaries, advantages, edits).",
        show_default="the team's model",
    ),
]
Trust = Annotated[
    list[str] | None,
    typer.Option(
        "--trust",
        metavar="MODULE",
        help="A module whose classes --team and model config files may name (its submodules too), besides "
        "autogen's and mas's; repeatable, or MAS_TRUST=a,b. Files naming other modules are refused before any "
        "import. autogen classes that run what a file names need naming too: autogen_core.tools.FunctionTool, "
        "autogen_ext.tools.mcp, autogen_ext.code_executors.",
        show_default=False,
    ),
]
Reasoning = Annotated[
    bool | None,
    typer.Option(
        "--reasoning/--no-reasoning",
        help="Treat the model as a reasoning model (max_completion_tokens, no temperature) or not.",
        show_default="by the model's name",
    ),
]


def scenario_from(
    arg: str | None,
    *,
    team: Path | None,
    tasks_file: Path | None,
    reward: str | None,
    fields: Fields,
    test_file: Path | None = None,
    say: Callable[[str], None] | None = print,
    trust: list[str] | None = None,
) -> Scenario:
    """The scenario a command was given; ``say`` (when given) is told how mas chose a team or
    reward."""
    from mas.team.scenario import load_scenario

    if team is None:
        if tasks_file is not None or reward is not None:
            raise UserError(f"{'--tasks-file' if tasks_file is not None else '--reward'} goes with --team")
        if arg is None:
            raise UserError("Missing argument 'SCENARIO' (a scenario, a .jsonl file, or --team with --tasks-file)")
        spec = load_scenario(arg, test_file=test_file, fields=fields)
    else:
        if arg is not None and tasks_file is not None:
            raise UserError("--team: give the tasks once, as SCENARIO or as --tasks-file")
        tasks = tasks_file or (Path(arg) if arg is not None else None)
        if tasks is None or tasks.suffix != ".jsonl":
            raise UserError("--team needs its tasks as a .jsonl file: give it as SCENARIO or as --tasks-file")
        from mas.team.teamfile import load_team  # autogen's loaders: only for a team file

        spec = load_team(team, tasks=tasks, reward=reward, fields=fields, test_file=test_file, trust=trust or ())
        if spec.reward_fn is not None:
            _try_reward(spec)
    if spec.origin and say is not None:
        say(spec.origin)
    if not spec.held_out and say is not None:
        say(f"{arg if arg is not None else tasks_file}: {_NONE_HELD_OUT}")
    return spec


_NONE_HELD_OUT = (
    "no task is held out for mas eval (a fifth of the tasks, by a hash of each id, came to none): "
    "give a test file (--test-file)"
)
"""Said before training: with a handful of tasks, ``mas eval`` after it had nothing to score."""


def _try_reward(spec: Scenario) -> None:
    """Score the first task's own answer with the user's reward, now: one that raises or returns
    no number stopped the run at its first scored rollout, after that step's model calls were paid
    and its run folder written."""
    task = next((t for t in [*spec.tasks, *spec.held_out] if t.answer is not None), None)
    if task is not None:
        spec.reward(task, task.answer)


@dataclass
class Models:
    """The clients of a command: the team's, and the learner's when it has its own."""

    spec: str
    label: str
    """The model's name in run.json and the price table (``openai:gpt-4o-mini``)."""
    team: Configured | None = None
    learner: Configured | None = None
    loading: dict = field(default_factory=dict)
    """How the config files were loaded (``load_model_config``'s options): a Ray worker loads
    the team's the same way."""

    @contextlib.asynccontextmanager
    async def open(self, **spec_options) -> AsyncIterator[tuple[ChatCompletionClient, ChatCompletionClient | None]]:
        """``(client, learner)``; ``spec_options`` go to ``open_client`` when there is no config."""
        from mas.models.clients import open_client, stopped_if_misconfigured

        async with contextlib.AsyncExitStack() as stack:
            for configured in (self.team, self.learner):
                if configured is not None:  # closed on the way out; a setup that fails every call stops the command
                    await stack.enter_async_context(stopped_if_misconfigured(configured.client))
            client = self.team.client if self.team else await stack.enter_async_context(
                open_client(self.spec, **spec_options)
            )  # fmt: skip
            yield client, self.learner.client if self.learner else None

    @contextlib.asynccontextmanager
    async def executor(self, scenario: Scenario, config, **spec_options) -> AsyncIterator[object | None]:
        """Where the rollouts run, as ``config.executor`` says: None for ``local``, else a started
        ``RayExecutor`` whose workers open the team's client as ``open`` does here."""
        self.check_executor(config)
        if config.executor == "local":
            yield None
            return
        from mas.executors.ray_driver import RayExecutor

        opener = self.opener(**spec_options)
        async with RayExecutor(
            scenario, opener, address=config.ray_address, workers=config.workers, concurrency=config.concurrency
        ) as executor:
            yield executor

    def check_executor(self, config) -> None:
        """Refuse now, before anything is written, what ``executor`` would: Ray's options without
        ``ray``, Ray not installed, or a model no worker can reach."""
        if config.executor == "local":
            if config.ray_address is not None or config.workers is not None:
                raise UserError(f"{'--ray-address' if config.ray_address else '--workers'} goes with --executor ray")
            return
        from mas.executors.ray_driver import EXTRA

        if importlib.util.find_spec("ray") is None:
            raise UserError(f"--executor ray needs Ray: {EXTRA}")
        if self.team is None and self.spec == "local":
            raise UserError(
                "--executor ray: the embedded model serves this process only; give an endpoint every worker "
                "can reach (--model openai:MODEL with --base-url, or --model-config)"
            )

    def opener(self, *, base_url=None, api_key=None, **limits):
        """The team's client as a worker on another machine opens it: a picklable function
        (``mas.executors.ray_worker.Opener``) with the base URL and key resolved here."""
        if self.team is not None:
            from mas.models.config_file import open_model_config, read_document

            document = read_document(self.team.path, "--model-config")
            return functools.partial(open_model_config, self.team.path, data=document, **self.loading)
        from mas.models.clients import open_client

        base_url = base_url or os.environ.get("MAS_BASE_URL")
        api_key = api_key or os.environ.get("OPENAI_API_KEY")
        return functools.partial(open_client, self.spec, base_url=base_url, api_key=api_key, **limits)


def models(
    spec: str,
    *,
    model_config: Path | None,
    learner_config: Path | None = None,
    reasoning: bool | None = None,
    call_timeout: float | None = None,
    retries: int | None = None,
    trust: list[str] | None = None,
) -> Models:
    """Read and check the model config files now (before anything is written)."""
    from mas.models.config_file import load_model_config

    limits = {k: v for k, v in (("call_timeout", call_timeout), ("retries", retries)) if v is not None}
    limits["trust"] = trust or ()
    if model_config is not None and spec != "local":
        raise UserError("give --model or --model-config, not both")
    team = load_model_config(model_config, reasoning=reasoning, **limits) if model_config else None
    learner = (
        load_model_config(learner_config, flag="--learner-config", reasoning=reasoning, **limits)
        if learner_config
        else None
    )
    return Models(spec, team.label if team else spec, team, learner, loading={"reasoning": reasoning, **limits})
