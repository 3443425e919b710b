"""The review gate: the edits a training step held instead of applying them (``mas train
--review``), the reviewers' decisions on them, and their way into the library.

Stage: apply (held for review instead, applied when a reviewer accepts).

A step under review appends the edits it would have applied to ``<library>.pending.jsonl``
(one line per step, so a resumed step never holds them twice), each with a number that names
it, the text of the lesson it changes as it was then, and the groups whose semantic advantages
proposed it. A decision (accept, reject, or accept with the reviewer's text) is appended to
``<library>.reviews.jsonl`` and then *settled*: made a version of the library whose provenance
names the held edit, who decided and why. Settling takes the library (``LibraryStore.exclusive``);
while a training run holds it, the run settles the decisions itself before each step, so a
later step sees what was accepted and no held edit is ever in a prompt. The library's versions
say which held edits are settled, so a decision is settled once, whoever settles it.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from mas.errors import UserError
from mas.library.edits import apply, parse_items, text_problem
from mas.library.logs import SideFiles, StepKey, held_edits, sorted_lines
from mas.library.store import LibraryStore
from mas.paths import regular_file
from mas.redact import redact_data, secret_in
from mas.screen import screen, step_material
from mas.types.base import first_error
from mas.types.lessons import GLOBAL, REVIEW_SCHEMA, Provenance, Rejected, Version
from mas.types.replies import AddOperation, Advantage, Operation
from mas.types.review import Change, Decision, PendingEdit, PendingStep, Proposal
from mas.types.rollouts import Group

_operation = TypeAdapter(Operation)
_DONE = {"accept": "accepted", "reject": "rejected", "edit": "accepted with the reviewer's text"}


@dataclass(frozen=True)
class Held:
    """A held edit, the step that held it, its first decision and the version that settled it."""

    key: StepKey
    step: PendingStep
    edit: PendingEdit
    decision: Decision | None = None
    settled: Version | None = None

    @property
    def open(self) -> bool:
        """Waiting for a decision."""
        return self.decision is None and self.settled is None

    @property
    def decided(self) -> Decision | None:
        """The decision that holds: the first one logged, else the one its settled version
        records (its line of the reviews log may be gone); None while open."""
        if self.decision is not None or self.settled is None:
            return self.decision
        p, version = self.settled.provenance, self.settled
        verdict = "reject" if not version.edits else "edit" if version.rejected else "accept"
        return Decision(id=self.edit.id, verdict=verdict, by=p.by or "?", why=p.why)


def same_edit(library: str, change) -> tuple:
    """What makes two edits the same edit: the library, the operation, the lesson it changes
    and its words (case and spacing aside)."""
    return library, change.op, getattr(change, "id", None), " ".join(getattr(change, "text", "").casefold().split())


def rejections(held: Iterable[Held]) -> dict[tuple, Held]:
    """Each edit (``same_edit``) whose last decision, in the order held, was a rejection, with
    the held edit a reviewer rejected. An edit accepted since is no longer among them."""
    out = {}
    for h in held:
        if (d := h.decided) is not None:
            key = same_edit(h.edit.library, h.edit.edit)
            if d.verdict == "reject":
                out[key] = h
            else:
                out.pop(key, None)
    return out


def rejected_before(store: LibraryStore) -> dict[tuple, Held]:
    """``rejections`` of every edit the library file's training ever held: what a step does not
    make again (``mas.step.edit.apply_edits``). Empty without a review."""
    return rejections(queue(store)) if SideFiles(store.path).pending.path.exists() else {}


def rejection(held: Held) -> str:
    """Why a step does not make ``held``'s edit again."""
    d = held.decided
    assert d is not None
    return f"rejected in review before: #{held.edit.id} by {d.by}" + (f" ({d.why})" if d.why else "")


# -- holding a step's edits ----------------------------------------------------------------------


def hold(
    store: LibraryStore,
    provenance: Provenance,
    versions: list[Version],
    learned: Iterable[tuple[Group, object, Advantage | None]],
    *,
    heads: dict[str, Version],
    route: str = "role",
    limit: int | None = None,
) -> int:
    """Hold the edits of ``versions`` (a step's new versions, not committed) for review; return
    how many the step holds. ``learned``: each group with its semantic advantage."""
    log = SideFiles(store.path).pending
    key = StepKey(provenance.run, provenance.epoch, provenance.step)
    if log.has_step(key):  # a resumed step: held already
        return sum(len(s.edits) for k, items in log.steps() if k == key for s in items)
    learned = list(learned)
    proposals = _proposals(learned, route)
    number = 1 + max(_numbers(store), default=0)
    edits = []
    for version in versions:
        for change in version.edits:
            sources, count = _sources(version.library, change, proposals)
            was = next((l.text for l in heads[version.library].lessons if l.id == getattr(change, "id", None)), "")
            edits.append(
                PendingEdit(id=number + len(edits), library=version.library, edit=change, was=was, sources=sources,
                            proposals=count)
            )  # fmt: skip
    answers, texts = step_material([group for group, _, _ in learned])
    step = PendingStep(
        provenance=provenance, limit=limit, answers=answers, sources=texts, edits=edits, libraries=list(heads)
    )
    log.append(key, [step])
    return len(edits)


