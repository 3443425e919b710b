"""The team: built fresh for every rollout from role data, run, and split into role traces.

Stage: rollout (and the prompt each role is shown in it).

Nothing is shared between rollouts but the model client: agents, termination and the group
chat keep state, and a team that errored or was cancelled stays broken, so each rollout gets
its own and throws it away.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any, NamedTuple

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.base import TaskResult
from autogen_agentchat.messages import (
    BaseChatMessage,
    ToolCallExecutionEvent,
    ToolCallRequestEvent,
)
from autogen_agentchat.teams import BaseGroupChat, RoundRobinGroupChat
from autogen_core import CancellationToken
from autogen_core.models import ChatCompletionClient

from mas.library.exposure import RoleExposure
from mas.library.inject import role_block
from mas.library.store import LibraryStore
from mas.meter import Meter
from mas.models.wrappers import QUEUED, Queued, Seeded
from mas.team.scenario import Role, Scenario
from mas.tools import TOOLS
from mas.types.lessons import Budget, Version
from mas.types.rollouts import RoleTrace, Rollout, ToolCall, Turn
from mas.types.tasks import Task


class Prompt(NamedTuple):
    """A role's system message, the ids of the lessons rendered into it, and the ids of those
    whose showing was randomized in this rollout's group."""

    text: str
    shown: list[str]
    randomized: list[str] = []
    chance: dict[str, float] = {}
    classes: dict[str, str] = {}


def compose(
    role: Role,
    heads: dict[str, Version],
    *,
    task: str | None = None,
    budget: Budget = Budget(),
    exposure: RoleExposure | None = None,
) -> Prompt:
    """The role's prompt then its lesson block: the same text in training and at inference
    (training may withhold lessons under evaluation, and add transfer trials: ``exposure``)."""
    block = role_block(heads, role.name, task=task, budget=budget, exposure=exposure)
    text = role.system_prompt.strip() + (f"\n\n{block.text}" if block.text else "")
    if exposure is None:
        return Prompt(text, block.shown)
    return Prompt(text, block.shown, list(exposure.randomized), exposure.chance, exposure.classes)


def system_message(
    role: Role, heads: dict[str, Version] | LibraryStore, *, task: str | None = None, budget: Budget | None = None
) -> str:
    """The system message ``role`` gets for ``task`` with the libraries ``heads``: their latest
    versions when it is a ``LibraryStore``, composed as they were trained (as ``LessonMemory``
    composes them) unless ``budget`` says otherwise; ``Budget()``'s defaults for a dict."""
    if isinstance(heads, LibraryStore):
        budget, heads = budget or heads.composition(), heads.heads()
    return compose(role, heads, task=task, budget=budget or Budget()).text


def build_team(
    roles: list[Role], client: ChatCompletionClient, prompts: dict[str, str], task: Task
) -> RoundRobinGroupChat:
    agents = [
        AssistantAgent(
            role.name,
            model_client=client,
            system_message=prompts[role.name],
            description=role.description,
            tools=[TOOLS[name](task) for name in role.tools] or None,
            reflect_on_tool_use=role.reflect and bool(role.tools),
            max_tool_iterations=role.tool_rounds,
            tool_call_summary_format=role.tool_summary,
        )
        for role in roles
    ]
    return RoundRobinGroupChat(agents, max_turns=len(agents))


STARTING = 8
"""Rollouts of a step that build their team at once (``run_rollout``'s ``starting``): enough
to keep the first calls coming while the next teams are built."""


def start_gate() -> asyncio.Semaphore:
    return asyncio.Semaphore(STARTING)


