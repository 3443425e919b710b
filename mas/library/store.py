"""The one storage seam for experience libraries: every version of every library, on disk.

Stage: none (shared by every stage): apply writes each version; every stage reads the heads.

A library file (``libraries/maths.json``) holds all versions of all libraries of one
scenario, one tinydb document per ``Version``, append-only so every lesson's history is
reviewable in git. Writes are atomic and serialised by a lock file, so a killed training
run or two concurrent ``mas`` processes never leave a broken file. Only this module
imports tinydb.

The file is untrusted input: the head of a library, what prompts are made of, comes without the
lessons that fail the screen (``mas.library.screened``); the history (``versions``, ``version``)
is as stored.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from pydantic import ValidationError
from tinydb import TinyDB
from tinydb.storages import Storage

from mas.errors import UserError
from mas.library.edits import MAX_ID, apply
from mas.library.logs import SideFiles
from mas.paths import atomic_write, regular_file
from mas.redact import redact_data, redact_texts
from mas.types.base import INT64, first_error
from mas.types.lessons import GLOBAL, PERSON_SCHEMA, Add, Budget, Delete, Provenance, Version

if TYPE_CHECKING:  # imported on the first lock: reading a library file takes none
    import filelock

TABLE = "versions"


class CorruptLibrary(UserError):
    """A library file that does not parse or validate; ``recover()`` may restore it."""

    reason = ""
    """What is wrong with it, without the file's name and the hint."""


class NotCorrupt(UserError):
    """``recover()`` of a library file that needs no recovery."""


class InUse(UserError):
    """The library is held by another process (``LibraryStore.exclusive``)."""


def _dumps(data: Any) -> str:
    """Pretty, sorted JSON so a library file diffs well in review (orjson: the standard
    encoder falls back to pure Python as soon as it indents)."""
    return orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() + "\n"


def _corrupt(path: Path, reason: str) -> CorruptLibrary:
    reason = " ".join(reason.split())
    hint = (
        f"run `mas library recover {path}` to restore the backup ({path}.bak), or restore it from git"
        if Path(f"{path}.bak").is_file()
        else "there is no backup to restore: restore it from git, or move it aside to start a new library"
    )
    error = CorruptLibrary(f"{path}: not a valid library file ({reason}); {hint}")
    error.reason = reason
    return error


