"""What users of other OpenAI-compatible servers meet, played on loopback as those servers do it.

A setup that fails every call (nothing listening, TLS to a plain HTTP server, a base URL
without ``/v1``, an unknown model, a refused key) stops ``mas eval`` and ``mas train`` with
one line and exit code 2, instead of a table of zeros. A server that refuses a field mas can do
without (LM Studio: ``json_object``; a LiteLLM proxy: ``seed``) gets the call again without it.
A ``<think>`` block in the content (DeepSeek-R1 or Qwen3 on Ollama, vLLM without a reasoning
parser) never becomes an answer or part of a trace.
"""

from __future__ import annotations

import json
import socket
import socketserver
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests import inprocess
from tests.fault_server import fault_server  # noqa: F401  (a fixture)

EVAL = ["eval", "maths", "--tasks", "2", "--k", "1", "--no-library", "--retries", "1"]
THOUGHT = "<think>\nLet me see: {a} + {b}... ANSWER: 987654. Hmm, no.\n</think>\n\n"


def cli(args, capsys, monkeypatch) -> tuple[int, str, str]:
    # The loopback servers' own complaints (a connection the stopped client reset) are not mas's.
    monkeypatch.setattr(socketserver.BaseServer, "handle_error", lambda self, request, address: None)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("MAS_BASE_URL", raising=False)
    return inprocess.cli(args, capsys, monkeypatch)


def refused(args, capsys, monkeypatch) -> str:
    """The one line of a command that must stop with exit code 2."""
    code, out, err = cli(args, capsys, monkeypatch)
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


class Canned:
    """A loopback HTTP server answering every request with one status, content type and body."""

    def __init__(self, status: int, body: str, content_type: str = "application/json"):
        reply = (status, body.encode(), content_type)

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(reply[0])
                self.send_header("Content-Type", reply[2])
                self.send_header("Content-Length", str(len(reply[1])))
                self.end_headers()
                self.wfile.write(reply[1])

            do_GET = do_POST

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.root = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> Canned:
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def run_dir(tmp_path):
    return ["--run-dir", tmp_path / "run"]


# -- a setup that fails every call: one line, exit 2


def test_a_server_that_is_not_running(tmp_path, capsys, monkeypatch):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    line = refused([*EVAL, "--model", "openai:llama3.2", "--base-url", url, *run_dir(tmp_path)], capsys, monkeypatch)
    assert url in line and "nothing answers there" in line and "is the server running" in line, line
    assert not (tmp_path / "run").exists()  # refused: nothing written


def test_a_refused_setup_leaves_no_run_folder(tmp_path, capsys, monkeypatch):
    """The model name the server lacks, with --run-dir a new folder of new folders: nothing is left,
    and the command with the name corrected runs in that same --run-dir (run.json records the model)."""
    body = json.dumps({"error": {"message": "The model `llama9` does not exist.", "type": "NotFoundError"}})
    folder = tmp_path / "runs" / "first"
    args = ["train", "maths", "--tasks", "2", "--group-size", "2", "--epochs", "1", "--retries", "0"]
    args += ["--library", tmp_path / "lib.json", "--run-dir", folder]
    with Canned(404, body) as canned:
        refused([*args, "--model", "openai:llama9", "--base-url", f"{canned.root}/v1"], capsys, monkeypatch)
    assert not (tmp_path / "runs").exists() and not (tmp_path / "lib.json").exists()
    code, out, err = cli([*args, "--model", "fake"], capsys, monkeypatch)
    assert code == 0, err
    assert (folder / "journal.jsonl").stat().st_size > 0


