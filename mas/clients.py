"""The one seam to the model: build an autogen ``ChatCompletionClient`` from a short spec.

Specs:
  ``local``          the embedded SmolLM2-135M, served by llama.cpp on 127.0.0.1 (default)
  ``openai:MODEL``   any OpenAI-compatible endpoint; base URL and key from options or from
                     ``MAS_BASE_URL`` / ``OPENAI_API_KEY`` (OpenAI, DeepSeek, vLLM, Ollama)
  ``fake``           the deterministic client in ``mas.fake`` (``fake:0.05``: 50 ms per call)

Structured replies are asked for as ``json_output=<pydantic model>`` everywhere in mas. The
``Adapted`` wrapper turns that into what each server accepts: JSON mode (the schema is also in
the prompt), plus the schema itself for llama.cpp, which then constrains decoding to it.
Only this module and ``server.py`` know about openai or llama.cpp.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
from typing import Any, AsyncIterator, Mapping, Sequence

from autogen_core import CancellationToken, FunctionCall
from autogen_core.models import (
    AssistantMessage,
    ChatCompletionClient,
    CreateResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    ModelInfo,
    SystemMessage,
    UserMessage,
)
from autogen_core.tools import Tool, ToolSchema
from pydantic import BaseModel

from . import texttools
from .errors import EndpointError, UserError
from .fake import FakeClient

OPEN_MODEL_INFO = ModelInfo(
    vision=False, function_calling=True, json_output=True, structured_output=False, family="unknown"
)


@contextlib.asynccontextmanager
async def open_client(
    spec: str = "local", *, base_url: str | None = None, api_key: str | None = None, threads: int | None = None
) -> AsyncIterator[ChatCompletionClient]:
    """Yield a ready client for ``spec``; anything it started is stopped on the way out."""
    if spec == "fake" or spec.startswith("fake:"):
        yield FakeClient(latency=_seconds(spec.partition(":")[2] or "0", spec))
        return
    if spec == "local":
        from .server import embedded_server

        with embedded_server(threads=threads) as url:
            client = _openai("smollm2-135m", url, "not-needed", embedded=True)
            try:
                yield client
            finally:
                await client.close()
        return
    if spec.startswith("openai:") and spec[len("openai:"):]:
        url = base_url or os.environ.get("MAS_BASE_URL")
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            raise UserError("--model openai:...: no API key (set OPENAI_API_KEY or pass --api-key)")
        client = _openai(spec[len("openai:"):], url, key, embedded=False)
        try:
            yield client
        finally:
            await client.close()
        return
    raise UserError(f"--model {spec!r}: expected 'local', 'fake' or 'openai:MODEL'")


def _seconds(text: str, spec: str) -> float:
    try:
        return max(0.0, float(text))
    except ValueError:
        raise UserError(f"--model {spec!r}: expected fake:SECONDS, the fake's latency per call") from None


def _openai(model: str, url: str | None, key: str, *, embedded: bool) -> ChatCompletionClient:
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    # The openai library retries 429s, 5xx and dropped connections with backoff; timeout bounds a call.
    inner = OpenAIChatCompletionClient(
        model=model, base_url=url, api_key=key, model_info=OPEN_MODEL_INFO, max_retries=2, timeout=600
    )
    return Adapted(inner, schema_in_format=embedded, text_tools=embedded, name=model)


class Delegating(ChatCompletionClient):
    """Forwards everything to ``inner``; subclasses change ``create``."""

    def __init__(self, inner: ChatCompletionClient):
        self.inner = inner

    async def create(self, messages, **kwargs) -> CreateResult:
        return await self.inner.create(messages, **kwargs)

    def create_stream(self, messages, **kwargs):
        return self.inner.create_stream(messages, **kwargs)

    async def close(self) -> None:
        await self.inner.close()

    def actual_usage(self):
        return self.inner.actual_usage()

    def total_usage(self):
        return self.inner.total_usage()

    def count_tokens(self, messages, **kwargs) -> int:
        return self.inner.count_tokens(messages, **kwargs)

    def remaining_tokens(self, messages, **kwargs) -> int:
        return self.inner.remaining_tokens(messages, **kwargs)

    @property
    def capabilities(self):  # type: ignore[override]
        return self.inner.model_info

    @property
    def model_info(self) -> ModelInfo:
        return self.inner.model_info


class Limited(Delegating):
    """At most ``n`` calls in flight, across every rollout and learning call of a run."""

    def __init__(self, inner: ChatCompletionClient, n: int):
        super().__init__(inner)
        self.slots = asyncio.Semaphore(n)

    async def create(self, messages, **kwargs) -> CreateResult:
        async with self.slots:
            return await self.inner.create(messages, **kwargs)


class Adapted(Delegating):
    """Wraps an OpenAI-compatible client for what its server accepts.

    ``schema_in_format``: send ``{"type": "json_object", "schema": ...}`` (llama.cpp constrains
    decoding with it). ``text_tools``: the server has no native tool calls, so tools are
    described in the system message, calls are parsed from the reply text, and tool
    history is replayed as text.
    """

    def __init__(self, inner: ChatCompletionClient, *, schema_in_format: bool, text_tools: bool, name: str):
        super().__init__(inner)
        self.schema_in_format, self.text_tools, self.name = schema_in_format, text_tools, name

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
        extra = dict(extra_create_args)
        if isinstance(json_output, type):
            fmt = {"type": "json_object"}
            if self.schema_in_format:
                fmt["schema"] = grammar_safe(json_output.model_json_schema())
            extra["response_format"] = fmt
            json_output = None
        import openai  # only here: the fake and user-supplied clients never need it

        try:
            if self.text_tools and (tools or texttools.has_tool_history(messages)):
                # Also without tools: a reflection call still carries the tool history.
                schemas = [t.schema if isinstance(t, Tool) else t for t in tools]
                if schemas and self.schema_in_format and not isinstance(messages[-1], FunctionExecutionResultMessage):
                    extra["response_format"] = {"type": "json_object", "schema": texttools.action_schema(schemas)}
                result = await self.inner.create(
                    texttools.as_text(messages, schemas), extra_create_args=extra, cancellation_token=cancellation_token
                )
                return texttools.parse_action(result, schemas) if schemas else result
            return await self.inner.create(
                messages, tools=tools, json_output=json_output, extra_create_args=extra,
                cancellation_token=cancellation_token,
            )  # fmt: skip
        except openai.APIError as exc:
            raise EndpointError(f"{type(exc).__name__}: {exc}") from exc


def grammar_safe(schema: object) -> object:
    """The schema without string length bounds: llama.cpp unrolls ``maxLength: 600`` into a
    grammar so large that the server process dies. Lengths are still checked on our side."""
    if isinstance(schema, dict):
        return {k: grammar_safe(v) for k, v in schema.items() if k not in ("maxLength", "minLength")}
    if isinstance(schema, list):
        return [grammar_safe(v) for v in schema]
    return schema
