"""The search and open tools: real autogen tools over one task's passages, safe on junk input."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from autogen_core import CancellationToken
from autogen_core.tools import FunctionTool

from mas.domains.qa import generate
from mas.tools import TOOLS
from mas.tools.search import _index, find, open_tool, search_tool, stem
from mas.types.tasks import Passage, Task

TASK = Task(
    id="search-test",
    question="In which region is the town where Velora Quint was born?",
    answer="Marrowen",
    passages=[
        Passage(
            title="Brannock Mills",
            text="Brannock Mills is a company founded by Osric Pell in 1901. It is based in Duns.",
        ),
        Passage(title="Tamsk", text="Tamsk is a town in Marrowen. The Orlen flows through Tamsk."),
        Passage(
            title="Osric Pell", text="Osric Pell is a potter born in Duns in 1950. Osric Pell works for Brannock Mills."
        ),
        Passage(
            title="Velora Quint",
            text="Velora Quint is a weaver born in Tamsk in 1932. Velora Quint works for Brannock Mills.",
        ),
        Passage(
            title="Duns", text="Duns is a town in Hallo. Duns is known for its stone bridge. " + "Filler text. " * 30
        ),
    ],
)
EMPTY = Task(id="empty", question="q")


def run(tool: FunctionTool, **args) -> str:
    return asyncio.run(tool.run_json(args, CancellationToken()))


def search(query, task: Task = TASK) -> str:
    return run(search_tool(task), query=query)


def open_doc(doc_id, task: Task = TASK) -> str:
    return run(open_tool(task), doc_id=doc_id)


def test_tools_are_registered_autogen_function_tools():
    assert TOOLS["search"] is search_tool and TOOLS["open"] is open_tool
    assert "calculator" in TOOLS
    for name, factory in (("search", search_tool), ("open", open_tool)):
        tool = factory(TASK)
        assert isinstance(tool, FunctionTool)
        assert tool.name == name
        assert list(tool.schema["parameters"]["properties"]) == (["query"] if name == "search" else ["doc_id"])
        assert "\n" not in tool.description


def test_search_ranks_the_gold_passage_first():
    result = search("Velora Quint born")
    lines = result.splitlines()
    assert lines[0].startswith("[d3] Velora Quint: Velora Quint is a weaver born in Tamsk")
    assert 1 <= len(lines) <= 3


def test_search_shows_three_lines_with_short_snippets():
    assert len(search("Tamsk Duns Brannock").splitlines()) == 3
    long_line = search("Duns stone bridge").splitlines()[0]
    assert long_line.startswith("[d4] Duns: Duns is a town in Hallo.")
    assert long_line.endswith("…") and len(long_line) < 200


def test_search_stems_so_related_word_forms_match():
    assert stem("founder") == stem("founded") and stem("governs") == stem("governor")
    assert search("founder of Brannock Mills").startswith("[d0] Brannock Mills")


def test_search_finds_the_gold_passage_in_generated_tasks():
    """Searching a fact's subject (the question's first entity) finds its passage first."""
    for task in generate(30):
        titles = [p.title for p in task.passages]
        named = [t for t in titles if t in task.question]
        for title in named:
            first = search(title, task).splitlines()[0]
            assert first.startswith(f"[d{titles.index(title)}] {title}:"), (task.question, first)


def test_search_without_a_match_lists_the_documents():
    result = search("zzzz qqqq")
    assert result.startswith("no match") and "[d3] Velora Quint" in result


def test_search_without_documents():
    assert search("Velora", EMPTY) == "no documents"
    assert open_doc("d0", EMPTY) == "no documents"


@pytest.mark.parametrize(
    "doc_id", ["d3", "3", "[d3]", " D3 ", "doc 3", "Velora Quint", " velora quint ", "[d3] Velora Quint: ..."]
)
def test_open_accepts_id_spellings_and_titles(doc_id):
    assert open_doc(doc_id) == "[d3] Velora Quint\n" + TASK.passages[3].text


def test_open_shows_the_whole_text():
    assert open_doc("d4") == "[d4] Duns\n" + TASK.passages[4].text


@pytest.mark.parametrize(
    "doc_id", ["d999", "-1", "5", "", "   ", '{"doc_id": "d3"}', "d3.5", "dd3", "x" * 10_000, "☃💥\x00"]
)
def test_open_refuses_unknown_ids_with_the_valid_range(doc_id):
    result = open_doc(doc_id)
    assert result.startswith("unknown document") and "d0 to d4" in result
    assert len(result) < 150


HOSTILE = [
    "",
    "   ",
    "the a of",
    "x" * 10_000,
    "Velora " * 2_000,
    "☃💥日本語\x00\u202e",
    '{"query": "Velora"}',
    "[]",
    "null",
    "-1",
    "d999",
    "\n\n\t",
    "SELECT * FROM docs; --",
]


@pytest.mark.parametrize("query", HOSTILE)
def test_search_survives_hostile_queries(query):
    started = time.perf_counter()
    result = search(query)
    assert isinstance(result, str) and result
    assert len(result) < 1000
    assert time.perf_counter() - started < 2


@pytest.mark.parametrize("value", [5, 3.5, None, True, ["Velora", "Quint"], {"name": "Velora"}, [[["x"]]]])
def test_tools_survive_wrong_argument_types(value):
    assert isinstance(search(value), str)
    assert isinstance(open_doc(value), str)


def test_tools_survive_wrong_or_missing_argument_names():
    tool = search_tool(TASK)
    token = CancellationToken()
    assert asyncio.run(tool.run_json({"q": "Velora Quint"}, token)).startswith("[d3]")
    assert asyncio.run(tool.run_json({}, token)).startswith("empty query")
    assert isinstance(asyncio.run(tool.run_json({"a": 1, "b": 2}, token)), str)
    assert open_doc(3).startswith("[d3]")


def test_find_prefers_an_exact_title_over_a_leading_number():
    passages = (Passage(title="a", text="x"), Passage(title="3 Doors Down", text="band"))
    assert find(passages, "3 Doors Down") == 1
    assert find(passages, "d1") == 1
    assert find(passages, "3") is None


def test_index_is_cached_per_task():
    _index.cache_clear()
    for _ in range(3):
        search("Velora")
        search("Tamsk")
    assert _index.cache_info().misses == 1
    assert _index.cache_info().maxsize is not None  # bounded


def test_documents_without_searchable_words():
    task = Task(id="junk", question="q", passages=[Passage(title="", text=""), Passage(title="the", text="a")])
    assert search("Velora", task).startswith("no searchable")
    assert open_doc("d1", task) == "[d1] the\na"


def test_a_team_rollout_searches_opens_and_answers(monkeypatch):
    """The multihop team end to end with a scripted fake model: the searcher's tools run
    inside autogen and the solver's ANSWER line scores 1."""
    import re

    from autogen_core import FunctionCall

    from mas.domains.qa import extract_answer, qa_reward
    from mas.meter import Meter
    from mas.models.fake import FakeClient
    from mas.team.rollout import run_rollout
    from mas.team.scenario import EXTRACTORS, REWARDS, load_scenario

    monkeypatch.setitem(REWARDS, "qa", qa_reward)
    monkeypatch.setitem(EXTRACTORS, "qa", extract_answer)

    def respond(request):
        role = re.search(r"You are the (\w+)", request.system).group(1)
        if role == "searcher" and len(request.tool_results) == 0:
            return [FunctionCall(id="c1", name="search", arguments='{"query": "Velora Quint"}')]
        if role == "searcher" and len(request.tool_results) == 1:
            doc = re.search(r"\[(d\d+)\]", request.tool_results[0]).group(1)
            return [FunctionCall(id="c2", name="open", arguments=json.dumps({"doc_id": doc}))]
        if role == "searcher":
            return f"Found: {request.tool_results[-1]}"
        if role == "solver":
            town = re.search(r"born in (\w+)", " ".join(request.messages))
            return f"ANSWER: {town.group(1) if town else 'unknown'}"
        return "1. Where was Velora Quint born?"

    scenario = load_scenario("multihop", limit=1)
    task = TASK.model_copy(update={"question": "In which town was Velora Quint born?", "answer": "Tamsk"})
    rollout = asyncio.run(
        run_rollout(scenario, task, 0, client=FakeClient(respond), heads={}, settings={}, timeout=30, meter=Meter())
    )
    assert rollout.error is None and rollout.answer == "Tamsk"
    assert scenario.reward(task, rollout.answer) == 1.0
    calls = [c for trace in rollout.traces for turn in trace.turns for c in turn.tool_calls]
    assert [c.name for c in calls] == ["search", "open"]
    assert not any(c.is_error for c in calls)
    assert calls[1].result.startswith("[d3] Velora Quint")
