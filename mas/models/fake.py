"""A deterministic model client shipped in the package, for tests and plumbing demos.

Its reply is a pure function of the request (messages, tools, requested schema, seed), never
of call order, so it stays deterministic when many rollouts run at once. Pass ``respond`` to
script it (``FunctionModel``-style); the default responder plays a plausible maths team and
answers every learning stage with valid structured output built from the request.
"""

from __future__ import annotations

import asyncio
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
    def __init__(self, respond: Callable[[Request], Reply] | None = None, *, latency: float = 0.0, name: str = "fake"):
        self._respond = respond or default_respond
        self.latency, self.name = latency, name
        self.calls = 0
        self.requests: list[Request] = []
        """Every request seen, in arrival order (for tests that check what was sent)."""
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


# -- the default responder ---------------------------------------------------------------

_EXPRESSION = re.compile(r"[\d(][\d\s+\-*/().]*[+\-*/][\d\s+\-*/().]*\d\)?")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_LESSON = re.compile(r"^- (?=\S)", re.M)
"""A lesson line of a role's system message (``mas.library.inject.render_block``)."""


def default_respond(request: Request) -> Reply:
    if request.schema is not None:
        return json.dumps(_structured(request))
    task = request.messages[0] if request.messages else ""
    role = _role(request.system)
    if role == "solver":
        return _solve(request, task)
    if role == "verifier":
        numbers = _NUMBER.findall(" ".join(request.messages[1:]) or task)
        return f"The solver's work checks out. ANSWER: {numbers[-1] if numbers else 0}"
    return "Plan: find the numbers in the question, write the arithmetic, compute it with the calculator."


def _role(system: str) -> str:
    match = re.search(r"You are the (\w+)", system) or re.search(r"lessons of the (\w+)", system)
    return match.group(1).lower() if match else "assistant"


def _solve(request: Request, task: str) -> Reply:
    if request.tool_results:
        return f"The calculator gives {request.tool_results[-1]}. ANSWER: {request.tool_results[-1]}"
    expression = _EXPRESSION.search(task)
    numbers = [int(float(n)) for n in _NUMBER.findall(task)]
    text = expression.group(0).strip() if expression else " + ".join(map(str, numbers or [0]))
    # Lessons in the prompt make the fake more careful: that is what training can show.
    careful = 0.35 + 0.15 * min(len(_LESSON.findall(request.system)), 4)
    if request.unit("slip") > careful:
        text = f"{text} + 1"
    if "calculator" in request.tools:
        arguments = json.dumps({"expression": text})
        return [FunctionCall(id=f"call_{request.seed}", name="calculator", arguments=arguments)]
    return f"I compute {text}. ANSWER: {text}"


def _structured(request: Request) -> dict:
    name = request.schema.__name__
    body = "\n".join(request.messages)
    if name == "Summary":
        roles = re.findall(r"^## (\w+)", body, re.M) or ["solver"]
        return {
            "roles": [{"role": r, "steps": [f"{r} took its turn."]} for r in roles],
            "outcome": "correct" if "reward 1" in body else "wrong",
        }
    if name == "Advantage":
        team = re.findall(r"^- (\w+): ", request.system, re.M) or ["solver"]
        role = "solver" if "solver" in team else team[-1]
        text = f"When the task is about {_topic(body)}, pass the exact expression to the calculator."
        return {
            "comparison": "The winners computed the expression exactly as written; the losers added a term.",
            "lessons": "No current lesson covers this.",
            "deciding_roles": [role],
            "operations": [{"op": "add", "library": role, "text": text, "reason": "the winners did this"}],
        }
    if name == "EditBatch":
        edits = [{"op": "add", "text": text} for text in re.findall(r"^- add: (.+?)(?: \(why: .*\))?$", body, re.M)]
        edits += [
            {"op": "modify", "id": i, "text": t}
            for i, t in re.findall(r"^- modify \[(\S+)\] to: (.+?)(?: \(why: .*\))?$", body, re.M)
        ]
        edits += [{"op": "delete", "id": i} for i in re.findall(r"^- delete \[(\S+)\]", body, re.M)]
        return {"edits": edits[:3] or [{"op": "keep"}]}
    if name == "DirectLessons":
        role = _role(request.system)
        return {
            "lessons": [
                f"As the {role}, work carefully and check the task's numbers.",
                "Answer in the requested format.",
            ]
        }
    raise ValueError(f"the fake client has no default reply for schema {name}")


def _topic(body: str) -> str:
    question = re.search(r"^Task: (.*)$", body, re.M)
    words = re.findall(r"[a-z]{5,}", question.group(1).lower() if question else "")
    return words[0] if words else "arithmetic"
