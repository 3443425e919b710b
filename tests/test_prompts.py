"""Every template renders, strictly; structured calls validate, repair and count."""

import json

import pytest
from autogen_core.models import CreateResult, RequestUsage

from mas.ask import ask, close_truncated
from mas.errors import ModelReplyError
from mas.meter import Meter
from mas.models.fake import FakeClient
from mas.templates import STAGES, render, template
from mas.types import EditBatch


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("half", ["system", "user"])
def test_every_template_renders(stage, half):
    names = template(f"{stage}.{half}").get_identifiers()
    text = render(f"{stage}.{half}", **{n: f"<{n}>" for n in names})
    assert all(f"<{n}>" in text for n in names) and "$" not in text


def test_rendering_is_strict():
    with pytest.raises(KeyError, match="missing"):
        render("edit.user", role="solver")
    with pytest.raises(KeyError, match="unused"):
        render("edit.user", role="solver", library="", proposals="", extra="x")


class Scripted(FakeClient):
    def __init__(self, content, finish="stop"):
        super().__init__()
        self.content, self.finish = content, finish

    async def create(self, messages, **kwargs):
        return CreateResult(
            finish_reason=self.finish,
            content=self.content,
            usage=RequestUsage(prompt_tokens=3, completion_tokens=4),
            cached=False,
        )


VALUES = dict(role="solver", system_role="solver", system_max_lessons=8, library="(none)", proposals="- (solver) x")


async def test_ask_counts_and_keeps_the_raw_reply():
    meter = Meter()
    with pytest.raises(ModelReplyError) as caught:
        await ask(Scripted("sure! here you go"), "edit", EditBatch, meter=meter, seed=0, temperature=0, **VALUES)
    assert caught.value.raw == "sure! here you go"
    assert meter.stages["edit"].calls == 1 and meter.stages["edit"].failures == 1


async def test_ask_finds_json_in_prose_and_repairs_a_cut_reply():
    meter = Meter()
    prose = 'Here: ```json\n{"edits": [{"op": "keep"}]}\n```'
    assert (await ask(Scripted(prose), "edit", EditBatch, meter=meter, seed=0, temperature=0, **VALUES)).edits == [
        {"op": "keep"}
    ]
    cut = '{"edits": [{"op": "add", "text": "Check the units before'
    batch = await ask(Scripted(cut, finish="length"), "edit", EditBatch, meter=meter, seed=0, temperature=0, **VALUES)
    assert batch.edits == [{"op": "add", "text": "Check the units before"}]
    assert meter.stages["edit"].failures == 0


def test_close_truncated_handles_escapes_and_nesting():
    assert json.loads(close_truncated('{"a": "x\\"y')) == {"a": 'x"y'}
    assert json.loads(close_truncated('{"a": ["}", {"b": 1')) == {"a": ["}", {"b": 1}]}


async def test_over_long_strings_are_cut_to_their_field():
    from mas.types import Summary, for_roles

    schema = for_roles(Summary, ("planner", "solver"))
    reply = json.dumps({"roles": [{"role": "solver", "note": "n" * 900}], "outcome": "o" * 5000})
    values = dict(question="q", answer="1", reward="1", traces="t")
    summary = await ask(Scripted(reply), "summary", schema, meter=Meter(), seed=0, temperature=0, **values)
    assert len(summary.outcome) == 600 and len(summary.roles[0].note) == 600
    with pytest.raises(ModelReplyError):  # anything else wrong still fails
        await ask(
            Scripted(json.dumps({"roles": [{"role": "astronaut", "note": "x" * 900}], "outcome": "o"})),
            "summary",
            schema,
            meter=Meter(),
            seed=0,
            temperature=0,
            **values,
        )
