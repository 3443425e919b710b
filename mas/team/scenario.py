"""Scenarios and roles, loaded from data files.

Stage: rollout and reward (a scenario's roles, tasks and reward).

A scenario is a folder with a ``scenario.toml`` (its roles, task file and reward) or, for a
quick start, any JSONL file of ``id``/``question``/``answer`` records, which gets the team and
reward of the shipped scenario it looks like. Roles are TOML files; a scenario may override one
with its own ``roles/NAME.toml``. Both are looked up in the user's folders first, then among
the shipped ones (``mas.paths``).
"""

from __future__ import annotations

import hashlib
import math
import string
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from autogen_agentchat.teams import BaseGroupChat
from autogen_core.models import ChatCompletionClient
from pydantic import Field, ValidationError, field_validator

from mas import paths
from mas.datasets import Fields, load_jsonl
from mas.domains.maths import extract_answer, numeric_reward
from mas.domains.qa import extract_answer as qa_extract
from mas.domains.qa import qa_reward
from mas.domains.symbolic import extract_latex, symbolic_reward
from mas.errors import UserError
from mas.library.edits import strip_lesson_ids
from mas.tools import TOOLS, isolation
from mas.types.base import Frozen, first_error
from mas.types.lessons import GLOBAL
from mas.types.rollouts import Rollout
from mas.types.tasks import Task

REWARDS: dict[str, Callable[[Task, str | None], float]] = {
    "numeric": lambda task, got: numeric_reward(task.answer or "", got),
    "symbolic": symbolic_reward,
    "qa": qa_reward,
}
"""Reward functions by the name a scenario.toml gives; each scores an answer against a task."""
EXTRACTORS: dict[str, Callable[[str], str | None]] = {
    "numeric": extract_answer,
    "symbolic": extract_latex,
    "qa": qa_extract,
}
"""How the team's answer is read off its transcript, by reward name."""


