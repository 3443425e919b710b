"""What was refused on its way into a library, with why: a proposed lesson the screen
quarantined, and an operation or edit that could not be used (the side files
``<library>.quarantine.jsonl`` and ``<library>.rejected.jsonl``).

Stage: screen, route and apply.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from mas.types.base import SCHEMA_VERSION, Frozen
from mas.types.lessons import Source


class QuarantineItem(Frozen):
    """A proposed lesson that screening refused, and why."""

    schema_version: int = SCHEMA_VERSION
    library: str
    text: str
    reason: str
    stage: Literal["advantage", "edit", "load", "import"]
    """Where the text was proposed: by a semantic advantage, or by an edit call; or where it was
    found: in a library file as it was read, or in a file being imported."""
    source: Source | None = Field(None, exclude_if=lambda source: source is None)
    """The file it was to be imported from (stage ``import``)."""


class RefusedEdit(Frozen):
    """A proposed change to a library that was refused, and why: an operation of a semantic
    advantage that could not be routed, or an edit the edit call wrote that could not be applied."""

    schema_version: int = SCHEMA_VERSION
    library: str
    """The library it would have changed, as far as it names one ("" when it names none)."""
    edit: dict | str
    reason: str
    stage: Literal["advantage", "edit"]
