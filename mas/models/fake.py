"""A deterministic model client shipped in the package, for tests and plumbing demos.

Stage: none: the model seam (every model call, in tests and demos).

Its reply is a pure function of the request (messages, tools, requested schema, seed), never
of call order, so it stays deterministic when many rollouts run at once. Pass ``respond`` to
script it (``FunctionModel``-style); the default responder plays a planted world (below): a
maths team whose success depends on which planted lessons each role is shown, and learning
calls that answer every stage with valid structured output built from the request.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from autogen_core import CancellationToken, FunctionCall
from autogen_core.models import (
    AssistantMessage,
    ChatCompletionClient,
    CreateResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    ModelInfo,
    RequestUsage,
    SystemMessage,
)
from autogen_core.tools import Tool, ToolSchema
from pydantic import BaseModel

from mas.tools.calculator import calculate

FAKE_INFO = ModelInfo(vision=False, function_calling=True, json_output=True, structured_output=True, family="unknown")


@dataclass(frozen=True)
class Request:
    """What the fake sees of one call."""

    system: str
    messages: list[str]
    tools: list[str]
    schema: type[BaseModel] | None
    seed: int = 0
    tool_results: list[str] = field(default_factory=list)
    settings: dict = field(default_factory=dict)
    """The extra create arguments (temperature, max_tokens, ...), to check what was asked."""

    def unit(self, salt: str = "") -> float:
        """A number in [0, 1) fixed by the request: the fake's only source of chance."""
        key = json.dumps([self.system, self.messages, self.seed, salt])
        return int(hashlib.sha256(key.encode()).hexdigest()[:12], 16) / 16**12


Reply = str | list[FunctionCall]


class FakeClient(ChatCompletionClient):
    """An autogen client whose reply to each call is ``respond(request)``: a ``Request`` holds
    its ``system``, ``messages``, ``schema`` and ``tool_results`` (``unit()``: a draw fixed by the
    request); a ``Reply`` is the text (a structured call's JSON) or a list of tool calls. Without
    ``respond`` it plays the maths world below; a team of your own gets its agents' replies from
    ``respond`` and hands the learning calls (``request.schema`` set) to ``default_respond``
    (``mas.testing``). ``latency``: seconds per call."""

    def __init__(
        self,
        respond: Callable[[Request], Reply] | None = None,
        *,
        latency: float = 0.0,
        name: str = "fake",
        record: bool = True,
    ):
        self._respond = respond or default_respond
        self.latency, self.name, self.record = latency, name, record
        self.calls = 0
        self.requests: list[Request] = []
        """Every request seen, in arrival order (for tests that check what was sent); none
        with ``record=False`` (a long run's requests would fill memory)."""
        self._usage = RequestUsage(prompt_tokens=0, completion_tokens=0)

    async def create(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Tool | ToolSchema] = [],
        tool_choice: Any = "auto",
        json_output: bool | type[BaseModel] | None = None,
        extra_create_args: Mapping[str, Any] = {},
        cancellation_token: CancellationToken | None = None,
    ) -> CreateResult:
        request = _request(messages, tools, json_output, extra_create_args)
        if self.record:
            self.requests.append(request)
        if self.latency:
            await asyncio.sleep(self.latency)
        content = self._respond(request)
        self.calls += 1
        prompt = sum(len(m.split()) for m in [request.system, *request.messages])
        completion = len(str(content).split())
        usage = RequestUsage(prompt_tokens=prompt, completion_tokens=completion)
        self._usage = RequestUsage(
            prompt_tokens=self._usage.prompt_tokens + prompt,
            completion_tokens=self._usage.completion_tokens + completion,
        )
        reason = "function_calls" if isinstance(content, list) else "stop"
        return CreateResult(finish_reason=reason, content=content, usage=usage, cached=False)

    async def create_stream(self, messages, **kwargs) -> AsyncGenerator[str | CreateResult, None]:
        yield await self.create(messages, **kwargs)

    async def close(self) -> None:
        pass

    def actual_usage(self) -> RequestUsage:
        return self._usage

    def total_usage(self) -> RequestUsage:
        return self._usage

    def count_tokens(self, messages: Sequence[LLMMessage], **kwargs: Any) -> int:
        return sum(len(str(m.content).split()) for m in messages)

    def remaining_tokens(self, messages: Sequence[LLMMessage], **kwargs: Any) -> int:
        return 100_000 - self.count_tokens(messages)

    @property
    def capabilities(self) -> ModelInfo:  # type: ignore[override]
        return FAKE_INFO

    @property
    def model_info(self) -> ModelInfo:
        return FAKE_INFO


