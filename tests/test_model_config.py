"""``--model-config``: an autogen model client config file (``client.dump_component()``), behind
the same wrappers as ``--model openai:...`` (retries counted by kind, JSON validation, redaction),
and a bad file refused with one line naming it (and its field), exit 2, nothing written."""

from __future__ import annotations

import json

import pytest
import yaml
from autogen_core.models import CreateResult, RequestUsage, UserMessage
from autogen_ext.models.openai import OpenAIChatCompletionClient

from mas import paths
from mas.errors import EndpointError
from mas.models.config_file import load_model_config
from mas.models.endpoint import Adapted
from mas.models.fake import FAKE_INFO
from mas.models.wrappers import Delegating
from tests.inprocess import cli

KEY = "sk-config-file-secret-0123456789"


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch):
    monkeypatch.setattr("mas.models.config_file.BACKOFF", 0.05)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def steps(run) -> list[dict]:
    lines = (run / "journal.jsonl").read_text().splitlines()
    return [r["data"] for r in map(json.loads, lines) if r["kind"] == "step"]


def write(path, client) -> str:
    data = client.dump_component().model_dump(mode="json")
    path.write_text(yaml.safe_dump(data) if path.suffix == ".yaml" else json.dumps(data))
    return str(path)


def test_an_openai_config_trains_through_faults_and_bad_replies(fault_server, tmp_path, capsys, monkeypatch):
    fault_server.configure({"500": 0.1, "429": 0.1, "bad_json": 0.15}, seed=3)
    config = write(
        tmp_path / "model.yaml",
        OpenAIChatCompletionClient(model="gpt-4o-mini", base_url=fault_server.url, api_key=KEY),
    )
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # the dump wrote "**********": the key comes from here
    run = tmp_path / "run"
    args = ["train", "maths", "--model-config", config, "--tasks", "8", "--group-size", "3", "--retries", "8"]
    code, out, err = cli([*args, "--run-dir", run, "--library", tmp_path / "lib.json"], capsys, monkeypatch)
    assert code == 0, err
    done = steps(run)
    assert sum(s["endpoint"]["retries"] for s in done) > 0 and all(s["endpoint"]["failures"] == 0 for s in done)
    assert sum(c["failures"] for s in done for c in s["calls"].values()) > 0  # bad JSON: counted, skipped
    assert all(s["failed_rollouts"] == 0 for s in done)
    assert set(fault_server.keys) == {KEY}
    written = "".join(p.read_text() for p in tmp_path.rglob("*.json*"))
    assert KEY not in written and "run.json" in [p.name for p in run.iterdir()]


def test_an_azure_config_reaches_its_deployment(fault_server, tmp_path, capsys, monkeypatch):
    root = fault_server.url.removesuffix("/v1")
    data = {  # what AzureOpenAIChatCompletionClient(...).dump_component() writes (it needs azure-core to dump)
        "provider": "autogen_ext.models.openai.AzureOpenAIChatCompletionClient",
        "component_type": "model",
        "config": {
            "model": "gpt-4o", "azure_endpoint": root, "azure_deployment": "team-deployment",
            "api_version": "2024-06-01", "api_key": KEY,
        },
    }  # fmt: skip
    config = tmp_path / "azure.json"
    config.write_text(json.dumps(data))
    run = tmp_path / "run"
    code, out, err = cli(
        ["train", "maths", "--model-config", config, "--tasks", "4", "--group-size", "2", "--run-dir", run],
        capsys, monkeypatch,
    )  # fmt: skip
    assert code == 0, err
    assert all(s["failed_rollouts"] == 0 for s in steps(run))
    assert json.loads((run / "run.json").read_text())["model"] == "azure:gpt-4o"
    assert KEY not in (run / "journal.jsonl").read_text()


OPENAI = {"provider": "autogen_ext.models.openai.OpenAIChatCompletionClient", "config": {"model": "gpt-4o-mini"}}

