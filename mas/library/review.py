"""A library file as a Markdown document for review (``mas library export``): every lesson with
where it came from (the run and step whose version added it, and the last one that changed
it) and its randomized evidence per role, and every role, with or without lessons. With
``since``, only what changed in each library since its version ``since``: added, changed and
deleted lessons, each with the step that did it.

Stage: none: the command line (``mas library export``).

    ## solver

    - **solver/0002** When the numbers are small, say each one aloud before using it.
      - from: run maths-1, epoch 0, step 1 (v2)
      - evidence: solver +0.20 [-0.05, +0.45] over 6 tasks, e-value 3.1; verifier (transfer trial) +0.10
        [n/a, n/a] over 1 task, e-value 1.1
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from mas.library.store import LibraryStore
from mas.types.evidence import Effect
from mas.types.lessons import BY_HAND, GLOBAL, Lesson, Provenance, Version

NO_EVIDENCE = "none yet (not shown at random to any role)"


@dataclass
class History:
    """One library's lessons through its versions: the version that added each lesson id, the
    last one that brought it back after it left (a rollback), the last one that changed its
    text, and the one that deleted it (while it is gone)."""

    added: dict[str, Version] = field(default_factory=dict)
    restored: dict[str, Version] = field(default_factory=dict)
    changed: dict[str, Version] = field(default_factory=dict)
    deleted: dict[str, Version] = field(default_factory=dict)

    @classmethod
    def of(cls, versions: list[Version]) -> History:
        history, before = cls(), {}
        for v in versions:
            now = {lesson.id: lesson.text for lesson in v.lessons}
            for i, text in now.items():
                if i not in before and i in history.added:  # back after it left
                    history.restored[i] = v
                    history.deleted.pop(i, None)
                elif i not in before:
                    history.added[i] = v
                elif before[i] != text:
                    history.changed[i] = v
            for i in before.keys() - now.keys():
                history.deleted[i] = v
            before = now
        return history


def markdown(
    store: LibraryStore,
    effects: dict[tuple[str, str], Effect],
    *,
    roles: list[str] = (),
    only: str | None = None,
    since: int | None = None,
) -> str:
    """The document: the shared library, then every role (``roles`` and those with a library or
    evidence), each with its lessons, or only the changes since version ``since``."""
    heads = store.heads()
    names = sorted({GLOBAL, *roles, *heads, *(role for role, _ in effects)}, key=lambda n: (n != GLOBAL, n))
    title = "# Experience libraries" + (f": changes since version {since}" if since is not None else "")
    parts = [title, "", _LEGEND, ""]
    for name in names:
        if only in (None, name):
            versions = store.versions(name)
            head = heads.get(name) or Version.empty(name)
            parts += _section(name, head, versions, effects, since)
    return "\n".join(parts)


_LEGEND = (
    "_Evidence: per role, the change in the team's success when the lesson is in that role's prompt, "
    "from randomized exposure within groups of the same task, with its 90% confidence bounds [low, high] "
    "and the number of tasks; n/a: too few tasks for a bound._"
)


def _section(name, head: Version, versions: list[Version], effects, since: int | None) -> list[str]:
    history = History.of(versions)
    if since is None:
        out = [f"## {name}", ""]
        out += [line for lesson in head.lessons for line in _lesson(lesson, history, effects)]
        out += [] if head.lessons else ["_(no lessons)_"]
        return out + ["", f"_{_version(head)}_", ""]
    old = next((v for v in versions if v.number == since), Version.empty(name))  # versions chain: 0 is the empty one
    out = [f"## {name}", ""]
    if head.number == since:
        return out + [f"_no change since version {since} (now version {head.number})_", ""]
    if head.number < since:  # version numbers are each library's own: this one never had that version
        return out + [
            f"_no version {since}: the library is at version {head.number} (`--since 0` shows all its changes)_",
            "",
        ]
    before, after = {x.id: x for x in old.lessons}, {x.id: x for x in head.lessons}
    out.append(f"_version {old.number} -> {head.number}_")
    out.append("")
    for i in sorted(before.keys() | after.keys()):
        if i not in after:
            gone = history.deleted.get(i)
            where = f" (by {_step(gone)})" if gone else ""
            out.append(f"- deleted **{i}**{where}: {_one_line(before[i].text)}")
        elif i not in before:
            out += _lesson(after[i], history, effects, mark="added ")
        elif before[i].text != after[i].text:
            out += _lesson(after[i], history, effects, mark="changed ")
            out.append(f"  - was: {_one_line(before[i].text)}")
    if out[-1] == "":
        out.append("_(no lesson changed)_")
    return out + [""]


def changed_by(versions: list[Version], old: Version, new: Version) -> dict[str, str]:
    """For each lesson id whose text differs between ``old`` and ``new`` (two versions of one
    library, ``versions`` its history), the version between them that made the difference: the
    step or pass and the version number (``run r1, epoch 0, step 2, a promotion pass (v7)``)."""
    between = [v for v in versions if old.number < v.number <= new.number]
    history = History.of([old, *between])
    before, after = {x.id: x.text for x in old.lessons}, {x.id: x.text for x in new.lessons}
    out = {}
    for i in before.keys() | after.keys():
        if before.get(i) != after.get(i):
            if i not in after:
                v = history.deleted.get(i)
            elif i not in before:
                v = history.restored.get(i) or history.added.get(i)
            else:
                v = history.changed.get(i)
            if v is not None:
                out[i] = f"{_step(v)} (v{v.number})"
    return out


def _lesson(lesson: Lesson, history: History, effects, *, mark: str = "") -> list[str]:
    origin = history.added.get(lesson.id)
    lines = [f"- {mark}**{lesson.id}** {_one_line(lesson.text)}"]
    where = f"{_step(origin)} (v{origin.number})" if origin else "unknown"
    if back := history.restored.get(lesson.id):
        where += f"; back by {_step(back)} (v{back.number})"
    changed = history.changed.get(lesson.id)
    where += f"; changed by {_step(changed)} (v{changed.number})" if changed else ""
    lines.append(f"  - from: {where}")
    lines.append(f"  - evidence: {evidence(lesson.id, effects)}")
    return lines


def evidence(lesson: str, effects: dict[tuple[str, str], Effect]) -> str:
    """The randomized evidence about ``lesson`` for every role it was shown to at random."""
    found = sorted((e for (_, i), e in effects.items() if i == lesson), key=lambda e: e.role)
    if not found:
        return NO_EVIDENCE
    return "; ".join(
        f"{e.role}{' (transfer trial)' if e.trial else ''} {e.effect:+.2f} [{_n(e.lcb)}, {_n(e.ucb)}] "
        f"over {e.tasks} task{'s' * (e.tasks != 1)}, e-value {e.e_value:.1f}"
        for e in found
    )


_STAGES = {"fresh": "--fresh", "promotion": "a promotion pass", "prune": "pruning", "budget": "its token budget",
           "direct": "lessons written directly"}  # fmt: skip
"""What made a version that a step's edits did not."""


def _step(version: Version) -> str:
    p = version.provenance
    if p is None:  # a rollback from before rollbacks recorded who and why
        return "a rollback"
    if p.stage in BY_HAND:
        return person_change(p)
    what = f"run {p.run}, epoch {p.epoch}, step {p.step}"
    if p.stage == "review":
        return f"{what}, held #{p.pending}, decided in review by {p.by}" + (f" ({p.why})" if p.why else "")
    return what if p.stage == "edit" else f"{what}, {_STAGES.get(p.stage, p.stage)}"


def person_change(p: Provenance) -> str:
    """What a person did by hand (a stage of ``BY_HAND``), who, and why: ``ana's addition (our
    style guide)``, ``ana's removal (wrong sign)``, ``ana's rollback to version 2 (the lessons of
    run r3 mislead)``."""
    what = {"add": "addition", "remove": "removal"}.get(p.stage) or f"rollback to version {p.to_version}"
    return f"{p.by}'s {what}" + (f" ({p.why})" if p.why else "")


def _version(version: Version) -> str:
    return f"version {version.number}" + (f", last changed by {_step(version)}" if version.number else "")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _n(value: float) -> str:
    return f"{value:+.2f}" if math.isfinite(value) else "n/a"
