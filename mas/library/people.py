"""What people decided about a library's lessons, which a training step keeps to: an edit a
reviewer rejected (``mas library review``) is not made again, and a lesson a person removed
(``mas library remove``) is not added again in the same words (by a step's edits, nor adopted
by a run's end), nor tried on other roles.

Stage: apply (the edits a step may make), exposure (the trials of lessons that left), and a
run's end (its adoptions).
"""

from __future__ import annotations

from collections.abc import Iterator

from mas.library import pending
from mas.library.store import LibraryStore
from mas.types.evidence import PromotionMove
from mas.types.lessons import Add, Lesson, Provenance


def decided_against(store: LibraryStore) -> dict[tuple, str]:
    """The edits people decided against, by ``pending.same_edit``, each with why a step does not
    make it: a reviewer's rejection (until a reviewer accepts the same edit), and the words of a
    removed lesson as an add to its library (until a rollback brings the lesson back)."""
    out = {key: pending.rejection(held) for key, held in pending.rejected_before(store).items()}
    for library, removed in removals(store).items():
        for text, why in removed.items():
            out[pending.same_edit(library, Add(op="add", text=text))] = why
    return out


def adoptable(store: LibraryStore, moves: list[PromotionMove]) -> list[PromotionMove]:
    """``moves`` without the adoptions people decided against: a lesson adopted into a role
    whose library had the same words removed by a person, or rejected as an add in review (a
    run's end adopts another role's lesson by its trial: ``promotion.adoptions``)."""
    against = decided_against(store)
    return [
        m
        for m in moves
        if m.kind != "adopt" or not any(pending.same_edit(r, Add(op="add", text=m.text)) in against for r in m.roles)
    ]


def removals(store: LibraryStore) -> dict[str, dict[str, str]]:
    """Per library, the words of each lesson a person removed, with who and why."""
    out: dict[str, dict[str, str]] = {}
    for lesson, p in _removed(store):
        out.setdefault(lesson.library, {})[lesson.text] = f"removed by {p.by}" + (f" ({p.why})" if p.why else "")
    return out


def removed_ids(store: LibraryStore) -> set[str]:
    """The ids of the lessons a person removed: no trial of theirs goes on after they left."""
    return {lesson.id for lesson, _ in _removed(store)}


def _removed(store: LibraryStore) -> Iterator[tuple[Lesson, Provenance]]:
    """Each lesson a person removed and no rollback brought back, with the provenance of the
    version that left it out."""
    for library in store.libraries():
        versions = store.versions(library)
        back = {l.id for l in versions[-1].lessons} if versions else set()
        for before, version in zip(versions, versions[1:]):
            p = version.provenance
            if p is not None and p.stage == "remove":
                kept = {l.id for l in version.lessons}
                yield from ((l, p) for l in before.lessons if l.id not in kept and l.id not in back)
