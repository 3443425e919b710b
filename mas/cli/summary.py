"""What a training run says at its start (the library versions it continues, or a resume) and
at its end, in two lines: what was refused and what failed, by kind (``mas.studies.by_kind``).

Stage: none: the command line (the start and end of a training run).
"""

from __future__ import annotations

from pathlib import Path

from mas.studies.by_kind import count, failed_line, reason_kind, refused_line
from mas.train import finished
from mas.types.lessons import GLOBAL, Version

__all__ = ["count", "failed_line", "near", "reason_kind", "refused_line", "starting_line", "unread_line"]


def starting_line(library: Path, heads: dict[str, Version], run_dir: Path, *, fresh: bool, steps: int) -> str:
    """What a training run starts from: a new or resumed run, with which library versions.

    >>> starting_line(Path("maths.json"), {}, Path("runs/x"), fresh=False, steps=2)
    'starting maths.json: no lessons yet'
    """
    lessons = sum(len(v.lessons) for v in heads.values())
    versions = ", ".join(f"{name} v{v.number}: {len(v.lessons)}" for name, v in heads.items())
    where = near(library)
    if (run_dir / "run.json").is_file():
        done = f"{len(finished(run_dir))} of {steps} steps done"
        return f"resuming {near(run_dir)} ({done}) with {where}: {versions or 'no lessons yet'}"
    if not lessons:
        return f"starting {where}: no lessons yet"
    if fresh:
        return (
            f"starting from empty libraries (--fresh): {where} gets an empty version of each library; its "
            f"{count(lessons, 'lesson')} ({versions}) stay in its history (mas library rollback brings them back)"
        )
    return f"continuing {where}: {count(lessons, 'lesson')} ({versions}); --fresh starts from empty libraries"


def unread_line(library: Path, heads: dict[str, Version], roles: list[str]) -> str | None:
    """Which lessons of ``library`` no role of the team reads, or None: a team whose verifier
    became a checker left the verifier's lessons in no prompt, while train and eval counted them.

    >>> from mas.types.lessons import Lesson
    >>> v = Version(library="verifier", number=1, next_id=2, lessons=[Lesson(id="verifier/0001", text="Reread it.")])
    >>> unread_line(Path("maths.json"), {"verifier": v}, ["solver", "checker"])
    'maths.json: 1 lesson of verifier, which no role of this team reads (its roles: solver, checker)'
    """
    unread = {name: len(v.lessons) for name, v in heads.items() if name != GLOBAL and name not in roles and v.lessons}
    if not unread:
        return None
    lessons = count(sum(unread.values()), "lesson")
    return f"{near(library)}: {lessons} of {', '.join(unread)}, which no role of this team reads (its roles: {', '.join(roles)})"


def near(path: Path) -> Path:
    """``path`` relative to the current folder when it is below it."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return path
