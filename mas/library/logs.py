"""The files next to a library file, and their append-only writes: one owner for both.

Stage: none (shared by every stage): screen, apply, record usage and evidence append here.

For ``libraries/maths.json``:

    maths.json.bak            the last good state (written by the store with every commit)
    maths.json.lock           held by every write to the library file
    maths.json.run.lock       held for a whole operation on the library: a training run, a
                              rollback, a promotion pass, a recovery, a graph export
    maths.usage.jsonl         the usage events of each step
    maths.quarantine.jsonl    the lessons screening refused, with why: proposed in training, found
                              in the library file on load, or left out of an import
    maths.rejected.jsonl      the operations and edits that could not be applied, with why
    maths.promotions.jsonl    every promotion pass: its promotions and demotions, with evidence
    maths.prunings.jsonl      the lessons pruned after each step, with their evidence, and those
                              adopted by other roles after a run's last step
    maths.equivalence.jsonl   the judgements of which lessons say the same thing
    maths.pending.jsonl       the edits steps held for review (``mas train --review``)
    maths.reviews.jsonl       the review decisions on them, until the library records them
    maths.graph.html|graphml  the usage graph, when exported

The six step logs are append-only, one JSON line per training step (``{"run", "epoch", "step",
"items": [...]}``), so a crash can never leave a step half recorded and a resumed step is
never recorded twice. They are read back as untrusted input: a last line cut short by a crash
is dropped, any other bad line (or a second line of one step) stops the reader with one line
naming it, and ``repair()`` (``mas library recover``) sets such lines aside in
``<log>.bad``. What is appended is redacted (``mas.redact``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from functools import cache, cached_property
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Generic, NamedTuple, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from mas.errors import UserError
from mas.paths import atomic_write, regular_file
from mas.redact import redact, redact_data
from mas.types.base import first_error
from mas.types.evidence import PromotionMove
from mas.types.refusals import QuarantineItem, RefusedEdit
from mas.types.replies import Equivalence
from mas.types.review import PendingEdit, PendingStep
from mas.types.usage import UsageEvent

if TYPE_CHECKING:
    from mas.library.ledger import Ledger

Item = TypeVar("Item", bound=BaseModel)


class StepKey(NamedTuple):
    run: str
    epoch: int
    step: int


class Mark(NamedTuple):
    """Where a reader of a step log stopped: the file (device, inode) and the byte after the
    last whole line it read."""

    file: tuple[int, int] | None = None
    offset: int = 0
    line: int = 0
    """The number of that last line (for messages)."""
    tail: bytes = b""
    """The last bytes of that line: a file rewritten in place under the mark shows here."""


class CorruptLog(UserError):
    """A step log line that is not a step record; ``StepLog.repair()`` sets it aside."""


class _Line(BaseModel, Generic[Item]):
    """One line of a step log, validated in one pass (strict: ``true`` is no step number)."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)
    run: str
    epoch: int
    step: int
    items: list[Item]


