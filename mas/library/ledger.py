"""The randomized evidence of a usage log, kept between reads (``Ledger``).

Stage: record usage and evidence (every decision of a step after its rollouts reads it; its
edits with the step's own groups counted ahead).
"""

from __future__ import annotations

from collections.abc import Iterable

from mas.library.evidence import Fold, Key, Randomized, Tally, effects, groups_of
from mas.library.logs import Mark, StepLog
from mas.types.evidence import Effect
from mas.types.usage import UsageEvent


class Ledger:
    """The randomized evidence of one usage log, read once and kept: each step's line is
    parsed once, into its randomized groups (``Randomized``), and each way of counting (a
    lineage and classes of twins) folds each group once, adding only the groups recorded since
    it was last asked. A training step asks for the evidence several times (to plan exposure,
    to choose pairs to judge, to prune, to keep budgets, to promote), under a lineage and
    classes that change when lessons are promoted, merged or judged twins: a new way of
    counting folds the kept groups again, with no file read. A log replaced since (``repair``)
    is read again from its start.

    The groups are what a run keeps in memory beyond a step (the sets of lessons shown are
    kept once each): 8 MB for 10,000 rollouts of a team of three, 12 lessons a role, 4 of them
    randomized in each group (measured: 270 bytes a rollout and role); 8 MB for 18,000 events of
    about 18 lessons shown each, nearly every list of them a different one (``groups_of``)."""

    KEEP = 6
    """Ways of counting kept (a step reads three or four)."""

    def __init__(self, log: StepLog):
        self.log = log
        self._groups: list[Randomized] = []
        self._starts: list[int] = []
        """Where each step's groups start in ``_groups``."""
        self._sets: dict = {}
        """One copy of each lesson id and each list of ids (``groups_of``)."""
        self._mark = Mark()
        self._folds: dict[tuple, Fold] = {}

    def groups(self) -> list[Randomized]:
        """Every randomized group of the log, reading only the lines recorded since the last read."""
        if not self.log.current(self._mark):
            self._groups, self._starts, self._sets, self._mark, self._folds = [], [], {}, Mark(), {}
        for _, step, mark in self.log.since(self._mark):
            self._starts.append(len(self._groups))
            self._groups += groups_of(step, self._sets)
            self._mark = mark
        return self._groups

    def contrasts(
        self, lineage: dict[str, str] | None = None, classes: dict[str, str] | None = None
    ) -> dict[Key, Tally]:
        """``evidence.contrasts(log, lineage, classes)`` from the kept groups."""
        return self._fold(lineage or {}, classes or {}).tallies()

    def _fold(self, lineage: dict[str, str], classes: dict[str, str]) -> Fold:
        """The fold of this way of counting, with every group of the log."""
        groups = self.groups()
        key = (frozenset(lineage.items()), frozenset(classes.items()))
        fold = self._folds.pop(key, None) or Fold(lineage, classes)
        self._folds[key] = fold  # the most recent last
        while len(self._folds) > self.KEEP:
            del self._folds[next(iter(self._folds))]
        fold.add(groups[fold.count :])
        return fold

    def estimate(
        self, *, lineage: dict[str, str] | None = None, classes: dict[str, str] | None = None
    ) -> dict[Key, Effect]:
        """``evidence.estimate(log, ...)`` from the kept groups."""
        return effects(self.contrasts(lineage, classes), classes)

    def ahead(
        self,
        step: Iterable[UsageEvent],
        *,
        lineage: dict[str, str] | None = None,
        classes: dict[str, str] | None = None,
    ) -> dict[Key, Effect]:
        """The effects as ``estimate`` will give them once ``step``'s events are recorded,
        recording nothing: a step's edits are judged with the groups of the step's own
        rollouts, which randomized the lessons the edits would retire."""
        fold = self._fold(lineage or {}, classes or {}).copy()
        fold.add(groups_of(step))
        return effects(fold.tallies(), classes)

    def windows(
        self, *, lineage: dict[str, str] | None = None, classes: dict[str, str] | None = None
    ) -> tuple[dict[Key, Effect], dict[Key, Effect]]:
        """The effects (as ``estimate`` gives them) of the log's steps before its last third, and
        of its last third (whole steps: a run of three epochs, its last epoch); both empty when
        the log holds fewer than three steps. What a lesson did lately, beside what it did
        before (``promotion.turns``)."""
        groups = self.groups()
        late = len(self._starts) // 3
        if not late:
            return {}, {}
        cut = self._starts[-late]
        folds = [Fold(lineage or {}, classes or {}) for _ in range(2)]
        folds[0].add(groups[:cut])
        folds[1].add(groups[cut:])
        return effects(folds[0].tallies(), classes), effects(folds[1].tallies(), classes)