BAD_CONFIGS = {  # file name, text -> what the one line says
    "not json": ("m.json", "{", "not valid JSON at line 1"),
    "bad yaml": ("m.yaml", "provider: [unclosed", "not valid YAML"),
    "a list": ("m.json", "[]", "expected an object with 'provider' and 'config'"),
    "no provider": ("m.json", json.dumps({"config": {}}), "field 'provider': Field required"),
    "no config": ("m.json", json.dumps({"provider": "OpenAIChatCompletionClient"}), "field 'config': Field required"),
    "a team": ("m.json", json.dumps({**OPENAI, "component_type": "team"}), "field 'component_type' is 'team'"),
    "missing sdk": (
        "m.json",
        json.dumps({"provider": "autogen_ext.models.anthropic.AnthropicChatCompletionClient", "config": {}}),
        "pip install 'autogen-ext[anthropic]'",
    ),
    "no such class": ("m.json", json.dumps({"provider": "mas.models.Nothing", "config": {}}), "has no class 'Nothing'"),
    "not a client": ("m.json", json.dumps({"provider": "mas.errors.UserError", "config": {}}), "is not a model client"),
    "no model": (
        "m.json",
        json.dumps({"provider": "OpenAIChatCompletionClient", "config": {}}),
        "field 'config.model'",
    ),
    "bad type": (
        "m.json",
        json.dumps({**OPENAI, "config": {"model": "gpt-4o", "temperature": "hot"}}),
        "field 'config.temperature'",
    ),
    "bad mas section": ("m.json", json.dumps({**OPENAI, "mas": {"reasoning": True}}), "field 'mas.reasoning'"),
    "bad capability": (
        "m.json",
        json.dumps({**OPENAI, "mas": {"capabilities": {"token_limit": "tokens"}}}),
        "field 'mas.capabilities.token_limit'",
    ),
    "refused by the client": (
        "m.json",
        json.dumps({"provider": "OpenAIChatCompletionClient", "config": {"model": "mystery-model", "api_key": "x"}}),
        "OpenAIChatCompletionClient refused the config: model_info is required",
    ),
}


@pytest.mark.parametrize("name", BAD_CONFIGS)
@pytest.mark.parametrize("flag", ["--model-config", "--learner-config"])
def test_a_bad_config_is_one_line_naming_the_file_exit_2_nothing_written(name, flag, tmp_path, capsys, monkeypatch):
    file_name, text, message = BAD_CONFIGS[name]
    path = tmp_path / file_name
    path.write_text(text)
    args = ["train", "maths", flag, path, "--run-dir", tmp_path / "run"]
    if flag == "--learner-config":
        args += ["--model", "fake"]
    before = sorted(tmp_path.rglob("*")), sorted(paths.home().rglob("*"))
    code, _, err = cli(args, capsys, monkeypatch)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith(f"error: {flag} {path}: ") and message in lines[0], err
    assert (sorted(tmp_path.rglob("*")), sorted(paths.home().rglob("*"))) == before


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model-config", "{tmp}/none.json"], "--model-config {tmp}/none.json: no such file"),
        (["--model-config", "{tmp}"], "not a file"),
        (["--model", "fake", "--model-config", "{good}"], "give --model or --model-config, not both"),
    ],
)
def test_bad_config_arguments(args, message, tmp_path, capsys, monkeypatch):
    good = tmp_path / "good.json"
    good.write_text(json.dumps({**OPENAI, "config": {"model": "gpt-4o-mini", "api_key": "x"}}))
    args = [a.format(tmp=tmp_path, good=good) for a in args]
    code, _, err = cli(["eval", "maths", *args], capsys, monkeypatch)
    assert code == 2 and len(err.strip().splitlines()) == 1 and message.format(tmp=tmp_path) in err, err


# -- another provider's SDK errors, read by their shape ---------------------------------------


class ProviderError(Exception):
    """Like anthropic.APIStatusError / ollama.ResponseError: a status code on the exception."""

    def __init__(self, status_code: int):
        super().__init__(f"status {status_code}")
        self.status_code = status_code


