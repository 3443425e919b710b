"""``Adapted``: an OpenAI-compatible client made to fit its server and to survive its faults.

Stage: none: the model seam (every model call).

Structured replies are asked for as ``json_output=<pydantic model>`` everywhere in mas.
``Adapted`` turns that into what each server accepts: JSON mode (the schema is also in the
prompt), plus the schema itself for llama.cpp, which then constrains decoding to it.

Every call has a deadline (``call_timeout``); what is transient (``faults.py``) is retried with
exponential backoff and jitter, at most ``retries`` times; then ``EndpointError``, which the
stages count and skip. The openai library's own retries are off, so that every fault is seen
and counted here (``Adapted.counts``). Well-formed replies with bad content (invalid JSON, a
schema violation) are not retried: ``ask`` turns them into a ``ModelReplyError``.

Servers differ from OpenAI in ways that would fail every call or spoil every reply; ``Adapted``
evens out the known ones. A 400 that names a setting mas can do without (LM Studio refuses
``json_object`` and takes only ``json_schema``; a LiteLLM proxy refuses ``seed`` for a provider
without it) is sent again without it, and later calls leave it out. A ``<think>`` block in the
content (DeepSeek-R1 or Qwen3 on Ollama, or on vLLM without a reasoning parser) becomes the
reply's thought, as deepseek-reasoner's ``reasoning_content`` does. And a fault that says the
endpoint is set up wrong (nothing listening, TLS to a plain HTTP server, 401, 403, 404, a 200
that is no completion), met before any call got through, is told to ``on_misconfigured`` with
one line saying what to fix: ``open_client`` stops the command with it.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any, Literal
from urllib.parse import urlsplit

from autogen_core import CancellationToken
from autogen_core.models import ChatCompletionClient, CreateResult, FunctionExecutionResultMessage, LLMMessage
from autogen_core.tools import Tool, ToolSchema
from pydantic import BaseModel
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from mas.errors import EndpointError
from mas.models import texttools
from mas.models.capabilities import STANDARD, Capabilities
from mas.models.faults import BadBody, Transient, retry_after
from mas.models.limiter import backoff, rate_limited
from mas.models.wrappers import Delegating
from mas.redact import redact, remember
from mas.types.reports import EndpointCounts

CALL_TIMEOUT = 120.0
"""Default seconds one attempt of one model call may take (``TrainConfig.call_timeout``)."""
RETRIES = 4
"""Default retries after a transient fault, so at most 5 attempts per call."""
BACKOFF = 0.5
"""Seconds before the first retry (doubled each time, with jitter) unless ``Retry-After`` says."""
BACKOFF_MAX = 8.0
MAX_RETRY_AFTER = 120.0
"""A ``Retry-After`` longer than this is not waited for: the call fails at once."""
OPTIONAL = ("response_format", "seed")
"""Request fields a server may refuse with a 400 that mas can do without: the JSON schema is
also in the prompt and replies are validated here; the seed only asks for repeatable samples."""


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
    ``secrets`` (the API key) are cut out of every error message, and of everything mas
    writes (``mas.redact.remember``). ``tokenizer`` names the model's tokenizer.

    ``capabilities`` (``capabilities.py``) rewrites the sampling settings for the model
    (reasoning models). ``json_mode``: ``response_format`` for OpenAI-compatible servers,
    ``native`` to use another provider's own JSON switch. Errors of other providers' SDKs are
    classified by their status code and class names.
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
        capabilities: Capabilities = STANDARD,
        json_mode: Literal["response_format", "native"] = "response_format",
        tokenizer: str = "words",
        where: str = "",
        timeouts_retried: bool = True,
    ):
        super().__init__(inner)
        self.timeouts_retried = timeouts_retried
        """False for a server that finishes a reply after mas stopped waiting for it (llama-cpp-python's,
        for a request that does not stream): a retry would queue behind the abandoned reply and
        be cut in turn, each attempt leaving the server one more reply to finish."""
        self.tokenizer_spec = tokenizer
        """The model's tokenizer (``mas.models.tokens``), for budgets set to ``model``."""
        self.schema_in_format, self.text_tools, self.name = schema_in_format, text_tools, name
        self.caps, self.json_mode = capabilities, json_mode  # (``capabilities`` is autogen's model_info)
        self.call_timeout, self.max_retries, self.backoff, self.backoff_max = (
            call_timeout,
            retries,
            backoff,
            backoff_max,
        )
        self.secrets = tuple(s for s in secrets if s and len(s) >= 4)
        for secret in self.secrets:
            remember(secret)  # the journal, the logs and the library redact it too
        self.counts = EndpointCounts()
        self._jitter = random.Random()
        self.where = where
        """The base URL, named in what ``on_misconfigured`` is told."""
        self.on_misconfigured: Callable[[str], None] | None = None
        """Told, once, what to fix when the endpoint is set up wrong (see ``_misconfigured``)."""
        self.proven = False
        """A call got through: a fault after that is the server's, not the setup's."""
        self.refused: dict[str, str] = {}
        """Fields of ``OPTIONAL`` the server refused (and how it said so): no longer sent."""

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
        extra = self.caps.adapt(dict(extra_create_args))
        schema = json_output if isinstance(json_output, type) else None
        if isinstance(json_output, type) and self.json_mode == "native":
            # Another provider's client: its own JSON switch; the schema is in the prompt.
            json_output = True if self.inner.model_info.get("json_output") else None
        elif isinstance(json_output, type):
            fmt = {"type": "json_object"}
            if self.schema_in_format:
                fmt["schema"] = _grammar_schema(json_output)
            extra["response_format"] = fmt
            json_output = None
        while True:
            extra = self._without_refused(extra, schema)
            try:
                result = await self._send(messages, tools, tool_choice, json_output, extra, cancellation_token)
            except EndpointError as exc:
                if not self._refuses_optional(exc, extra):
                    raise
                # Counted as a retry of the same call, not as a second call that failed.
                self.counts.calls, self.counts.failures, self.counts.retries = (
                    self.counts.calls - 1, self.counts.failures - 1, self.counts.retries + 1,
                )  # fmt: skip
                continue
            self.proven = True
            return _unthought(result)

    async def _send(self, messages, tools, tool_choice, json_output, extra, cancellation_token) -> CreateResult:
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
                messages,
                tools=tools,
                json_output=json_output,
                extra_create_args=extra,
                cancellation_token=cancellation_token,
            ),  # fmt: skip
            cancellation_token,
        )

    # -- what the server refuses

    def _refuses_optional(self, exc: EndpointError, extra: dict) -> bool:
        """Whether ``exc`` is a 400 naming a field of ``OPTIONAL`` that ``extra`` holds; then
        it is left out from now on (a call sent before then is sent again too). ``json_object``
        refused for ``json_schema`` (LM Studio) is asked for as ``json_schema``, and dropped only
        if that is refused too."""
        if exc.status != 400:
            return False
        said = exc.said.lower()
        for name in OPTIONAL:
            if name not in extra or name not in said:
                continue
            fmt = extra[name]
            if isinstance(fmt, dict) and fmt.get("type") == "json_object" and "json_schema" in said:
                self.refused.setdefault(name, "json_schema")  # a call sent before it was dropped keeps it dropped
            else:
                self.refused[name] = "drop"
            return True  # ``_without_refused`` changes what is sent: this ends
        return False

    def _without_refused(self, extra: dict, schema: type[BaseModel] | None) -> dict:
        """``extra`` without the fields the server refused; ``json_object`` as ``json_schema``
        with ``schema`` when that is what it takes."""
        out = dict(extra)
        for name, how in self.refused.items():
            fmt = out.pop(name, None)
            if how == "json_schema" and isinstance(fmt, dict) and fmt.get("type") == "json_object" and schema:
                spec = {"name": schema.__name__, "schema": _grammar_schema(schema)}
                out[name] = {"type": "json_schema", "json_schema": spec}
        return out

    # -- retries

    async def _robust(
        self, call: Callable[[], Awaitable[CreateResult]], token: CancellationToken | None
    ) -> CreateResult:
        """``call`` with a deadline per attempt and retries of transient faults; then
        ``EndpointError``. Cancellation (the token, or the task) is never retried."""
        self.counts.calls += 1

        async def sleep(seconds: float) -> None:
            if token is not None and token.is_cancelled():
                raise asyncio.CancelledError()
            waiting = asyncio.ensure_future(backoff(seconds))  # out of the in-flight limit meanwhile
            if token is not None:
                token.link_future(waiting)
            await waiting

        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.max_retries + 1),
            retry=retry_if_exception(self._retried),
            wait=self._wait,
            sleep=sleep,
            before_sleep=self._count_retry,
            reraise=True,
        )
        try:
            return await retrying(self._attempt, call, token)
        except Transient as exc:
            self.counts.failures += 1
            attempts = retrying.statistics.get("attempt_number", self.max_retries + 1)
            self._misconfigured(exc.kind, str(exc))
            raise EndpointError(
                f"{self.name}: {exc.kind}: {self._clean(str(exc))} (gave up after {attempts} attempt{'s' * (attempts > 1)})"
            ) from None
        except EndpointError as exc:
            self._misconfigured(str(exc.status or ""), exc.said)
            raise

    def _retried(self, exc: BaseException) -> bool:
        return isinstance(exc, Transient) and (self.timeouts_retried or exc.kind != "timeout")

    async def _attempt(
        self, call: Callable[[], Awaitable[CreateResult]], token: CancellationToken | None
    ) -> CreateResult:
        import openai  # only here: the fake and user-supplied clients never need it

        if token is not None and token.is_cancelled():
            raise asyncio.CancelledError()
        self.counts.attempts += 1
        try:
            async with asyncio.timeout(self.call_timeout):
                return await call()
        except TimeoutError:
            raise self._fault(Transient("timeout", f"no reply within {self.call_timeout:g} s")) from None
        except openai.APITimeoutError as exc:
            if lost := _lost_connection(exc):
                raise self._fault(Transient("connection", f"{type(lost).__name__}: {lost}")) from None
            raise self._fault(Transient("timeout", f"no reply within {self.call_timeout:g} s")) from None
        except openai.APIConnectionError as exc:
            cause = type(exc.__cause__).__name__ if exc.__cause__ else "connection error"
            raise self._fault(Transient("connection", f"{cause}: {exc.__cause__ or exc}")) from None
        except BadBody as exc:
            raise self._fault(Transient(exc.kind, str(exc))) from None
        except openai.APIResponseValidationError as exc:
            raise self._fault(Transient("bad_body", str(exc))) from None
        except openai.APIStatusError as exc:
            raise self._status_fault(exc.status_code, f"{type(exc).__name__}: {exc}", exc.response.headers) from None
        except openai.APIError as exc:
            self._fault(Transient("api_error", str(exc)))
            self.counts.failures += 1
            raise EndpointError(f"{self.name}: {type(exc).__name__}: {self._clean(str(exc))}") from None
        except Exception as exc:  # another provider's SDK (anthropic, ollama): read it by its shape
            raise self._foreign_fault(exc) from None

    def _status_fault(self, status: int, message: str, headers) -> Exception:
        """A ``Transient`` to retry (408, 409, 429, 5xx), or the ``EndpointError`` that ends the call."""
        if status == 429:
            rate_limited()  # the in-flight limit learns the endpoint took fewer calls
        if status in (408, 409, 429) or status >= 500:
            wait = retry_after(headers or {})
            if wait is None or wait <= MAX_RETRY_AFTER:
                return self._fault(Transient(str(status), message, wait))
            self._fault(Transient(str(status), message))
            self.counts.failures += 1
            return EndpointError(f"{self.name}: {status}: the server asks to wait {wait:g} s: {self._clean(message)}")
        self._fault(Transient(str(status), message))
        self.counts.failures += 1  # 400, 401, 404...: asking again gets the same answer
        return EndpointError(f"{self.name}: {status}: {self._clean(message)}", status, message)

    def _misconfigured(self, kind: str, message: str) -> None:
        """Tell ``on_misconfigured`` what to fix when a call failed, before any got through, in
        a way that says the endpoint is set up wrong (and so every call will fail alike)."""
        if self.proven or self.on_misconfigured is None:
            return
        line = _setup_fault(kind, message, self.name, self.where or "the OpenAI API")
        if line is not None:
            self.on_misconfigured(redact(line, self.secrets))

    def _foreign_fault(self, exc: Exception) -> Exception:
        """An error of a client that is not openai's: an HTTP status is read off ``status_code``
        (and ``response.headers``), a timeout or a lost connection off the class names; anything
        else is not an endpoint fault and goes on as it is."""
        status = getattr(exc, "status_code", None)
        if isinstance(status, int) and not isinstance(status, bool):
            headers = getattr(getattr(exc, "response", None), "headers", None)
            return self._status_fault(status, f"{type(exc).__name__}: {exc}", headers)
        names = " ".join(k.__name__.lower() for k in type(exc).__mro__)
        if "timeout" in names:
            return self._fault(Transient("timeout", f"no reply within {self.call_timeout:g} s"))
        if "connect" in names:
            return self._fault(Transient("connection", f"{type(exc).__name__}: {exc}"))
        return exc

    def _fault(self, exc: Transient) -> Transient:
        self.counts.faults[exc.kind] = self.counts.faults.get(exc.kind, 0) + 1
        return exc

    def _count_retry(self, state: RetryCallState) -> None:
        self.counts.retries += 1

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, Transient) and exc.retry_after is not None:
            return max(0.0, exc.retry_after)
        doublings = min(state.attempt_number - 1, 64)  # 2 ** 1024 is no float: a --retries of thousands overflowed
        ceiling = min(self.backoff_max, self.backoff * 2**doublings)
        return ceiling / 2 + self._jitter.uniform(0, ceiling / 2)

    def _clean(self, text: str) -> str:
        """An error message fit to be logged and journaled: one line, no secret, bounded."""
        text = " ".join(redact(text, self.secrets).split())
        return text if len(text) <= 300 else text[:297] + "..."


