"""The one seam to the model: build an autogen ``ChatCompletionClient`` from a short spec.

Stage: none: the model seam (every model call).

Specs:
  ``local``          the embedded SmolLM2-135M, served by llama.cpp on 127.0.0.1 (default)
  ``openai:MODEL``   any OpenAI-compatible endpoint; base URL and key from options or from
                     ``MAS_BASE_URL`` / ``OPENAI_API_KEY`` (OpenAI, DeepSeek, vLLM, Ollama)
  ``fake``           the deterministic client in ``mas.models.fake`` (``fake:0.05``: 50 ms per call)

HTTP clients are wrapped in ``Adapted`` (``endpoint.py``): JSON mode for structured replies,
deadlines, retries of transient faults, and the request rules of reasoning models
(``capabilities.py``). An autogen model config file (``--model-config``) builds its client in
``config_file.py``, behind the same wrapper. Only this package knows about openai or llama.cpp.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

from autogen_core.models import ChatCompletionClient, ModelInfo

from mas.errors import UserError
from mas.models.capabilities import STANDARD, Capabilities, capabilities_for, profile
from mas.models.endpoint import BACKOFF, BACKOFF_MAX, CALL_TIMEOUT, RETRIES, Adapted
from mas.models.fake import FakeClient
from mas.models.faults import http_client
from mas.models.limiter import Limited
from mas.models.stopping import stoppable
from mas.models.tokens import spec_for_model
from mas.models.wrappers import Delegating

KEYLESS = "not-needed"
"""The key sent to a server that needs none (the openai library insists on one)."""
EMBEDDED_CALL_TIMEOUT = 900.0
"""Seconds one call to the embedded server may take: a guard against a hung server, not a
deadline. Its speed is the machine's (a slow or busy CPU takes minutes over a long reply),
and a call cut short frees nothing: the server finishes the abandoned reply first."""
OPEN_MODEL_INFO = ModelInfo(
    vision=False, function_calling=True, json_output=True, structured_output=False, family="unknown"
)


@contextlib.asynccontextmanager
async def open_client(
    spec: str = "local",
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    threads: int | None = None,
    call_timeout: float | None = None,
    retries: int | None = None,
    reasoning: bool | None = None,
) -> AsyncIterator[ChatCompletionClient]:
    """Yield a ready client for ``spec``; anything it started is stopped on the way out.

    ``call_timeout`` (seconds per attempt, default ``CALL_TIMEOUT``, for ``local``
    ``EMBEDDED_CALL_TIMEOUT``) and ``retries`` (after a transient fault, default ``RETRIES``)
    apply to the HTTP specs; the fake ignores them.
    ``reasoning`` says whether ``openai:MODEL`` is a reasoning model (None: by its name, see
    ``capabilities.py``). A base URL without a key is for a server that needs none."""
    limits = {
        "call_timeout": CALL_TIMEOUT if call_timeout is None else call_timeout,
        "retries": RETRIES if retries is None else retries,
    }
    if spec == "fake" or spec.startswith("fake:"):
        yield FakeClient(latency=_seconds(spec.partition(":")[2] or "0", spec))
        return
    if spec == "local":
        from mas.models.server import serving

        limits["call_timeout"] = EMBEDDED_CALL_TIMEOUT if call_timeout is None else call_timeout

        async with serving(threads=threads) as server:
            # The server answers one request at a time: queue here, so that a call's deadline
            # counts the server's own time and not the wait behind other calls.
            client = Limited(Watched(_openai("smollm2-135m", server.url, KEYLESS, embedded=True, **limits), server), 1)
            try:
                yield client
            finally:
                await client.close()
        return
    if spec.startswith("openai:") and spec[len("openai:") :]:
        url = base_url or os.environ.get("MAS_BASE_URL")
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key and not url:
            raise UserError(
                "--model openai:...: no API key (set OPENAI_API_KEY or pass --api-key; "
                "a server that needs none: give its --base-url)"
            )
        model = spec[len("openai:") :]
        caps = capabilities_for(model, profile(reasoning))
        client = _openai(model, url, key or KEYLESS, embedded=False, capabilities=caps, **limits)
        async with stopped_if_misconfigured(client):
            yield client
        return
    raise UserError(f"--model {spec!r}: expected 'local', 'fake' or 'openai:MODEL'")


class Watched(Delegating):
    """A client of the embedded server. A call that failed because the server died waits for
    ``serving`` to cancel it (within ``POLL``) instead of failing: with no retry left
    (``--retries 0``) it failed before ``serving`` saw the death, and its rollout was journaled
    as errored."""

    def __init__(self, inner: ChatCompletionClient, server):
        super().__init__(inner)
        self.server = server

    async def create(self, messages, **kwargs):
        try:
            return await self.inner.create(messages, **kwargs)
        except Exception:
            if await self.server.died():
                await asyncio.sleep(60)  # cancelled by ``serving`` long before
            raise


@contextlib.asynccontextmanager
async def stopped_if_misconfigured(client: Adapted) -> AsyncIterator[None]:
    """Closes ``client`` on the way out, and stops the block with a ``UserError`` (exit code 2)
    when the endpoint turns out to be set up wrong (``Adapted.on_misconfigured``): a wrong URL,
    model name or key fails every call, and a run that went on would score nothing and say so
    only in its failure counts. The block's task is cancelled when the call that found it ran
    in another task (a rollout, a learning call), which could only count the fault; a call in
    the block's own task already raised ``EndpointError`` to its caller, which decides."""
    async with stoppable() as stop:

        def misconfigured(line: str) -> None:
            if asyncio.current_task() is not stop.task:
                stop(UserError(line))

        client.on_misconfigured = misconfigured
        try:
            yield
        finally:
            await asyncio.shield(client.close())


