"""Tool calls for servers without native tool calling (the embedded llama.cpp server).

Stage: none: the model seam (a rollout's tool calls on the embedded server).

The tools are described in the system message. The first reply of a turn is decoded under a
JSON schema that admits exactly one action: a call of one of the tools with its argument
schema, or an answer. A 135M model never writes a call syntax by itself, but under this
constraint it emits ``{"name": "calculator", "arguments": {"expression": "23*17"}}``. Tool
history is replayed to the model as plain text.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Sequence

from autogen_core import FunctionCall
from autogen_core.models import (
    AssistantMessage,
    CreateResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    SystemMessage,
    UserMessage,
)
from autogen_core.tools import ToolSchema


def action_schema(schemas: list[ToolSchema]) -> dict:
    """One of: a call ``{"name": ..., "arguments": {...}}`` per tool, or ``{"answer": ...}``."""
    calls = [
        {
            "type": "object",
            "properties": {"name": {"const": s["name"]}, "arguments": s.get("parameters", {"type": "object"})},
            "required": ["name", "arguments"],
        }
        for s in schemas
    ]
    answer = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    return {"oneOf": [*calls, answer]}


def has_tool_history(messages: Sequence[LLMMessage]) -> bool:
    return any(
        isinstance(m, FunctionExecutionResultMessage)
        or (isinstance(m, AssistantMessage) and isinstance(m.content, list))
        for m in messages
    )


def as_text(messages: Sequence[LLMMessage], schemas: list[ToolSchema]) -> list[LLMMessage]:
    """The conversation with the tools described and tool calls and results written as text."""
    guide = _guide(schemas)
    out: list[LLMMessage] = []
    for m in messages:
        if isinstance(m, SystemMessage):
            out.append(SystemMessage(content="\n\n".join(filter(None, [m.content, guide]))))
        elif isinstance(m, AssistantMessage) and isinstance(m.content, list):
            calls = " ".join(json.dumps({"name": c.name, "arguments": _loads(c.arguments)}) for c in m.content)
            out.append(AssistantMessage(content=calls, source=m.source))
        elif isinstance(m, FunctionExecutionResultMessage):
            results = "\n".join(f"{r.name} returned: {r.content}" for r in m.content)
            out.append(UserMessage(content=results, source="tools"))
        else:
            out.append(m)
    if guide and not any(isinstance(m, SystemMessage) for m in messages):
        out.insert(0, SystemMessage(content=guide))
    return out


def _guide(schemas: list[ToolSchema]) -> str:
    if not schemas:
        return ""
    lines = [
        f"- {s['name']}({', '.join(s.get('parameters', {}).get('properties', {}))}): {s.get('description', '')}"
        for s in schemas
    ]
    how = 'To call a tool reply with JSON {"name": ..., "arguments": {...}}; to answer, reply with {"answer": ...}.'
    return "Tools:\n" + "\n".join(lines) + "\n" + how


def parse_action(result: CreateResult, schemas: list[ToolSchema]) -> CreateResult:
    """A reply as a tool call when it is one; an ``{"answer": ...}`` reply as its answer."""
    if not isinstance(result.content, str):
        return result
    text = result.content.strip()
    data = None
    with contextlib.suppress(ValueError, RecursionError):
        data = json.loads(text[text.find("{") : text.rfind("}") + 1])
    if isinstance(data, dict) and data.get("name") in {s["name"] for s in schemas}:
        arguments = data.get("arguments") if isinstance(data.get("arguments"), dict) else {}
        call = FunctionCall(id="call_0", name=data["name"], arguments=json.dumps(arguments))
        return result.model_copy(update={"content": [call], "finish_reason": "function_calls", "thought": None})
    if isinstance(data, dict) and isinstance(data.get("answer"), str):
        return result.model_copy(update={"content": f"ANSWER: {data['answer']}"})
    call = _written_call(text, schemas)
    if call is not None:
        return result.model_copy(update={"content": [call], "finish_reason": "function_calls", "thought": text})
    return result


def _written_call(text: str, schemas: list[ToolSchema]) -> FunctionCall | None:
    """``calculator(2 + 3)`` in free text, for a tool with exactly one required parameter."""
    for s in schemas:
        required = s.get("parameters", {}).get("required", [])
        match = re.search(rf"\b{re.escape(s['name'])}\s*\(([^\n]*)\)", text)
        if len(required) == 1 and match:
            return FunctionCall(
                id="call_0", name=s["name"], arguments=json.dumps({required[0]: match.group(1).strip()})
            )
    return None


def _loads(arguments: str) -> object:
    with contextlib.suppress(ValueError, RecursionError):
        return json.loads(arguments)
    return arguments
