"""Libraries as values: validating and applying a batch of edits.

A library is one ``Version`` (see ``types.py``). Applying edits never mutates it: it returns
the next version plus the edits that were refused, each with its reason. An edit batch is
applied in order, so a ``modify`` may refer to a lesson the same batch added earlier only by
its id once that id exists; ids are never reused.
"""

from __future__ import annotations

from pydantic import TypeAdapter, ValidationError

from mas.types import Add, Delete, Edit, Keep, Lesson, Modify, Provenance, Rejected, Version

_edit = TypeAdapter(Edit)


def parse_edits(items: list) -> tuple[list[Edit], list[Rejected]]:
    """Validate each proposed edit on its own: one bad item never sinks the batch."""
    edits, rejected = [], []
    for item in items:
        try:
            edits.append(_edit.validate_python(item))
        except ValidationError as exc:
            reason = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'edit'}: {e['msg']}" for e in exc.errors())
            rejected.append(Rejected(edit=item if isinstance(item, dict) else str(item), reason=reason))
    return edits, rejected


def lesson_id(library: str, number: int) -> str:
    return f"{library}/{number:04d}"


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

    >>> v0 = Version(library="solver", number=0, lessons=[], next_id=1)
    >>> v1, bad = apply(v0, [Add(op="add", text="Check the units before answering.")])
    >>> [l.id for l in v1.lessons], bad
    (['solver/0001'], [])
    """
    lessons = {lesson.id: lesson for lesson in version.lessons}
    next_id, applied, rejected = version.next_id, [], []
    for edit in edits:
        reason = _refusal(edit, lessons, shared)
        if not reason and isinstance(edit, Add) and limit is not None and len(lessons) >= limit:
            reason = f"library is full ({limit} lessons): modify or delete instead"
        if reason:
            rejected.append(Rejected(edit=edit.model_dump(mode="json"), reason=reason))
            continue
        if isinstance(edit, Add):
            new = Lesson(id=lesson_id(version.library, next_id), text=edit.text.strip())
            lessons[new.id] = new
            next_id += 1
        elif isinstance(edit, Modify):
            lessons[edit.id] = Lesson(id=edit.id, text=edit.text.strip())
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


def _refusal(edit: Edit, lessons: dict[str, Lesson], shared: list[Lesson]) -> str | None:
    if isinstance(edit, (Modify, Delete)) and edit.id not in lessons:
        return f"unknown lesson id {edit.id!r}"
    text = getattr(edit, "text", None)
    if text is not None:
        normal = _normal(text)
        for lesson in [*lessons.values(), *shared]:
            if _normal(lesson.text) == normal and getattr(edit, "id", None) != lesson.id:
                return f"duplicate of {lesson.id}"
    return None


def _normal(text: str) -> str:
    return " ".join(text.lower().split()).rstrip(".")