class ReadTimeout(Exception):
    pass


class Scripted(Delegating):
    """Raises the scripted errors in turn, then answers."""

    def __init__(self, errors):
        super().__init__(None)
        self.errors, self.calls = list(errors), 0

    async def create(self, messages, **kwargs):
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return CreateResult(
            finish_reason="stop", content="ok", usage=RequestUsage(prompt_tokens=1, completion_tokens=1), cached=False
        )

    @property
    def model_info(self):
        return FAKE_INFO


def adapted(errors) -> Adapted:
    return Adapted(
        Scripted(errors), schema_in_format=False, text_tools=False, name="other", retries=3, backoff=0.01,
        json_mode="native",
    )  # fmt: skip


async def test_other_providers_faults_are_retried_and_counted():
    client = adapted([ProviderError(429), ProviderError(503), ReadTimeout("slow")])
    result = await client.create([UserMessage(content="hi", source="user")])
    assert result.content == "ok" and client.counts.retries == 3
    assert client.counts.faults == {"429": 1, "503": 1, "timeout": 1}


async def test_other_providers_fatal_faults_and_bugs():
    client = adapted([ProviderError(400)])
    with pytest.raises(EndpointError, match="400"):
        await client.create([UserMessage(content="hi", source="user")])
    assert client.counts.failures == 1 and client.inner.calls == 1
    with pytest.raises(ValueError, match="a bug"):  # not an endpoint fault: not retried, not hidden
        await adapted([ValueError("a bug")]).create([UserMessage(content="hi", source="user")])


async def test_native_json_asks_the_clients_own_switch():
    from mas.types.replies import Summary

    seen = {}

    class Recording(Scripted):
        async def create(self, messages, **kwargs):
            seen.update(kwargs)
            return await super().create(messages, **kwargs)

    client = Adapted(Recording([]), schema_in_format=False, text_tools=False, name="x", json_mode="native")
    await client.create([UserMessage(content="hi", source="user")], json_output=Summary)
    assert seen["json_output"] is True and "response_format" not in seen["extra_create_args"]


async def test_a_masked_key_is_not_sent_and_a_keyless_server_works(tmp_path, fault_server):
    path = tmp_path / "m.json"
    write(path, OpenAIChatCompletionClient(model="gpt-4o-mini", base_url=fault_server.url, api_key=KEY))
    assert "**********" in path.read_text()
    configured = load_model_config(path)
    assert configured.label == "openai:gpt-4o-mini" and configured.client.secrets == ()
    await configured.client.create([UserMessage(content="What is 2 + 3?", source="user")])
    await configured.client.close()
    assert set(fault_server.keys) == {"not-needed"}


def test_a_config_whose_server_is_not_there_stops_with_one_line(tmp_path, capsys, monkeypatch):
    """As ``--model openai:... --base-url`` does: a config file pointing at nothing scored every
    rollout 0 and exited 0."""
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    config = write(tmp_path / "model.json", OpenAIChatCompletionClient(model="gpt-4o-mini", base_url=url, api_key=KEY))
    args = ["eval", "maths", "--model-config", config, "--tasks", "2", "--k", "1", "--no-library", "--retries", "0"]
    code, out, err = cli([*args, "--run-dir", tmp_path / "run"], capsys, monkeypatch)
    assert code == 2, (out, err)
    [line] = err.strip().splitlines()
    assert line.startswith(f"error: {url}: nothing answers there"), line


def test_a_config_file_saved_with_a_bom_is_read(tmp_path):
    """Windows editors write a UTF-8 BOM; json refused it ("Unexpected UTF-8 BOM"), YAML read it as text."""
    from mas.models.config_file import read_document

    for name, body in (("m.json", '{"provider": "x", "config": {}}'), ("m.yaml", "provider: x\nconfig: {}\n")):
        (tmp_path / name).write_text("\ufeff" + body, encoding="utf-8")
        assert read_document(tmp_path / name, "--model-config") == {"provider": "x", "config": {}}