def _numbers(store: LibraryStore) -> Iterable[int]:
    """Every number a held edit was given: in the pending log, and in the decisions and library
    versions that name one (the log may have been cleared, or its lines set aside by ``mas
    library recover``). A new number above them all is never taken for one already decided."""
    yield from (e.id for s in SideFiles(store.path).pending.items() for e in s.edits)
    yield from (d.id for d in decisions(SideFiles(store.path).reviews))
    for name in store.libraries():
        yield from (v.provenance.pending for v in store.versions(name) if v.provenance and v.provenance.pending)


def _proposals(learned, route: str) -> list[tuple[str, Operation, Proposal]]:
    """Every usable operation of the step's semantic advantages, with its library and group."""
    out = []
    for group, _, adv in learned:
        if adv is None:
            continue
        operations, _ = parse_items(adv.operations, _operation)
        for op in operations:
            if isinstance(op, AddOperation):
                library = GLOBAL if route == "global" else op.library
            else:
                library = op.id.rpartition("/")[0]
            source = Proposal(
                task_id=group.task.id, question=_cut(group.task.question, 600), rewards=group.rewards,
                reason=_cut(op.reason, 600), comparison=_cut(adv.comparison, 1500), deciding_roles=adv.deciding_roles,
            )  # fmt: skip
            out.append((library, op, source))
    return out


def _sources(library: str, change: Change, proposals) -> tuple[list[Proposal], int]:
    """The groups behind ``change``, the likeliest first (the operation on the same lesson, then
    those whose text shares most words with it), at most three; and the operations on the
    library the edit call merged."""
    mine = [(op, source) for name, op, source in proposals if name == library]
    target, text = getattr(change, "id", None), getattr(change, "text", "")
    ranked = sorted(mine, key=lambda p: (target is None or getattr(p[0], "id", None) != target, -_shared(p[0], text)))
    return [source for _, source in ranked[:3]], len(mine)


def _shared(op: Operation, text: str) -> float:
    a, b = set(getattr(op, "text", "").lower().split()), set(text.lower().split())
    return len(a & b) / len(a | b) if a | b else 0.0


def _cut(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 3] + "..."


# -- the queue -----------------------------------------------------------------------------------


def queue(store: LibraryStore) -> list[Held]:
    """Every held edit of the library file, in the order held, with its state."""
    side = SideFiles(store.path)
    first: dict[int, Decision] = {}
    for decision in decisions(side.reviews):
        first.setdefault(decision.id, decision)
    settled = {
        v.provenance.pending: v
        for name in store.libraries()
        for v in store.versions(name)
        if v.provenance is not None and v.provenance.stage == "review" and v.provenance.pending is not None
    }
    found = list(held_edits(side.pending))
    _check_older_lines(side, store, found)
    return [Held(key, step, edit, first.get(edit.id), settled.get(edit.id)) for _, key, step, edit in found]


def _check_older_lines(side: SideFiles, store: LibraryStore, found: list) -> None:
    """Refuse a held edit, on a line held before steps kept the libraries they could edit
    (``PendingStep.libraries``), in a library the team leaves no trace of: not the shared one,
    none of the library file, and no role the usage log records for that step. Accepting it
    would make a library no role reads."""
    older = [(number, key, edit) for number, key, step, edit in found if step.libraries is None]
    if not older:
        return
    known, roles = {GLOBAL, *store.libraries()}, {}
    for key, events in side.usage.steps():
        roles.setdefault(key, set()).update(event.role for event in events)
    for number, key, edit in older:
        if edit.library not in known and edit.library not in roles.get(key, ()):
            raise UserError(
                f"{side.pending.path}:{number}: held edit {edit.id}: library {edit.library!r} is not one the step "
                "could edit; mend or remove that line"
            )


def changed(held: Held, text: str | None) -> Change:
    """The held edit, with the reviewer's text when given (a UserError, without the option it
    came from, for a delete or a text too short or too long)."""
    edit = held.edit.edit
    if text is None:
        return edit
    if not hasattr(edit, "text"):
        raise UserError("a delete has no text to edit; accept or reject it")
    problem = text_problem(text)
    if problem:
        raise UserError(problem)
    return edit.model_copy(update={"text": " ".join(text.split())})


def refusal(held: Held, change: Change) -> str | None:
    """Why ``change``'s text may not become a lesson: the length limits and the screen a model's
    text passes, with the answers and sources of the step that held it."""
    text = getattr(change, "text", None)
    if text is not None:
        reason = text_problem(text) or screen(text, answers=held.step.answers, sources=held.step.sources)
        reason = reason or secret_in(text)
        if reason:
            return f"refused by screening: {reason}"
    return None


def applied(heads: dict[str, Version], held: Held, change: Change) -> tuple[Version, str | None]:
    """The next version of ``change``'s library in ``heads`` (the latest versions, by library),
    and why ``change`` could not be applied to it, or None."""
    library = held.edit.library
    shared = heads[GLOBAL].lessons if library != GLOBAL and GLOBAL in heads else []
    version, refused = apply(
        heads.get(library) or Version.empty(library), [change], limit=held.step.limit, shared=shared
    )
    return version, refused[0].reason if refused else None