def _request(messages, tools, json_output, extra) -> Request:
    system = "\n".join(str(m.content) for m in messages if isinstance(m, SystemMessage))
    texts, results = [], []
    for m in messages:
        if isinstance(m, SystemMessage):
            continue
        if isinstance(m, FunctionExecutionResultMessage):
            results.extend(r.content for r in m.content)
        elif isinstance(m, AssistantMessage) and isinstance(m.content, list):
            texts.append(json.dumps([c.arguments for c in m.content]))
        else:
            texts.append(str(m.content))
    schema = json_output if isinstance(json_output, type) else None
    names = [getattr(t, "name", None) or t["name"] for t in tools]
    return Request(system, texts, names, schema, int(extra.get("seed", 0)), results, dict(extra))


# -- the default responder: a planted world -------------------------------------------------
#
# The default fake plays a maths team (planner, solver, verifier) whose success depends on
# which of a few planted lessons each role's prompt shows, with a known effect per role. Some
# help two roles, some one, one none. Its learning calls propose these lessons (mostly to a
# role they help, sometimes to another), so a run on the fake shows the whole loop: lessons
# learned, randomized evidence per role, transfer trials, and a promotion. The effects are
# planted, not learned: the fake demonstrates the machinery, never that learning works.

PLANTED: dict[str, dict[str, float]] = {
    "When a task has several operations, write the whole expression with its parentheses before computing.": {
        "planner": 0.35,
        "solver": 0.25,
    },
    "When a result comes back, compare it with a rough estimate before passing it on.": {
        "solver": 0.25,
        "verifier": 0.35,
    },
    "When the question is a word problem, list each quantity with its unit first.": {"planner": 0.3},
    "When checking, redo the last operation in reverse.": {"verifier": 0.3},
    "When the numbers are small, say each one aloud before using it.": {},
}
"""Each planted lesson, and how much showing it to a role raises the chance that the role's
part goes right: the planner writes a careful plan, the solver computes without a slip, the
verifier catches a slip."""

_EXPRESSION = re.compile(r"[\d(][\d\s+\-*/().]*[+\-*/][\d\s+\-*/().]*\d\)?")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_LESSON = re.compile(r"^- (.+)$", re.M)
_CAREFUL_PLAN = "each operation written out in order"


def default_respond(request: Request) -> Reply:
    if request.schema is not None:
        return json.dumps(_structured(request))
    task = request.messages[0] if request.messages else ""
    role = _role(request.system)
    if role == "solver":
        return _solve(request, task)
    if role == "verifier":
        return _verify(request, task)
    careful = request.unit("plan") < _chance(request, "planner", 0.1)
    plan = "Plan: find the numbers in the question, write the arithmetic"
    return plan + (f", {_CAREFUL_PLAN}" if careful else "") + ", compute it with the calculator."


def shown(system: str) -> list[str]:
    """The lesson texts a role's system message shows (``mas.library.inject.render_block``)."""
    return (
        _LESSON.findall(system.split("Lessons learned from earlier tasks", 1)[1]) if "Lessons learned" in system else []
    )


def _chance(request: Request, role: str, base: float) -> float:
    return min(0.95, base + sum(PLANTED.get(text, {}).get(role, 0.0) for text in shown(request.system)))


def _role(system: str) -> str:
    match = re.search(r"You are the (\w+)", system) or re.search(r"lessons of the (\w+)", system)
    return match.group(1).lower() if match else "assistant"