def _parse(path: Path, text: str) -> dict:
    """Parse a library file's text, checking the shape tinydb relies on."""
    if not text.strip():
        raise _corrupt(path, "empty file")
    try:
        data = json.loads(text, object_pairs_hook=_once)
    except (ValueError, RecursionError) as e:  # RecursionError: nested past json's depth
        raise _corrupt(path, str(e)) from None
    ok = isinstance(data, dict) and all(
        isinstance(table, dict) and all(str(k).isdigit() and isinstance(d, dict) for k, d in table.items())
        for table in data.values()
    )
    if not ok:
        raise _corrupt(path, "expected an object of tables of numbered documents")
    if _SURROGATE.search(text):
        try:
            json.dumps(data, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise _corrupt(path, "a text holds a lone surrogate (a \\udXXX escape)") from None
    if _LONG_NUMBER.search(text):
        try:
            field = _too_large(data)
        except RecursionError:
            raise _corrupt(path, "nested too deep") from None
        if field is not None:
            raise _corrupt(path, f"{field}: an integer past 64 bits")
    return data


def _once(pairs: list[tuple[str, Any]]) -> dict:
    """A JSON object whose keys are each given once. A key given twice keeps only its last
    value, without a word: two branches that each added a version under the next document
    number, merged by hand, would lose one branch's version (and its lessons) in silence."""
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise ValueError(f'key "{twice}" appears twice in one object (after a merge, renumber one of them)')
    return data


def _too_large(data: Any) -> str | None:
    """Where in ``data`` an integer lies that the file cannot be written with (orjson stops at
    64 bits: a file holding one would read, then fail at its next write), or None."""
    if isinstance(data, int) and not isinstance(data, bool):
        return "" if not -INT64 - 1 <= data <= INT64 else None
    inside = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in inside:
        found = _too_large(value)
        if found is not None:
            return f"{key}.{found}" if found else str(key)
    return None


def read_versions(path: Path, text: str) -> list[Version]:
    """Every version of the library file text ``text`` (read from ``path``), validated: a
    ``CorruptLibrary`` (with its ``reason``) when it is not a library file."""
    return _validate(path, _parse(path, text).get(TABLE, {}))


def _validate(path: Path, docs: dict[str, dict]) -> list[Version]:
    """Documents to versions: a bad or duplicated document means the file is corrupt. A bad
    one is named by its key, as the file spells it: the file lists "1", "10", "2", ..., so its
    place among them is no help to whoever mends it."""
    out: list[Version] = []
    for i, doc in docs.items():
        schema = doc.get("schema_version")
        if isinstance(schema, int) and schema > PERSON_SCHEMA:
            raise UserError(f"{path}: written by a newer mas (schema {schema}); upgrade mas")
        try:
            out.append(Version.model_validate(dict(doc), strict=True))  # strict: `true` is no number
        except ValidationError as e:
            loc, said = first_error(e)
            raise _corrupt(path, f'document "{i}": {loc}: {said}') from None
    out.sort(key=lambda v: (v.library, v.number))
    previous: Version | None = None
    for v in out:
        if previous is not None and previous.library == v.library and previous.number == v.number:
            raise _corrupt(path, f"library {v.library!r} has two versions {v.number}")
        before = previous if previous is not None and previous.library == v.library else None
        problem = broken(v, before)
        if problem:
            raise _corrupt(path, problem)
        previous = v
    return out


def broken(version: Version, before: Version | None) -> str | None:
    """What breaks the invariants of a stored version, given the one before it (None: it
    must be version 1), or None: versions chain, ids are the library's own (``solver/0003``:
    4 to 9 digits), unique and below ``next_id``, which never goes back (ids are never
    reused), texts are not empty."""
    v, name = version, version.library
    where = f"library {name!r} version {v.number}"
    if not is_name(name):
        return f"library name {name!r} is not a name"
    expected = before.number + 1 if before else 1
    if v.number != expected:
        return f"library {name!r}: version {v.number} follows version {expected - 1} (versions must chain)"
    if v.schema_version < 1:
        return f"{where}: schema_version {v.schema_version}"
    if not 1 <= v.next_id <= MAX_ID:
        return f"{where}: next_id {v.next_id} out of range"
    if before is not None and v.next_id < before.next_id:
        return f"{where}: next_id goes back from {before.next_id} to {v.next_id} (ids would be reused)"
    prefix = f"{name}/"
    ids = [lesson.id for lesson in v.lessons]
    listed = "".join(f"{i}\n" for i in ids)
    if not re.fullmatch(rf"(?:{re.escape(prefix)}[0-9]{{4,9}}\n)*", listed):  # one pass over thousands
        bad = next(i for i in ids if not re.fullmatch(rf"{re.escape(prefix)}[0-9]{{4,9}}", i))
        return f"{where}: lesson id {bad!r} is not an id of library {name!r}"
    if len(set(ids)) != len(ids):
        seen: set[str] = set()
        twice = next(i for i in ids if i in seen or seen.add(i))
        return f"{where}: duplicate lesson id {twice}"
    highest = max((int(i[len(prefix) :]) for i in ids), default=0)
    if highest >= v.next_id:
        return f"{where}: next_id {v.next_id} is not above lesson id {prefix}{highest:04d} (an add would overwrite it)"
    empty = next((lesson.id for lesson in v.lessons if not lesson.text or lesson.text.isspace()), None)
    if empty is not None:
        return f"{where}: lesson {empty} has an empty text"
    return None


def is_name(name: str) -> bool:
    """Whether ``name`` can name a library (``_LIBRARY``)."""
    return bool(_LIBRARY.fullmatch(name)) and ".." not in name


_LIBRARY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
"""A library name: ``global`` or a role's name (an agent's name, so an identifier)."""
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
"""The JSON escape of a surrogate: paired it is a character, alone it is no text at all."""
_LONG_NUMBER = re.compile(r"[0-9]{19}")
"""Nineteen digits in a row: an integer past 64 bits has them (``_too_large`` looks, then)."""


class AtomicJSONStorage(Storage):
    """tinydb JSON storage that never half-writes, and backs up the previous content.

    A missing file reads as empty and is not created until the first write; an empty
    file is corrupt (mas never writes one), so history is never silently started over.
    Every write also goes to ``<file>.bak``: writes are atomic, so the library file can only
    be damaged from outside (an editor, a bad merge, a disk), and the backup then holds the
    last good state, the latest commit included.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.written: str | None = None
        """The text of the last write, so the store can keep what it wrote as its cache."""

    def read(self) -> dict | None:
        text = _read_text(self.path)
        return None if text is None else _parse(self.path, text)

    def write(self, data: dict) -> None:
        try:
            text = _dumps(data)
        except TypeError as e:  # an integer past 64 bits: ``_parse`` refuses a file holding one
            raise UserError(f"{self.path}: cannot write ({e})") from None
        backup = regular_file(SideFiles(self.path).backup)  # (a folder there would fail after the write)
        atomic_write(self.path, text)
        atomic_write(backup, text)
        self.written = text


def _read_text(path: Path) -> str | None:
    """A library file's text; None when it is missing."""
    try:
        return regular_file(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as e:
        raise _corrupt(path, f"not UTF-8: {e.reason}") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read ({e.strerror or e})") from None


class LibraryStore:
    """All versions of all libraries of one scenario, in one library file.

    ``path`` is resolved: a symlinked library file is written through (the link stays), and
    its locks and side files are those of the file it points to."""

    def __init__(self, path: str | Path, lock_timeout: float = 30.0) -> None:
        try:
            self.path = Path(path).resolve()
        except (RuntimeError, OSError) as e:  # a symlink loop
            raise UserError(f"{path}: cannot resolve ({e})") from None
        self.side = SideFiles(self.path)
        self._lock_timeout = lock_timeout
        self.backup = self.side.backup
        self._cache: tuple[str, list[Version]] | None = None
        """The file text last read or written, and its versions, validated: a read finding the
        very same text reuses them instead of parsing and validating the whole history again."""
        self._usable: dict[tuple[str, int], tuple[Version, Version]] = {}
        """Each head read, and that head without its quarantined lessons."""

    # -- reading -------------------------------------------------------------------------

    def _open(self) -> TinyDB:
        return TinyDB(storage=AtomicJSONStorage, path=self.path)

    def _load(self) -> list[Version]:
        """Every version, validated, ordered by library then number."""
        text = _read_text(self.path)
        if text is None:
            return []
        if self._cache is not None and self._cache[0] == text:
            return list(self._cache[1])
        data = _parse(self.path, text)
        loaded = _validate(self.path, data.get(TABLE, {}))
        self._cache = (text, loaded)
        return list(loaded)

    def libraries(self) -> list[str]:
        return _ordered({v.library for v in self._load()})

    def versions(self, library: str) -> list[Version]:
        return [v for v in self._load() if v.library == library]

    def head(self, library: str, *, screened: bool = True) -> Version:
        """The latest version, or the implicit empty version 0 of a new library; without the
        lessons that fail the screen unless ``screened`` is False (``mas.library.screened``)."""
        found = _head(self._load(), library)
        return self._screened(found) if screened else found

    def heads(self, *, screened: bool = True) -> dict[str, Version]:
        """The latest version of every library, as ``head`` gives it."""
        loaded = self._load()
        found = {name: _head(loaded, name) for name in _ordered({v.library for v in loaded})}
        return {name: self._screened(v) for name, v in found.items()} if screened else found

    def _screened(self, version: Version) -> Version:
        """``version`` without its quarantined lessons, worked out once per version read."""
        if not version.lessons:
            return version
        from mas.library.screened import usable

        key = (version.library, version.number)
        hit = self._usable.get(key)
        if hit is None or hit[0] is not version:
            hit = self._usable[key] = (version, usable(version))
        return hit[1]

    def version(self, library: str, number: int) -> Version:
        """One version; number 0 is the implicit empty version every library starts at."""
        return self._find(self._load(), library, number)

    def _find(self, loaded: list[Version], library: str, number: int) -> Version:
        if number == 0:
            return Version.empty(library)
        for v in loaded:
            if v.library == library and v.number == number:
                return v
        raise UserError(f"{self.path}: library {library!r} has no version {number}")

    def has_provenance(self, run: str, epoch: int, step: int, stage: str = "edit") -> bool:
        """Whether a training step (or its promotion or budget pass) was already applied, so
        a resumed run skips it."""
        return any(
            v.provenance is not None
            and (v.provenance.run, v.provenance.epoch, v.provenance.step, v.provenance.stage)
            == (run, epoch, step, stage)
            for v in self._load()
        )

    def trained_on(self) -> set[str]:
        """The ids of every task any training step of these libraries learned from (a step whose
        edits were held for review, once a decision on one of them is in the library)."""
        return {
            i
            for v in self._load()
            if v.provenance and v.provenance.stage in ("edit", "review")
            for i in v.provenance.task_ids
        }

    def composition(self) -> Budget | None:
        """The prompt composition (injection and budgets) the libraries were last trained with."""
        recorded = [v for v in self._load() if v.provenance and v.provenance.budget]
        return (
            max(recorded, key=lambda v: (v.provenance.epoch, v.provenance.step)).provenance.budget if recorded else None
        )

    # -- writing -------------------------------------------------------------------------

    @cached_property
    def _lock(self) -> filelock.FileLock:
        """Held by every write to the library file."""
        import filelock  # here, not at the top: ``mas library show`` starts 10 ms sooner without it

        return filelock.FileLock(self.side.lock, timeout=self._lock_timeout)

    @cached_property
    def _held(self) -> filelock.FileLock:
        """Held for a whole operation (``exclusive``); one per file in this process, so it nests."""
        import filelock

        return filelock.FileLock(self.side.run_lock, is_singleton=True)

    @contextlib.contextmanager
    def exclusive(self, *, settle: bool = True) -> Iterator[None]:
        """Hold the library for a whole operation: a training run, a rollback, a promotion
        pass, a recovery, a graph export. Another process asking meanwhile is refused at once
        (one line), never queued; within this process the hold nests (a training run promotes
        and commits while it holds the library). Taking the hold first takes the quarantined
        lessons out of the file (``screened.settle``), unless ``settle`` is False: what the
        operation makes from the heads then follows the stored versions."""
        import filelock

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._held.acquire(timeout=0)
        except filelock.Timeout:
            raise InUse(
                f"{self.path}: in use by another mas process (a training run, or a rollback, promote, recover or "
                "graph export); wait for it to finish or use another library file"
            ) from None
        except OSError as e:
            raise UserError(f"{self.path}: cannot lock ({e.strerror or e})") from None
        try:
            if settle and self._held.lock_counter == 1:
                from mas.library.screened import settle as take_out

                take_out(self)
            yield
        finally:
            self._held.release()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the lock file for a read-modify-write; sweep temp files of killed writers."""
        import filelock

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock.acquire()
        except filelock.Timeout:
            raise UserError(f"{self.path}: locked by another mas process") from None
        except OSError as e:
            raise UserError(f"{self.path}: cannot lock ({e.strerror or e})") from None
        try:
            for stale in self.path.parent.glob(f".{self.path.name}.*.tmp"):
                with contextlib.suppress(OSError):
                    stale.unlink()
            yield
        finally:
            self._lock.release()

    def commit(self, versions: list[Version]) -> None:
        """Append new versions of different libraries in one atomic write, redacted
        (``mas.redact``): no secret reaches the file or its backup, nor a lone surrogate
        (no UTF-8 file can hold one)."""
        if not versions:
            return
        with self.exclusive(settle=False), self._locked():
            self._commit(versions)

    def _commit(self, versions: list[Version]) -> None:
        names = [v.library for v in versions]
        if len(set(names)) != len(names):
            raise ValueError(f"one commit holds two versions of a library: {names}")
        loaded = self._load()
        versions = [_redacted(v) for v in versions]
        for v in versions:
            head = _head(loaded, v.library)
            if v.number != head.number + 1:
                raise ValueError(f"{v.library}: next version is {head.number + 1}, not {v.number}")
            problem = _unwritable(v, head)
            if problem:
                raise UserError(f"{self.path}: refusing to write {problem}")
        with self._open() as db:
            db.table(TABLE).insert_multiple(v.model_dump(mode="json") for v in versions)
            written = db.storage.written
        if written is not None:  # the new versions are validated models already
            self._cache = (written, sorted(loaded + versions, key=lambda v: (v.library, v.number)))

    def rollback(self, library: str, number: int, *, by: str | None = None, why: str = "") -> Version:
        """Commit a new version with the lessons of an old one; ids stay never reused. With ``by``,
        the version records who rolled back and why (stage ``rollback``); without, nothing (a
        rollback from code, as every rollback was before these records)."""
        with self.exclusive(), self._locked():
            loaded = self._load()
            old = self._find(loaded, library, number)
            head = _head(loaded, library)
            new = Version(library=library, number=head.number + 1, lessons=old.lessons, next_id=head.next_id)
            if by is not None:
                stamp = by_hand("rollback", by, why, to_version=number)
                new = new.model_copy(update={"provenance": stamp, "schema_version": PERSON_SCHEMA})
            self._commit([new])
        return new

    def add(self, library: str, text: str, *, by: str, why: str) -> Version:
        """Commit a new version of ``library`` with one more lesson, ``text``, under its next id,
        recording who wrote it in and why (stage ``add``). A ``UserError`` when the library or
        the shared one already has these words (``edits.apply``'s refusal). The caller screens
        the text (``mas.library.screened.refusals``): the file holds what it is given."""
        with self.exclusive(), self._locked():
            loaded = self._load()
            head = _head(loaded, library)
            shared = [] if library == GLOBAL else _head(loaded, GLOBAL).lessons
            new, refused = apply(head, [Add(op="add", text=text)], provenance=by_hand("add", by, why), shared=shared)
            if refused:
                raise UserError(f"{self.path}: library {library!r}: {refused[0].reason}")
            new = new.model_copy(update={"schema_version": PERSON_SCHEMA})
            self._commit([new])
        return new

    def remove(self, lesson: str, *, by: str, why: str) -> Version:
        """Commit a new version of ``lesson``'s library without it, recording who removed it and
        why (stage ``remove``); its id is never reused (``next_id`` stays). A ``UserError`` when
        the library's latest version has no such lesson."""
        library = lesson.rpartition("/")[0]
        with self.exclusive(), self._locked():
            head = _head(self._load(), library)
            kept = [x for x in head.lessons if x.id != lesson]
            if len(kept) == len(head.lessons):
                raise UserError(
                    f"{self.path}: library {library!r} has no lesson {lesson!r} (in its version {head.number})"
                )
            new = Version(library=library, number=head.number + 1, lessons=kept, next_id=head.next_id,
                          edits=[Delete(op="delete", id=lesson)], provenance=by_hand("remove", by, why),
                          schema_version=PERSON_SCHEMA)  # fmt: skip
            self._commit([new])
        return new

    def healthy(self) -> bool:
        """Whether the library file (missing counts) loads without a fault ``recover`` fixes."""
        try:
            self._load()
        except CorruptLibrary:
            return False
        return True

    def recover(self) -> int:
        """Restore a corrupt library file from ``<file>.bak``; returns the versions restored."""
        with contextlib.suppress(CorruptLibrary):  # checked before the lock: no lock file for nothing
            self._load()
            raise NotCorrupt(f"{self.path}: not corrupt, nothing to recover")
        with self.exclusive(settle=False), self._locked():
            with contextlib.suppress(CorruptLibrary):
                self._load()
                raise NotCorrupt(f"{self.path}: not corrupt, nothing to recover")
            if not self.backup.exists():
                raise UserError(f"{self.path}: corrupt and no backup at {self.backup}")
            try:
                text = self.backup.read_text(encoding="utf-8")
                data = _parse(self.backup, text)
                restored = _validate(self.backup, data.get(TABLE, {}))
            except (CorruptLibrary, UnicodeDecodeError):
                raise UserError(f"{self.path}: corrupt, and so is {self.backup}") from None
            except OSError as e:
                raise UserError(f"{self.backup}: cannot read ({e.strerror or e})") from None
            atomic_write(self.path, _dumps(redact_data(data)))
        return len(restored)


def by_hand(stage: str, by: str, why: str, **more: Any) -> Provenance:
    """The provenance of a version a person made by hand (a stage of ``BY_HAND``): who, why, and
    a name telling when, as an import's (``rollback-<time>``); no step made it."""
    run = f"{stage}-{datetime.now(UTC):%Y%m%d-%H%M%S}"
    return Provenance(run=run, epoch=0, step=0, stage=stage, by=by, why=why, **more)


def _unwritable(version: Version, head: Version) -> str | None:
    """Why ``version`` may not follow ``head`` in the file (what ``broken`` says a reader would
    refuse), or None. The same bounds hold for reading and writing, so an edit that needs an id
    past them (a library whose ``next_id`` is at ``MAX_ID`` has used every id) is refused here:
    the file that was read stays as it was. (``edits.apply`` refuses such an edit as it is made;
    this holds for every other way a version is made.)"""
    if version.next_id > MAX_ID >= head.next_id:
        return f"library {version.library!r} version {version.number}: no lesson id left (ids have at most 9 digits)"
    return broken(version, head if head.number else None)


def _redacted(version: Version) -> Version:
    """``version`` with its strings redacted; itself when there is nothing to cut. Its lessons
    go through ``redact_texts``, which skips the texts it found clean before: each version
    repeats every lesson of its library."""
    doc = version.model_dump(mode="json")
    lessons = doc.pop("lessons")
    texts = [lesson["text"] for lesson in lessons]
    clean_texts, rest = redact_texts(texts), redact_data(doc)
    if clean_texts is texts and rest is doc:
        return version
    lessons = [{**lesson, "text": text} for lesson, text in zip(lessons, clean_texts)]
    return Version.model_validate({**rest, "lessons": lessons})


def _ordered(names: Iterable[str]) -> list[str]:
    """Library names sorted, with the shared library first as it is in every prompt."""
    return sorted(names, key=lambda n: (n != GLOBAL, n))


def _head(loaded: list[Version], library: str) -> Version:
    numbered = [v for v in loaded if v.library == library]
    return max(numbered, key=lambda v: v.number) if numbered else Version.empty(library)


# -- pure helpers over versions --------------------------------------------------------------


def diff(old: Version, new: Version) -> list[str]:
    """Lesson-level changes from old to new, in id order, for review and logs."""
    before = {lesson.id: lesson.text for lesson in old.lessons}
    after = {lesson.id: lesson.text for lesson in new.lessons}
    lines = []
    for lid in sorted(before.keys() | after.keys()):
        if lid not in after:
            lines.append(f"- {lid}: {before[lid]}")
        elif lid not in before:
            lines.append(f"+ {lid}: {after[lid]}")
        elif before[lid] != after[lid]:
            lines.append(f"~ {lid}: {before[lid]} -> {after[lid]}")
    return lines
