"""Another team's library file, brought in as lessons of ours (``mas library import``).

Stage: none: the command line (``mas library import``; the versions it makes have stage ``import``).

The file is untrusted input twice over: it is read and validated as a library file (one line
naming it when it is not one), and each lesson of the latest version of each of its libraries
is screened like a lesson typed into ours (``mas.library.screened``). What passes is added to
our library of the same name, with our next ids, as one new version per library it changes
(stage ``import``), whose provenance names the file, the SHA-256 of the bytes read and the time,
so the version is reviewed like any other (``mas library diff``, ``export --since``, git). What
fails is quarantined with its reason, never imported; a lesson we already have, or that is too
long or too short to be a lesson, is skipped and said. Evidence does not travel: an imported
lesson starts with none, and training tests it by randomized exposure like any new lesson.

>>> # mas library import ../other-team/libraries/maths.json --into libraries/maths.json
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from mas.errors import UserError
from mas.library.edits import apply, normal_text, text_problem
from mas.library.logs import SideFiles, StepKey
from mas.library.screened import refusals
from mas.library.store import CorruptLibrary, LibraryStore, read_versions
from mas.types.lessons import GLOBAL, Add, Provenance, Source, Version
from mas.types.refusals import QuarantineItem


@dataclass
class Incoming:
    """What an import brings, before it is written: the new versions and what stays out."""

    run: str
    """The name the import goes by in provenance and logs (``import-<time>``)."""
    versions: list[Version] = field(default_factory=list)
    added: list[tuple[str, str, str]] = field(default_factory=list)
    """(their lesson id, our new id, the text) of each lesson brought in."""
    quarantined: list[tuple[str, QuarantineItem]] = field(default_factory=list)
    """(their lesson id, the quarantine item) of each lesson the screen refused."""
    skipped: list[tuple[str, str]] = field(default_factory=list)
    """(their lesson id, why) of each lesson left out for another reason."""


def read(path: Path) -> tuple[list[Version], str]:
    """The versions in the library file ``path`` and the SHA-256 of its bytes, read once; a
    ``UserError`` naming it when it is no library file."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{path}: no such library file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: a folder, not a library file") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        versions = read_versions(path, data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not a library file (not UTF-8: {e.reason})") from None
    except CorruptLibrary as e:
        raise UserError(f"{path}: not a library file ({e.reason})") from None
    return versions, hashlib.sha256(data).hexdigest()


def plan(store: LibraryStore, path: Path, *, only: str | None = None, at: datetime | None = None) -> Incoming:
    """What importing the library file ``path`` into ``store`` brings (``only``: one library)."""
    theirs, digest = read(path)
    if path.resolve() == store.path:
        raise UserError(f"{path}: this is the library file it would be imported into")
    at = at or datetime.now().astimezone()
    incoming = Incoming(run=f"import-{at:%Y%m%d-%H%M%S}")
    heads = {v.library: v for v in theirs}  # versions come sorted: the last of each is its head
    if only is not None and only not in heads:
        raise UserError(f"{path}: no library {only!r} (has {', '.join(heads) or 'none'})")
    ours = store.heads()
    shared = {
        normal_text(lesson.text): f"our {lesson.id}" for lesson in ours.get(GLOBAL, Version.empty(GLOBAL)).lessons
    }
    for name, head in sorted(heads.items(), key=lambda item: item[0] != GLOBAL):  # the shared library first
        if only in (None, name):
            source = Source(file=named(path), sha256=digest, at=at.isoformat(timespec="seconds"), library=name,
                            version=head.number)  # fmt: skip
            _library(incoming, head, ours.get(name) or Version.empty(name), source, shared)
    return incoming


def named(path: Path) -> str:
    """The imported file as provenance names it: its path from the current folder when it is
    under it, else its name. An absolute path would carry the importer's home folder into a file
    others review and share, and names nothing on their machines; the SHA-256 beside it says
    which bytes were read."""
    resolved = path.resolve()
    try:
        return resolved.relative_to(Path.cwd().resolve()).as_posix()
    except (ValueError, OSError):  # not under it, or no current folder any more
        return resolved.name


def _library(incoming: Incoming, theirs: Version, ours: Version, source: Source, shared: dict[str, str]) -> None:
    """Plan one library's import; ``shared``: the shared library's texts (ours and those this
    import brings), which every role has already, so a role's copy of one is skipped as training
    refuses it (``edits.apply``)."""
    refused = refusals([lesson.text for lesson in theirs.lessons])
    have = {} if ours.library == GLOBAL else dict(shared)
    have.update({normal_text(lesson.text): f"our {lesson.id}" for lesson in ours.lessons})
    adds, origins = [], []
    for lesson in theirs.lessons:
        if lesson.text in refused:
            item = QuarantineItem(library=ours.library, text=lesson.text, reason=refused[lesson.text], stage="import",
                                  source=source)  # fmt: skip
            incoming.quarantined.append((lesson.id, item))
        elif problem := text_problem(lesson.text):
            incoming.skipped.append((lesson.id, problem))
        elif (same := have.get(normal_text(lesson.text))) is not None:
            incoming.skipped.append((lesson.id, f"the same text as {same}"))
        else:
            have[normal_text(lesson.text)] = f"their {lesson.id}"
            adds.append(Add(op="add", text=lesson.text))
            origins.append(lesson.id)
    if not adds:
        return
    provenance = Provenance(run=incoming.run, epoch=0, step=0, stage="import", source=source)
    new, _ = apply(ours, adds, provenance=provenance)  # nothing is refused: no copies, no limit
    made = new.lessons[len(ours.lessons) :]  # the adds, in their order, after our lessons
    if ours.library == GLOBAL:
        shared.update({normal_text(lesson.text): f"their {their}" for their, lesson in zip(origins, made)})
    incoming.added += [(their, lesson.id, lesson.text) for their, lesson in zip(origins, made)]
    incoming.versions.append(new)


def bring(store: LibraryStore, incoming: Incoming) -> None:
    """Write ``incoming``: the quarantined lessons to the quarantine log, then the versions."""
    SideFiles(store.path).quarantine.append(StepKey(incoming.run, 0, 0), [item for _, item in incoming.quarantined])
    store.commit(incoming.versions)