def _seconds(text: str, spec: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0 <= seconds <= 3600:
        raise UserError(f"--model {spec!r}: expected fake:SECONDS, the fake's latency per call (0 to 3600)")
    return seconds


def _openai(
    model: str,
    url: str | None,
    key: str,
    *,
    embedded: bool,
    call_timeout: float,
    retries: int,
    capabilities: Capabilities = STANDARD,
) -> Adapted:
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    if call_timeout <= 0 or retries < 0:
        raise UserError(f"call timeout must be > 0 and retries >= 0 (got {call_timeout:g} s, {retries})")
    # max_retries=0: Adapted retries, so that it sees and counts every fault. The response hook
    # refuses a 200 whose body is not a completion before autogen indexes into it.
    inner = OpenAIChatCompletionClient(
        model=model, base_url=url, api_key=key, model_info=OPEN_MODEL_INFO, max_retries=0, timeout=call_timeout,
        http_client=http_client(),
    )  # fmt: skip
    return Adapted(
        inner, schema_in_format=embedded, text_tools=embedded, name=model, where=url or "",
        call_timeout=call_timeout, retries=retries, backoff=BACKOFF, backoff_max=BACKOFF_MAX,
        timeouts_retried=not embedded, secrets=() if embedded else secrets_of(key, url), capabilities=capabilities,
        tokenizer="embedded" if embedded else spec_for_model(f"openai:{model}"),
    )  # fmt: skip


def secrets_of(key: str | None, url: str | None) -> tuple[str, ...]:
    """What to redact: the key (not the placeholder of a keyless server) and the URL's password."""
    return tuple(s for s in (key, *_credentials(url)) if s and s != KEYLESS)


def _credentials(url: str | None) -> tuple[str, ...]:
    """The password (and ``user:password``) of a base URL like ``http://user:pass@host/v1``."""
    try:
        parts = urlsplit(url or "")
    except ValueError:  # not a URL: the client will say so
        return ()
    if not parts.password:
        return ()
    return (parts.password, f"{parts.username or ''}:{parts.password}")
