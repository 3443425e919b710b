import asyncio

from autogen_core.models import SystemMessage, UserMessage

from mas.models.fake import FakeClient
from mas.types.replies import advantage_schema, edit_schema, summary_schema


def messages(text, system="You are the solver."):
    return [SystemMessage(content=system), UserMessage(content=text, source="user")]


async def test_reply_is_a_function_of_the_request_even_under_concurrency():
    client = FakeClient()
    asks = [messages(f"What is {i} + {i}?") for i in range(20)] * 3
    seeds = [{"seed": i % 7} for i in range(60)]
    first = await asyncio.gather(*(client.create(m, extra_create_args=s) for m, s in zip(asks, seeds)))
    again = await asyncio.gather(*(client.create(m, extra_create_args=s) for m, s in reversed(list(zip(asks, seeds)))))
    assert [r.content for r in first] == [r.content for r in reversed(again)]
    assert client.calls == 120


async def test_structured_defaults_validate():
    client = FakeClient()
    roles = ("planner", "solver", "verifier")
    schemas = (summary_schema(roles), advantage_schema(("global", *roles), (), 2), edit_schema((), 8))
    for schema in schemas:
        text = "Task: How many apples?\n## solver\n- add: When counting, use the calculator. (why: it helps)"
        result = await client.create(messages(text, system="Team:\n- solver: solves."), json_output=schema)
        assert schema.model_validate_json(result.content)


async def test_scripted_responder_and_recorded_settings():
    client = FakeClient(lambda request: f"seen {len(request.messages)}")
    result = await client.create(messages("hi"), extra_create_args={"temperature": 0.2, "max_tokens": 9})
    assert result.content == "seen 1"
    assert client.requests[0].settings == {"temperature": 0.2, "max_tokens": 9}
