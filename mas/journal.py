"""The run journal: every stage's output, appended as it finishes, so a run can resume.

Stage: none (shared by every stage, and by the studies).

One JSON line per finished unit of work (a rollout, a summary, an advantage, an edit batch,
a step report), keyed by what produced it. Each line is flushed and fsynced before the next
stage may depend on it. A crash can only cut the last line short; loading drops such a line,
so its unit of work is simply done again. Any other bad line is damage from outside: loading
stops with one line naming it, rather than silently dropping every record after it. A record
read back (``Journal.load``, ``read_back``) is untrusted too: one that is not of its kind, or
whose data contradict its key (a step report or a rollout of other work), stops the command
with one line naming its line and field, rather than being taken as done. What is written is
redacted (``mas.redact``).

Memory holds only where each record is (its offset and length in the file), not the records,
and only for the steps not yet finished (and each step's report): a run of thousands of steps
holds every rollout with its traces, a finished step is never read again but for its report,
and resuming reads a record again only when its unit of work comes up. Loading checks every
line (orjson).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from mas.errors import UserError
from mas.paths import regular_file
from mas.redact import redact_data

T = TypeVar("T", bound=BaseModel)


class CorruptJournal(UserError):
    """A journal line in the middle of the file that is not a record."""


class Journal:
    def __init__(self, path: Path):
        self.path = path
        self.index: dict[tuple[str, str], int] = {}
        """Where each record of the step under way starts in the file (step reports are kept
        whole, in ``_reports``)."""
        self._pending: list[tuple[str, str]] = []
        """The keys of the records since the last step report: those of the step under way (a
        run's steps follow one another, and a step's report is its last record)."""
        self._reports: dict[str, Any] = {}
        """Each finished step's report (small; a resume reads every one)."""
        self._report_at: dict[str, int] = {}
        """Where each step's report starts in the file: an error names its line."""
        self._calls: dict[str, list[str]] = {}
        """The keys of the model calls journaled in the step under way, by the rollout that
        made them (``calls_of``)."""
        self._lock = threading.Lock()
        if path.exists():
            self._load()

    def _load(self) -> None:
        """Index every record line (one tight loop: a resume reads the whole journal, and this
        is most of its time), then cut a last line left half written by a crash."""
        try:
            f = regular_file(self.path).open("rb")
        except OSError as e:
            raise UserError(f"{self.path}: cannot read ({e.strerror or e})") from None
        reports, report_at, loads = self._reports, self._report_at, orjson.loads
        pending: list[tuple[str, str, int]] = []
        whole, offset, number, bad = 0, 0, 0, None
        collecting = gc.isenabled()
        gc.disable()  # nothing here makes cycles; the collector would rescan what is kept again and again
        with f, contextlib.ExitStack() as stack:
            if collecting:
                stack.callback(gc.enable)
            for raw in f:
                number += 1
                length = len(raw)
                if raw.isspace():
                    offset += length
                    continue
                if bad is not None:  # a bad line before this one: the damage is in the middle
                    raise _corrupt(self.path, *bad)
                try:
                    record = loads(raw)
                    kind, key = record["kind"], record["key"]
                    if type(kind) is not str or type(key) is not str or "data" not in record:
                        raise ValueError
                except (ValueError, KeyError, TypeError):
                    try:
                        record = _record(raw)  # the slow path says why (or reads NaN that json wrote)
                        kind, key = record["kind"], record["key"]
                    except ValueError as e:
                        bad = (number, e)
                        whole_line = raw.endswith(b"\n")
                        continue
                if kind == "step":  # ``_note``, inlined (it runs per record)
                    reports[key] = record["data"]
                    report_at[key] = offset
                    pending.clear()
                else:
                    pending.append((kind, key, offset))
                offset += length
                whole = offset
        if bad is not None and whole_line:  # a crash cuts a line before its newline: this is damage
            raise _corrupt(self.path, *bad)
        for kind, key, at in pending:
            self.index[(kind, key)] = at
            self._pending.append((kind, key))
            if kind == "call":
                self._calls.setdefault(_rollout_of(key), []).append(key)
        with self.path.open("r+b") as f:
            size = f.seek(0, os.SEEK_END)
            if whole < size:  # a last line cut short by a crash: its work is done again
                f.truncate(whole)
            elif size:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":  # whole, but its newline was cut off
                    f.write(b"\n")

    def get(self, kind: str, key: str) -> Any | None:
        if kind == "step":
            return self._reports.get(key)
        where = self.index.get((kind, key))
        if where is None:
            return None
        try:
            with self.path.open("rb") as f:
                f.seek(where)
                return _record(f.readline())["data"]
        except (OSError, ValueError) as e:
            raise UserError(f"{self.path}: cannot read a record back ({e})") from None

    def load(self, kind: str, key: str, model: type[T]) -> T | None:
        """``get``, validated as ``model`` and checked against ``key``: a record that is not
        one, or is another unit of work's (damage, a hand edit, a line from another run), stops
        the run with one line naming the file and the line, rather than being taken as done."""
        at = self._report_at.get(key) if kind == "step" else self.index.get((kind, key))
        if at is None:
            return None
        try:
            return _checked(kind, key, self.get(kind, key), model)
        except BadRecord as e:
            with self.path.open("rb") as f:
                line = f.read(at).count(b"\n") + 1
            raise _bad(self.path, line, e) from None

    def put(self, kind: str, key: str, data: Any, *, sync: bool = True) -> None:
        """Append a record. ``sync=False`` leaves it to the system to reach the disk: for a
        record whose loss in a crash of the machine (not of mas) only means its work is done
        again, such as one model call's reply (``mas.models.wrappers.Replayed``)."""
        data = redact_data(data)
        line = (json.dumps({"kind": kind, "key": key, "data": data}, separators=(",", ":")) + "\n").encode()
        try:
            with self._lock, self.path.open("ab") as f:
                offset = f.seek(0, os.SEEK_END)
                f.write(line)
                f.flush()
                if sync:
                    os.fsync(f.fileno())
                self._note(kind, key, data, offset)
        except OSError as e:
            raise UserError(f"{self.path}: cannot write ({e.strerror or e})") from None

    def _note(self, kind: str, key: str, data: Any, offset: int) -> None:
        """Index a record; a step's report closes the step: its other records leave the index."""
        if kind == "step":
            self._reports[key] = data
            self._report_at[key] = offset
            for done in self._pending:
                self.index.pop(done, None)
            self._pending.clear()
            self._calls.clear()
        else:
            self.index[(kind, key)] = offset
            self._pending.append((kind, key))
            if kind == "call":
                self._calls.setdefault(_rollout_of(key), []).append(key)

    async def record(self, kind: str, key: str, data: Any, *, sync: bool = True) -> None:
        """``put`` in a worker thread: an fsync takes milliseconds, and the event loop has
        every other rollout's calls to send meanwhile."""
        await asyncio.to_thread(self.put, kind, key, data, sync=sync)

    def calls_of(self, rollout: str) -> dict[str, Any]:
        """The model calls journaled for the rollout keyed ``rollout`` (by their keys): what a
        rollout cut short gets back when it runs again in another process."""
        return {key: self.get("call", key) for key in self._calls.get(rollout, [])}

    def all(self, kind: str) -> list[Any]:
        if kind == "step":
            return list(self._reports.values())
        return [self.get(k, key) for k, key in list(self.index) if k == kind]