def endpoint_counts(client: ChatCompletionClient) -> EndpointCounts | None:
    """The endpoint counts of ``client`` or of the ``Adapted`` client it wraps (through
    ``Limited``, ``Seeded``, ...); None for a client with no endpoint (the fake)."""
    seen = 0
    while client is not None and seen < 32:
        if isinstance(client, Adapted):
            return client.counts
        client, seen = getattr(client, "inner", None), seen + 1
    return None


@lru_cache(maxsize=256)
def _grammar_schema(model: type[BaseModel]) -> dict:
    return grammar_safe(model.model_json_schema())


def grammar_safe(schema: object) -> object:
    """The schema without string length bounds: llama.cpp unrolls ``maxLength: 600`` into a
    grammar so large that the server process dies. Lengths are still checked on our side."""
    if isinstance(schema, dict):
        return {k: grammar_safe(v) for k, v in schema.items() if k not in ("maxLength", "minLength")}
    if isinstance(schema, list):
        return [grammar_safe(v) for v in schema]
    return schema


def _lost_connection(exc: BaseException) -> BaseException | None:
    """The aiohttp error under an SDK "timeout" that was no timeout: its transport maps every
    lost connection (a server that hung up, say) to httpx's ``ConnectTimeout``."""
    cause = exc.__cause__
    while cause is not None:
        if type(cause).__module__.startswith("aiohttp") and not isinstance(cause, TimeoutError):
            return cause
        cause = cause.__cause__
    return None