class Role(Frozen):
    name: str
    description: str
    system_prompt: str
    tools: list[str] = []
    tool_rounds: int = Field(1, ge=1, le=8)
    """Model calls that may request tools in one turn."""
    reflect: bool = True
    """After its tool calls, one more model call writes the turn's message; when false the
    message is ``tool_summary`` filled with each call's result."""
    tool_summary: str = "{result}"
    """Filled by autogen with ``{tool_name}``, ``{arguments}``, ``{result}`` and ``{is_error}``."""
    tool_docs: dict[str, str] = {}
    """What each tool does, for tools that are not mas's own (an autogen team file's)."""

    @field_validator("tools")
    @classmethod
    def _distinct(cls, tools: list[str]) -> list[str]:
        return _unique(tools, "tool")

    @field_validator("tool_summary")
    @classmethod
    def _fields(cls, text: str) -> str:
        """Only autogen's four fields, by plain name: a format string reaches attributes
        (``{result.__class__}``), and an unknown field fails every rollout."""
        known = ", ".join(SUMMARY_FIELDS)
        try:
            names = [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
        except ValueError as exc:
            raise ValueError(f"not a format string ({exc})") from None
        unknown = [n for n in names if n not in SUMMARY_FIELDS]
        if unknown:
            raise ValueError(f"unknown field {{{unknown[0]}}} (known: {known})")
        try:
            text.format(**dict.fromkeys(SUMMARY_FIELDS, ""))
        except ValueError as exc:  # a bad conversion or format spec
            raise ValueError(f"not a format string of {known} ({exc})") from None
        return text


SUMMARY_FIELDS = ("tool_name", "arguments", "result", "is_error")


def _unique(names: list[str], what: str) -> list[str]:
    repeated = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if repeated is not None:
        raise ValueError(f"{what} {repeated!r} is named twice")
    return names


class ScenarioFile(Frozen):
    name: str
    description: str = ""
    roles: list[str] = Field(min_length=1)
    tasks: str
    test_tasks: str | None = None
    reward: str

    @field_validator("roles")
    @classmethod
    def _distinct(cls, roles: list[str]) -> list[str]:
        return _unique(roles, "role")


TeamFactory = Callable[[dict[str, str], ChatCompletionClient, Task], BaseGroupChat]
"""``factory(system_messages, client, task)`` -> a new autogen team whose agents are named
after the roles and use ``system_messages[role]`` as their system message."""


REWARD_MAX = 1e100
"""The largest reward taken, either sign: the sums and squares of a group's statistics stay finite."""
HELD_OUT = 0.2
"""Share of a task file set apart for evaluation when no test file is given."""


def held_out(task_id: str, share: float = HELD_OUT) -> bool:
    """Whether a task is held out: decided by a hash of its id alone, so the split is the
    same on every machine, in every run, and whatever order or subset of the file is read."""
    return int(hashlib.sha256(f"held-out/{task_id}".encode()).hexdigest()[:8], 16) < share * 16**8


def reward_number(value: object) -> float | None:
    """A reward as a float (a bool or a numpy number too); None for what is not a number."""
    if isinstance(value, (str, bytes)):
        return None
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class Scenario:
    """A team and its tasks: the roles (each with its own library), the training and held-out
    tasks, and how an answer is read and rewarded. Made by ``load_scenario`` (a shipped name, a
    folder, a task file), ``custom_scenario`` (your own autogen team) or ``load_team`` (an
    autogen team file); passed to ``mas.train``, ``mas.evaluate`` and the studies."""

    name: str
    roles: list[Role]
    tasks: list[Task]
    """Training tasks."""
    reward_name: str
    test_tasks: list[Task] | None = None
    """Held-out tasks for evaluation. None: the tasks are split by a hash of their ids
    (``held_out``), and ``tasks`` keeps the training part."""
    team: TeamFactory | None = None
    """Your own team (see ``custom_scenario``); None builds one from the roles' data."""
    reward_fn: Callable[[Task, str | None], float] | None = None
    extract_fn: Callable[[str], str | None] | None = None
    description: str = ""
    """What the team does, for the learning prompts."""
    split: str = ""
    """How the held-out tasks were set apart (recorded with the run and the library)."""
    origin: str = ""
    """How the team and reward were chosen when mas guessed or mapped them (a bare task file,
    an autogen team file): the CLI prints it."""
    sources: dict[str, str] = field(default_factory=dict)
    """Files the scenario was built from and their digests, recorded in run.json."""
    answer_from: Literal["transcript", "final"] = "transcript"
    """What the extractor reads: the whole transcript, or the team's final message only."""

    def __post_init__(self) -> None:
        if self.test_tasks is None:
            object.__setattr__(self, "test_tasks", [t for t in self.tasks if held_out(t.id)])
            object.__setattr__(self, "tasks", [t for t in self.tasks if not held_out(t.id)])
            object.__setattr__(self, "split", f"hash of the task id, {HELD_OUT:.0%} held out")

    def __repr__(self) -> str:
        """Short: the generated one printed every task, and a scenario of a thousand tasks
        filled the screen when a user only wanted to see what they had made."""
        return (
            f"Scenario({self.name!r}, roles={self.role_names}, tasks={len(self.tasks)}, "
            f"held_out={len(self.held_out)}, reward={self.reward_name!r})"
        )

    def reward(self, task: Task, answer: str | None) -> float:
        return (self.reward_fn or REWARDS[self.reward_name])(task, answer)

    def score(self, task: Task, rollout: Rollout) -> float:
        """A rollout's reward: 0 when it failed, or when there is no answer to compare with. One
        that is not a finite number (a ``custom_scenario``'s own reward) stops the run here: NaN
        stopped it later, in the group's statistics, after the step's learning calls were paid for;
        so does one beyond ``REWARD_MAX`` (1e308 overflowed the group's mean), and one that is not a
        number at all (None, a string: it failed in ``math.isfinite`` with a traceback)."""
        if rollout.error or task.answer is None:
            return 0.0
        got = self.reward(task, rollout.answer)
        value = reward_number(got)
        if value is None:
            raise UserError(f"the reward of task {task.id!r} is {got!r} ({type(got).__name__}), expected a number")
        if not (math.isfinite(value) and abs(value) <= REWARD_MAX):
            raise UserError(
                f"the reward of task {task.id!r} is {value}, expected a finite number within +-{REWARD_MAX:g}"
            )
        return value

    def extract(self, transcript: str) -> str | None:
        """The team's answer; lesson ids a role wrote are removed first, so they can never
        become or change an answer."""
        return (self.extract_fn or EXTRACTORS[self.reward_name])(
            strip_lesson_ids(transcript, [GLOBAL, *self.role_names])
        )

    def role(self, name: str) -> Role:
        for role in self.roles:
            if role.name == name:
                return role
        raise UserError(f"unknown role {name!r} (scenario {self.name} has {', '.join(self.role_names)})")

    @property
    def held_out(self) -> list[Task]:
        return self.test_tasks or []

    @property
    def role_names(self) -> list[str]:
        return [r.name for r in self.roles]


def custom_scenario(
    name: str,
    *,
    roles: dict[str, str],
    team: TeamFactory,
    tasks: list[Task],
    reward: Callable[[Task, str | None], float],
    extract: Callable[[str], str | None] = extract_answer,
    test_tasks: list[Task] | None = None,
    description: str = "",
) -> Scenario:
    """Bring your own team: ``roles`` maps each role (agent name) to its base system prompt;
    mas appends the role's lessons and hands the results to ``team`` for every rollout.
    Without ``test_tasks``, a fifth of ``tasks`` is held out by a hash of their ids. ``extract``
    reads the answer off the team's transcript (default: the last number, for maths).

    Every argument is checked here, each fault a ``UserError`` naming it, and ``team`` is called
    once with the roles' prompts and a fake client: a team whose agents do not carry the roles'
    names trained a library per role that no agent ever read, and a factory that fails did so
    in every rollout, each counted as a failed rollout."""
    if paths.safe_name(name) is None:
        raise UserError(f"name: {name!r} is not a name (letters, digits, '-', '_' and '.', up to 64)")
    made = [Role(name=n, description=_described(n, prompt), system_prompt=prompt) for n, prompt in _roles(roles)]
    for argument, value in (("team", team), ("reward", reward), ("extract", extract)):
        if not callable(value):
            raise UserError(f"{argument}: expected a function, got {type(value).__name__} {value!r}")
    train_list = _tasks(tasks, "tasks")
    test_list = _tasks(test_tasks, "test_tasks") if test_tasks is not None else None
    trained = {t.id for t in train_list}
    for i, task in enumerate(test_list or []):
        if task.id in trained:
            raise UserError(f"test_tasks[{i}]: task {task.id!r} is also in tasks (held-out tasks are never trained on)")
    _trial_team(team, roles, (train_list or test_list or [Task(id="trial", question="")])[0])
    return Scenario(
        name, made, train_list, "custom", test_list, team, reward, extract, description,
        split="given test tasks" if test_list is not None else "",
    )  # fmt: skip


def _roles(roles: object) -> list[tuple[str, str]]:
    """``custom_scenario``'s roles, checked: each name becomes an autogen agent's name (a Python
    identifier) and a library's (a file-safe name other than the shared library's)."""
    if not isinstance(roles, dict) or not roles:
        raise UserError(f"roles: expected a dict of role name to system prompt, got {roles!r}")
    for role, prompt in roles.items():
        if not (isinstance(role, str) and role.isidentifier() and paths.safe_name(role)):
            raise UserError(f"roles: {role!r} is not a role name (an agent name: letters, digits and '_')")
        if role == GLOBAL:
            raise UserError(f"roles: {role!r} is the name of the library every role shares; choose another")
        if not isinstance(prompt, str):
            raise UserError(
                f"roles[{role!r}]: expected the role's system prompt (a string), got {type(prompt).__name__}"
            )
    return list(roles.items())


def _described(name: str, prompt: str) -> str:
    return prompt.strip().splitlines()[0] if prompt.strip() else name


def _tasks(tasks: object, argument: str) -> list[Task]:
    """``custom_scenario``'s tasks: ``mas.Task``s or dicts of their fields, with distinct ids (the
    journal, the evidence and the held-out split key everything by task id)."""
    if isinstance(tasks, (str, bytes, dict)) or not isinstance(tasks, Iterable):
        raise UserError(f"{argument}: expected a list of mas.Task, got {type(tasks).__name__}")
    out: list[Task] = []
    for i, task in enumerate(tasks):
        if isinstance(task, dict):
            try:
                task = Task.model_validate(task)
            except ValidationError as exc:
                where, said = first_error(exc, f"{argument}[{i}]")
                raise UserError(f"{where}: {said}") from None
        if not isinstance(task, Task):
            raise UserError(f"{argument}[{i}]: expected a mas.Task, got {type(task).__name__}")
        out.append(task)
    seen: set[str] = set()
    for i, task in enumerate(out):
        if task.id in seen:
            raise UserError(f"{argument}[{i}]: task id {task.id!r} is used twice")
        seen.add(task.id)
    return out


def _trial_team(team: TeamFactory, roles: dict[str, str], task: Task) -> None:
    """Build the team once, as a rollout does, and check that every role is an agent of it."""
    from mas.models.fake import FakeClient

    try:
        built = team(dict(roles), FakeClient(), task)
    except Exception as exc:  # the user's own code: its traceback stays attached as the cause
        raise UserError(f"team: building the team failed: {type(exc).__name__}: {exc}") from exc
    if not hasattr(built, "run_stream"):
        raise UserError(f"team: expected an autogen team (such as a RoundRobinGroupChat), got {type(built).__name__}")
    names = _agent_names(built)
    missing = [r for r in roles if r not in names]
    if missing:
        raise UserError(
            f"team: no agent is named {missing[0]!r} (the team's agents: {', '.join(sorted(names))}); "
            "each role of roles is the name of the agent that gets its system message"
        )


def _agent_names(team: object) -> set[str]:
    """The names of a team's agents, those of nested teams too (a single agent: its own)."""
    participants = getattr(team, "_participants", None)
    if participants is None:
        return {str(getattr(team, "name", ""))}
    return {name for p in participants for name in {str(getattr(p, "name", "")), *_agent_names(p)}}


def load_scenario(
    name_or_path: str, *, limit: int | None = None, test_file: Path | None = None, fields: Fields = Fields()
) -> Scenario:
    """``maths`` (a folder in scenarios/), a folder path, or a ``.jsonl`` file path. Held-out
    tasks come from ``test_file``, else from the scenario's own test file, else from a hash
    split of the tasks. ``fields`` names the question and answer fields of the task files."""
    path = Path(name_or_path)
    if path.suffix == ".jsonl":
        return _from_jsonl(path, limit, test_file, fields)
    named = paths.safe_name(name_or_path)
    spec_path = (
        path / "scenario.toml"
        if path.is_dir()
        else named and _first(d / named / "scenario.toml" for d in paths.search_path("scenarios"))
    )
    if not spec_path or not spec_path.is_file():
        folders = [path] if path.is_dir() else [d / named for d in paths.search_path("scenarios")] if named else []
        bare = next((f for f in folders if f.is_dir()), None)
        if bare is not None:  # the folder is there: what it lacks says more than the list of scenarios
            raise UserError(
                f"unknown scenario {name_or_path!r}: {bare} has no scenario.toml (its name, roles, tasks and reward)"
            )
        known = sorted(
            {
                p.name
                for d in paths.search_path("scenarios")
                if d.is_dir()
                for p in d.iterdir()
                if (p / "scenario.toml").is_file()
            }
        )
        raise UserError(
            f"unknown scenario {name_or_path!r}: expected one of {', '.join(known)}, a folder or a .jsonl file"
        )
    spec = _validated(ScenarioFile, _toml(spec_path), spec_path)
    if paths.safe_name(spec.name) is None:  # it names the library file and the run folder
        raise UserError(
            f"{spec_path}: field 'name': {spec.name!r} is not a name (letters, digits, '-', '_' and '.', up to 64)"
        )
    if not path.is_dir() and spec.name != name_or_path:  # found by its folder's name
        # A copied folder whose name was left as it was trained into the other scenario's library.
        raise UserError(
            f"{spec_path}: field 'name' is {spec.name!r}, expected {name_or_path!r} (the folder's name, "
            "which mas train and mas library look it up by)"
        )
    if spec.reward not in REWARDS:
        raise UserError(f"{spec_path}: field 'reward': unknown reward {spec.reward!r} (known: {', '.join(REWARDS)})")
    folder = spec_path.parent
    roles = [load_role(r, source=spec_path, local=folder / "roles") for r in spec.roles]
    tasks = load_jsonl(folder / spec.tasks, limit=limit, fields=fields)
    test_path = test_file or (folder / spec.test_tasks if spec.test_tasks else None)
    test = load_jsonl(test_path, limit=limit, fields=fields) if test_path else None
    if test and not test_file:  # the pack's own pair of files; --test-file is checked against the library
        _apart(tasks, test, folder / spec.tasks, test_path)
    return Scenario(
        spec.name, roles, tasks, spec.reward, test, description=spec.description or spec.name,
        split=f"test file {test_path.name}" if test_path else "",
    )  # fmt: skip


def _apart(tasks: list[Task], test: list[Task], tasks_path: Path, test_path: Path) -> None:
    """Refuse a test task that is also a training task: trained on, it was refused only at ``mas
    eval``, after the training it spoilt."""
    trained = {t.id for t in tasks}
    both = next((t.id for t in test if t.id in trained), None)
    if both is not None:
        raise UserError(
            f"{test_path}: task {both!r} is also in {tasks_path.name} (held-out tasks are never trained on)"
        )


def _from_jsonl(path: Path, limit: int | None, test_file: Path | None, fields: Fields) -> Scenario:
    """A task file gets the team and reward of the shipped scenario it looks like: passages
    mean multi-hop QA, numeric answers mean maths, other answers are compared symbolically."""
    tasks = load_jsonl(path, limit=limit, fields=fields)
    if any(t.passages for t in tasks):
        template, reward, why = "multihop", "qa", "it has passages"
    else:
        reward, why = guess_reward(tasks)
        template = "maths"
    like = load_scenario(template, limit=1)
    test = load_jsonl(test_file, limit=limit, fields=fields) if test_file else None
    origin = f"{path}: {why}, so the {template} team ({', '.join(like.role_names)}) and the {reward} reward"
    return Scenario(
        paths.safe_name(path.stem) or paths.slug(path.stem), like.roles, tasks, reward, test,
        description=like.description, split=f"test file {test_file.name}" if test_file else "", origin=origin,
    )  # fmt: skip


def guess_reward(tasks: list[Task]) -> tuple[str, str]:
    """``numeric`` when every answer is a number, else ``symbolic``; and why, in words."""
    if all(numeric_reward(t.answer or "", t.answer) == 1.0 for t in tasks):
        return "numeric", "every answer is a number"
    return "symbolic", "not every answer is a number"


def load_role(name: str, *, source: Path | None = None, local: Path | None = None) -> Role:
    """The scenario's own ``roles/NAME.toml`` when it has one, else the user's, else the shipped one."""
    folders = ([local] if local else []) + paths.search_path("roles")
    where = f"{source}: field 'roles'" if source else "role"
    if not role_name(name):  # refused here: autogen refused it in the first rollout, with a traceback
        raise UserError(f"{where}: {name!r} cannot name a role ({ROLE_NAMES})")
    path = _first(d / f"{name}.toml" for d in folders)
    if not path:
        raise UserError(f"{where}: unknown role {name!r} (no {name}.toml in {', '.join(map(str, folders))})")
    role = _validated(Role, _toml(path), path)
    for tool in role.tools:
        if tool not in TOOLS:
            raise UserError(f"{path}: field 'tools': unknown tool {tool!r} (known: {', '.join(TOOLS)})")
    if role.name != name:
        raise UserError(f"{path}: field 'name' is {role.name!r}, expected {name!r} (the file name)")
    if "python" in role.tools:
        try:
            isolation.require()
        except UserError as exc:
            raise UserError(f"{path}: {exc}") from None
    return role


ROLE_NAMES = "an agent's name: letters, digits and '_', not starting with a digit; not 'global'"


def role_name(name: str) -> bool:
    """Whether ``name`` can name a role: it is an autogen agent's name (a Python identifier),
    a library's file name, and not the library every role shares."""
    return name.isidentifier() and paths.safe_name(name) is not None and name != GLOBAL


def _first(candidates: Iterable[Path]) -> Path | None:
    """The first candidate that exists. One that exists but is not a regular file (a folder, a
    FIFO) is refused, naming it: skipping it would silently use the next, the shipped file."""
    return next((paths.regular_file(c) for c in candidates if c.exists()), None)


def _toml(path: Path) -> dict:
    try:
        # A BOM is allowed, as in task files: Windows editors write one, and TOML refused it as a bad statement.
        return tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 (byte {exc.start + 1})") from None
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise UserError(f"{path}: not valid TOML ({exc})") from None


def _validated(model, data: dict, path: Path):
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        unknown = [e["loc"][0] for e in exc.errors() if e["type"] == "extra_forbidden" and len(e["loc"]) == 1]
        if unknown:  # a misspelt key is named first: "Field required" for the right one hid the typo
            known = ", ".join(model.model_fields)
            raise UserError(f"{path}: field '{unknown[0]}': not a field of this file (known: {known})") from None
        field, said = first_error(exc)
        raise UserError(f"{path}: field '{field}': {said}") from None