class StepLog(Generic[Item]):
    """Append-only, one JSON line per training step, each holding that step's items."""

    def __init__(self, path: Path, item: type[Item], library: Path | None = None):
        self.path, self.item, self.library = path, item, library
        self._keys: dict[StepKey, int] = {}
        self._indexed = Mark()
        """The keys of the steps read so far, each with the line that first records it, and where
        that reading stopped: each line is read once for ``has_step`` (and ``since``) however many
        steps append after it."""

    def steps(self) -> Iterator[tuple[StepKey, list[Item]]]:
        for _, key, items in self.records():
            yield key, items

    def records(self) -> Iterator[tuple[int, StepKey, list[Item]]]:
        """Each step with the number of its line, for messages that name it. A step recorded
        twice stops the reader (``_once``)."""
        first: dict[StepKey, int] = {}
        for number, raw, last in self._lines():
            try:
                key, items = self._parse(raw)
            except ValueError as e:
                if last and not raw.endswith(b"\n"):
                    return  # a line cut short by a crash (before its newline); append() drops it
                raise self._corrupt(number, f"not a step record ({_why(e)})") from None
            self._once(key, number, first.setdefault(key, number))
            yield number, key, items

    def _once(self, key: StepKey, number: int, first: int) -> None:
        """Refuse a second line of the step that line ``first`` records: ``append`` records a
        step once, so a copy came from outside, and its items would count twice (a usage line
        twice is that step's evidence twice)."""
        if first != number:
            step = f"run {key.run!r}, epoch {key.epoch}, step {key.step}"
            raise self._corrupt(number, f"a second record of {step} (first on line {first})")

    def _corrupt(self, number: int, what: str) -> CorruptLog:
        where = f"library file {self.library}" if self.library else "its library file"
        return CorruptLog(
            f"{self.path}:{number}: {what}; run `mas library recover` on {where} to set the bad lines aside"
        )

    def items(self) -> Iterator[Item]:
        for _, items in self.steps():
            yield from items

    def has_step(self, key: StepKey) -> bool:
        """Whether the step is recorded (a check made at every append: the lines read before
        are not read again)."""
        self._index()
        return key in self._keys

    def _index(self, until: Mark | None = None) -> None:
        """Index the keys of the lines after the last one indexed: to the end, or to ``until``."""
        if not self.current(self._indexed):
            self._keys, self._indexed = {}, Mark()
        if until is not None and self._indexed.offset >= until.offset:
            return
        for raw, mark in self._raw_since(self._indexed):
            if (found := self._key(raw)) is not None:
                self._keys.setdefault(found, mark.line)
            self._indexed = mark
            if until is not None and mark.offset >= until.offset:
                return

    def current(self, mark: Mark) -> bool:
        """Whether ``mark`` is a place in this very file: the file was not replaced since
        (``repair``, a copy over it), is not shorter, and still ends its line there as it did."""
        if mark.offset == 0:
            return True
        try:
            with self.path.open("rb") as f:
                stat = os.fstat(f.fileno())
                if mark.file != (stat.st_dev, stat.st_ino) or stat.st_size < mark.offset:
                    return False
                f.seek(mark.offset - len(mark.tail))
                return f.read(len(mark.tail)) == mark.tail
        except FileNotFoundError:
            return False
        except OSError as e:
            raise UserError(f"{self.path}: cannot read ({e.strerror or e})") from None

    def since(self, mark: Mark) -> Iterator[tuple[StepKey, list[Item], Mark]]:
        """The steps recorded after ``mark`` (a mark ``current`` says is still good; ``Mark()``
        for all), each with the mark after it: a reader that keeps the mark reads each line
        once. A last line cut short by a crash is not read (the mark stays before it). A step
        recorded on a line before, above ``mark`` (the index of ``has_step`` knows those) or
        below it, stops the reader (``_once``)."""
        here: dict[StepKey, int] | None = None
        for raw, after in self._raw_since(mark):
            try:
                key, items = self._parse(raw)
            except ValueError as e:
                raise self._corrupt(after.line, f"not a step record ({_why(e)})") from None
            if here is None:  # a line below the mark: the keys above it are needed (read once)
                self._index(until=mark)
                here = {}
            self._once(key, after.line, self._keys.get(key) or here.setdefault(key, after.line))
            yield key, items, after

    def _raw_since(self, mark: Mark) -> Iterator[tuple[bytes, Mark]]:
        """The whole lines after ``mark``, blank ones left out, each with the mark after it."""
        if (f := self._open()) is None:
            return
        with f:
            stat = os.fstat(f.fileno())
            offset, number = mark.offset, mark.line
            f.seek(offset)
            try:
                for raw in f:
                    if not raw.endswith(b"\n") and not self._whole(raw):
                        return  # cut short by a crash: ``append`` drops it
                    offset, number = offset + len(raw), number + 1
                    if raw.strip():
                        yield raw, Mark((stat.st_dev, stat.st_ino), offset, number, raw[-32:])
            except OSError as e:
                raise UserError(f"{self.path}: cannot read ({e.strerror or e})") from None

    def _whole(self, raw: bytes) -> bool:
        try:
            self._parse(raw)
            return True
        except ValueError:
            return False

    def _key(self, raw: bytes) -> StepKey | None:
        """A line's step key: from the line validated as a step record, or, for a damaged line,
        from its JSON when that still names one (``steps`` reports the damage)."""
        try:
            return self._parse(raw)[0]
        except ValueError:
            pass
        try:
            line = json.loads(raw)
            key = StepKey(line["run"], line["epoch"], line["step"]) if isinstance(line, dict) else None
        except (ValueError, KeyError, TypeError, RecursionError):
            return None
        usable = key is not None and isinstance(key.run, str) and all(type(n) is int for n in key[1:])
        return key if usable else None  # (a list there could not be a key of the index)

    def append(self, key: StepKey, items: list[Item]) -> None:
        """Record the step's items once; a step already recorded is left as it is."""
        self._drop_torn_tail()
        if self.has_step(key):
            return
        line = redact_data({**key._asdict(), "items": [x.model_dump(mode="json") for x in items]})
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(line, separators=(",", ":")) + "\n")
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            raise UserError(f"{self.path}: cannot write ({e.strerror or e})") from None

    def repair(self) -> int:
        """Move the lines that are not step records to ``<log>.bad``; return how many."""
        return set_aside(self.path, *self._sorted())

    def damaged(self) -> bool:
        """Whether ``repair`` has lines to set aside."""
        return bool(self._sorted()[1])

    def _sorted(self) -> tuple[list[bytes], list[bytes]]:
        """The lines that are step records, and the others: those that are not, and the second
        record of a step (``_once``)."""
        good, bad, seen = [], [], set()
        for _, raw, _ in self._lines():
            try:
                key = self._parse(raw)[0]
            except ValueError:
                key = None
            if key is None or key in seen:
                bad.append(raw)
            else:
                seen.add(key)
                good.append(raw)
        return good, bad

    def _open(self) -> BinaryIO | None:
        """The log opened for reading; None when there is none yet."""
        try:
            return regular_file(self.path).open("rb")
        except FileNotFoundError:
            return None
        except OSError as e:
            raise UserError(f"{self.path}: cannot read ({e.strerror or e})") from None

    def _parse(self, raw: bytes) -> tuple[StepKey, list[Item]]:
        line = _line(self.item).model_validate_json(raw)
        return StepKey(line.run, line.epoch, line.step), line.items

    def _lines(self) -> Iterator[tuple[int, bytes, bool]]:
        """Each non-blank line with its number, and whether it is the last one; read as a
        stream (one line ahead), so that a reader holds one step's line however long the log."""
        if (f := self._open()) is None:
            return
        with f:
            held = None
            try:
                for n, raw in enumerate(f, 1):
                    if raw.strip():
                        if held is not None:
                            yield *held, False
                        held = (n, raw)
            except OSError as e:
                raise UserError(f"{self.path}: cannot read ({e.strerror or e})") from None
            if held is not None:
                yield *held, True

    def _drop_torn_tail(self) -> None:
        """Before appending: cut a last line that a crash cut short (no newline, not a whole
        step record), so that it does not end up in the middle of the log; give a whole record
        whose newline was cut off its newline. A bad line that has its newline is damage, and
        ``steps`` names it."""
        tail = self._tail()
        if tail is None or tail[1].endswith(b"\n"):
            return
        start, raw = tail
        with self.path.open("r+b") as f:
            if self._whole(raw):
                f.seek(0, os.SEEK_END)
                f.write(b"\n")
            else:
                f.truncate(start)

    def _tail(self) -> tuple[int, bytes] | None:
        """Where the last non-blank line starts, and the line with what follows it, read
        from the end of the file; None for a log without one."""
        try:
            with self.path.open("rb") as f:
                size = f.seek(0, os.SEEK_END)
                start = size
                while start > 0:
                    start = max(0, start - (1 << 16))
                    f.seek(start)
                    data = f.read(size - start)
                    cut = data.rstrip().rfind(b"\n")
                    if cut >= 0 or start == 0:
                        return (start + cut + 1, data[cut + 1 :]) if data.strip() else None
        except FileNotFoundError:
            return None
        except OSError as e:
            raise UserError(f"{self.path}: cannot read ({e.strerror or e})") from None
        return None


