"""Which lessons of a library file may reach a prompt: every one is screened when it is read.

Stage: screen (every library file as it is read).

A library file is shared and committed like configuration, and anyone with an editor (or a merge)
can type a lesson into it that no model proposed and no screen saw. So the store hands out the
head of each library (``LibraryStore.head``, ``heads``: what every prompt, training's learning
prompts and ``LessonMemory`` are built from) without the lessons that fail the screen
(``mas.screen``, every layer that needs no step: normalising, structure, instructions, the
learned classifier; and ``secret_in``). The file is otherwise usable. Such a lesson is
quarantined: ``mas library show`` counts it and ``--quarantine`` lists it with its reason; the
next operation that holds the library to change it (a training run, a promotion pass, a
rollback, an import) takes it out with a version of its own (stage ``screen``, each lesson
deleted by an edit) and logs it with its reason in ``<library>.quarantine.jsonl``.

How "screened" is known: nothing in the file says so, since anything in it can be typed too.
Verdicts are kept on this machine, in the user's cache (``$XDG_CACHE_HOME/mas/screened/``, else
``~/.cache/mas/screened/``), keyed by the SHA-256 of the lesson's text, in a file named by the
SHA-256 of the screen itself (its code, rules and weights): a lesson typed in or changed has a
digest never screened, and a changed screen screens everything again. Screening costs about
0.6 s to load the screen (its rules and weights) and 3-5 ms per lesson on 2 busy cores; a known
lesson costs a hash. A record that cannot be written is not an error: the screen runs again.
"""

from __future__ import annotations

import hashlib
import os
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from mas.types.lessons import Delete, Lesson, Provenance, Version
from mas.types.refusals import QuarantineItem

if TYPE_CHECKING:
    from mas.library.store import LibraryStore

SCREEN_FILES = ("screen/__init__.py", "screen/layers.py", "screen/text.py", "screen/rules.py", "screen/rules.txt",
                "screen/model.py", "screen/model.npz", "redact.py")  # fmt: skip
"""What the screen is made of, as paths in the ``mas`` package: a change to any of them (or a move)
screens again. ``screen/train.py`` is not among them: it only rebuilds ``model.npz``."""

_known: dict[str, str | None] = {}
"""Verdicts of this process and of the record read so far: digest -> reason (None: it passed)."""
_read: set[Path] = set()


def refusals(texts: list[str]) -> dict[str, str]:
    """The texts of ``texts`` that may not reach a prompt, each with the screen's reason. A text
    too long or too short for any lesson (``text_problem``: what an edit, an import or a review
    refuses) is refused by its length before the screen reads it: the rule layers take about a
    minute over a megabyte."""
    from mas.library.edits import text_problem

    sized = {text: problem for text in texts if (problem := text_problem(text))}
    return sized | _screened([text for text in texts if text not in sized])


def _screened(texts: list[str]) -> dict[str, str]:
    digests = {text: _digest(text) for text in texts}
    if any(d not in _known for d in digests.values()):
        _recall()
    missing = {text: d for text, d in digests.items() if d not in _known}
    if missing:
        _remember({d: _screen(text) for text, d in missing.items()})
    return {text: reason for text, d in digests.items() if (reason := _known[d]) is not None}


def quarantined(version: Version) -> list[tuple[Lesson, str]]:
    """The lessons of ``version`` that fail the screen, each with its reason."""
    refused = refusals([lesson.text for lesson in version.lessons])
    return [(lesson, refused[lesson.text]) for lesson in version.lessons if lesson.text in refused]


def usable(version: Version) -> Version:
    """``version`` without its quarantined lessons (itself when it has none): same number and
    ``next_id``, so a version made from it follows the stored one."""
    out = {lesson.id for lesson, _ in quarantined(version)}
    if not out:
        return version
    return version.model_copy(update={"lessons": [lesson for lesson in version.lessons if lesson.id not in out]})


def settle(store: LibraryStore) -> list[QuarantineItem]:
    """Take the quarantined lessons out of the library file: one version of each library whose
    head holds some, deleting them (stage ``screen``), logged first with their reasons. Called by
    the store as an operation takes hold of the library (``LibraryStore.exclusive``)."""
    from mas.library.edits import apply
    from mas.library.logs import SideFiles, StepKey

    heads = store.heads(screened=False)
    found = {name: q for name, v in heads.items() if (q := quarantined(v))}
    if not found:
        return []
    side = SideFiles(store.path)
    side.check()  # a damaged log stops the operation here, before anything is written
    run = f"screen-{datetime.now(UTC):%Y%m%d-%H%M%S-%f}"
    provenance = Provenance(run=run, epoch=0, step=0, stage="screen")
    items = [QuarantineItem(library=n, text=l.text, reason=why, stage="load") for n, q in found.items() for l, why in q]
    deleted = [
        apply(heads[n], [Delete(op="delete", id=l.id) for l, _ in q], provenance=provenance)[0]
        for n, q in found.items()
    ]
    side.quarantine.append(StepKey(run, 0, 0), items)  # logged first: a crash before the commit loses no reason
    store.commit(deleted)
    return items


def _screen(text: str) -> str | None:
    from mas.redact import redact, secret_in
    from mas.screen import screen

    reason = screen(text, answers=[], sources=[]) or secret_in(text)
    return None if reason is None else " ".join(redact(reason).split())


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@cache
def fingerprint() -> str:
    """The SHA-256 of the screen's files: what the verdicts on record were given by."""
    folder = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for name in SCREEN_FILES:
        h.update(name.encode() + b"\0" + (folder / name).read_bytes() + b"\0")
    return h.hexdigest()


def record() -> Path:
    """The file of this screen's verdicts on this machine."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "mas" / "screened" / f"{fingerprint()[:32]}.txt"


def _recall() -> None:
    """Read the record once per process. A line is ``+<digest>`` (passed) or ``-<digest> <reason>``
    (refused), ended by a newline: a line cut short is not read, and a cut refusal still refuses."""
    path = record()
    if path in _read:
        return
    _read.add(path)
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").split("\n")[:-1]
    except OSError:
        return
    for line in lines:
        digest = line[1:65]
        if len(digest) == 64 and line[:1] in "+-" and (line[:1] == "-" or len(line) == 65):
            _known.setdefault(digest, None if line[0] == "+" else line[66:] or "refused by an earlier screening")


def _remember(verdicts: dict[str, str | None]) -> None:
    _known.update(verdicts)
    lines = "".join(f"+{d}\n" if why is None else f"-{d} {why}\n" for d, why in verdicts.items())
    path = record()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab", buffering=0) as f:  # one append of whole lines: writers do not mix
            f.write(lines.encode("utf-8", "surrogatepass"))
    except OSError:
        pass  # no record: the screen runs again in the next process