async def run_rollout(
    scenario: Scenario,
    task: Task,
    index: int,
    *,
    client: ChatCompletionClient,
    heads: dict[str, Version],
    settings: dict[str, Any],
    timeout: float,
    meter: Meter,
    budget: Budget = Budget(),
    exposures: dict[str, RoleExposure] | None = None,
    starting: asyncio.Semaphore | None = None,
) -> Rollout:
    """One run of the whole team on ``task``. Never raises for model or team failures.

    ``starting`` (shared by the rollouts of a step) bounds how many build their team at once:
    a rollout holds it from before its prompts are composed until its first model call goes
    out. Without it, a step of 2,048 rollouts built every team before any call went out (the
    event loop runs each task's set-up before any task's next step): 9 s with the endpoint
    idle, in ``bench/scale.py``."""
    held = starting
    if held is not None:
        await held.acquire()

    def started() -> None:  # at the first call, or at the end of a rollout that made none
        nonlocal held
        if held is not None:
            held.release()
            held = None

    try:
        exposures = exposures or {}
        prompts = {
            role.name: compose(role, heads, task=task.question, budget=budget, exposure=exposures.get(role.name))
            for role in scenario.roles
        }
        texts = {name: prompt.text for name, prompt in prompts.items()}
        own = Meter()  # this rollout's calls, kept with it
        seeded = Seeded(client, settings=settings, meter=own, on_call=started)
        team = scenario.team(texts, seeded, task) if scenario.team else build_team(scenario.roles, seeded, texts, task)
        messages, error = await _run(team, task.question, timeout)
    finally:
        started()
    if error:
        own.fail("rollout", "timeout" if error.startswith("timeout") else error.partition(":")[0])
    meter.add(calls := own.snapshot())
    said = [m.to_text() for m in messages if isinstance(m, BaseChatMessage) and m.source != "user"]
    read = said[-1:] if scenario.answer_from == "final" else said
    answer = None if error else scenario.extract("\n".join(read))
    traces = split_traces(messages, prompts)
    return Rollout(task_id=task.id, index=index, traces=traces, answer=answer, error=error, calls=calls)


GRACE = 0.5
_WRAPPED = re.compile(r"[A-Z]\w*(?:Error|Exception): ")
"""How autogen's team words an agent's error it re-raises as a RuntimeError: ``EndpointError: ...``."""
"""Seconds a cancelled team gets to wind down before the rollout returns without it."""


async def _run(team: BaseGroupChat, question: str, timeout: float) -> tuple[list, str | None]:
    """Run with a deadline of ``timeout`` seconds of the team's own time (waiting for a call
    slot does not count). On timeout cancel the token first (it stops a model call), then
    the task (a running tool call ignores the token), and keep what was produced."""
    messages: list = []
    token = CancellationToken()

    async def consume() -> None:
        async for item in team.run_stream(task=question, cancellation_token=token):
            if not isinstance(item, TaskResult):
                messages.append(item)

    clock, start = Queued(), time.monotonic()
    reset = QUEUED.set(clock)
    runner = asyncio.ensure_future(consume())  # the task copies the context, and with it the clock
    QUEUED.reset(reset)
    done: set = set()
    try:
        while not done and (left := timeout + clock.seconds - (time.monotonic() - start)) > 0:
            done, _ = await asyncio.wait({runner}, timeout=left)
    except asyncio.CancelledError:  # the rollout is cancelled: so is its team, which ``wait`` leaves running
        token.cancel()
        runner.cancel()
        runner.add_done_callback(lambda task: task.cancelled() or task.exception())  # its error is the run's
        raise
    if not done:
        token.cancel()
        runner.cancel()
        await asyncio.wait({runner}, timeout=GRACE)  # a team stuck in a tool call may never end: drop it
        return messages, f"timeout after {timeout:g} s"
    exc = runner.exception()
    if exc is not None:
        said = str(exc).splitlines()[0] if str(exc) else ""
        if type(exc) is RuntimeError and _WRAPPED.match(said):  # autogen's team re-raises an agent's error so
            return messages, said
        return messages, f"{type(exc).__name__}: {said}"
    return messages, None


def split_traces(messages: list, prompts: dict[str, Prompt]) -> list[RoleTrace]:
    """One trace per role: its messages, tool calls with their results, and token counts."""
    turns: dict[str, list[dict]] = {name: [] for name in prompts}
    for m in messages:
        own = turns.get(m.source)
        if own is None:
            continue
        usage = m.models_usage
        tokens = {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens} if usage else {}
        if isinstance(m, ToolCallRequestEvent):
            calls = [{"name": c.name, "arguments": c.arguments, "id": c.id} for c in m.content]
            own.append({"content": "", "tool_calls": calls, **tokens})
        elif isinstance(m, ToolCallExecutionEvent):
            results = {r.call_id: r for r in m.content}
            for call in own[-1]["tool_calls"] if own else []:
                result = results.get(call["id"])
                if result is not None:
                    call.update(result=result.content, is_error=bool(result.is_error))
        elif isinstance(m, BaseChatMessage):
            own.append({"content": m.to_text(), "tool_calls": [], **tokens})
    return [
        RoleTrace(
            role=name,
            system_message=prompts[name].text,
            shown=prompts[name].shown,
            randomized=prompts[name].randomized,
            chance=prompts[name].chance,
            classes=prompts[name].classes,
            turns=[Turn(**{**t, "tool_calls": [ToolCall(**_call(c)) for c in t["tool_calls"]]}) for t in own],
        )
        for name, own in turns.items()
    ]


def _call(c: dict) -> dict:
    return {k: v for k, v in c.items() if k != "id"}