@cache
def _line(item: type[Item]) -> type[_Line]:
    return _Line[item]


def _why(e: Exception) -> str:
    if isinstance(e, ValidationError):
        where, said = first_error(e)
        return f"{where or 'line'}: {said}"
    if isinstance(e, UnicodeDecodeError):
        return "not UTF-8"
    return f"not JSON: {e}" if isinstance(e, json.JSONDecodeError) else str(e)


class SideFiles:
    """The paths of the files next to one library file, and its logs."""

    def __init__(self, library: Path):
        self.library = Path(library)
        self.backup = Path(f"{self.library}.bak")
        self.lock = Path(f"{self.library}.lock")
        self.run_lock = Path(f"{self.library}.run.lock")
        self.usage = StepLog(self._beside(".usage.jsonl"), UsageEvent, self.library)
        self.quarantine = StepLog(self._beside(".quarantine.jsonl"), QuarantineItem, self.library)
        self.rejected = StepLog(self._beside(".rejected.jsonl"), RefusedEdit, self.library)
        self.promotions = StepLog(self._beside(".promotions.jsonl"), PromotionMove, self.library)
        self.prunings = StepLog(self._beside(".prunings.jsonl"), PromotionMove, self.library)
        self.equivalence = self._beside(".equivalence.jsonl")
        self.pending = StepLog(self._beside(".pending.jsonl"), PendingStep, self.library)
        self.reviews = self._beside(".reviews.jsonl")

    @cached_property
    def evidence(self) -> Ledger:
        """The usage log's randomized evidence, kept between reads (``ledger.Ledger``)."""
        from mas.library.ledger import Ledger  # the ledger reads logs: imported when first asked

        return Ledger(self.usage)

    @property
    def logs(self) -> list[StepLog]:
        return [self.usage, self.quarantine, self.rejected, self.promotions, self.prunings, self.pending]

    def check(self) -> None:
        """Read every log through: a damaged one stops a command before it writes anything (the
        held edits with the queue's own check, ``held_edits``; the judgements and the review
        decisions too)."""
        from mas.library.pending import decisions

        for log in self.logs:
            for _ in held_edits(log) if log is self.pending else log.steps():
                pass
        for _ in judgements(self.equivalence):
            pass
        decisions(self.reviews)

    def damaged(self) -> dict[Path, tuple[list[bytes], list[bytes]]]:
        """Per log with lines ``mas library recover`` sets aside: its good lines and its bad ones."""
        from mas.library.pending import decision_lines

        found = {log.path: log._sorted() for log in self.logs}
        found[self.equivalence] = judgement_lines(self.equivalence)
        found[self.reviews] = decision_lines(self.reviews)
        return {path: lines for path, lines in found.items() if lines[1]}

    def owned(self) -> set[Path]:
        """Every file that belongs to the library: no output may replace one of them."""
        paths = {self.library, self.backup, self.lock, self.run_lock, self.equivalence, self.reviews}
        logs = [*(log.path for log in self.logs), self.equivalence, self.reviews]
        return paths | set(logs) | {Path(f"{path}.bad") for path in logs}

    def graph(self, fmt: str) -> Path:
        return self._beside(f".graph.{fmt}")

    def _beside(self, suffix: str) -> Path:
        return self.library.with_suffix(suffix)