def _solve(request: Request, task: str) -> Reply:
    if request.tool_results:
        return f"The calculator gives {request.tool_results[-1]}. ANSWER: {request.tool_results[-1]}"
    text = _expression(task)
    planned = any(_CAREFUL_PLAN in m for m in request.messages[1:])
    if request.unit("slip") > _chance(request, "solver", 0.2 + 0.3 * planned):
        text = f"{text} + 1"
    if "calculator" in request.tools:
        arguments = json.dumps({"expression": text})
        return [FunctionCall(id=f"call_{request.seed}", name="calculator", arguments=arguments)]
    return f"I compute {text}. ANSWER: {text}"


def _verify(request: Request, task: str) -> str:
    numbers = _NUMBER.findall(" ".join(request.messages[1:]) or task)
    said = numbers[-1] if numbers else "0"
    if request.unit("catch") < _chance(request, "verifier", 0.0):
        with contextlib.suppress(ArithmeticError, SyntaxError, ValueError):
            said = calculate(_expression(task))  # the verifier redoes the work, and gets it right
    return f"The solver's work checks out. ANSWER: {said}"


def _expression(task: str) -> str:
    found = _EXPRESSION.search(task)
    return found.group(0).strip() if found else " + ".join(_NUMBER.findall(task) or ["0"])


def _structured(request: Request) -> dict:
    name = request.schema.__name__
    body = "\n".join(request.messages)
    if name == "Summary":
        return _summary(request, body)
    if name == "Advantage":
        return _advantage(request)
    if name == "EditBatch":
        edits = [{"op": "add", "text": text} for text in re.findall(r"^- add: (.+?)(?: \(why: .*\))?$", body, re.M)]
        edits += [
            {"op": "modify", "id": i, "text": t}
            for i, t in re.findall(r"^- modify \[(\S+)\] to: (.+?)(?: \(why: .*\))?$", body, re.M)
        ]
        edits += [{"op": "delete", "id": i} for i in re.findall(r"^- delete \[(\S+)\]", body, re.M)]
        return {"edits": edits[:3] or [{"op": "keep"}]}
    if name == "Equivalence":
        first, second = re.findall(r"^Lesson [AB]: (.+)$", body, re.M)
        same = " ".join(first.lower().split()) == " ".join(second.lower().split())
        return {"reason": "compared condition and action", "same": same, "merged": first if same else ""}
    if name == "DirectLessons":
        role = _role(request.system)
        return {
            "lessons": [
                f"As the {role}, work carefully and check the task's numbers.",
                "Answer in the requested format.",
            ]
        }
    raise ValueError(f"the fake client has no default reply for schema {name}")


def _summary(request: Request, body: str) -> dict:
    """Each role's turn; "applied" is the confounded judgement a real summarizer gives (it sees
    the reward): lessons shown count as applied more often when the attempt won."""
    won = "(reward 1)" in body
    roles = []
    for section in body.split("\n## ")[1:]:
        role = section.split("\n", 1)[0].strip()
        listed = re.search(r"^Lessons shown: (.*)$", section, re.M)
        ids = [i for i in listed.group(1).split(", ") if i != "none"] if listed else []
        applied = [i for i in ids if request.unit(f"judged {role} {i}") < (0.7 if won else 0.3)]
        roles.append({"role": role, "steps": [f"{role} took its turn."], "applied": applied})
    return {"roles": roles, "outcome": "correct" if won else "wrong"}


def _advantage(request: Request) -> dict:
    """One planted lesson, proposed to a role it helps seven times in ten, else to another."""
    team = re.findall(r"^- (\w+): ", request.system, re.M) or ["solver"]
    texts = list(PLANTED)
    text = texts[int(request.unit("lesson") * len(texts))]
    helped = [role for role in PLANTED[text] if role in team] or team
    pool = helped if request.unit("role") < 0.7 else team
    role = pool[int(request.unit("which") * len(pool))]
    return {
        "comparison": "The winners' roles worked step by step; the losers' slipped on one operation.",
        "lessons": "The current lessons were followed about as often by winners as by losers.",
        "deciding_roles": [role],
        "operations": [{"op": "add", "library": role, "text": text, "reason": "the winners did this"}],
    }
