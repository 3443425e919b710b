"""Lessons and libraries: a lesson, the edits of a library (one union on ``op``), a version of a
library with its provenance, and the token budget of the libraries and of a prompt.

Stage: edit and apply (a version is what applying a step's edits makes).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_serializer, model_validator

from mas.models.tokens import file_problem
from mas.types.base import INT64, SCHEMA_VERSION, Frozen, Int64, Settings

REVIEW_SCHEMA = 2
"""The schema of a library version a review decision made (``mas library review``): its
provenance says who decided and why, fields a mas from before the review gate cannot read."""
PERSON_SCHEMA = 3
"""The schema of a library version a person made by hand (``mas library add``, ``remove``,
``rollback``): its provenance says who and why under a stage a mas from before these records does not
know, so such a mas refuses the file ("upgrade mas") rather than calling it corrupt. The newest
schema this mas reads."""
BY_HAND = ("add", "remove", "rollback")
"""The stages of the versions a person made by hand, outside training and review."""
PERSON_FIELDS = {
    "review": ("pending", "by", "why"),
    "add": ("by", "why"),
    "remove": ("by", "why"),
    "rollback": ("by", "why", "to_version"),
}
"""The fields of ``Provenance`` that each stage a person makes writes to the file; other stages write none."""
GLOBAL = "global"
"""The name of the shared library that every role's prompt carries."""


class Lesson(Frozen):
    id: str
    """Stable id, ``<library>/<4 digits>``, never reused within a library. It names one text:
    a modify that changes the words gives them the next id (``mas.library.edits.apply``)."""
    text: str

    @property
    def library(self) -> str:
        """The library its id names (where it was written)."""
        return self.id.rpartition("/")[0]


class Budget(Settings):
    """Token caps of the libraries and of the lessons injected into one prompt (the same
    injection in training and at inference; a library records the one it was trained with)."""

    global_tokens: int = Field(300, ge=1)
    """The global library at most; it is injected whole into every role's prompt."""
    private_tokens: int = Field(600, ge=1)
    """Each role's private library at most; past it the weakest lessons are retired."""
    inject_tokens: int = Field(300, ge=1)
    """Private lessons injected into one prompt at most."""
    inject: Literal["relevant", "all"] = "relevant"
    """``relevant``: BM25 ranking against the task; ``all``: id order."""
    inject_global: bool = True
    """False leaves the global library out of every prompt (the private-only ablation)."""
    tokenizer: str = "model"
    """What counts these tokens: ``model`` (the tokenizer of the model in use, fixed when a run
    starts), ``tiktoken:ENCODING``, ``embedded``, ``gguf:PATH``, or ``words`` (words and
    punctuation marks; see ``mas.models.tokens``)."""

    @field_validator("global_tokens", "private_tokens", "inject_tokens")
    @classmethod
    def _writable(cls, tokens: int) -> int:
        """A cap a library file can record (``INT64``; a validator, not a bound of the field: the
        CLI would show it in every option's help)."""
        if tokens > INT64:
            raise ValueError(f"{tokens} is past {INT64}")
        return tokens

    @field_validator("tokenizer")
    @classmethod
    def _a_file_the_loader_can_read(cls, spec: str) -> str:
        """A library file records the tokenizer it was trained with, and evaluation loads it:
        a ``gguf:`` path from the file is refused here, when the file is read, unless it names
        a regular file (``mas.models.tokens.file_problem``)."""
        problem = file_problem(spec)
        if problem:
            raise ValueError(problem)
        return spec

    def cap(self, library: str) -> int:
        return self.global_tokens if library == GLOBAL else self.private_tokens


class Source(Frozen):
    """Where lessons from outside came from: another team's library file, as it was read."""

    file: str
    """The file: its path from the folder the import ran in, or its name when outside it (an
    older import: its absolute path)."""
    sha256: str
    """The digest of the file's bytes as they were read."""
    at: str
    """When it was read (ISO 8601, with the time zone)."""
    library: str
    """The library of that file the lessons were in."""
    version: Int64 = 0
    """That library's version."""


class Provenance(Frozen):
    run: str
    epoch: Int64
    step: Int64
    task_ids: list[str] = []
    model: str = ""
    stage: Literal[
        "edit", "promotion", "prune", "budget", "direct", "fresh", "screen", "import", "review",
        "add", "remove", "rollback",
    ] = "edit"  # fmt: skip
    """What made the version: the step's edit batch, a promotion pass, a budget retirement,
    lessons written directly without the loop (the ablation), the emptying of a library by a
    run started with ``fresh``, the removal of lessons that fail the screen on load, an import
    of another team's lessons (``source``), a review decision on an edit held for review, or a
    person by hand: a lesson written in, the removal of one, a rollback to an earlier version
    (``BY_HAND``)."""
    budget: Budget | None = None
    """The prompt composition the library was trained with; evaluation uses the same."""
    held_out: str = ""
    """How the run's held-out tasks were set apart (a test file, or a hash of the task ids)."""
    source: Source | None = Field(None, exclude_if=lambda source: source is None)
    """Where imported lessons came from (stage ``import``); left out of the file otherwise."""
    pending: Int64 | None = None
    """The held edit a review decided (``stage="review"``)."""
    by: str = ""
    """Who decided it (a review), or made it (an addition, a removal, a rollback)."""
    why: str = ""
    """Why, in that person's words."""
    to_version: Int64 | None = None
    """The version a rollback returned to (``stage="rollback"``)."""

    @model_serializer(mode="wrap")
    def _person_fields_only_where_made(self, handler):
        """Who and why are written only in the versions a person made (``PERSON_FIELDS``): any
        other version is written as before the review gate, so that a mas from before it reads
        the file (the versions a person made have their own schemas: ``REVIEW_SCHEMA``,
        ``PERSON_SCHEMA``)."""
        data = handler(self)
        if isinstance(data, dict):
            kept = PERSON_FIELDS.get(self.stage, ())
            for name in ("pending", "by", "why", "to_version"):
                if name not in kept:
                    data.pop(name, None)
        return data

    @model_validator(mode="before")
    @classmethod
    def _words_before_tokenizers(cls, data: object) -> object:
        """Libraries trained before budgets named their tokenizer counted words."""
        budget = data.get("budget") if isinstance(data, dict) else None
        if isinstance(budget, dict) and "tokenizer" not in budget:
            return {**data, "budget": {**budget, "tokenizer": "words"}}
        return data


class Add(Frozen):
    op: Literal["add"]
    text: str = Field(min_length=8, max_length=400)


class Modify(Frozen):
    op: Literal["modify"]
    id: str
    text: str = Field(min_length=8, max_length=400)


class Delete(Frozen):
    op: Literal["delete"]
    id: str


class Keep(Frozen):
    op: Literal["keep"]


Edit = Annotated[Add | Modify | Delete | Keep, Field(discriminator="op")]


class Rejected(Frozen):
    """An edit the model proposed that could not be applied, with why."""

    edit: dict | str
    reason: str


class Version(Frozen):
    """One state of one library: its lessons, and the edits that produced it."""

    schema_version: int = SCHEMA_VERSION
    library: str
    number: int
    lessons: list[Lesson]
    next_id: int
    """The number the next added lesson gets; ids are never reused."""
    edits: list[Edit] = []
    rejected: list[Rejected] = []
    provenance: Provenance | None = None

    @classmethod
    def empty(cls, library: str) -> Version:
        """Version 0 of a library: where every library starts, never stored."""
        return cls(library=library, number=0, lessons=[], next_id=1)