def held_edits(log: StepLog[PendingStep]) -> Iterator[tuple[int, StepKey, PendingStep, PendingEdit]]:
    """Every held edit of a pending log (``mas.library.pending``), with its line and step. An id
    names one held edit (decisions and the library's versions refer to it by its id), so an id
    held again, on a line mended by hand, stops the reader with one line naming it (a step's own
    line holds each id once: ``PendingStep``)."""
    first: dict[int, int] = {}
    for number, key, items in log.records():
        for step in items:
            for edit in step.edits:
                if edit.id in first:
                    raise UserError(
                        f"{log.path}:{number}: held edit {edit.id} again (first on line {first[edit.id]}); "
                        "mend or remove that line"
                    )
                first[edit.id] = number
                yield number, key, step, edit


def judgements(path: Path) -> Iterator[Judgement]:
    """The judgements of an equivalence log (``mas.library.similar``), each with its key (and a
    "same" with its texts: ``Judgement``). The log is a cache: a line that is not JSON (cut short
    by a crash, or run into by the next append; not UTF-8) is left out, and that pair is judged
    again. A JSON line that is not a judgement was written by no crash, and stops the reader with
    one line naming it: a "same" merges and deletes lessons.

    The whole lines read are kept (``_judged``): a training step makes a judge four times or
    more, over a log that only grows, so each reading parses only the lines appended since the
    last one (a log replaced or cut since is read from its start)."""
    try:
        f = regular_file(path).open("rb")
    except FileNotFoundError:
        return
    except OSError as e:
        raise UserError(f"{path}: cannot read ({e.strerror or e})") from None
    with f:
        try:
            stat = os.fstat(f.fileno())
            mark, found = _judged.get(Path(path), (Mark(), []))
            if not _same_file(f, stat, mark):
                mark, found = Mark(), []
            f.seek(mark.offset)
            data = f.read()
        except OSError as e:
            raise UserError(f"{path}: cannot read ({e.strerror or e})") from None
    whole = data.rfind(b"\n") + 1  # a last line without its newline is read, not kept: an append may run into it
    found = list(found)
    number = mark.line
    for number, line in enumerate(data[:whole].splitlines(), mark.line + 1):
        if (judged := _parsed(path, number, line)) is not None:
            found.append(judged)
    if whole:
        tail = data[max(0, whole - 32) : whole]
        _judged[Path(path)] = (Mark((stat.st_dev, stat.st_ino), mark.offset + whole, number, tail), found)
    yield from found
    for n, line in enumerate(data[whole:].splitlines(), number + 1):
        if (judged := _parsed(path, n, line)) is not None:
            yield judged


