"""A real OpenAI-compatible HTTP server on 127.0.0.1 that injects endpoint faults.

``POST /v1/chat/completions`` answers like OpenAI. Its normal replies come from
``mas.fake.default_respond``, so training works against it and a reply is a function of the
request: a retried call gets the same answer. Faults are drawn at a rate per kind from a
``random.Random`` seeded by (``seed``, the request's digest, how many times that request came
before), so the faults of a run do not depend on the order concurrent requests arrive in: a
run is reproducible, retries included. Every request and every fault is counted by kind.

Fault kinds (``KINDS``):
  ``429``            rate limited, with ``Retry-After: 0``
  ``500``, ``503``   server errors
  ``slow``           the normal reply, but only after ``slow_seconds`` (past the client's deadline)
  ``truncated``      ``Content-Length`` larger than the body written, then the connection closes
  ``garbage``        status 200 whose body is not JSON (a proxy's HTML error page)
  ``empty_choices``  a well-formed completion with ``choices: []``
  ``bad_json``       structured requests only: content that is not JSON
  ``bad_schema``     structured requests only: JSON that violates the requested schema
and, not in ``KINDS`` (so not in ``spread``): ``401``, a fault no retry can cure.

``echo_key`` puts the request's API key into error bodies; ``echo_reply`` puts it, as it is,
upper-cased, base64-encoded or spaced out, into one normal reply in two (its content,
free-text fields and tool-call arguments), as a careless endpoint or a prompt-injected model
would.

A kind's rate is its chance on each request it applies to: a rollout call never gets
``bad_json``, so it faults at the sum of the transport rates, a structured call at the sum of all.

To play a particular endpoint: ``respond`` replaces the fake's replies, ``rules`` refuses a
request with a 400 as the real API would (its message), ``decorate`` changes each completion
before it is sent (a provider's extra fields); ``bodies`` keeps every chat request received.

Use the ``fault_server`` fixture (import it into a test module), or ``with FaultServer() as s``.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from mas.models.fake import Request, default_respond

KINDS = ("429", "500", "503", "slow", "truncated", "garbage", "empty_choices", "bad_json", "bad_schema")
STRUCTURED_ONLY = frozenset({"bad_json", "bad_schema"})
TRANSPORT = tuple(k for k in KINDS if k not in STRUCTURED_ONLY)
"""Faults a client can see and retry; the others are well-formed replies with bad content."""
FATAL = ("401",)


def spread(total: float, kinds: tuple[str, ...] = KINDS) -> dict[str, float]:
    """``total`` fault rate split evenly across ``kinds``."""
    return {k: total / len(kinds) for k in kinds}


class FaultServer:
    def __init__(
        self, rates: dict[str, float] | None = None, *, seed: int = 0, slow_seconds: float = 5.0, echo_key: bool = False
    ):
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.latency, self.slots, self.busy, self.peak = 0.0, None, 0, 0
        self.refuse, self.refused, self.served = False, 0, 0
        self.echo_reply = False
        self.respond: Callable[[Request], Any] = default_respond
        self.rules: Callable[[dict], str | None] = lambda body: None
        self.decorate: Callable[[dict, dict], None] = lambda body, completion: None
        self.bodies: list[dict] = []
        """Every chat request body received, in arrival order."""
        self.configure(rates or {}, seed=seed, slow_seconds=slow_seconds, echo_key=echo_key)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def pace(self, latency: float, slots: int, *, refuse: bool = False) -> FaultServer:
        """Serve like a real endpoint: every reply takes ``latency`` seconds and at most
        ``slots`` requests are served at once; the others wait their turn (vLLM, llama.cpp),
        or with ``refuse`` get a 429 at once (a hosted API's concurrency limit; no Retry-After)."""
        self.latency, self.slots, self.refuse = latency, threading.BoundedSemaphore(slots), refuse
        return self

    def configure(
        self,
        rates: dict[str, float],
        *,
        seed: int = 0,
        slow_seconds: float | None = None,
        echo_key: bool | None = None,
        echo_reply: bool | None = None,
    ) -> FaultServer:
        """New fault rates (and seed), with every count set back to zero."""
        unknown = set(rates) - set(KINDS) - set(FATAL)
        if unknown:
            raise ValueError(f"unknown fault kinds: {sorted(unknown)}")
        if sum(rates.values()) > 1:
            raise ValueError("fault rates add up to more than 1")
        with self.lock:
            self.rates = {k: float(rates.get(k, 0.0)) for k in (*KINDS, *FATAL)}
            self.seed = seed
            self.seen: Counter[str] = Counter()
            if slow_seconds is not None:
                self.slow_seconds = slow_seconds
            if echo_key is not None:
                self.echo_key = echo_key
            if echo_reply is not None:
                self.echo_reply = echo_reply
            self.requests = 0
            self.structured = 0
            self.faults: Counter[str] = Counter()
            self.errors: list[str] = []
            """Requests the server itself could not answer (a bug in the server or the test)."""
            self.keys: Counter[str] = Counter()
            """Requests per API key received (to check that a key was really sent)."""
        return self

    # -- lifecycle

    @property
    def url(self) -> str:
        assert self._httpd is not None, "not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> FaultServer:
        server = self

        class Handler(_Handler):
            owner = server

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
        httpd.daemon_threads = True
        httpd.block_on_close = False
        httpd.request_queue_size = 256
        httpd.allow_reuse_address = True
        httpd.server_bind()
        httpd.server_activate()
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()  # wakes the handlers sleeping in a slow reply
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- counts

    @property
    def total_faults(self) -> int:
        return sum(self.faults.values())

    def figures(self) -> str:
        faults = ", ".join(f"{k} {n}" for k, n in sorted(self.faults.items())) or "none"
        return f"{self.requests} requests ({self.structured} structured), {self.total_faults} faults: {faults}"

    # -- what to answer

    def _draw(self, body: dict, structured: bool) -> str | None:
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
        with self.lock:
            self.requests += 1
            self.structured += structured
            repeat = self.seen[digest]
            self.seen[digest] += 1
            u = random.Random(f"{self.seed}/{digest}/{repeat}").random()
            for kind, rate in self.rates.items():
                if structured or kind not in STRUCTURED_ONLY:
                    u -= rate
                    if u < 0:
                        self.faults[kind] += 1
                        return kind
            return None


class _Handler(BaseHTTPRequestHandler):
    owner: FaultServer
    protocol_version = "HTTP/1.1"  # keep-alive, like a real endpoint
    timeout = 60  # an idle kept-alive connection is dropped after this
    counted = False  # this connection's call is in ``busy``

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": "fake-model", "object": "model", "owned_by": "mas"}]})
        else:
            self._send(404, _error("not found", "invalid_request_error"))

    def do_POST(self) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if not self.path.split("?", 1)[0].rstrip("/").endswith("/chat/completions"):  # Azure adds ?api-version
                self._send(404, _error(f"no route {self.path}", "invalid_request_error"))
                return
            try:
                body = json.loads(raw)
                request = to_request(body)
            except (ValueError, KeyError, TypeError) as exc:
                self._send(400, _error(f"bad request: {exc}", "invalid_request_error"))
                return
            self._answer(body, request)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (its deadline)
            self.close_connection = True

    def _answer(self, body: dict, request: Request) -> None:
        server = self.owner
        if server.slots is None:
            return self._answer_now(body, request)
        if server.refuse:
            if not server.slots.acquire(blocking=False):
                with server.lock:
                    server.refused += 1
                self._send(429, _error("Too many concurrent requests", "rate_limit_error"))
                return
            try:
                return self._serve(body, request)
            finally:
                server.slots.release()
        with server.slots:
            self._serve(body, request)

    def _serve(self, body: dict, request: Request) -> None:
        server = self.owner
        with server.lock:
            server.busy += 1
            server.served += 1
            server.peak = max(server.peak, server.busy)
        self.counted = True
        time.sleep(server.latency)
        try:
            self._answer_now(body, request)
        finally:
            self._done()

    def _done(self) -> None:
        """The call no longer counts as busy. Called before the first byte of the reply is
        written: a client that has its reply may send its next call at once, and that call
        must not meet this one still counted."""
        if self.counted:
            self.counted = False
            with self.owner.lock:
                self.owner.busy -= 1

    def _answer_now(self, body: dict, request: Request) -> None:
        server = self.owner
        with server.lock:
            server.bodies.append(body)
        refused = server.rules(body)
        if refused:
            self._send(400, _error(refused, "invalid_request_error"))
            return
        kind = server._draw(body, structured=request.schema is not None)
        key = (self.headers.get("Authorization") or "").removeprefix("Bearer ").strip()
        with server.lock:
            server.keys[key] += 1
        echo = f" (request key {key})" if server.echo_key else ""
        if kind == "401":
            self._send(401, _error("Incorrect API key provided" + echo, "invalid_request_error"))
            return
        if kind == "429":
            self._send(429, _error("Rate limit reached for requests" + echo, "rate_limit_error"), {"Retry-After": "0"})
            return
        if kind in ("500", "503"):
            message = "The server had an error" if kind == "500" else "The engine is currently overloaded"
            self._send(int(kind), _error(message + echo, "server_error"))
            return
        if kind == "garbage":
            self._send_raw(200, b"<html><body><h1>502 Bad Gateway</h1></body></html>", "application/json")
            return
        try:
            reply = server.respond(request)
        except Exception as exc:  # the responder has no answer: a bug, not a fault
            with server.lock:
                server.errors.append(f"{type(exc).__name__}: {exc}")
            self._send(400, _error(f"no reply: {exc}", "invalid_request_error"))
            return
        if server.echo_reply and key:
            reply = _echoed(reply, key, int(hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest(), 16))
        if kind == "bad_json":
            reply = "Sure! Here is the JSON you asked for: {roles: [solver], outcome: ok}"
        elif kind == "bad_schema":
            reply = json.dumps({"unexpected": True})
        completion = _completion(body, request, reply, empty=kind == "empty_choices")
        server.decorate(body, completion)
        if kind == "slow":
            if server.stopping.wait(server.slow_seconds):
                self.close_connection = True
                return
        if kind == "truncated":
            data = json.dumps(completion).encode()
            self._done()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self._send(200, completion)

    def _send(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
        self._send_raw(status, json.dumps(payload).encode(), "application/json", headers)

    def _send_raw(self, status: int, data: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self._done()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


def echo_forms(key: str) -> list[str]:
    """The key as an echo may carry it: as it is, upper-cased, base64, spaced out."""
    return [key, key.upper(), base64.b64encode(key.encode()).decode(), " ".join(key)]


FREE_TEXT = {
    "text",
    "note",
    "reason",
    "outcome",
    "lessons",
    "edits",
    "operations",
    "comparison",
    "steps",
    "missed",
    "errors",
}
"""Fields of structured replies that hold free text (a role name or an op must stay valid)."""


def _echoed(reply: Any, key: str, n: int) -> Any:
    """``reply`` with a form of ``key`` in front of its text: the content of a text reply, the
    free-text fields of a structured one, an extra argument of a tool call."""
    forms = echo_forms(key)

    def add(value: Any, i: int) -> Any:
        if isinstance(value, str):
            return f"(key {forms[(n + i) % len(forms)]}) {value}"
        if isinstance(value, list):
            return [add(v, i + j) for j, v in enumerate(value)]
        if isinstance(value, dict):
            return {k: add(v, i + j) if k in FREE_TEXT else v for j, (k, v) in enumerate(value.items())}
        return value

    if n % 2:  # one reply in two is left alone (the request decides, so a run is reproducible)
        return reply
    if isinstance(reply, list):  # FunctionCalls
        return [
            dataclasses.replace(c, arguments=json.dumps({**json.loads(c.arguments), "note": forms[n % len(forms)]}))
            for c in reply
        ]
    try:
        structured = json.loads(reply)
    except ValueError:
        return add(reply, 0)
    return json.dumps(add(structured, 0)) if isinstance(structured, dict) else reply


def _error(message: str, kind: str) -> dict:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


# -- OpenAI JSON <-> the fake's Request and reply


class _Schema:
    """Stands in for the requested pydantic class: the responder reads only its name."""


def _schema_stub(title: str) -> type:
    return type(title, (_Schema,), {})


def to_request(body: dict) -> Request:
    """The fake's view of an OpenAI chat request (what ``mas.fake._request`` builds from
    autogen messages)."""
    system, texts, results = [], [], []
    for m in body["messages"]:
        role, content = m["role"], _text(m.get("content"))
        if role in ("system", "developer"):
            system.append(content)
        elif role == "tool":
            results.append(content)
        elif role == "assistant" and m.get("tool_calls"):
            texts.append(json.dumps([c["function"]["arguments"] for c in m["tool_calls"]]))
        else:
            texts.append(content)
    tools = [t["function"]["name"] for t in body.get("tools") or []]
    title = _schema_title(body.get("response_format"), "\n".join(system))
    settings = {k: v for k, v in body.items() if k not in ("messages", "tools", "model")}
    return Request(
        "\n".join(system),
        texts,
        tools,
        _schema_stub(title) if title else None,
        int(body.get("seed") or 0),
        results,
        settings,
    )


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, list):  # content parts
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


def _schema_title(fmt: dict | None, system: str) -> str | None:
    """The requested schema's name: from ``json_schema``, from llama.cpp's ``schema``, or,
    for plain JSON mode, from the schema that mas writes into the system message."""
    if not fmt or fmt.get("type") == "text":
        return None
    if fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema") or {}
        return (spec.get("schema") or {}).get("title") or spec.get("name") or "Unknown"
    if isinstance(fmt.get("schema"), dict) and fmt["schema"].get("title"):
        return fmt["schema"]["title"]
    decoder = json.JSONDecoder()
    for i, ch in enumerate(system):
        if ch != "{":
            continue
        try:
            found, _ = decoder.raw_decode(system, i)
        except ValueError:
            continue
        if isinstance(found, dict) and "properties" in found and found.get("title"):
            return found["title"]
    return "Unknown"


def _completion(body: dict, request: Request, reply: Any, *, empty: bool = False) -> dict:
    if isinstance(reply, list):  # FunctionCalls
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in reply
            ],
        }
        finish = "tool_calls"
    else:
        message, finish = {"role": "assistant", "content": str(reply)}, "stop"
    prompt = sum(len(m.split()) for m in [request.system, *request.messages])
    completion = len(str(message["content"] or message.get("tool_calls")).split())
    return {
        "id": f"chatcmpl-{int(time.time() * 1e6):x}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake-model"),
        "choices": [] if empty else [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }


@pytest.fixture
def fault_server():
    """A started ``FaultServer`` with no faults; ``configure`` it in the test."""
    with FaultServer() as server:
        yield server
