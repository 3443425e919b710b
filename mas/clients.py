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

Endpoint faults: ``Adapted`` makes every call with a deadline (``call_timeout``) and retries
what is transient (429 honouring ``Retry-After``, 408/409/5xx, timeouts, dropped or truncated
connections, bodies that are not a completion, ``choices: []``) with exponential backoff and
jitter, at most ``retries`` times; then it raises ``EndpointError``, which the stages count
and skip. The openai library's own retries are off, so that every fault is seen and counted
here (``Adapted.counts``). Well-formed replies with bad content (invalid JSON, a schema
violation) are not retried: ``ask`` turns them into a ``ModelReplyError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import os
import random
import re
import time
from collections import Counter
from typing import Any, AsyncIterator, Awaitable, Callable, Mapping, Sequence

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
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from . import texttools
from .errors import EndpointError, UserError
from .fake import FakeClient

OPEN_MODEL_INFO = ModelInfo(
    vision=False, function_calling=True, json_output=True, structured_output=False, family="unknown"
)

CALL_TIMEOUT = 120.0
"""Default seconds one attempt of one model call may take (``TrainConfig.call_timeout``)."""
RETRIES = 4
"""Default retries after a transient fault, so at most 5 attempts per call."""
BACKOFF = 0.5
"""Seconds before the first retry (doubled each time, with jitter) unless ``Retry-After`` says."""
BACKOFF_MAX = 8.0
MAX_RETRY_AFTER = 120.0
"""A ``Retry-After`` longer than this is not waited for: the call fails at once."""


@contextlib.asynccontextmanager
async def open_client(
    spec: str = "local",
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    threads: int | None = None,
    call_timeout: float | None = None,
    retries: int | None = None,
) -> AsyncIterator[ChatCompletionClient]:
    """Yield a ready client for ``spec``; anything it started is stopped on the way out.

    ``call_timeout`` (seconds per attempt, default ``CALL_TIMEOUT``) and ``retries`` (after a
    transient fault, default ``RETRIES``) apply to the HTTP specs; the fake ignores them."""
    limits = {
        "call_timeout": CALL_TIMEOUT if call_timeout is None else call_timeout,
        "retries": RETRIES if retries is None else retries,
    }
    if spec == "fake" or spec.startswith("fake:"):
        yield FakeClient(latency=_seconds(spec.partition(":")[2] or "0", spec))
        return
    if spec == "local":
        from .server import embedded_server

        with embedded_server(threads=threads) as url:
            # The server answers one request at a time: queue here, so that a call's deadline
            # counts the server's own time and not the wait behind other calls.
            client = Limited(_openai("smollm2-135m", url, "not-needed", embedded=True, **limits), 1)
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
        client = _openai(spec[len("openai:"):], url, key, embedded=False, **limits)
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


def _openai(
    model: str, url: str | None, key: str, *, embedded: bool, call_timeout: float, retries: int
) -> "Adapted":
    import openai
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    if call_timeout <= 0 or retries < 0:
        raise UserError(f"call timeout must be > 0 and retries >= 0 (got {call_timeout:g} s, {retries})")
    # max_retries=0: Adapted retries, so that it sees and counts every fault. The response hook
    # refuses a 200 whose body is not a completion before autogen indexes into it.
    http = openai.DefaultAsyncHttpxClient(event_hooks={"response": [_check_completion]})
    inner = OpenAIChatCompletionClient(
        model=model, base_url=url, api_key=key, model_info=OPEN_MODEL_INFO, max_retries=0, timeout=call_timeout,
        http_client=http,
    )  # fmt: skip
    return Adapted(
        inner, schema_in_format=embedded, text_tools=embedded, name=model,
        call_timeout=call_timeout, retries=retries, backoff=BACKOFF, backoff_max=BACKOFF_MAX, secrets=(key,),
    )  # fmt: skip


