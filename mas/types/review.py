"""The review gate (``mas train --review``, ``mas library review``): the edits a step held
instead of applying them, with the groups behind them, and the reviewers' decisions.

Stage: apply (held for review instead, applied when a reviewer accepts).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, FiniteFloat

from mas.types.base import SCHEMA_VERSION, Frozen
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

    id: int = Field(ge=1)
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


class Decision(Frozen):
    """A reviewer's decision on a held edit; the first decision on an edit is the one that holds."""

    schema_version: int = SCHEMA_VERSION
    id: int = Field(ge=1)
    verdict: Literal["accept", "reject", "edit"]
    by: str
    why: str = ""
    text: str | None = None
    """The reviewer's text (``edit``), which replaces the model's."""
    at: str = ""
    """When, as an ISO 8601 time."""
