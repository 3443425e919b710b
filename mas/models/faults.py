"""Endpoint faults: what counts as transient, and how long a server asks us to wait.

Stage: none: the model seam (every model call).

A fault is one failed attempt at the HTTP endpoint: a status code worth retrying (408, 409,
429, 5xx), a timeout, a dropped or truncated connection, or a 200 whose body is not a chat
completion (``BadBody``). ``Adapted`` (``endpoint.py``) retries them and counts each by kind.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Mapping


def http_client():
    """The HTTP client of every OpenAI-family endpoint: the SDK's own defaults on aiohttp's
    transport, whose C parser and pool spend about a quarter less CPU per call than httpx's
    own (``bench/scale.py``), with ``check_completion`` as its response hook."""
    import openai

    return openai.DefaultAioHttpClient(event_hooks={"request": [_no_userinfo], "response": [check_completion]})


async def _no_userinfo(request) -> None:
    """httpx hook: a URL's ``user:password@`` has become the request's Basic credentials by
    now; aiohttp refuses a request that has both, so the URL loses them."""
    if request.url.userinfo:
        request.url = request.url.copy_with(username=None, password=None)


class BadBody(Exception):
    """A 200 reply that is not a usable chat completion (``kind``: ``bad_body`` when it is not
    a JSON completion, ``empty_choices`` for ``choices: []``). Transient: retried."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


async def check_completion(response) -> None:
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
        # LM Studio answers a path it does not serve with a 200 and {"error": "Unexpected endpoint..."}.
        error = body.get("error") if isinstance(body, dict) else None
        said = error.get("message") if isinstance(error, dict) else error
        what = f": {' '.join(str(said).split())[:200]}" if said else ""
        raise BadBody("bad_body", f"the reply body is not a chat completion (no choices){what}")
    if not choices:
        raise BadBody("empty_choices", "the reply has no choices")
    if not isinstance(choices[0], dict) or not isinstance(choices[0].get("message"), dict):
        raise BadBody("bad_body", "the reply's first choice has no message")


class Transient(Exception):
    """One failed attempt worth another (raised and retried inside ``Adapted``)."""

    def __init__(self, kind: str, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.kind, self.retry_after = kind, retry_after


def retry_after(headers: Mapping[str, str]) -> float | None:
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