class BadBody(Exception):
    """A 200 reply that is not a usable chat completion (``kind``: ``bad_body`` when it is not
    a JSON completion, ``empty_choices`` for ``choices: []``). Transient: retried."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


async def _check_completion(response) -> None:
    """httpx response hook: reads a non-streamed chat completion and checks its shape."""
    if response.status_code != 200 or not response.request.url.path.endswith("/chat/completions"):
        return
    if "event-stream" in response.headers.get("content-type", ""):
        return
    await response.aread()  # a truncated body raises here, as a connection error
    try:
        body = json.loads(response.content)
    except ValueError:
        raise BadBody("bad_body", f"the reply body is not JSON ({len(response.content)} bytes)") from None
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list):
        raise BadBody("bad_body", "the reply body is not a chat completion (no choices)")
    if not choices:
        raise BadBody("empty_choices", "the reply has no choices")
    if not isinstance(choices[0], dict) or not isinstance(choices[0].get("message"), dict):
        raise BadBody("bad_body", "the reply's first choice has no message")


class EndpointCounts(BaseModel):
    """What one client met at its endpoint. ``faults`` counts failed attempts by kind (status
    code, ``timeout``, ``connection``, ``bad_body``, ``empty_choices``): each was either
    retried or was the last attempt of a failed call, so ``sum(faults) == retries + failures``."""

    calls: int = 0
    """Calls asked of the client."""
    attempts: int = 0
    """HTTP requests made for them (calls + retries)."""
    retries: int = 0
    failures: int = 0
    """Calls that raised ``EndpointError`` (attempts exhausted, or a fault not worth retrying)."""
    faults: dict[str, int] = {}

    def minus(self, before: "EndpointCounts") -> "EndpointCounts":
        """The counts since ``before`` (for one step's report)."""
        faults = Counter(self.faults)
        faults.subtract(before.faults)
        return EndpointCounts(
            calls=self.calls - before.calls,
            attempts=self.attempts - before.attempts,
            retries=self.retries - before.retries,
            failures=self.failures - before.failures,
            faults={k: n for k, n in sorted(faults.items()) if n},
        )


def endpoint_counts(client: ChatCompletionClient) -> EndpointCounts | None:
    """The endpoint counts of ``client`` or of the ``Adapted`` client it wraps (through
    ``Limited``, ``Seeded``, ...); None for a client with no endpoint (the fake)."""
    seen = 0
    while client is not None and seen < 32:
        if isinstance(client, Adapted):
            return client.counts
        client, seen = getattr(client, "inner", None), seen + 1
    return None


class _Transient(Exception):
    """One failed attempt worth another (kept inside ``Adapted``)."""

    def __init__(self, kind: str, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.kind, self.retry_after = kind, retry_after


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
    """Wraps an OpenAI-compatible client for what its server accepts, and makes its calls
    robust.

    ``schema_in_format``: send ``{"type": "json_object", "schema": ...}`` (llama.cpp constrains
    decoding with it). ``text_tools``: the server has no native tool calls, so tools are
    described in the system message, calls are parsed from the reply text, and tool
    history is replayed as text.

    Each attempt has ``call_timeout`` seconds; transient faults are retried up to ``retries``
    times (backoff from ``backoff`` seconds, doubled, capped at ``backoff_max``, with jitter;
    a ``Retry-After`` header is honoured instead). ``counts`` keeps what happened.
    ``secrets`` (the API key) are cut out of every error message.
    """

    def __init__(
        self,
        inner: ChatCompletionClient,
        *,
        schema_in_format: bool,
        text_tools: bool,
        name: str,
        call_timeout: float = CALL_TIMEOUT,
        retries: int = RETRIES,
        backoff: float = BACKOFF,
        backoff_max: float = BACKOFF_MAX,
        secrets: Sequence[str] = (),
    ):
        super().__init__(inner)
        self.schema_in_format, self.text_tools, self.name = schema_in_format, text_tools, name
        self.call_timeout, self.max_retries, self.backoff, self.backoff_max = call_timeout, retries, backoff, backoff_max
        self.secrets = tuple(s for s in secrets if s and len(s) >= 4)
        self.counts = EndpointCounts()
        self._jitter = random.Random()

    @property
    def faults(self) -> dict[str, int]:
        return self.counts.faults

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
        if self.text_tools and (tools or texttools.has_tool_history(messages)):
            # Also without tools: a reflection call still carries the tool history.
            schemas = [t.schema if isinstance(t, Tool) else t for t in tools]
            if schemas and self.schema_in_format and not isinstance(messages[-1], FunctionExecutionResultMessage):
                extra["response_format"] = {"type": "json_object", "schema": texttools.action_schema(schemas)}
            text = texttools.as_text(messages, schemas)
            result = await self._robust(
                lambda: self.inner.create(text, extra_create_args=extra, cancellation_token=cancellation_token),
                cancellation_token,
            )
            return texttools.parse_action(result, schemas) if schemas else result
        return await self._robust(
            lambda: self.inner.create(
                messages, tools=tools, json_output=json_output, extra_create_args=extra,
                cancellation_token=cancellation_token,
            ),  # fmt: skip
            cancellation_token,
        )

    # -- retries

    async def _robust(self, call: Callable[[], Awaitable[CreateResult]], token: CancellationToken | None) -> CreateResult:
        """``call`` with a deadline per attempt and retries of transient faults; then
        ``EndpointError``. Cancellation (the token, or the task) is never retried."""
        self.counts.calls += 1

        async def sleep(seconds: float) -> None:
            if token is not None and token.is_cancelled():
                raise asyncio.CancelledError()
            waiting = asyncio.ensure_future(asyncio.sleep(seconds))
            if token is not None:
                token.link_future(waiting)
            await waiting

        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.max_retries + 1),
            retry=retry_if_exception_type(_Transient),
            wait=self._wait,
            sleep=sleep,
            before_sleep=self._count_retry,
            reraise=True,
        )
        try:
            return await retrying(self._attempt, call, token)
        except _Transient as exc:
            self.counts.failures += 1
            attempts = self.max_retries + 1
            raise EndpointError(
                f"{self.name}: {exc.kind}: {self._clean(str(exc))} (gave up after {attempts} attempt{'s' * (attempts > 1)})"
            ) from None

    async def _attempt(self, call: Callable[[], Awaitable[CreateResult]], token: CancellationToken | None) -> CreateResult:
        import openai  # only here: the fake and user-supplied clients never need it

        if token is not None and token.is_cancelled():
            raise asyncio.CancelledError()
        self.counts.attempts += 1
        try:
            async with asyncio.timeout(self.call_timeout):
                return await call()
        except TimeoutError:
            raise self._fault(_Transient("timeout", f"no reply within {self.call_timeout:g} s")) from None
        except openai.APITimeoutError:
            raise self._fault(_Transient("timeout", f"no reply within {self.call_timeout:g} s")) from None
        except openai.APIConnectionError as exc:
            cause = type(exc.__cause__).__name__ if exc.__cause__ else "connection error"
            raise self._fault(_Transient("connection", f"{cause}: {exc.__cause__ or exc}")) from None
        except BadBody as exc:
            raise self._fault(_Transient(exc.kind, str(exc))) from None
        except openai.APIResponseValidationError as exc:
            raise self._fault(_Transient("bad_body", str(exc))) from None
        except openai.APIStatusError as exc:
            status, message = exc.status_code, f"{type(exc).__name__}: {exc}"
            if status in (408, 409, 429) or status >= 500:
                wait = _retry_after(exc.response.headers)
                if wait is not None and wait > MAX_RETRY_AFTER:
                    self._fault(_Transient(str(status), message))
                    self.counts.failures += 1
                    raise EndpointError(
                        f"{self.name}: {status}: the server asks to wait {wait:g} s: {self._clean(message)}"
                    ) from None
                raise self._fault(_Transient(str(status), message, wait)) from None
            self._fault(_Transient(str(status), message))
            self.counts.failures += 1  # 400, 401, 404...: asking again gets the same answer
            raise EndpointError(f"{self.name}: {status}: {self._clean(message)}") from None
        except openai.APIError as exc:
            self._fault(_Transient("api_error", str(exc)))
            self.counts.failures += 1
            raise EndpointError(f"{self.name}: {type(exc).__name__}: {self._clean(str(exc))}") from None

    def _fault(self, exc: _Transient) -> _Transient:
        self.counts.faults[exc.kind] = self.counts.faults.get(exc.kind, 0) + 1
        return exc

    def _count_retry(self, state: RetryCallState) -> None:
        self.counts.retries += 1

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, _Transient) and exc.retry_after is not None:
            return max(0.0, exc.retry_after)
        ceiling = min(self.backoff_max, self.backoff * 2 ** (state.attempt_number - 1))
        return ceiling / 2 + self._jitter.uniform(0, ceiling / 2)

    def _clean(self, text: str) -> str:
        """An error message fit to be logged and journaled: one line, no secret, bounded."""
        for secret in self.secrets:
            text = text.replace(secret, "[redacted]")
        text = re.sub(r"(?i)(bearer\s+)\S+", r"\1[redacted]", text)
        text = re.sub(r"\bsk-[\w-]{6,}", "sk-[redacted]", text)
        text = " ".join(text.split())
        return text if len(text) <= 300 else text[:297] + "..."


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) / scale)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value:
        try:
            return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None
    return None


def grammar_safe(schema: object) -> object:
    """The schema without string length bounds: llama.cpp unrolls ``maxLength: 600`` into a
    grammar so large that the server process dies. Lengths are still checked on our side."""
    if isinstance(schema, dict):
        return {k: grammar_safe(v) for k, v in schema.items() if k not in ("maxLength", "minLength")}
    if isinstance(schema, list):
        return [grammar_safe(v) for v in schema]
    return schema