def _rollout_of(call: str) -> str:
    """The rollout key of a call's key, ``<rollout>/<request digest>/<n>`` (``Replayed``)."""
    return call.rsplit("/", 2)[0]


def records(path: Path) -> tuple[list[dict], int]:
    """The records of a journal file, and the length of the part of it that holds them: all
    of it but a last line cut short by a crash. Any other bad line is a ``CorruptJournal``."""
    found, whole = [], 0
    for record, _, offset, length in _scan(path):
        found.append(record)
        whole = offset + length
    return found, whole


def read_back(path: Path, models: dict[str, type[BaseModel]]) -> Iterator[tuple[str, str, Any, int]]:
    """(kind, key, record, line) for each record of a kind in ``models``, in file order, the
    record validated as that kind's model and checked against its key (``Journal.load``): a
    journal read whole, by a report or for a run's finished steps, is as untrusted as one read
    back record by record. A bad record is a ``CorruptJournal`` naming its line."""
    for record, line, _, _ in _scan(path):
        kind, key = record["kind"], record["key"]
        if kind in models:
            try:
                yield kind, key, _checked(kind, key, record["data"], models[kind]), line
            except BadRecord as e:
                raise _bad(path, line, e) from None


class BadRecord(ValueError):
    """A record that is not of its kind, or not of the work its key names (``_checked``)."""


