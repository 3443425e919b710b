"""Loading task files: the shared datasets load, and every bad file gets a precise message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mas.datasets import Fields, load_jsonl
from mas.errors import UserError
from mas.types.tasks import Task

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
PACK = Path(__file__).resolve().parents[1] / "scenarios" / "maths" / "tasks.jsonl"


def shared(name: str) -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is absent")
    return SHARED / name


def write(path: Path, *lines: str) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_gsm8k() -> None:
    tasks = load_jsonl(shared("gsm8k_test.jsonl"))
    assert len(tasks) == 1319
    assert tasks[0].id == "gsm8k-test-0" and tasks[0].answer == "18"
    assert all(t.question and t.answer and t.level is None for t in tasks)


def test_dapo_subset() -> None:
    tasks = load_jsonl(shared("dapo_math_17k_subset500.jsonl"))
    assert len(tasks) == 500
    assert len({t.id for t in tasks}) == 500
    assert all(t.question and t.answer for t in tasks)


def test_limit_stops_early() -> None:
    tasks = load_jsonl(str(shared("gsm8k_test.jsonl")), limit=5)
    assert [t.id for t in tasks] == [f"gsm8k-test-{i}" for i in range(5)]


def test_maths_pack() -> None:
    if not PACK.exists():
        pytest.skip("the maths pack has not been written")
    tasks = load_jsonl(PACK)
    assert len(tasks) == 200 and {t.level for t in tasks} == {1, 2, 3, 4, 5}


def test_types_are_coerced_and_extras_ignored(tmp_path: Path) -> None:
    path = write(
        tmp_path / "t.jsonl",
        json.dumps({"id": 7, "question": "q?", "answer": 3, "extra": [1]}),
        "",
        "   ",
        json.dumps({"id": "b", "question": "q2?", "answer": 2.5, "level": 4}),
        json.dumps({"id": "c", "question": "q3?", "answer": "x", "level": None}),
    )
    assert load_jsonl(path) == [
        Task(id="7", question="q?", answer="3"),
        Task(id="b", question="q2?", answer="2.5", level=4),
        Task(id="c", question="q3?", answer="x"),
    ]


GOOD = json.dumps({"id": "a", "question": "q?", "answer": "1"})


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"id": "x", "question": "q", "answer": "1"', "not valid JSON"),
        ("[1, 2]", "expected a JSON object, got an array"),
        ('"text"', "expected a JSON object, got a string"),
        ("null", "expected a JSON object, got null"),
        ('{"id": 3.5, "question": "q", "answer": "1"}', "field 'id' must be a string or integer"),
        ('{"id": "", "question": "q", "answer": "1"}', "field 'id' is empty"),
        ('{"id": true, "question": "q", "answer": "1"}', "field 'id' must be"),
        ('{"id": 1.5, "question": "q", "answer": "1"}', "field 'id' must be"),
        ('{"id": "x", "answer": "1"}', "missing field 'question'"),
        ('{"id": "x", "question": "  ", "answer": "1"}', "field 'question' is empty"),
        ('{"id": "x", "question": 5, "answer": "1"}', "field 'question' must be a string"),
        ('{"id": "x", "question": "q"}', "missing field 'answer'"),
        ('{"id": "x", "question": "q", "answer": null}', "field 'answer' must be"),
        ('{"id": "x", "question": "q", "answer": [1]}', "field 'answer' must be"),
        ('{"id": "x", "question": "q", "answer": ""}', "field 'answer' is empty"),
        ('{"id": "x", "question": "q", "answer": "1", "passages": {}}', "field 'passages' must be a list"),
        ('{"id": "x", "question": "q", "answer": "1", "passages": [{"title": 1}]}', "field 'passages[0]'"),
        ('{"id": "x", "question": "q", "answer": "1", "answer_aliases": "a"}', "field 'answer_aliases'"),
        ('{"id": "a", "question": "q", "answer": "1"}', "duplicate id 'a' (first on line 1)"),
    ],
)
def test_bad_line_names_file_line_and_field(tmp_path: Path, bad: str, message: str) -> None:
    path = write(tmp_path / "bad.jsonl", GOOD, "", bad)
    with pytest.raises(UserError) as caught:
        load_jsonl(path)
    text = str(caught.value)
    assert f"{path}:3: " in text and "bad.jsonl" in text
    assert message in text
    assert "\n" not in text


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.jsonl"
    with pytest.raises(UserError, match="nope.jsonl: no such file"):
        load_jsonl(path)


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not a file"):
        load_jsonl(tmp_path)


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_empty_file(tmp_path: Path, content: str) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(UserError, match=r"empty\.jsonl: no tasks"):
        load_jsonl(path)


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin.jsonl"
    path.write_bytes(GOOD.encode() + b"\n" + b'{"id": "\xe9"}\n')
    with pytest.raises(UserError, match=r"latin\.jsonl:2: not valid UTF-8"):
        load_jsonl(path)


def test_bad_line_after_limit_is_not_read(tmp_path: Path) -> None:
    path = write(tmp_path / "t.jsonl", GOOD, "{broken")
    assert len(load_jsonl(path, limit=1)) == 1


def test_bad_limit(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="limit"):
        load_jsonl(write(tmp_path / "t.jsonl", GOOD), limit=0)


def test_bom_and_crlf_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "windows.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + GOOD.encode() + b"\r\n\r\n")
    assert load_jsonl(path) == [Task(id="a", question="q?", answer="1")]


def test_an_id_defaults_to_the_line_number(tmp_path: Path) -> None:
    path = write(tmp_path / "t.jsonl", '{"question": "q1?", "answer": "1"}', "", '{"question": "q3?", "answer": "3"}')
    assert [t.id for t in load_jsonl(path)] == ["1", "3"]


def test_hugging_face_fields_are_mapped_and_a_boxed_solution_is_read(tmp_path: Path) -> None:
    record = {
        "problem": "What is 1/2 + 1/4?",
        "solution": "Add them: $\\frac{2}{4} + \\frac{1}{4} = \\boxed{\\frac{3}{4}}$.",
    }
    path = write(tmp_path / "hf.jsonl", json.dumps(record))
    [task] = load_jsonl(path, fields=Fields(question="problem", answer="solution"))
    assert task == Task(id="1", question=record["problem"], answer="\\frac{3}{4}")
    with pytest.raises(UserError, match=r"hf\.jsonl:1: missing field 'question' \(the record has 'problem', "
                       r"'solution'.*; --question-field names another\)"):  # fmt: skip
        load_jsonl(path)
    with pytest.raises(UserError, match="missing field 'answer_text' .*; --answer-field names another"):
        load_jsonl(path, fields=Fields(question="problem", answer="answer_text"))


def test_a_bare_task_file_says_which_team_it_was_given(tmp_path: Path) -> None:
    from mas.team.scenario import load_scenario

    numbers = write(tmp_path / "n.jsonl", '{"question": "What is 2 + 2?", "answer": "4"}')
    assert load_scenario(str(numbers)).origin.endswith(
        "every answer is a number, so the maths team (planner, solver, verifier) and the numeric reward"
    )
    latex = write(tmp_path / "l.jsonl", '{"question": "Simplify 2/4.", "answer": "\\\\frac{1}{2}"}')
    assert "the symbolic reward" in load_scenario(str(latex)).origin
    assert load_scenario("maths").origin == ""
