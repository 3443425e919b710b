"""Reasoning models, against a loopback endpoint that enforces their rules as the real APIs do:
o-series and gpt-5 refuse ``max_tokens`` and a non-default ``temperature`` or ``top_p`` with a
400; deepseek-reasoner returns its chain of thought in ``reasoning_content`` and refuses a
request that sends one back. mas passes with its capability table, and fails (every call
refused) when the table is overridden the wrong way: so the server really enforces."""

from __future__ import annotations

import json
import re

import pytest

from mas.models.capabilities import REASONING, STANDARD, capabilities_for
from tests.inprocess import cli

REASONING_MODEL = re.compile(r"^(o\d|gpt-5)(?!-chat)")
THOUGHT = "Thinking it over, the answer could be 987654. ANSWER: 987654"


def openai_rules(body: dict) -> str | None:
    """What OpenAI and DeepSeek refuse, in their words."""
    model = body["model"]
    if REASONING_MODEL.match(model):
        if "max_tokens" in body:
            return "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
        for name in ("temperature", "top_p"):
            if name in body and body[name] != 1:
                return (
                    f"Unsupported value: '{name}' does not support {body[name]} with this model. "
                    "Only the default (1) value is supported."
                )
    if model.startswith("deepseek-reasoner") and any("reasoning_content" in m for m in body["messages"]):
        return "The reasoning_content is an intermediate result for display purposes only and must not be sent back."
    return None


def deepseek_thoughts(body: dict, completion: dict) -> None:
    if body["model"].startswith("deepseek-reasoner"):
        for choice in completion["choices"]:
            choice["message"]["reasoning_content"] = THOUGHT


@pytest.fixture
def endpoint(fault_server, monkeypatch):
    fault_server.rules = openai_rules
    fault_server.decorate = deepseek_thoughts
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # servers that need no key
    monkeypatch.delenv("MAS_BASE_URL", raising=False)
    return fault_server


def train(tmp_path, extra, capsys, monkeypatch):
    run = tmp_path / "run"
    args = ["train", "maths", "--tasks", "4", "--batch-size", "4", "--group-size", "2", "--run-dir", str(run)]
    code, out, err = cli([*args, "--library", str(tmp_path / "lib.json"), *extra], capsys, monkeypatch)
    assert code == 0, err
    return [r["data"] for r in journal(run) if r["kind"] == "step"], out


def journal(run) -> list[dict]:
    return [json.loads(line) for line in (run / "journal.jsonl").read_text().splitlines()]


@pytest.mark.parametrize(
    "name, expected",
    [
        ("o3-mini", REASONING),
        ("o1", REASONING),
        ("o4-mini-2025-04-16", REASONING),
        ("gpt-5", REASONING),
        ("GPT-5-mini", REASONING),
        ("openai/gpt-5-nano", REASONING),
        ("gpt-5-chat-latest", STANDARD),
        ("gpt-4o-mini", STANDARD),
        ("deepseek-chat", STANDARD),
    ],
)
def test_capability_table(name, expected):
    assert capabilities_for(name) == expected


def test_adapt_renames_the_cap_and_drops_sampling():
    args = {"seed": 3, "temperature": 0.7, "top_p": 0.9, "max_tokens": 100}
    assert capabilities_for("o3-mini").adapt(args) == {"seed": 3, "max_completion_tokens": 100 + 4096}
    assert capabilities_for("deepseek-reasoner").adapt(args) == {"seed": 3, "max_tokens": 4196}
    assert capabilities_for("gpt-4o").adapt(args) == args
    custom = capabilities_for("o3-mini", {"reasoning_tokens": 0, "sampling": True})
    assert custom.adapt(args) == {"seed": 3, "temperature": 0.7, "top_p": 0.9, "max_completion_tokens": 100}


async def test_the_server_enforces_the_rules(endpoint):
    """Without mas, autogen's client sends what a reasoning model refuses."""
    import openai
    from autogen_core.models import UserMessage
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    client = OpenAIChatCompletionClient(
        model="o3-mini", base_url=endpoint.url, api_key="not-needed", max_retries=0, temperature=0.7
    )
    with pytest.raises(openai.BadRequestError, match="temperature"):
        await client.create([UserMessage(content="What is 2 + 2?", source="user")])
    await client.close()