def _unthought(result: CreateResult) -> CreateResult:
    """``result`` with a leading ``<think>...</think>`` block (or the text up to a lone
    ``</think>``: DeepSeek-R1 leaves out the opening tag) moved from the content to the thought.
    A block never closed (the reply was cut while thinking) leaves no content. Answers, traces
    and lessons never see it."""
    if not isinstance(result.content, str):
        return result
    text = result.content.lstrip()
    if text.startswith("<think>"):
        text = text[len("<think>") :]
    elif "</think>" not in text or "<think>" in text:
        return result
    thought, closed, answer = text.partition("</think>")
    thought = "\n".join(t for t in (result.thought, thought.strip()) if t)
    return result.model_copy(update={"content": answer.strip() if closed else "", "thought": thought or None})


def _setup_fault(kind: str, message: str, model: str, where: str) -> str | None:
    """One line saying what is wrong with the endpoint's setup and what to do, or None for a
    fault that says nothing of the setup (a 429, a 500, a timeout, a dropped connection)."""
    said = " ".join(message.split())[:200]
    if kind in ("401", "403"):
        return f"{where}: the server refused the API key ({kind}: {said}); check --api-key or OPENAI_API_KEY"
    if kind == "404":
        if re.search(r"\bmodel\b", said, re.IGNORECASE):  # vLLM, Ollama, OpenAI, LiteLLM all name it
            return (
                f"{where}: the server has no model {model!r} ({said}); check the name in --model openai:NAME "
                "(GET /models on the server lists its models; Ollama: ollama pull NAME)"
            )
        return f"{where}: no chat completions there (404: {said}); {_v1_hint(where)}"
    if kind == "connection":
        if re.search(r"sslerror|\[ssl|tls|certificate|wrong_version_number", said, re.IGNORECASE):
            plain = where.replace("https://", "http://", 1)
            return f"{where}: the TLS handshake failed ({said}); a local server speaks plain HTTP: try {plain}"
        if re.search(r"refused|connect call failed|name or service not known|nodename nor servname|getaddrinfo|"
                     r"cannot connect to host", said, re.IGNORECASE):  # fmt: skip
            return f"{where}: nothing answers there ({said}); is the server running, on that host and port?"
        return None
    if kind in ("bad_body", "empty_choices"):
        return f"{where}: the server's replies are not chat completions ({said}); {_v1_hint(where)}"
    return None


def _v1_hint(where: str) -> str:
    path = urlsplit(where).path.rstrip("/") if "://" in where else ""
    if not re.search(r"/v\d+[a-z]*$", path):
        return f"OpenAI-compatible servers serve them under /v1: try --base-url {where.rstrip('/')}/v1"
    return "check --base-url (the address of the server's OpenAI-compatible API)"
