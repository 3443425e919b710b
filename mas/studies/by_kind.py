"""What was refused and what failed, by kind: one line each, for the end of a training run
(``mas train``) and for each step or evaluation of a report (``mas report``).

Stage: none: evaluation and studies, after training (and the end of a training run).

refused: 3 edits (library is full: 2, duplicate of a lesson: 1); 1 operation (unknown lesson id: 1)
failed: 2 calls (summary: reply cut at the token limit 2), 1 rollout (timeout 1)
"""

from __future__ import annotations

import re
from collections import Counter

from mas.types.lessons import Rejected
from mas.types.reports import StageCount, StepReport

_ID = re.compile(r"\b[A-Za-z0-9_][A-Za-z0-9_.-]*/\d{4,9}\b")
_DETAIL = re.compile(r" \(|: | '|\"")
_FIELD = re.compile(r"([\w.]+): ")


def reason_kind(reason: str) -> str:
    """A refusal's reason without its details (ids, numbers, quoted values), so that reasons
    of one kind count together.

    >>> reason_kind("unknown lesson id 'solver/0042'"), reason_kind("duplicate of solver/0001")
    ('unknown lesson id', 'duplicate of a lesson')
    >>> reason_kind("library is full (8 lessons): modify or delete instead")
    'library is full'
    >>> reason_kind("over the limit of 2 operations per group"), reason_kind("text: String too short")
    ('over the limit of N operations per group', 'malformed text')
    """
    field = _FIELD.match(reason)
    if field:  # a validation error: "<field>: <message>"
        return f"malformed {field[1]}"
    text = _ID.sub("a lesson", reason)
    text = _DETAIL.split(text, maxsplit=1)[0]
    return re.sub(r"\b\d+(\.\d+)?\b", "N", text).strip() or "other"


def refused_line(steps: list[StepReport]) -> str:
    """Refused edits and operations by kind, and the lessons screening quarantined."""
    edits = [r for s in steps for rejected in s.rejected.values() for r in rejected]
    operations = [r for s in steps for r in s.refused_operations]
    quarantined = sum(s.quarantined for s in steps)
    parts = [_kinds(edits, "edit"), _kinds(operations, "operation")]
    parts += [f"{count(quarantined, 'proposed lesson')} quarantined by screening"] if quarantined else []
    parts = [p for p in parts if p]
    return "refused: " + ("; ".join(parts) if parts else "nothing")


def failed_line(steps: list[StepReport]) -> str:
    """Failed model calls per stage and kind, failed rollouts by kind, and the endpoint's faults."""
    calls: Counter = Counter()
    for s in steps:
        for stage, tally in s.calls.items():
            if stage in ("route", "rollout"):  # refused operations; rollouts are counted below
                continue
            calls.update({(stage, kind): n for kind, n in _kinds_of(tally.kinds, tally.failures).items()})
    rollouts: Counter = Counter()
    for s in steps:
        tally = s.calls.get("rollout")
        if tally is not None:
            rollouts.update(_kinds_of(tally.kinds, tally.failures))
    parts = []
    if calls:
        stages = sorted({stage for stage, _ in calls})
        detail = "; ".join(
            f"{stage}: " + ", ".join(f"{kind} {n}" for (st, kind), n in sorted(calls.items()) if st == stage)
            for stage in stages
        )
        parts.append(f"{count(sum(calls.values()), 'call')} ({detail})")
    if rollouts:
        parts.append(
            f"{count(sum(rollouts.values()), 'rollout')} ({', '.join(f'{k} {n}' for k, n in sorted(rollouts.items()))})"
        )
    faults: Counter = Counter()
    retries = 0
    for s in steps:
        if s.endpoint:
            faults.update(s.endpoint.faults)
            retries += s.endpoint.retries
    if faults:
        kinds = ", ".join(f"{k}: {n}" for k, n in sorted(faults.items()))
        parts.append(f"endpoint faults {kinds} ({count(retries, 'retry', 'retries')} in all)")
    return "failed: " + (", ".join(parts) if parts else "nothing")


def failed_rollouts(calls: dict[str, StageCount], total: int) -> str:
    """An evaluation's failed rollouts by kind, "" for none: each scored 0, so a Mean@k of a run
    whose endpoint failed mid-way read as the team's own score."""
    tally = calls.get("rollout")
    if tally is None or not tally.failures:
        return ""
    kinds = _kinds_of(tally.kinds, tally.failures)
    return f"{tally.failures} of {total} rollouts failed ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))})"


def _kinds(refused: list[Rejected], noun: str) -> str:
    if not refused:
        return ""
    kinds = Counter(reason_kind(r.reason) for r in refused)
    detail = ", ".join(f"{kind}: {n}" for kind, n in kinds.most_common())
    return f"{count(len(refused), noun)} ({detail})"


def _kinds_of(kinds: dict[str, int], failures: int) -> Counter:
    """Failures by kind; failures counted before kinds were kept are ``other``."""
    counted = Counter(kinds)
    rest = failures - sum(counted.values())
    if rest > 0:
        counted["other"] += rest
    return counted


def count(n: int, noun: str, plural: str | None = None) -> str:
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