@pytest.mark.parametrize("model", ["o3-mini", "gpt-5"])
def test_reasoning_models_train_without_a_key(endpoint, model, tmp_path, capsys, monkeypatch):
    steps, _ = train(tmp_path, ["--model", f"openai:{model}", "--base-url", endpoint.url], capsys, monkeypatch)
    assert steps and all(s["failed_rollouts"] == 0 and s["endpoint"]["failures"] == 0 for s in steps)
    assert sum(s["informative"] for s in steps) > 0  # learning calls were answered too
    assert endpoint.bodies and all("max_completion_tokens" in b and "temperature" not in b for b in endpoint.bodies)
    assert set(endpoint.keys) == {"not-needed"}


def test_forcing_a_reasoning_model_to_standard_fails_every_call(endpoint, tmp_path, capsys, monkeypatch):
    args = ["--model", "openai:o3-mini", "--base-url", endpoint.url, "--no-reasoning", "--retries", "0"]
    steps, _ = train(tmp_path, args, capsys, monkeypatch)
    assert all(s["failed_rollouts"] == 8 and s["endpoint"]["faults"] == {"400": s["endpoint"]["calls"]} for s in steps)


def test_reasoning_flag_makes_an_unknown_name_a_reasoning_model(endpoint, tmp_path, capsys, monkeypatch):
    """A reasoning model under a name the table does not know (a proxy's alias)."""
    endpoint.rules = lambda body: openai_rules({**body, "model": "o3"})
    args = ["--model", "openai:my-proxy-alias", "--base-url", endpoint.url, "--reasoning"]
    steps, _ = train(tmp_path, args, capsys, monkeypatch)
    assert all(s["failed_rollouts"] == 0 for s in steps)


def test_deepseek_reasoner_thoughts_never_become_answers(endpoint, tmp_path, capsys, monkeypatch):
    steps, _ = train(tmp_path, ["--model", "openai:deepseek-reasoner", "--base-url", endpoint.url], capsys, monkeypatch)
    assert all(s["failed_rollouts"] == 0 for s in steps)
    records = journal(tmp_path / "run")
    answers = [r["data"]["answer"] for r in records if r["kind"] == "rollout"]
    assert answers and "987654" not in answers
    texts = json.dumps([r for r in records if r["kind"] in ("summary", "advantage", "edit")])
    assert "987654" not in texts and "987654" not in (tmp_path / "lib.json").read_text()
    assert all("temperature" not in b and "max_tokens" in b for b in endpoint.bodies)  # it ignores sampling


def test_a_model_config_file_with_sampling_settings_fits_the_model(endpoint, tmp_path, capsys, monkeypatch):
    config = {
        "provider": "autogen_ext.models.openai.OpenAIChatCompletionClient",
        "config": {"model": "gpt-5", "base_url": endpoint.url, "temperature": 0.2, "max_tokens": 300},
    }
    path = tmp_path / "gpt5.json"
    path.write_text(json.dumps(config))
    steps, out = train(tmp_path, ["--model-config", str(path)], capsys, monkeypatch)
    assert all(s["failed_rollouts"] == 0 for s in steps)
    assert json.loads((tmp_path / "run" / "run.json").read_text())["model"] == "openai:gpt-5"


def test_a_model_config_can_override_the_table(endpoint, tmp_path, capsys, monkeypatch):
    config = {
        "provider": "OpenAIChatCompletionClient",
        "config": {"model": "o3-mini", "base_url": endpoint.url},
        "mas": {"capabilities": {"token_limit": "max_tokens"}},
    }
    path = tmp_path / "o3.json"
    path.write_text(json.dumps(config))
    steps, _ = train(tmp_path, ["--model-config", str(path), "--retries", "0"], capsys, monkeypatch)
    assert all(s["failed_rollouts"] == 8 for s in steps)  # the override sent max_tokens: refused
    assert all("max_tokens" in b for b in endpoint.bodies)
