"""The model seam: specs, JSON-schema adaptation, and tool calls as text."""

import json

import pytest
from autogen_core import FunctionCall
from autogen_core.models import (
    AssistantMessage,
    CreateResult,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    RequestUsage,
    SystemMessage,
    UserMessage,
)

from mas.errors import UserError
from mas.models.clients import open_client
from mas.models.endpoint import Adapted, grammar_safe
from mas.models.fake import FakeClient
from mas.models.texttools import action_schema, as_text, parse_action
from mas.tools import TOOLS
from mas.types.replies import Advantage, advantage_schema
from mas.types.tasks import Task

CALCULATOR = TOOLS["calculator"](Task(id="t", question="?"))
CALC = CALCULATOR.schema


def result(content):
    return CreateResult(
        finish_reason="stop", content=content, usage=RequestUsage(prompt_tokens=1, completion_tokens=1), cached=False
    )


async def test_specs():
    async with open_client("fake") as client:
        assert isinstance(client, FakeClient)
    with pytest.raises(UserError, match="expected 'local'"):
        async with open_client("gpt-4"):
            pass


async def test_openai_spec_needs_a_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(UserError, match="no API key"):
        async with open_client("openai:gpt-4o-mini"):
            pass


def test_grammar_safe_drops_string_lengths_only():
    schema = grammar_safe(advantage_schema(("global", "planner", "solver"), ("solver/0001",), 2).model_json_schema())
    text = json.dumps(schema)
    assert "maxLength" not in text and "minLength" not in text and "maxItems" in text and '"enum"' in text


@pytest.mark.parametrize(
    "reply, expected",
    [
        ('{"name": "calculator", "arguments": {"expression": "23*17"}}', ("calculator", {"expression": "23*17"})),
        ('  {"name":"calculator","arguments":{"expression":"1+1"}} ', ("calculator", {"expression": "1+1"})),
        ("I will use calculator(12 * 7) now", ("calculator", {"expression": "12 * 7"})),
        ('{"answer": "42"}', "ANSWER: 42"),
        ('{"name": "rm", "arguments": {}}', '{"name": "rm", "arguments": {}}'),
        ("just prose", "just prose"),
        ('{"answer": ' + "[" * 100_000 + "]" * 100_000 + "}", '{"answer": ' + "[" * 100_000 + "]" * 100_000 + "}"),
    ],
    ids=["call", "padded call", "call in prose", "answer", "unknown tool", "prose", "nested too deeply"],
)
def test_parse_action(reply, expected):
    parsed = parse_action(result(reply), [CALC]).content
    if isinstance(expected, tuple):
        assert isinstance(parsed, list) and parsed[0].name == expected[0]
        assert json.loads(parsed[0].arguments) == expected[1]
    else:
        assert parsed == expected


def test_action_schema_offers_each_tool_and_an_answer():
    options = action_schema([CALC])["oneOf"]
    assert options[0]["properties"]["name"] == {"const": "calculator"}
    assert options[-1]["required"] == ["answer"]


def test_tool_history_is_replayed_as_text():
    messages = as_text(
        [
            SystemMessage(content="You are the solver."),
            UserMessage(content="What is 2+3?", source="user"),
            AssistantMessage(
                content=[FunctionCall(id="1", name="calculator", arguments='{"expression": "2+3"}')], source="solver"
            ),
            FunctionExecutionResultMessage(
                content=[FunctionExecutionResult(content="5", name="calculator", call_id="1")]
            ),
        ],
        [CALC],
    )
    assert "Tools:" in messages[0].content and all(isinstance(m.content, str) for m in messages)
    assert messages[-1].content == "calculator returned: 5"


class Recorder(FakeClient):
    async def create(self, messages, **kwargs):
        self.seen = (messages, kwargs)
        return result('{"name": "calculator", "arguments": {"expression": "2+2"}}')


async def test_adapted_constrains_json_and_first_tool_turn():
    inner = Recorder()
    client = Adapted(inner, schema_in_format=True, text_tools=True, name="local")
    await client.create([UserMessage(content="hi", source="user")], json_output=Advantage)
    fmt = inner.seen[1]["extra_create_args"]["response_format"]
    assert fmt["type"] == "json_object" and "maxLength" not in json.dumps(fmt["schema"])
    called = await client.create([UserMessage(content="2+2?", source="user")], tools=[CALCULATOR])
    assert called.content[0].name == "calculator"
    assert "oneOf" in inner.seen[1]["extra_create_args"]["response_format"]["schema"]
