"""``mas library review``: the edits ``mas train --review`` held, and the reviewers' decisions.

Stage: none: the command line (apply, for the edits a step held for review).

Each held edit is shown with the group behind it (the task, the rewards, the reason the
semantic advantage gave, its comparison of winners and losers) and the randomized evidence on
the lesson it changes. On a terminal the command asks for a decision on each: accept, reject,
or edit the text (screened like a model's); ``--accept``, ``--reject`` and ``--edit`` decide
from a script. Every decision of a command is checked before any is written, and each goes into
the library's history with who decided and why (``mas.library.pending``).
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from mas.cli.library import Which, library_app, library_path, person, say
from mas.errors import UserError

if TYPE_CHECKING:
    from mas.library.pending import Held
    from mas.library.store import LibraryStore
    from mas.types.review import Decision

_PAST = {"accept": "accepted", "reject": "rejected", "edit": "accepted with the reviewer's text"}
CHOICES = "accept (a), reject (r), edit the text (e), skip (s), quit (q)? "


@library_app.command("review")
def library_review(
    which: Which,
    accept: list[int] = typer.Option(
        [], "--accept", metavar="ID", help="Accept held edit ID (repeatable).", show_default=False
    ),
    reject: list[int] = typer.Option(
        [], "--reject", metavar="ID", help="Reject held edit ID (repeatable; --why).", show_default=False
    ),
    edit: int | None = typer.Option(None, "--edit", metavar="ID", help="Accept held edit ID with --text as its text."),
    text: str | None = typer.Option(None, help="The text for --edit, screened like a model's."),
    why: str | None = typer.Option(
        None, help="Why: kept in the library's history (needed by --reject; with a --reject, for the rejections only)."
    ),
    by: str | None = typer.Option(None, help="Who decides.", show_default="your user name"),
    decided: bool = typer.Option(False, "--decided", help="List the decided edits too, with their decisions."),
) -> None:
    """Review the edits `mas train --review` held: each with the group behind it and the
    evidence on the lesson it changes. On a terminal, decide each in turn; --accept, --reject
    and --edit decide from a script. Each decision is kept in the library's history, with who
    decided and why; a training run using the library applies it before its next step."""
    from mas.library.pending import queue, rejections

    if why is not None and not (accept or reject or edit is not None):
        raise UserError("--why goes with --accept, --reject or --edit (on a terminal, each decision asks why)")
    store = _store(which)
    held = _settle_left(store, queue(store))
    who = person(by)
    made = _decisions(store, held, who=who, accept=accept, reject=reject, edit=edit, text=text, why=why)
    if made:
        _write(store, made)
    elif sys.stdin.isatty() and sys.stdout.isatty():
        _interactive(store, [h for h in held if h.open], who, before=rejections(held))
    else:
        shown = [h for h in held if decided or h.open]
        _list(store, shown, waiting=sum(h.open for h in held), which=which, before=rejections(held))


def _store(which: str) -> LibraryStore:
    """The library file (a scenario name or a path); it may not exist yet when its steps held
    every edit, but its queue must."""
    from mas.library.logs import SideFiles
    from mas.library.store import LibraryStore

    path = library_path(which)
    if path.is_dir():
        raise UserError(f"{path}: a folder, not a library file")
    if not path.exists() and not SideFiles(path).pending.path.exists():
        raise UserError(f"{path}: no such library file, and no edits held for it")
    return LibraryStore(path)


# -- decisions from options ----------------------------------------------------------------------


def _decisions(store, held, *, who, accept, reject, edit, text, why) -> list[Decision]:
    """The decisions the options ask for, each checked; a UserError before anything is written."""
    if reject and not (why and why.strip()):
        raise UserError("--reject needs --why (the reason is kept in the library's history)")
    if (edit is None) != (text is None):
        raise UserError("--edit ID and --text TEXT go together")
    asked = [(i, "accept", "--accept") for i in accept] + [(i, "reject", "--reject") for i in reject]
    asked += [(edit, "edit", "--edit")] if edit is not None else []
    by_id, heads = {h.edit.id: h for h in held}, store.heads()
    made, seen = [], set()
    for number, verdict, flag in asked:
        if number in seen:
            raise UserError(f"{flag} {number}: decided twice in one command")
        seen.add(number)
        found = by_id.get(number)
        if found is None:
            raise UserError(f"{flag} {number}: no held edit {number} in {_log(store)}")
        words = text if verdict == "edit" else None
        # a command that rejects too has its --why for the rejections (they need one): kept as the reason of an
        # accept as well, it would put words in the reviewer's mouth ("a copy of 3" on the edit that was kept)
        reason = "" if reject and verdict != "reject" else why or ""
        made.append(_decision(heads, found, verdict, who=who, why=reason, text=words, label=f"{flag} {number}"))
    return made


def _decision(heads, held: Held, verdict: str, *, who: str, why: str, text: str | None, label: str) -> Decision:
    """One decision on ``held``, checked against ``heads`` (``_check``), which then hold it."""
    from mas.types.review import Decision

    _check(heads, held, verdict, text, label)
    at = datetime.now(UTC).isoformat(timespec="seconds")
    text = " ".join(text.split()) if text is not None else None
    return Decision(id=held.edit.id, verdict=verdict, by=who, why=" ".join(why.split()), text=text, at=at)


def _check(heads: dict, held: Held, verdict: str, text: str | None, label: str) -> None:
    """A UserError unless ``held`` is still open and, for an accept, its text (or the
    reviewer's) passes the screen and the library in ``heads`` can take the edit; an accepted
    edit's version then takes its place in ``heads``, for the next decision of the command."""
    from mas.library.pending import applied, changed, refusal

    if not held.open:
        before = held.decided
        raise UserError(f"{label}: already {_PAST[before.verdict]} by {before.by}")
    if verdict == "reject":
        return
    try:
        change = changed(held, text if verdict == "edit" else None)
    except UserError as e:
        raise UserError(f"{label}: {e}") from None
    version, reason = applied(heads, held, change)
    reason = refusal(held, change) or reason
    if reason:
        # new words can help a refused or duplicate text; not a lesson gone since, nor a full library
        words = reason.startswith(("refused by", "duplicate of"))
        hint = "" if verdict == "edit" and reason.startswith("refused by") else "; reject it"
        hint += ", or edit its text" if hint and words and hasattr(change, "text") else ""
        raise UserError(f"{label}: {reason}{hint}")
    heads[version.library] = version


def _write(store: LibraryStore, made: list[Decision]) -> None:
    """Record the decisions, then put them into the library unless another process holds it."""
    from mas.library.logs import SideFiles
    from mas.library.pending import record

    reviews = SideFiles(store.path).reviews
    record(reviews, made)
    versions = _settled(store)
    for d in made:
        v = versions.get(d.id)
        where = f"{v.library} v{v.number}" if v else (
            f"recorded in {reviews}; the library is in use: the training run using the library applies it before "
            f"its next step, else `mas library review {store.path}` once the library is free"
        )  # fmt: skip
        say(f"#{d.id} {_PAST[d.verdict]} by {d.by}: {where}{_unchanged(d, v)}")


def _settle_left(store: LibraryStore, held: list[Held]) -> list[Held]:
    """Put into the library the decisions recorded but never applied (a review command killed
    between the two, or the library in use then), when the library is free; the queue after."""
    from mas.library.pending import queue

    left = [h.decision for h in held if h.decision is not None and h.settled is None]
    if not left:
        return held
    versions = _settled(store)
    for d in left:
        if (v := versions.get(d.id)) is not None:
            say(f"#{d.id} {_PAST[d.verdict]} by {d.by}: {v.library} v{v.number}{_unchanged(d, v)} (decided earlier)")
    return queue(store)


def _settled(store: LibraryStore) -> dict:
    """Settle the decisions waiting, unless another process holds the library (a training run
    settles them itself); the version that settled each held edit, by number, whoever made it."""
    from mas.library.pending import queue, settle
    from mas.library.store import InUse

    try:
        settle(store)
    except InUse:
        pass
    return {h.edit.id: h.settled for h in queue(store) if h.settled is not None}


def _unchanged(decision: Decision, version) -> str:
    """Why an accepted edit left the library unchanged (it changed under the decision), or nothing."""
    if version is None or decision.verdict == "reject" or version.edits:
        return ""
    return f", unchanged: {version.rejected[-1].reason}"


def _log(store: LibraryStore) -> Path:
    from mas.library.logs import SideFiles

    return SideFiles(store.path).pending.path


# -- showing and asking ----------------------------------------------------------------------------


def _list(store: LibraryStore, shown: list[Held], *, waiting: int, which: str, before: dict) -> None:
    """The held edits, then how to decide them: from a script the listing is all the command
    prints, so it says which options decide."""
    effects = _effects(store)
    for held in shown:
        _show(held, effects, before)
    say(f"{waiting} held edit{'s' * (waiting != 1)} waiting for review in {_log(store)}")
    if waiting:
        say(
            f"decide with: mas library review {which} --accept ID, --reject ID --why TEXT, or --edit ID --text TEXT "
            "(on a terminal, the command asks about each in turn)"
        )


def _interactive(store: LibraryStore, waiting: list[Held], who: str, *, before: dict) -> None:
    """Ask for a decision on each waiting edit; each is written as it is made."""
    effects = _effects(store)
    for number, held in enumerate(waiting, 1):
        say(f"-- {number} of {len(waiting)}")
        _show(held, effects, before)
        made = _ask(store, held, who)
        if made == "quit":
            break
        if made is not None:
            _write(store, [made])
    if not waiting:
        say(f"nothing waiting for review in {_log(store)}")


def _ask(store: LibraryStore, held: Held, who: str) -> Decision | str | None:
    """The reviewer's decision on ``held``; None to skip it, "quit" to stop."""
    label = f"#{held.edit.id}"
    while True:
        answer = _input(CHOICES).strip().lower()[:1]
        if answer == "q":
            return "quit"
        if answer == "s":
            return None
        verdict = {"a": "accept", "r": "reject", "e": "edit"}.get(answer)
        if verdict is None:
            continue
        text = _input("new text: ") if verdict == "edit" else None
        try:
            _check(store.heads(), held, verdict, text, label)
        except UserError as e:
            say(str(e))
            continue
        why = _input("why: " if verdict == "reject" else "why (optional): ")
        if verdict == "reject" and not why.strip():
            say("a rejection needs a reason")
            continue
        return _decision(store.heads(), held, verdict, who=who, why=why, text=text, label=label)


def _input(prompt: str) -> str:
    try:
        return input(prompt)
    except EOFError:
        return "q"


def _effects(store: LibraryStore):
    from mas.config import PromotionPolicy
    from mas.library import hierarchy

    return hierarchy.effects(store, PromotionPolicy())


def _show(held: Held, effects, before: dict) -> None:
    from mas.library.pending import same_edit
    from mas.library.review import evidence

    e, change = held.edit, held.edit.edit
    lines = [f"#{e.id} {e.library}: {change.op} {getattr(change, 'id', '')}".rstrip()]
    lines += [f"  was: {e.was}"] if e.was else []
    lines += [f"  {'now' if change.op == 'modify' else 'text'}: {change.text}"] if hasattr(change, "text") else []
    for i, s in enumerate(e.sources):
        rewards = ", ".join(f"{r:g}" for r in s.rewards)
        lines.append(f"  {'from' if i == 0 else 'or from'} task {s.task_id} (rewards {rewards}): {s.question}")
        lines += [f"    reason: {s.reason}"] if s.reason else []
        lines.append(f"    semantic advantage ({', '.join(s.deciding_roles) or 'no role'} decided): {s.comparison}")
    if e.proposals > 1:
        lines.append(f"  (the edit call merged {e.proposals} proposals of the step into this library's edits)")
    target = getattr(change, "id", None)
    lines.append(
        f"  evidence on {target}: {evidence(target, effects)}" if target else "  evidence: none yet (a new lesson)"
    )
    p = held.step.provenance
    lines.append(f"  held by run {p.run}, epoch {p.epoch}, step {p.step}")
    earlier = before.get(same_edit(e.library, change))
    if held.open and earlier is not None:
        d = earlier.decided
        lines.append(
            f"  the same edit was rejected before: #{earlier.edit.id} by {d.by}" + (f" ({d.why})" if d.why else "")
        )
    if not held.open:
        d = held.decided
        lines.append(f"  {_PAST[d.verdict]} by {d.by}" + (f": {d.why}" if d.why else ""))
    for line in lines:
        say(line)