_judged: dict[Path, tuple[Mark, list[Judgement]]] = {}
"""Each equivalence log read in this process: where its last whole line ends, and the judgements
up to there."""


def _same_file(f: BinaryIO, stat: os.stat_result, mark: Mark) -> bool:
    """Whether ``mark`` is a place in the open file ``f``: the same file, not shorter, and still
    ending its line there as it did (``StepLog.current``)."""
    if mark.offset == 0:
        return True
    if mark.file != (stat.st_dev, stat.st_ino) or stat.st_size < mark.offset:
        return False
    f.seek(mark.offset - len(mark.tail))
    return f.read(len(mark.tail)) == mark.tail


def _parsed(path: Path, number: int, line: bytes) -> Judgement | None:
    """A judgement line's key and verdict; None for a line that is not JSON (``judgements``)."""
    try:  # (a line that is not UTF-8 is a ValueError too)
        record = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return _judgement(f"{path}:{number}", record)


def set_aside(path: Path, good: list[bytes], bad: list[bytes]) -> int:
    """Write the ``good`` lines of the log at ``path`` back and add the ``bad`` ones to
    ``<path>.bad`` (``mas library recover``); return how many were set aside."""
    if bad:
        aside = Path(f"{path}.bad")
        kept = aside.read_bytes() if aside.exists() else b""
        lines = [redact(b.rstrip(b"\n").decode("utf-8", "backslashreplace")) for b in bad]
        atomic_write(aside, kept.decode("utf-8", "backslashreplace") + "".join(f"{x}\n" for x in lines))
        atomic_write(path, "".join(g.decode("utf-8", "backslashreplace") for g in good))
    return len(bad)


def judgement_lines(path: Path) -> tuple[list[bytes], list[bytes]]:
    """The lines of an equivalence log that ``judgements`` reads or leaves out (a line that is
    no JSON is a cache miss), and those that stop it (JSON that is no judgement)."""
    return sorted_lines(path, lambda number, line: _parsed(path, number, line))


def sorted_lines(path: Path, check: Callable[[int, bytes], object]) -> tuple[list[bytes], list[bytes]]:
    """The lines of the log at ``path`` (with their newlines) that ``check(number, line)``
    passes, and those it refuses with a ``UserError`` (``mas library recover`` sets them aside)."""
    try:
        raw = regular_file(path).read_bytes()
    except FileNotFoundError:
        return [], []
    except OSError as e:
        raise UserError(f"{path}: cannot read ({e.strerror or e})") from None
    parts = raw.split(b"\n")  # at newlines only, as the readers count lines: a lone \r is inside a line
    lines = [part + b"\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
    good, bad = [], []
    for number, line in enumerate(lines, 1):
        try:
            check(number, line)
        except UserError:
            bad.append(line)
        else:
            good.append(line)
    return good, bad


_MEND = "mend or remove that line, or run `mas library recover` on its library file to set it aside"


class Judgement(NamedTuple):
    """A line of an equivalence log: its key and verdict, and for a "same" the two texts as
    written (perhaps redacted, so not always the texts of the key; empty when not texts, and
    for a "different": only a "same" is looked up by its texts, ``Judge.near``)."""

    key: str
    verdict: Equivalence
    a: str = ""
    b: str = ""


def _judgement(where: str, record: object) -> Judgement:
    """A line's key and verdict, checked (strict: ``"no"`` is no ``same``), with its texts."""
    key = record.get("key") if isinstance(record, dict) else None
    if not isinstance(key, str):
        raise UserError(f"{where}: not a judgement (key: not a text); {_MEND}")
    try:
        verdict = Equivalence.model_validate(record.get("verdict"), strict=True)
    except ValidationError as e:
        field, said = first_error(e, "verdict")
        raise UserError(f"{where}: not a judgement ({field}: {said}); {_MEND}") from None
    if not verdict.same:
        return Judgement(key, verdict)
    a, b = record.get("a"), record.get("b")
    return Judgement(key, verdict, a if isinstance(a, str) else "", b if isinstance(b, str) else "")
