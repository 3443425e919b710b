"""Libraries as values: validating and applying a batch of edits.

Stage: apply (and every later change of a library: promotion, pruning, review, import).

A library is one ``Version`` (see ``mas.types.lessons``). Applying edits never mutates it: it returns
the next version plus the edits that were refused, each with its reason. A batch is applied
deletes first, then modifies, then adds, so a full library makes room before it grows, and
ids are never reused.

A lesson text a model wrote is refused, never cut, when it is too short or too long: a cut
lesson is half a sentence.
"""

from __future__ import annotations

import re

from pydantic import TypeAdapter, ValidationError

from mas.types.lessons import Add, Delete, Edit, Keep, Lesson, Modify, Provenance, Rejected, Version

MAX_WORDS = 40
"""Words a lesson may have (prompts ask for at most 32)."""
MAX_CHARS = 400
MIN_CHARS = 8

_edit = TypeAdapter(Edit)


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be a lesson as it is (too short or too long), or None."""
    words, chars = len(text.split()), len(text.strip())
    if chars < MIN_CHARS:
        return f"lesson too short ({chars} characters; at least {MIN_CHARS})"
    if chars > MAX_CHARS or words > MAX_WORDS:
        return f"lesson too long ({words} words, {chars} characters; at most {MAX_WORDS} words, {MAX_CHARS} characters)"
    return None


def parse_items(items: list, adapter: TypeAdapter) -> tuple[list, list[Rejected]]:
    """Validate each proposed item on its own: one bad item never sinks the batch. An item
    whose lesson text is too short or too long is refused with its reason."""
    parsed, rejected = [], []
    for item in items:
        try:
            value = adapter.validate_python(item)
        except ValidationError as exc:
            reason = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'item'}: {e['msg']}" for e in exc.errors())
            rejected.append(Rejected(edit=item if isinstance(item, dict) else str(item), reason=reason))
            continue
        problem = text_problem(value.text) if hasattr(value, "text") else None
        if problem:
            rejected.append(Rejected(edit=value.model_dump(mode="json"), reason=problem))
        else:
            parsed.append(value)
    return parsed, rejected


def parse_edits(items: list) -> tuple[list[Edit], list[Rejected]]:
    return parse_items(items, _edit)


MAX_ID = 10**9
"""The largest ``next_id``, read or written: one past the largest lesson id (9 digits)."""


def lesson_id(library: str, number: int) -> str:
    return f"{library}/{number:04d}"


def strip_lesson_ids(text: str, libraries: list[str]) -> str:
    """``text`` without the ids of lessons of ``libraries`` (``solver/0003``, ``[solver/0003]``):
    an id a role writes must never become part of an answer.

    >>> strip_lesson_ids("ANSWER: Paris [searcher/0002]", ["global", "searcher"])
    'ANSWER: Paris '
    """
    names = "|".join(re.escape(name) for name in libraries)
    # 4 to 9 digits: past solver/9999 an id has five (``lesson_id``), and one left in would count as an answer
    return re.sub(rf"\[?\b(?:{names})/\d{{4,9}}\b\]?", "", text) if names else text


def apply(
    version: Version,
    edits: list[Edit],
    *,
    provenance: Provenance | None = None,
    limit: int | None = None,
    shared: list[Lesson] = [],
) -> tuple[Version, list[Rejected]]:
    """Return the next version of the library and the edits that could not be applied.

    ``limit`` caps the number of lessons: an add past it is refused (delete or modify first).
    ``shared``: lessons the role already gets from the global library; copies are refused.
    An edit that needs a new id when the library has used every id (``MAX_ID``) is refused.
    A modify that changes the words writes them under the library's next id, in the old
    lesson's place: an id names one text, so the evidence gathered by showing the old words
    is never read as evidence for the new ones (a modify of case, spacing or the final full
    stop keeps the id).

    >>> v0 = Version(library="solver", number=0, lessons=[], next_id=1)
    >>> v1, bad = apply(v0, [Add(op="add", text="Check the units before answering.")])
    >>> [l.id for l in v1.lessons], bad
    (['solver/0001'], [])
    """
    lessons = {lesson.id: lesson for lesson in version.lessons}
    next_id, applied, rejected = version.next_id, [], []
    for edit in sorted(edits, key=lambda e: _ORDER[type(e)]):
        reason = _refusal(edit, lessons, shared)
        if not reason and isinstance(edit, Add) and limit is not None and len(lessons) >= limit:
            reason = f"library is full ({limit} lessons): modify or delete instead"
        if not reason and next_id >= MAX_ID and _needs_id(edit, lessons):
            reason = f"no lesson id left in library {version.library!r} (ids have at most 9 digits)"
        if reason:
            rejected.append(Rejected(edit=edit.model_dump(mode="json"), reason=reason))
            continue
        if isinstance(edit, Add):
            new = Lesson(id=lesson_id(version.library, next_id), text=edit.text.strip())
            lessons[new.id] = new
            next_id += 1
        elif isinstance(edit, Modify) and not rewords(edit, lessons[edit.id].text):
            lessons[edit.id] = Lesson(id=edit.id, text=edit.text.strip())
        elif isinstance(edit, Modify):  # new words are a new lesson, in the old one's place
            new = Lesson(id=lesson_id(version.library, next_id), text=edit.text.strip())
            lessons = dict((new.id, new) if i == edit.id else (i, lesson) for i, lesson in lessons.items())
            next_id += 1
        elif isinstance(edit, Delete):
            del lessons[edit.id]
        if not isinstance(edit, Keep):
            applied.append(edit)
    new_version = Version(
        library=version.library,
        number=version.number + 1,
        lessons=list(lessons.values()),
        next_id=next_id,
        edits=applied,
        rejected=rejected,
        provenance=provenance,
    )
    return new_version, rejected


def _needs_id(edit: Edit, lessons: dict[str, Lesson]) -> bool:
    return isinstance(edit, Add) or (isinstance(edit, Modify) and rewords(edit, lessons[edit.id].text))


_ORDER = {Delete: 0, Modify: 1, Add: 2, Keep: 3}
"""Deletes first, then modifies, then adds: room is made before anything is added."""


def _refusal(edit: Edit, lessons: dict[str, Lesson], shared: list[Lesson]) -> str | None:
    if isinstance(edit, (Modify, Delete)) and edit.id not in lessons:
        return f"unknown lesson id {edit.id!r}"
    text = getattr(edit, "text", None)
    if text is not None:
        normal = normal_text(text)
        for lesson in [*lessons.values(), *shared]:
            if normal_text(lesson.text) == normal and getattr(edit, "id", None) != lesson.id:
                return f"duplicate of {lesson.id}"
    return None


def rewords(edit: Modify, text: str) -> bool:
    """Whether a modify changes the words of the lesson whose text is ``text`` (case, spacing
    and a final full stop aside): then it makes a new lesson."""
    return normal_text(edit.text) != normal_text(text)


def normal_text(text: str) -> str:
    """What two texts that say the same words share: case, spacing and a final full stop aside."""
    return " ".join(text.lower().split()).rstrip(".")