# -- decisions -----------------------------------------------------------------------------------


def decisions(path: Path) -> list[Decision]:
    """The decisions of a reviews log, checked line by line (a last line cut short by a crash
    is left out; any other bad line stops the reader with one line naming it)."""
    try:
        raw = regular_file(path).read_bytes()
    except FileNotFoundError:
        return []
    except OSError as e:
        raise UserError(f"{path}: cannot read ({e.strerror or e})") from None
    return _parsed(path, raw)


def _parsed(path: Path, raw: bytes) -> list[Decision]:
    lines = raw.split(b"\n")
    out = []
    for number, line in enumerate(lines, 1):
        if not line.strip() or (number == len(lines) and not raw.endswith(b"\n")):
            continue  # blank, or torn by a crash before its newline
        out.append(_decision(path, number, line))
    return out


def _decision(path: Path, number: int, line: bytes) -> Decision:
    try:
        return Decision.model_validate_json(line, strict=True)
    except ValidationError as e:
        where, said = first_error(e)
        raise UserError(
            f"{path}:{number}: not a review decision ({where or 'line'}: {said}); mend or remove that line, "
            "or run `mas library recover` on its library file to set it aside"
        ) from None


def decision_lines(path: Path) -> tuple[list[bytes], list[bytes]]:
    """The lines of a reviews log that ``decisions`` reads or skips (blank, or torn by a crash),
    and those that stop it (``mas library recover`` sets them aside)."""

    def check(number: int, line: bytes) -> None:
        if line.strip() and line.endswith(b"\n"):  # a last line without one was torn by a crash
            _decision(path, number, line)

    return sorted_lines(path, check)


def record(path: Path, made: list[Decision]) -> None:
    """Append decisions to a reviews log (redacted, synced), cutting a line torn by a crash.
    The log is locked while it is read and written: a decision on an edit that another reviewer
    decided since the queue was read is a UserError, and nothing is written."""
    if not made:
        return
    text = "".join(json.dumps(redact_data(d.model_dump(mode="json")), separators=(",", ":")) + "\n" for d in made)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(regular_file(path) if path.exists() else path, "a+b") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)  # released when the file is closed
            f.seek(0)
            old = f.read()
            if old and not old.endswith(b"\n"):
                old = old[: old.rfind(b"\n") + 1]
                f.truncate(len(old))
            first = {}
            for decision in _parsed(path, old):
                first.setdefault(decision.id, decision)
            for d in made:
                if (before := first.get(d.id)) is not None:
                    raise UserError(
                        f"held edit {d.id}: already {_DONE[before.verdict]} by {before.by}; nothing written"
                    )
            f.seek(0, os.SEEK_END)
            f.write(text.encode())
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        raise UserError(f"{path}: cannot write ({e.strerror or e})") from None


def settle(store: LibraryStore) -> list[Version]:
    """Make a library version of every decision the library does not record yet, one version
    per decision, in the order decided, those recorded while it works too. Holds the library
    while it does."""
    if not SideFiles(store.path).reviews.exists():  # no decision yet (every step of every run asks)
        return []
    made = []
    with store.exclusive():
        while todo := [held for held in queue(store) if held.decision is not None and held.settled is None]:
            for held in todo:
                version = _version(store, held)
                store.commit([version])
                made.append(version)
    return made


def _version(store: LibraryStore, held: Held) -> Version:
    """The version recording ``held``'s decision: the edit applied (with the reviewer's text),
    or the library unchanged with the edit among its refusals (rejected, or no longer applicable)."""
    decision, library = held.decision, held.edit.library
    assert decision is not None
    stamp = held.step.provenance.model_copy(
        update={"stage": "review", "pending": held.edit.id, "by": decision.by, "why": decision.why}
    )
    model = held.edit.edit.model_dump(mode="json")
    head = store.head(library)
    unchanged = Version(library=library, number=head.number + 1, lessons=head.lessons, next_id=head.next_id,
                        provenance=stamp, schema_version=REVIEW_SCHEMA)  # fmt: skip
    if decision.verdict == "reject":
        why = f": {decision.why}" if decision.why else ""
        refused = Rejected(edit=model, reason=f"rejected in review by {decision.by}{why}")
        return unchanged.model_copy(update={"rejected": [refused]})
    try:
        change = changed(held, decision.text if decision.verdict == "edit" else None)
        reason = refusal(held, change)
    except UserError as e:
        reason = str(e)
    if reason:
        return unchanged.model_copy(update={"rejected": [Rejected(edit=model, reason=reason)]})
    version, _ = applied(store.heads(), held, change)
    replaced = [Rejected(edit=model, reason=f"text replaced in review by {decision.by}")]
    replaced = replaced if decision.verdict == "edit" else []
    return version.model_copy(
        update={"provenance": stamp, "schema_version": REVIEW_SCHEMA, "rejected": replaced + version.rejected}
    )
