"""The review gate (``mas train --review``, ``mas library review``): the edits a step held
instead of applying them, with the groups behind them, and the reviewers' decisions.

Stage: apply (held for review instead, applied when a reviewer accepts).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, FiniteFloat, model_validator

from mas.types.base import INT64, SCHEMA_VERSION, Frozen
from mas.types.lessons import Add, Delete, Modify, Provenance

Change = Annotated[Add | Modify | Delete, Field(discriminator="op")]
"""An edit that changes a library (a ``keep`` changes nothing and is never held)."""


class Proposal(Frozen):
    """A group whose semantic advantage proposed an operation behind a held edit."""

    task_id: str
    question: str
    rewards: list[FiniteFloat]
    reason: str = ""
    """The operation's reason, as the semantic advantage gave it."""
    comparison: str = ""
    """The semantic advantage's comparison of the winners with the losers."""
    deciding_roles: list[str] = []


class PendingEdit(Frozen):
    """An edit of a step held for review: the edit, the lesson it changes as it was then, and
    the groups behind it, the likeliest first (the edit call merges a library's operations)."""

    id: int = Field(ge=1, le=INT64)
    """Unique in the library file's queue, never reused."""
    library: str
    edit: Change
    was: str = ""
    """The text of the lesson a modify or delete changes, when the edit was held."""
    sources: list[Proposal] = []
    proposals: int = 0
    """Operations of the step that the library's edit call merged into its edits."""


class PendingStep(Frozen):
    """The edits one training step held, with what a review needs to apply them as the step
    would have: its provenance, the library size limit, and what screening checks a text
    against (the step's answers and the texts its roles read)."""

    schema_version: int = SCHEMA_VERSION
    provenance: Provenance
    limit: int | None = None
    answers: list[str] = []
    sources: list[str] = []
    edits: list[PendingEdit] = []
    libraries: list[str] | None = None
    """The libraries the step could edit (the shared one and the team's roles'), so that a held
    edit naming another is refused when the log is read; None in a line held before they were kept."""

    @model_validator(mode="after")
    def _edits_the_step_could_make(self):
        """Each held edit once, in a library the step could edit, and a modify or delete of a
        lesson of that library: accepting an edit of a line mended by hand would otherwise make
        a library no role reads, or decide one edit twice."""
        seen: set[int] = set()
        for held in self.edits:
            if held.id in seen:
                raise ValueError(f"held edit {held.id} twice")
            seen.add(held.id)
            if self.libraries is not None and held.library not in self.libraries:
                could = ", ".join(map(repr, self.libraries))
                raise ValueError(
                    f"held edit {held.id}: library {held.library!r} is not one the step could edit ({could})"
                )
            target = getattr(held.edit, "id", None)
            if target is not None and target.rpartition("/")[0] != held.library:
                raise ValueError(f"held edit {held.id}: {held.edit.op} of {target}, not a lesson of {held.library!r}")
        return self


class Decision(Frozen):
    """A reviewer's decision on a held edit; the first decision on an edit is the one that holds."""

    schema_version: int = SCHEMA_VERSION
    id: int = Field(ge=1, le=INT64)
    verdict: Literal["accept", "reject", "edit"]
    by: str
    why: str = ""
    text: str | None = None
    """The reviewer's text (``edit``), which replaces the model's."""
    at: str = ""
    """When, as an ISO 8601 time."""
