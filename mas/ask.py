"""One structured model call: render the prompt, ask for JSON, validate it, count it.

Stage: summarize, advantage and edit (every learning call; also the evidence's pair judge).

A reply that is not valid JSON for the schema, or that was cut at the token limit, raises
``ModelReplyError`` with the raw reply; the calling stage catches it and skips just its group
or edit batch. A cut reply is never repaired: its last string is half a sentence, and half a
lesson must not become a lesson.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import TypeVar

from autogen_core.models import ChatCompletionClient, SystemMessage, UserMessage
from pydantic import BaseModel, ValidationError

from mas.errors import ModelReplyError
from mas.meter import Meter
from mas.templates import render

T = TypeVar("T", bound=BaseModel)


async def ask(
    client: ChatCompletionClient,
    stage: str,
    schema: type[T],
    *,
    meter: Meter,
    seed: int,
    temperature: float,
    max_tokens: int,
    **values: object,
) -> T:
    """Ask ``stage`` (``summary``, ``advantage``, ``edit``, ``direct``) for a ``schema``
    instance, in at most ``max_tokens`` completion tokens."""
    schema_text = schema_json(schema)
    messages = [
        SystemMessage(content=render(f"{stage}.system", schema=schema_text, **_split(values, "system_"))),
        UserMessage(content=render(f"{stage}.user", **_split(values, "")), source="user"),
    ]
    extra = {"seed": seed, "temperature": temperature, "max_tokens": max_tokens}
    result = await client.create(messages, json_output=schema, extra_create_args=extra)
    meter.count(stage, result.usage)
    raw = result.content if isinstance(result.content, str) else str(result.content)
    if result.finish_reason == "length":
        meter.fail(stage, "reply cut at the token limit")
        raise ModelReplyError(f"{stage}: reply cut at the token limit ({max_tokens} tokens)", raw)
    try:
        # strict=False: llama.cpp's JSON grammar lets raw newlines into strings.
        data = json.loads(_json_part(raw), strict=False)
        try:
            return schema.model_validate(data)
        except ValidationError as exc:  # a note past its length (a rambling model) is cut;
            return schema.model_validate(_clipped(data, exc))  # lesson texts are never cut: see edits.py
    except (ValidationError, ValueError, RecursionError) as exc:
        meter.fail(stage, "reply not valid for its schema")
        first = str(exc).splitlines()[0]
        raise ModelReplyError(f"{stage}: reply does not match {schema.__name__}: {first}", raw) from None


@lru_cache(maxsize=256)
def schema_json(schema: type[BaseModel]) -> str:
    """The schema as compact JSON, once per class (the stage schemas are cached classes)."""
    return json.dumps(schema.model_json_schema(), separators=(",", ":"))


def _clipped(data, exc: ValidationError):
    """``data`` with every over-long string cut to its field's maximum, or the error again
    when anything else is wrong."""
    errors = exc.errors()
    if any(e["type"] != "string_too_long" for e in errors):
        raise exc
    for e in errors:
        *path, last = e["loc"]
        parent = data
        for key in path:
            parent = parent[key]
        parent[last] = parent[last][: e["ctx"]["max_length"]]
    return data


def _split(values: dict, prefix: str) -> dict:
    """Values named ``system_x`` fill ``x`` in the system half; the rest fill the user half."""
    if prefix:
        return {k[len(prefix) :]: v for k, v in values.items() if k.startswith(prefix)}
    return {k: v for k, v in values.items() if not k.startswith("system_")}


def _json_part(raw: str) -> str:
    """The outermost JSON object in a reply (models like to wrap JSON in prose or fences)."""
    start, end = raw.find("{"), raw.rfind("}")
    if start < 0 or end < start:
        raise ValueError("no JSON object in the reply")
    return raw[start : end + 1]