def _checked(kind: str, key: str, data: Any, model: type[T]) -> T:
    """``data`` as ``model``, or a ``BadRecord`` saying which field is wrong and why."""
    try:
        value = model.model_validate(data)
    except ValidationError as e:
        error = e.errors()[0]
        where = ".".join(map(str, error["loc"]))
        raise BadRecord(f"not {_a(kind)} record ({where + ': ' if where else ''}{error['msg']})") from None
    field = _contradicted(kind, key, value)
    if field is not None:
        raise BadRecord(f"not the {kind} record of {key!r} (its {field} is {getattr(value, field)!r})")
    return value


def _a(kind: str) -> str:
    """``kind`` with its article: a rollout, an advantage."""
    return f"{'an' if kind[:1] in tuple('aeiou') else 'a'} {kind}"


def _contradicted(kind: str, key: str, value: Any) -> str | None:
    """The field of a record that its key contradicts, or None. A step report's key is
    ``e<epoch>/s<step>``, a rollout's ends ``/<task id>/<index>``: a line pasted from another
    run or another step would otherwise be read back as the work of this one."""
    if kind == "step":
        epoch, _, step = key.partition("/")
        agrees = {"epoch": epoch == f"e{value.epoch}", "step": step == f"s{value.step}"}
    elif kind == "rollout":
        head, _, index = key.rpartition("/")
        agrees = {"task_id": head.endswith(f"/{value.task_id}"), "index": index == str(value.index)}
    else:
        return None
    return next((field for field, ok in agrees.items() if not ok), None)


def _bad(path: Path, line: int, e: BadRecord) -> CorruptJournal:
    reason = " ".join(str(e).split())[:200]  # one line, whatever the record held
    return CorruptJournal(f"{path}:{line}: {reason}; delete line {line} to redo its work, or use a new --run-dir")


def _scan(path: Path):
    """(record, line number, offset, length) for each record line, in file order; stops before
    a last line cut short by a crash. Any other bad line is a ``CorruptJournal``."""
    try:
        f = regular_file(path).open("rb")
    except OSError as e:
        raise UserError(f"{path}: cannot read ({e.strerror or e})") from None
    with f:
        offset, number, bad = 0, 0, None
        for raw in f:
            number += 1
            blank = raw.isspace()  # (no copy of the line, unlike strip())
            if bad is not None:  # a bad line before this one: the damage is in the middle
                if not blank:
                    raise _corrupt(path, *bad)
            elif not blank:
                try:
                    yield _record(raw), number, offset, len(raw)
                except ValueError as e:
                    bad = (number, e)
            offset += len(raw)


def _corrupt(path: Path, number: int, e: ValueError) -> CorruptJournal:
    reason = "not UTF-8" if isinstance(e, UnicodeDecodeError) else str(e).splitlines()[0][:120]
    return CorruptJournal(
        f"{path}:{number}: not a journal record ({reason}); the lines after it are intact: delete "
        f"line {number} to redo its work, or use a new --run-dir"
    )


def _record(raw: bytes) -> dict:
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError:  # orjson is strict: NaN and Infinity, which json writes, are not JSON to it
        try:
            record = json.loads(raw)
        except RecursionError:
            raise ValueError("nested too deeply") from None
    if type(record) is not dict or len(record.keys() & _FIELDS) != 3:
        raise ValueError("expected an object with kind, key and data")
    if type(record["kind"]) is not str or type(record["key"]) is not str:
        raise ValueError("kind and key must be strings")
    return record


_FIELDS = frozenset({"kind", "key", "data"})
