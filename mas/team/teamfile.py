"""Train an autogen team as it was saved: what ``team.dump_component()`` (or AutoGen Studio)
writes, as JSON or YAML.

Stage: rollout (a team file is a scenario's team).

The team's ``AssistantAgent``s are the roles: their names, descriptions, system messages and
tools. For every rollout the team is loaded again from the file, with each agent's system
message replaced by the one mas composes (its own, then its lessons) and every model client
in it (the agents', a selector's) replaced by the run's, so the whole loop (rollouts, a
library per role, eval, ablate, transfer) runs on it unchanged.

Supported: any group chat autogen can load (RoundRobinGroupChat, SelectorGroupChat, Swarm,
...) whose participants are all ``AssistantAgent``s; their tools, workbenches, handoffs,
termination conditions and model contexts load as autogen loads them, once every provider in the
file is found trusted (``mas.providers``: autogen's packages, mas, ``--trust``). A
``FunctionTool`` is rebuilt by running its saved source code: a file with one is code, and loads
only with ``--trust autogen_core.tools.FunctionTool``.
Not supported, refused at load: other participants (a ``UserProxyAgent`` needs a person, a
nested team or a code executor agent has no system message to learn). Changed: streaming is
switched off (mas's wrappers see whole replies), a ``LessonMemory`` in an agent is dropped
(mas puts the lessons in the system message itself), and a team with neither a termination
condition nor ``max_turns`` gets ``max_turns`` = one turn per agent. The saved model clients
are not used: the run's client (``--model`` / ``--model-config``) serves every agent.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import difflib
import hashlib
import importlib
import importlib.util
import inspect
import math
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.teams import BaseGroupChat
from autogen_core import Component, ComponentBase
from autogen_core.models import ChatCompletionClient
from pydantic import BaseModel

from mas import paths
from mas.datasets import Fields, load_jsonl
from mas.errors import UserError
from mas.models.config_file import component, provider_class, read_document
from mas.providers import check, trusted
from mas.team.scenario import EXTRACTORS, REWARDS, Role, Scenario, guess_reward, reward_number
from mas.types.lessons import GLOBAL
from mas.types.tasks import Task

Reward = Callable[[Task, str | None], float]


# -- the run's client, standing in for the saved ones -----------------------------------------

_CLIENT: contextvars.ContextVar[ChatCompletionClient] = contextvars.ContextVar("mas_rollout_client")


class _Empty(BaseModel):
    pass


class RolloutClient(ComponentBase[_Empty], Component[_Empty]):
    """A model client component that loads as the rollout's client (``_using``). The team
    template holds it wherever the file had a model client."""

    component_type = "model"
    component_config_schema = _Empty

    @classmethod
    def _from_config(cls, config: _Empty) -> ChatCompletionClient:  # type: ignore[override]
        return _CLIENT.get()


PLACEHOLDER = {"provider": f"{__name__}.RolloutClient", "component_type": "model", "config": {}}


@contextlib.contextmanager
def _using(client: ChatCompletionClient) -> Iterator[None]:
    token = _CLIENT.set(client)
    try:
        yield
    finally:
        _CLIENT.reset(token)


# -- loading ---------------------------------------------------------------------------------


def load_team(
    path: str | Path,
    *,
    tasks: str | Path,
    reward: str | None = None,
    fields: Fields = Fields(),
    test_file: Path | None = None,
    limit: int | None = None,
    trust: Iterable[str] = (),
) -> Scenario:
    """The scenario of the team in ``path`` on the tasks in ``tasks``, scored by ``reward``: a
    shipped reward's name, ``module:function`` or ``file.py:function`` (None: guessed from the
    answers, as for a bare task file). ``trust``: modules whose providers may load besides
    autogen's and mas's (``--trust``)."""
    path, tasks = Path(path), Path(tasks)
    where = f"--team {path}"
    data = read_document(path, "--team")
    check(data, where, trusted(trust))  # every provider, nested ones too, before any import
    model = component(data, where, "team")
    cls = provider_class(model, where)
    if not (isinstance(cls, type) and issubclass(cls, BaseGroupChat)):
        raise UserError(f"{where}: field 'provider': {model.provider} is not an autogen group chat team")
    template, roles, notes = _template(model.model_dump(mode="json"), where)
    _trial(template, roles, where)
    chosen = _reward(reward)  # a bad --reward is named before the tasks are read
    task_list = load_jsonl(tasks, limit=limit, fields=fields)
    test = load_jsonl(test_file, limit=limit, fields=fields) if test_file else None
    if chosen is None:
        name, why = guess_reward(task_list)
        chosen = (name, None, None, "transcript", f"guessed: {why}; --reward to choose")
    reward_name, reward_fn, extract, answer_from, why = chosen
    description = model.config.get("description") or ""
    if not description or description == "A team of agents.":
        description = f"The autogen team in {path.name}: {', '.join(r.name for r in roles)}."
    if any(
        "FunctionTool" in str(t.get("provider"))
        for a in template["config"]["participants"]
        for t in _tools(a["config"])
    ):
        notes.append("its FunctionTools run the source code saved in the file")
    origin = (
        f"{path}: {cls.__name__} of {', '.join(r.name for r in roles)} on {tasks}; reward {reward_name} ({why})"
        + "".join(f"; {n}" for n in notes)
    )
    return Scenario(
        paths.safe_name(path.stem) or paths.slug(path.stem), roles, task_list, reward_name, test,
        team=lambda messages, client, task: build(template, messages, client), reward_fn=reward_fn,
        extract_fn=extract, description=description, split=f"test file {test_file.name}" if test_file else "",
        origin=origin, answer_from=answer_from,
        sources={"team_file": str(path.resolve()), "team_sha256": hashlib.sha256(path.read_bytes()).hexdigest()},
    )  # fmt: skip


def build(template: dict, system_messages: dict[str, str], client: ChatCompletionClient) -> BaseGroupChat:
    """A new team from ``template`` with mas's system messages and ``client`` in every place
    the file had a model client."""
    data = copy.deepcopy(template)
    for agent in data["config"]["participants"]:
        agent["config"]["system_message"] = system_messages.get(agent["config"]["name"]) or None
    with _using(client), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"(?s).*SECURITY WARNING")  # said once, at load (``origin``)
        return BaseGroupChat.load_component(data)


def _template(data: dict, where: str) -> tuple[dict, list[Role], list[str]]:
    """The team with its model clients replaced and streaming off; its roles; what was changed."""
    config = data["config"]
    participants = config.get("participants")
    if not isinstance(participants, list) or not participants:
        raise UserError(f"{where}: field 'config.participants': a team needs at least one agent")
    roles, notes = [], []
    for i, agent in enumerate(participants):
        roles.append(_role(agent, f"{where}: participant {i}"))
        agent_config = agent["config"]
        schema = provider_class(component(agent, where, "agent"), where).component_config_schema
        notes += _ignored_keys(agent_config, roles[-1].name, list(schema.model_fields))
        agent_config["model_client_stream"] = False
        kept = [m for m in agent_config.get("memory") or [] if not str(m.get("provider", "")).endswith("LessonMemory")]
        if len(kept) != len(agent_config.get("memory") or []):
            notes.append(f"the LessonMemory of {agent_config['name']} is left out (mas injects the lessons)")
        agent_config["memory"] = kept or None
    names = [r.name for r in roles]
    if len(set(names)) != len(names):
        raise UserError(f"{where}: two participants are both named {_first_twice(names)!r}")
    if "model_client_streaming" in config:
        config["model_client_streaming"] = False
    if not config.get("termination_condition") and not config.get("max_turns"):
        config["max_turns"] = len(roles)
        notes.append(f"no termination condition or max_turns: max_turns set to {len(roles)}")
    return _replace_clients(data), roles, notes


def _role(agent: object, where: str) -> Role:
    if not isinstance(agent, dict) or not isinstance(agent.get("config"), dict):
        raise UserError(f"{where}: not a component (expected 'provider' and 'config')")
    cls = provider_class(component(agent, where, "agent"), where)
    config = agent["config"]
    name = config.get("name")
    if not (isinstance(cls, type) and issubclass(cls, AssistantAgent)):
        raise UserError(
            f"{where} ({name}): {cls.__name__} is not supported: every participant must be an AssistantAgent "
            "(its system message is what mas trains)"
        )
    if not isinstance(name, str) or paths.safe_name(name) is None or name == GLOBAL:
        raise UserError(f"{where}: field 'name': {name!r} cannot name a role (letters, digits, '_', not 'global')")
    prompt = config.get("system_message") or ""
    description = str(config.get("description") or "").strip() or (prompt.strip().splitlines() or [name])[0]
    docs = {}
    for tool in _tools(config):
        tool_config = tool.get("config") or {}
        tool_name = str(tool_config.get("name") or tool.get("label") or "tool")
        docs[tool_name] = str(tool_config.get("description") or tool.get("description") or tool_name)
    return Role(name=name, description=description, system_prompt=prompt, tools=list(docs), tool_docs=docs)


def _ignored_keys(agent_config: dict, name: str, known: list[str]) -> list[str]:
    """What autogen would silently drop from an agent's config (``known``: its class's fields): a
    hand-edited ``system_messag`` left the role with no prompt at all, and nothing said so. A note,
    not a refusal: a file saved by a newer autogen may hold fields this one does not know."""
    said = []
    for key in [k for k in agent_config if k not in known]:
        close = difflib.get_close_matches(key, known, n=1)
        said.append(f"{name}'s config has {key!r}, which autogen ignores" + (f" ({close[0]}?)" if close else ""))
    return said


def _tools(agent_config: dict) -> list[dict]:
    """The tool components of an agent, from its workbenches and its (older) ``tools`` list."""
    found = [t for t in agent_config.get("tools") or [] if isinstance(t, dict)]
    for bench in agent_config.get("workbench") or []:
        if isinstance(bench, dict):
            found += [t for t in (bench.get("config") or {}).get("tools") or [] if isinstance(t, dict)]
    return found


def _replace_clients(value: object, key: str = "") -> object:
    """``value`` with every model client component (``model_client`` or a component of type
    ``model``) replaced by ``PLACEHOLDER``."""
    if isinstance(value, dict):
        if "provider" in value and (key == "model_client" or value.get("component_type") == "model"):
            return dict(PLACEHOLDER)
        return {k: _replace_clients(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_clients(v, key) for v in value]
    return value


def _trial(template: dict, roles: list[Role], where: str) -> None:
    """Load the team once now, so a bad file fails here and not in every rollout."""
    from mas.models.fake import FakeClient

    try:
        build(template, {r.name: r.system_prompt for r in roles}, FakeClient())
    except UserError:
        raise
    except Exception as exc:  # whatever autogen (or a tool's saved source) raises
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(f"{where}: autogen cannot load this team: {type(exc).__name__}: {first}") from None


def _first_twice(names: list[str]) -> str:
    return next(n for i, n in enumerate(names) if n in names[:i])


# -- rewards ---------------------------------------------------------------------------------


def _reward(spec: str | None):
    """(name, function, extractor, what it reads, why) for ``--reward``; None to guess."""
    if spec is None:
        return None
    if spec in REWARDS:
        return spec, None, EXTRACTORS[spec], "transcript", "a shipped reward, on the answer its extractor reads"
    return spec, load_reward(spec), final_answer, "final", "yours, given the team's final message"


def load_reward(spec: str) -> Reward:
    """``module:function`` (a module on the import path: mas never adds the working directory
    to it) or ``path.py:function``: a function ``(task, answer) -> float``."""
    module_name, _, attr = spec.rpartition(":")
    if not module_name or not attr:
        known = ", ".join(REWARDS)
        raise UserError(f"--reward {spec!r}: expected a shipped reward ({known}), module:function or file.py:function")
    try:
        if module_name.endswith(".py"):
            file = Path(module_name)
            if not file.is_file():
                raise UserError(f"--reward {spec!r}: {file}: no such file")
            loader = importlib.util.spec_from_file_location(f"mas_reward_{file.stem}", file)
            module = importlib.util.module_from_spec(loader)
            loader.loader.exec_module(module)
        else:
            if importlib.util.find_spec(module_name.partition(".")[0]) is None:
                hint = f"; a file of yours: --reward {module_name.replace('.', '/')}.py:{attr}"
                raise UserError(f"--reward {spec!r}: no module {module_name!r} on the import path{hint}")
            module = importlib.import_module(module_name)
    except UserError:
        raise
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise UserError(f"--reward {spec!r}: cannot load {module_name} ({type(exc).__name__}: {first})") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise UserError(f"--reward {spec!r}: {module_name} has no function {attr!r}")
    try:
        inspect.signature(fn).bind(None, None)
    except (TypeError, ValueError):
        raise UserError(f"--reward {spec!r}: {attr} must take (task, answer) and return a number") from None
    return _checked(fn, spec)


def _checked(fn: Reward, spec: str) -> Reward:
    """``fn`` whose result must be a number: anything else stops the run with a ``UserError``."""

    def reward(task: Task, answer: str | None) -> float:
        on = f"(task {task.id!r})"  # which task: a reward that fails on some answers only is found by it
        try:
            value = fn(task, answer)
        except Exception as exc:
            first = str(exc).splitlines()[0] if str(exc) else ""
            raise UserError(f"--reward {spec!r} raised {type(exc).__name__}: {first} {on}") from None
        number = reward_number(value)  # a bool or a numpy number too, as a custom_scenario's reward
        if number is None:
            raise UserError(f"--reward {spec!r} returned {type(value).__name__}, expected a number {on}")
        if not math.isfinite(number):
            raise UserError(f"--reward {spec!r} returned {number}, expected a finite number {on}")
        return number

    return reward


def final_answer(text: str) -> str | None:
    """The team's final message, without autogen's closing ``TERMINATE``."""
    text = text.strip()
    if text.endswith("TERMINATE"):
        text = text[: -len("TERMINATE")].rstrip()
    return text or None
