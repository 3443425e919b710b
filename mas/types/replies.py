"""What the learning calls must return, validated: a summary of a rollout, the semantic
advantage of a group, an edit batch; the schemas advertised to the model, restricted to the
team's roles and the library's lesson ids; the twin judge's verdict and the direct lessons.

Stage: summarize, advantage and edit (and, for ``Equivalence``, promote; for ``DirectLessons``,
the "directly generated" ablation).
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Literal, Union

from pydantic import BaseModel, Field, create_model

from mas.types.base import Frozen, Plain
from mas.types.lessons import GLOBAL, Add, Delete, Keep, Modify


class RoleSteps(Plain):
    """What one role did in one rollout, step by step."""

    role: str
    steps: list[str] = Field(max_length=24)
    """One line per step: what the role did, each tool call with its arguments and result."""
    missed: str = Field("", max_length=800)
    """Information the role had (a tool result, a teammate's message) and did not use."""
    errors: str = Field("", max_length=800)
    """Where the role went wrong, and why; empty when it did not."""
    applied: list[str] = Field(default=[], max_length=16)
    """Ids of the lessons the trace shows the role following (a description, never evidence)."""


class Summary(Plain):
    """A rollout compressed step by step, per role, against the ground truth when known."""

    roles: list[RoleSteps] = Field(max_length=8)
    outcome: str = Field(max_length=800)
    """The team's answer against the ground truth, and the step where the rollout was decided."""


class AddOperation(Frozen):
    op: Literal["add"]
    library: str
    """A role's name, or ``global`` for a lesson every role should have."""
    text: str
    reason: str = ""


class ModifyOperation(Frozen):
    op: Literal["modify"]
    id: str
    text: str
    reason: str = ""


class DeleteOperation(Frozen):
    op: Literal["delete"]
    id: str
    reason: str = ""


Operation = Annotated[AddOperation | ModifyOperation | DeleteOperation, Field(discriminator="op")]


class Advantage(Plain):
    """The semantic advantage of one group. Its fields come in the order a careful reader
    reasons: compare first, then judge the current lessons, then decide, then act (a
    constrained decoder writes them in this order). Operations are validated one by one."""

    comparison: str = Field(max_length=3000)
    """What the winners did that the losers did not, role by role, step by step."""
    lessons: str = Field("", max_length=1500)
    """Which current lessons (by id) the winners and the losers followed or ignored, and
    whether following them helped or hurt here."""
    deciding_roles: list[str] = Field(max_length=8)
    operations: list[dict] = Field(max_length=12)


class EditBatch(Plain):
    """The model's reply to the edit stage. Items are validated one by one, not here, so one
    malformed edit never sinks the others."""

    edits: list[dict] = Field(max_length=24)


def _ids(ids: tuple[str, ...]) -> object:
    return Literal[ids] if ids else str  # type: ignore[valid-type]


@cache
def summary_schema(roles: tuple[str, ...]) -> type[BaseModel]:
    """``Summary`` with every role field restricted to the team's roles."""
    steps = create_model("RoleSteps", __base__=RoleSteps, role=(Literal[roles], ...))  # type: ignore[valid-type]
    return create_model("Summary", __base__=Summary, roles=(list[steps], Field(max_length=8)))


def _advertising(base: type[BaseModel], schema: dict) -> type[BaseModel]:
    """``base`` (what validates a reply) advertising ``schema``, a stricter JSON schema for
    the prompt and for a constrained decoder."""
    return type(base.__name__, (base,), {"model_json_schema": classmethod(lambda cls, *args, **kwargs: schema)})


@cache
def advantage_schema(libraries: tuple[str, ...], ids: tuple[str, ...], most: int) -> type[Advantage]:
    """``Advantage``, advertising roles and lesson ids restricted to those that exist, at most
    ``most`` operations, and no modify or delete while there is no lesson yet."""
    add = create_model("AddOperation", __base__=AddOperation, library=(Literal[libraries], ...))  # type: ignore[valid-type]
    ops: list[type] = [add]
    if ids:
        ops += [
            create_model("ModifyOperation", __base__=ModifyOperation, id=(_ids(ids), ...)),
            create_model("DeleteOperation", __base__=DeleteOperation, id=(_ids(ids), ...)),
        ]
    union = Annotated[Union[tuple(ops)], Field(discriminator="op")]  # noqa: UP007
    roles = tuple(r for r in libraries if r != GLOBAL)
    strict = create_model(
        "Advantage",
        __base__=Advantage,
        deciding_roles=(list[Literal[roles]], Field(max_length=len(roles))),  # type: ignore[valid-type]
        operations=(list[union], Field(max_length=most)),
    )
    return _advertising(Advantage, strict.model_json_schema())


@cache
def edit_schema(ids: tuple[str, ...], most: int) -> type[EditBatch]:
    """``EditBatch``, advertising the edit union with lesson ids restricted to the library's."""
    ops: list[type] = [Add, Keep]
    if ids:
        ops += [
            create_model("Modify", __base__=Modify, id=(_ids(ids), ...)),
            create_model("Delete", __base__=Delete, id=(_ids(ids), ...)),
        ]
    union = Annotated[Union[tuple(ops)], Field(discriminator="op")]  # noqa: UP007
    strict = create_model("EditBatch", edits=(list[union], Field(max_length=most)))
    return _advertising(EditBatch, strict.model_json_schema())


class Equivalence(Plain):
    """The model's judgement of two lessons: does following one amount to following the
    other? The reasoning comes first; a merged text is offered when they are the same."""

    reason: str = Field(max_length=1200)
    same: bool
    merged: str = ""


class DirectLessons(Plain):
    """Lessons asked for outright, without rollouts (the paper's "directly generated" ablation)."""

    lessons: list[str] = Field(max_length=16)
