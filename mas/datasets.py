"""Loading task files: one JSON object per line with ``question`` and ``answer`` (and ``id``,
else the line number is the id). Other field names are mapped with ``Fields``
(``Fields(question="problem", answer="solution")`` for Hugging Face style files).

Stage: rollout (its input: the task files of training and of evaluation).

Files come from people, so every problem becomes a ``UserError`` naming the file, the line
and the field, and the file is streamed so a large one costs no more memory than its tasks.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from mas.errors import UserError
from mas.types.tasks import Passage, Task


class Fields(NamedTuple):
    """The names of a task file's question and answer fields."""

    question: str = "question"
    answer: str = "answer"


def load_jsonl(path: str | Path, *, limit: int | None = None, fields: Fields = Fields()) -> list[Task]:
    """The tasks in ``path``, in file order; at most ``limit`` of them when given.

    A record without ``id`` gets its line number. An answer holding ``\\boxed{...}`` (a
    worked solution) is the content of its last box. Also read when present: ``level`` (an
    integer), ``answer_aliases`` and ``passages`` (multi-hop QA); other fields are ignored, so
    the shared benchmark files load as they are.
    """
    if limit is not None and limit < 1:
        raise UserError(f"limit must be at least 1, got {limit}")
    tasks: list[Task] = []
    first_line: dict[str, int] = {}
    for number, record in records(Path(path)):
        where = f"{path}:{number}"
        task = to_task(record, where, fields=fields, line=number)
        if task.id in first_line:
            first = first_line[task.id]
            raise UserError(f"{where}: duplicate id {task.id!r} (first on line {first})")
        first_line[task.id] = number
        tasks.append(task)
        if limit is not None and len(tasks) >= limit:
            break
    if not tasks:
        raise UserError(f"{path}: no tasks (the file is empty)")
    return tasks


def records(path: Path) -> Iterator[tuple[int, object]]:
    """Each non-blank line's line number and parsed JSON value.

    Lines are read as bytes and decoded one by one so a bad byte is blamed on its own line
    (text mode decodes in chunks, ahead of the line being parsed). A leading BOM is allowed.
    """
    if not path.exists():
        raise UserError(f"{path}: no such file")
    if not path.is_file():
        raise UserError(f"{path}: not a file")
    try:
        with path.open("rb") as lines:
            for number, raw in enumerate(lines, start=1):
                where = f"{path}:{number}"
                line = decode(raw, where, "utf-8-sig" if number == 1 else "utf-8")
                if line.strip():
                    yield number, parse(line, where)
    except OSError as error:
        raise UserError(f"{path}: cannot read ({error.strerror})") from None


def decode(raw: bytes, where: str, encoding: str) -> str:
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError:
        raise UserError(f"{where}: not valid UTF-8") from None


def parse(line: str, where: str) -> object:
    try:
        return json.loads(line)
    except json.JSONDecodeError as error:
        raise UserError(f"{where}: not valid JSON ({error.msg})") from None
    except ValueError:  # an integer of thousands of digits (Python's int limit)
        raise UserError(f"{where}: not valid JSON (a number too long to read)") from None
    except RecursionError:
        raise UserError(f"{where}: not valid JSON (nested too deeply)") from None


def to_task(record: object, where: str, *, fields: Fields = Fields(), line: int | None = None) -> Task:
    """Check one record's fields and build the task; ``where`` is ``path:line``. Without an
    ``id``, the task's id is ``line`` (when given)."""
    if not isinstance(record, dict):
        raise UserError(f"{where}: expected a JSON object, got {json_type(record)}")
    if "id" not in record and line is not None:
        task_id = str(line)  # kept out of the record: a missing field's message lists the file's own fields
    else:
        task_id = text_field(record, "id", where, numbers=True)
    return Task(
        id=task_id,
        question=text_field(record, fields.question, where, numbers=False, flag="--question-field"),
        answer=last_boxed(answer_field(record, where, fields.answer)),
        level=level_field(record, where),
        aliases=aliases_field(record, where),
        passages=passages_field(record, where),
    )


def text_field(record: dict, name: str, where: str, *, numbers: bool, flag: str | None = None) -> str:
    """A required non-empty string; an integer is accepted (as text) when ``numbers``. ``flag``:
    the option that names the field otherwise."""
    if name not in record:
        raise _missing(record, name, where, flag)
    value = record[name]
    if numbers and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        kind = "a string or integer" if numbers else "a string"
        raise UserError(f"{where}: field {name!r} must be {kind}, got {json_type(value)}")
    if not value.strip():
        raise UserError(f"{where}: field {name!r} is empty")
    return value


def _missing(record: dict, name: str, where: str, flag: str | None) -> UserError:
    """A task file whose records name their fields otherwise (a Hugging Face export: ``problem``,
    ``solution``): the fields it has, and the option that names one."""
    has = ", ".join(repr(k)[:40] for k in list(record)[:8]) + (", ..." if len(record) > 8 else "")
    names = f"; {flag} names another" if flag else ""
    return UserError(f"{where}: missing field {name!r} (the record has {has or 'none'}{names})")


def answer_field(record: dict, where: str, name: str = "answer") -> str:
    """The ground truth as text; numbers are common in the wild and become strings."""
    if name not in record:
        raise _missing(record, name, where, "--answer-field")
    value = record[name]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        kind = json_type(value)
        raise UserError(f"{where}: field {name!r} must be a string or number, got {kind}")
    if not value.strip():
        raise UserError(f"{where}: field {name!r} is empty")
    return value


def last_boxed(text: str) -> str:
    r"""The content of the last ``\boxed{...}`` in ``text`` (braces balanced), else ``text``.

    >>> last_boxed(r"so $x = 2$, and $\boxed{\frac{1}{2}}$.")
    '\\frac{1}{2}'
    """
    start = text.rfind("\\boxed{")
    depth = 0
    for j in range(start + len("\\boxed"), len(text) if start >= 0 else 0):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            inner = text[start + len("\\boxed{") : j].strip()
            return inner or text
    return text


def level_field(record: dict, where: str) -> int | None:
    """A difficulty number; other kinds of ``level`` (HotpotQA's "hard") are not ours to read."""
    value = record.get("level")
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def passages_field(record: dict, where: str) -> list[Passage]:
    """The documents a searcher may search: a list of ``{title, text}`` objects."""
    value = record.get("passages", [])
    if not isinstance(value, list):
        raise UserError(f"{where}: field 'passages' must be a list, got {json_type(value)}")
    out = []
    for i, item in enumerate(value):
        ok = isinstance(item, dict) and isinstance(item.get("title"), str) and isinstance(item.get("text"), str)
        if not ok:
            raise UserError(f"{where}: field 'passages[{i}]' must be an object with string 'title' and 'text'")
        out.append(Passage(title=item["title"], text=item["text"]))
    return out


def aliases_field(record: dict, where: str) -> list[str]:
    value = record.get("answer_aliases", [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UserError(f"{where}: field 'answer_aliases' must be a list of strings")
    return value


def json_type(value: object) -> str:
    """The JSON name of a value's type, for messages people can read."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"