def test_the_stop_is_one_line_from_the_installed_command(tmp_path):
    """As a user runs it: the rollouts cut by the stop say nothing more (no unretrieved task's traceback)."""
    import subprocess

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    args = [*EVAL, "--model", "openai:llama3.2", "--base-url", url, "--run-dir", tmp_path / "run"]
    done = subprocess.run(
        [sys.executable, "-c", "from mas.cli.main import main; main()", *map(str, args)], capture_output=True, text=True
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith(f"error: {url}: nothing answers there"), done.stderr


def test_https_to_a_plain_http_server(fault_server, tmp_path, capsys, monkeypatch):  # noqa: F811
    url = fault_server.url.replace("http://", "https://")
    line = refused([*EVAL, "--model", "openai:m", "--base-url", url, *run_dir(tmp_path)], capsys, monkeypatch)
    assert "TLS handshake failed" in line and f"try {fault_server.url}" in line, line


@pytest.mark.parametrize(
    "server, status, body, content_type",
    [
        ("ollama", 404, "404 page not found", "text/plain"),
        ("vllm", 404, '{"detail":"Not Found"}', "application/json"),
        ("lm studio", 200, '{"error":"Unexpected endpoint or method. (POST /chat/completions)"}', "application/json"),
    ],
)
def test_a_base_url_without_v1(server, status, body, content_type, tmp_path, capsys, monkeypatch):
    """The most common mistake with Ollama: http://localhost:11434, as its own API is served."""
    with Canned(status, body, content_type) as canned:
        args = [*EVAL, "--model", "openai:llama3.2", "--base-url", canned.root, *run_dir(tmp_path)]
        line = refused(args, capsys, monkeypatch)
    assert f"try --base-url {canned.root}/v1" in line, line
    if server == "lm studio":
        assert "Unexpected endpoint or method" in line, line


@pytest.mark.parametrize(
    "message",
    [
        'model "llama9" not found, try pulling it first',  # Ollama
        "The model `llama9` does not exist.",  # vLLM
    ],
)
def test_an_unknown_model(message, tmp_path, capsys, monkeypatch):
    body = json.dumps({"error": {"message": message, "type": "api_error", "param": None, "code": None}})
    with Canned(404, body) as canned:
        args = [*EVAL, "--model", "openai:llama9", "--base-url", f"{canned.root}/v1", *run_dir(tmp_path)]
        line = refused(args, capsys, monkeypatch)
    assert "no model 'llama9'" in line and "--model openai:NAME" in line and message in line, line


def test_a_refused_key_stops_training(fault_server, tmp_path, capsys, monkeypatch):  # noqa: F811
    fault_server.configure({"401": 1.0})
    args = ["train", "maths", "--model", "openai:m", "--base-url", fault_server.url, "--api-key", "sk-wrong-000000"]
    args += ["--tasks", "2", "--group-size", "2", "--epochs", "1", "--library", tmp_path / "lib.json"]
    line = refused([*args, *run_dir(tmp_path)], capsys, monkeypatch)
    assert "refused the API key (401" in line and "--api-key" in line and "sk-wrong-000000" not in line, line
    assert fault_server.requests < 8  # stopped at the first calls, not after every rollout


# -- fields a server refuses: sent again without them


def train(tmp_path, server, capsys, monkeypatch, model="m"):
    # One call at a time: "once refused, never sent again" is then the order the server saw them
    # in (calls in flight when the refusal came back were sent with the field before it).
    args = [
        "train",
        "maths",
        "--model",
        f"openai:{model}",
        "--base-url",
        server.url,
        "--tasks",
        "4",
        "--concurrency",
        "1",
    ]
    args += ["--batch-size", "4", "--group-size", "2", "--epochs", "1", "--library", tmp_path / "lib.json"]
    code, out, err = cli([*args, *run_dir(tmp_path)], capsys, monkeypatch)
    assert code == 0, err
    records = [json.loads(line) for line in (tmp_path / "run" / "journal.jsonl").read_text().splitlines()]
    return records, [r["data"] for r in records if r["kind"] == "step"]


def test_lm_studio_refuses_json_object(fault_server, tmp_path, capsys, monkeypatch):  # noqa: F811
    """LM Studio takes ``response_format`` of type ``json_schema`` or ``text`` only (400 otherwise)."""
    fmt = lambda body: body.get("response_format") or {}  # noqa: E731
    fault_server.rules = lambda body: (
        "'response_format.type' must be 'json_schema' or 'text'" if fmt(body).get("type") == "json_object" else None
    )
    _, steps = train(tmp_path, fault_server, capsys, monkeypatch)
    assert sum(s["informative"] for s in steps) > 0
    assert all(s["endpoint"]["failures"] == 0 for s in steps)
    asked = [fmt(b)["type"] for b in fault_server.bodies if fmt(b)]
    first = asked.index("json_schema")
    assert set(asked[first:]) == {"json_schema"}  # once refused, never sent again
    assert all(fmt(b)["json_schema"]["schema"]["properties"] for b in fault_server.bodies if fmt(b).get("json_schema"))


def test_a_litellm_proxy_refuses_seed(fault_server, tmp_path, capsys, monkeypatch):  # noqa: F811
    fault_server.rules = lambda body: (
        "litellm.UnsupportedParamsError: anthropic does not support parameters: ['seed'], for model=claude. "
        "To drop these, set `litellm.drop_params=True`"
        if "seed" in body
        else None
    )
    _, steps = train(tmp_path, fault_server, capsys, monkeypatch)
    assert all(s["failed_rollouts"] == 0 and s["endpoint"]["failures"] == 0 for s in steps)
    seeded = ["seed" in b for b in fault_server.bodies]
    assert seeded[0] and not any(seeded[seeded.index(False) :])  # once refused, never sent again


# -- thinking in the content


def test_think_blocks_in_the_content_are_thoughts(fault_server, tmp_path, capsys, monkeypatch):  # noqa: F811
    """Ollama's or vLLM's DeepSeek-R1 and Qwen3 write their reasoning in the content, in
    ``<think>`` tags (R1 sometimes without the opening one); braces in it broke JSON replies."""

    def thinking(body, completion):
        for choice in completion["choices"]:
            if choice["message"].get("content"):
                think = THOUGHT if len(fault_server.bodies) % 2 else THOUGHT.removeprefix("<think>")
                choice["message"]["content"] = think + choice["message"]["content"]

    fault_server.decorate = thinking
    records, steps = train(tmp_path, fault_server, capsys, monkeypatch, model="qwen3:8b")
    assert all(s["failed_rollouts"] == 0 for s in steps)
    assert sum(s["calls"][stage]["failures"] for s in steps for stage in ("summary", "advantage", "edit")
               if stage in s["calls"]) == 0  # fmt: skip
    rollouts = [r["data"] for r in records if r["kind"] == "rollout"]
    assert rollouts and all(r["answer"] != "987654" for r in rollouts)
    kept = [r for r in records if r["kind"] in ("rollout", "summary", "advantage", "edit")]  # not the raw replies
    assert "987654" not in json.dumps(kept) and "987654" not in (tmp_path / "lib.json").read_text()


def test_eval_says_how_many_rollouts_failed(fault_server, tmp_path, capsys, monkeypatch):  # noqa: F811
    """A server that fails part of the calls (not its setup) left a Mean@k lowered by rollouts
    scored 0 for the endpoint's faults, and nothing in the table said so."""
    fault_server.configure({"500": 0.5}, seed=3)
    args = ["eval", "maths", "--tasks", "4", "--k", "2", "--no-library", "--retries", "0", "--model", "openai:m"]
    code, out, err = cli([*args, "--base-url", fault_server.url, *run_dir(tmp_path)], capsys, monkeypatch)
    assert code == 0, err
    [line] = [line for line in out.splitlines() if "rollouts failed" in line]
    assert line.startswith("none: ") and line.endswith("each scored 0") and " of 8 rollouts failed (" in line, line
    assert "(EndpointError " in line, line  # the agent's error, not the RuntimeError autogen's team wraps it in
