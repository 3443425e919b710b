"""Every template renders, strictly; structured calls validate, repair and count."""

import json

import pytest
from autogen_core.models import CreateResult, RequestUsage

from mas.ask import ask
from mas.errors import ModelReplyError
from mas.library.edits import parse_edits
from mas.meter import Meter
from mas.models.fake import FakeClient
from mas.templates import STAGES, render, template
from mas.types.replies import EditBatch, summary_schema


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("half", ["system", "user"])
def test_every_template_renders(stage, half):
    names = template(f"{stage}.{half}").get_identifiers()
    text = render(f"{stage}.{half}", **{n: f"<{n}>" for n in names})
    assert all(f"<{n}>" in text for n in names) and "$" not in text


def test_rendering_is_strict():
    with pytest.raises(KeyError, match="missing"):
        render("edit.user", count=1)
    with pytest.raises(KeyError, match="unused"):
        render("edit.user", count=1, max_lessons=8, lessons="", operations="", extra="x")


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


VALUES = dict(
    system_library="the solver", system_reader="- solver: solves.", system_objective="maths", system_max_lessons=8,
    count=0, max_lessons=8, lessons="(none)", operations="- add: x",
)  # fmt: skip


async def ask_edit(client, meter=None):
    return await ask(client, "edit", EditBatch, meter=meter or Meter(), seed=0, temperature=0, max_tokens=50, **VALUES)


async def test_a_reply_nested_past_the_recursion_limit_is_counted_and_skipped():
    meter = Meter()
    with pytest.raises(ModelReplyError):
        await ask_edit(Scripted('{"operations": ' + "[" * 100_000 + "]" * 100_000 + "}"), meter)
    assert meter.stages["edit"].failures == 1


async def test_ask_counts_and_keeps_the_raw_reply():
    meter = Meter()
    with pytest.raises(ModelReplyError) as caught:
        await ask_edit(Scripted("sure! here you go"), meter)
    assert caught.value.raw == "sure! here you go"
    assert meter.stages["edit"].calls == 1 and meter.stages["edit"].failures == 1


async def test_ask_finds_json_in_prose():
    prose = 'Here: ```json\n{"edits": [{"op": "keep"}]}\n```'
    assert (await ask_edit(Scripted(prose))).edits == [{"op": "keep"}]


async def test_a_reply_cut_at_the_token_limit_is_refused_not_repaired():
    """Before: the cut reply was closed and "Check the units before" became a lesson."""
    meter = Meter()
    cut = '{"edits": [{"op": "add", "text": "Check the units before'
    with pytest.raises(ModelReplyError, match="cut at the token limit"):
        await ask_edit(Scripted(cut, finish="length"), meter)
    assert meter.stages["edit"].failures == 1


async def test_over_long_notes_are_cut_to_their_field_but_lessons_never_are():
    schema = summary_schema(("planner", "solver"))
    reply = json.dumps({"roles": [{"role": "solver", "steps": ["s"], "missed": "n" * 900}], "outcome": "o" * 5000})
    values = dict(
        system_objective="o", system_team="t", question="q", truth="1", answer="1", reward="1", lessons="l", traces="t"
    )
    summary = await ask(
        Scripted(reply), "summary", schema, meter=Meter(), seed=0, temperature=0, max_tokens=50, **values
    )
    assert len(summary.outcome) == 800 and len(summary.roles[0].missed) == 800
    long = "When the sum is large, " + "check every digit again " * 12
    edits, refused = parse_edits([{"op": "add", "text": long}, {"op": "add", "text": "When adding, carry."}])
    assert [e.text for e in edits] == ["When adding, carry."]
    assert "too long" in refused[0].reason and refused[0].edit["text"] == long  # refused whole, never cut


def _common(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_learning_prompts_put_what_a_step_shares_before_what_varies():
    """Two groups of one step (other tasks, other attempts, the same libraries) share the
    advantage prompt up to the task; two attempts of one group share the summary prompt up to
    their traces, the lessons the group was shown included."""
    libraries = "global (every role):\n[global/0001] When stuck, reread the task."
    one = render("advantage.user", libraries=libraries, question="q1", truth="1", attempts="## Attempt 1")
    two = render("advantage.user", libraries=libraries, question="q2", truth="2", attempts="## Attempt 9")
    assert libraries in one[: _common(one, two)]
    shown = "solver:\n  [solver/0001] When adding, carry the tens."
    values = dict(question="q", truth="1", lessons=shown)
    first = render("summary.user", **values, answer="1", reward="1", traces="## solver\nLessons shown: solver/0001")
    second = render("summary.user", **values, answer="2", reward="0", traces="## solver\nLessons shown: none")
    assert shown in first[: _common(first, second)]
    assert first.index("Team answer") > first.index("## solver")
    edits = [
        render("edit.system", library=name, reader=name, objective="o", max_lessons=8, schema="{}") for name in "ab"
    ]
    assert _common(*edits) > 0.8 * min(map(len, edits))  # the library it keeps is named at the end
