"""Stages 6-9 of a step: route each operation to the library it changes, screen its text, one
batched edit call per library, screen what the editor wrote, apply. Whatever cannot be used is
kept with its reason (``Context.refused``, quarantine items), never dropped in silence.

Stage: route, screen, edit and apply.
"""

from __future__ import annotations

import asyncio

from pydantic import TypeAdapter

from mas import texts
from mas.config import PromotionPolicy
from mas.library.edits import apply, parse_edits, parse_items, rewords
from mas.library.evidence import likely_helps
from mas.library.pending import same_edit
from mas.library.promotion import helps, room
from mas.redact import secret_in
from mas.screen import screen, step_material
from mas.step.context import Context
from mas.step.learn import journaled
from mas.types.evidence import Effect
from mas.types.lessons import GLOBAL, Add, Delete, Edit, Modify, Rejected, Version
from mas.types.refusals import QuarantineItem
from mas.types.replies import AddOperation, Advantage, DeleteOperation, ModifyOperation, Operation, edit_schema
from mas.types.rollouts import Group

_operation = TypeAdapter(Operation)


def route(ctx: Context, advantages: list[Advantage]) -> dict[str, list[Operation]]:
    """The operations of every advantage, validated one by one, by the library they change:
    an add goes to the library it names (every add to the global one with ``route="global"``),
    a modify or delete to the library of the lesson it names. Whatever cannot be used is kept
    in ``ctx.refused`` with its reason, never dropped in silence."""
    routed: dict[str, list[Operation]] = {}
    for adv in advantages:
        operations, refused = parse_items(adv.operations, _operation)
        ctx.refused += refused
        for i, op in enumerate(operations):
            reason, library = _target(ctx, op)
            if i >= ctx.config.lessons_per_group:
                reason = f"over the limit of {ctx.config.lessons_per_group} operations per group"
            if reason:
                ctx.refused.append(Rejected(edit=op.model_dump(mode="json"), reason=reason))
                ctx.meter.fail("route", "refused")
            else:
                routed.setdefault(library, []).append(op)
    return routed


def _target(ctx: Context, op: Operation) -> tuple[str | None, str]:
    """(why ``op`` cannot be used or None, the library it changes)."""
    if isinstance(op, AddOperation):
        if op.library not in ctx.libraries:
            return f"unknown library {op.library!r}", ""
        return None, GLOBAL if ctx.config.route == "global" else op.library
    if ctx.lesson(op.id) is None:
        return f"unknown lesson id {op.id!r}", ""
    return None, op.id.rpartition("/")[0]


def screened(
    routed: dict[str, list[Operation]], answers: list[str], sources: list[str]
) -> tuple[dict[str, list[Operation]], list[QuarantineItem]]:
    """Operations whose text passes screening, and the refused ones as quarantine items."""
    kept: dict[str, list[Operation]] = {}
    refused = []
    for library, ops in routed.items():
        for op in ops:
            text = getattr(op, "text", None)
            reason = (screen(text, answers=answers, sources=sources) or secret_in(text)) if text is not None else None
            if reason:
                refused.append(QuarantineItem(library=library, text=op.text, reason=reason, stage="advantage"))
            else:
                kept.setdefault(library, []).append(op)
    return kept, refused


async def edit(ctx: Context, library: str, ops: list[Operation]) -> tuple[list[Edit], list[Rejected]] | None:
    """One batched edit call for one library: the step's operations on it, with their reasons,
    merged into one consistent list. Items are validated one by one."""
    head = ctx.heads[library]
    ids = tuple(sorted(l.id for l in head.lessons))
    reader = (
        "every role of the team:\n" + texts.team(ctx.scenario)
        if library == GLOBAL
        else texts.role_line(ctx.scenario.role(library))
    )
    batch = await journaled(
        ctx, "edit", f"{ctx.prefix}/{library}", edit_schema(ids, 24), 300 + 80 * (len(ops) + len(ids)),
        system_library="the global list, which every role reads" if library == GLOBAL else f"the {library}'s",
        system_reader=reader, system_objective=ctx.scenario.description, system_max_lessons=ctx.config.max_lessons,
        count=len(head.lessons), max_lessons=ctx.config.max_lessons,
        lessons=texts.lessons(head), operations="\n".join(_describe(op) for op in ops),
    )  # fmt: skip
    return None if batch is None else parse_edits(batch.edits)


def _describe(op: Operation) -> str:
    reason = f" (why: {op.reason})" if op.reason else ""
    if isinstance(op, AddOperation):
        return f"- add: {op.text}{reason}"
    if isinstance(op, ModifyOperation):
        return f"- modify [{op.id}] to: {op.text}{reason}"
    assert isinstance(op, DeleteOperation)
    return f"- delete [{op.id}]{reason}"


def screened_edits(
    library: str, edits: list[Edit], answers: list[str], sources: list[str]
) -> tuple[list[Edit], list[QuarantineItem]]:
    """The editor writes text too: its adds and modifies are screened the same way."""
    kept, refused = [], []
    for item in edits:
        reason = (
            (screen(item.text, answers=answers, sources=sources) or secret_in(item.text))
            if hasattr(item, "text")
            else None
        )
        if reason:
            refused.append(QuarantineItem(library=library, text=item.text, reason=reason, stage="edit"))
        else:
            kept.append(item)
    return kept, refused


def overruled(ctx: Context, library: str, edits: list[Edit]) -> tuple[list[Edit], list[Rejected]]:
    """The edits to apply, and those the evidence refuses: a delete, or a modify that changes
    the words (which retires the old ones, ``mas.library.edits.apply``), of a lesson shown to
    help a role that reads it (``PromotionPolicy.overrule``) or whose evidence there leans
    towards helping (``PromotionPolicy.overrule_level``). The model proposed the edit from one
    group; the lesson's randomized evidence comes from every group that showed it. New words
    can come as an add, and be tried on their own."""
    policy = ctx.config.promotion
    if not policy.overrule:
        return edits, []
    roles = ctx.scenario.role_names if library == GLOBAL else [library]
    texts = {lesson.id: lesson.text for lesson in ctx.heads[library].lessons}
    kept, refused = [], []
    for item in edits:
        evidence = [ctx.effects.get((role, item.id)) for role in roles] if _retires(item, texts) else []
        defended = [(e, reason) for e in evidence if e is not None and (reason := defence(e, policy))]
        if defended:  # the reason of the strongest evidence
            _, reason = max(defended, key=lambda pair: (helps(pair[0], policy), pair[0].e_value))
            refused.append(
                Rejected(edit=item.model_dump(mode="json"), reason=f"{reason}: the rollouts overrule the {item.op}")
            )
        else:
            kept.append(item)
    return kept, refused


def _retires(item: Edit, texts: dict[str, str]) -> bool:
    if isinstance(item, Modify):
        return item.id in texts and rewords(item, texts[item.id])
    return isinstance(item, Delete)


def defence(e: Effect, policy: PromotionPolicy) -> str | None:
    """The evidence in ``e.role`` that refuses an edit retiring the lesson, or None: it shows
    that the lesson helps (the test that promotes), or over ``min_tasks`` tasks or more it
    leans towards helping (the bound by which a run's end keeps a lesson)."""
    found = f"over {e.tasks} tasks, effect {e.effect:+.2f}"
    if helps(e, policy):
        return f"its evidence shows it helps the {e.role} (e-value {e.e_value:.0f} {found})"
    level = policy.overrule_level
    if level is not None and e.tasks >= policy.min_tasks and likely_helps(e, level):
        return f"its evidence leans towards helping the {e.role} ({1 - level:.0%} lower bound above zero {found})"
    return None


def unrejected(ctx: Context, library: str, edits: list[Edit]) -> tuple[list[Edit], list[Rejected]]:
    """The edits to apply, and those people decided against (``mas.library.people``): the same
    edit a reviewer rejected, the words of a lesson a person removed. The model proposes them
    again from new groups; the person's decision stands."""
    kept, refused = [], []
    for item in edits:
        why = ctx.decided_against.get(same_edit(library, item))
        if why is None:
            kept.append(item)
        else:
            refused.append(Rejected(edit=item.model_dump(mode="json"), reason=why))
    return kept, refused


def apply_edits(ctx: Context, library: str, edits: list[Edit], rejected: list[Rejected]) -> Version:
    shared = ctx.heads[GLOBAL].lessons if library != GLOBAL else []
    edits, reviewed = unrejected(ctx, library, edits)
    edits, overrules = overruled(ctx, library, edits)
    edits = made_room(ctx, library, edits, shared) + edits
    version, refused = apply(
        ctx.heads[library], edits, provenance=ctx.provenance, limit=ctx.config.max_lessons, shared=shared
    )
    return version.model_copy(update={"rejected": rejected + reviewed + overrules + refused})


def made_room(ctx: Context, library: str, edits: list[Edit], shared: list) -> list[Delete]:
    """The deletes that let the adds of ``edits`` fit in a full private library
    (``PromotionPolicy.make_room``, ``promotion.room``), each kept in ``ctx.room`` as the prune
    move that says why; none in a run whose edits are held for review (a person decides)."""
    limit, head = ctx.config.max_lessons, ctx.heads[library]
    if library == GLOBAL or ctx.config.review or not ctx.config.promotion.make_room:
        return []
    after, _ = apply(head, edits, limit=None, shared=shared)
    over, adds = len(after.lessons) - limit, sum(isinstance(edit, Add) for edit in after.edits)
    touched = {edit.id for edit in edits if isinstance(edit, (Delete, Modify))}
    untouched = head.model_copy(update={"lessons": [l for l in head.lessons if l.id not in touched]})
    moves = room(untouched, over, ctx.effects, ctx.config.promotion, limit=limit) if adds else []
    if over - len(moves) >= adds:  # a library past its limit: no add would fit even so
        return []
    ctx.room += moves
    return [Delete(op="delete", id=move.lessons[0]) for move in moves]


async def edit_all(
    ctx: Context, groups: list[Group], advantages: list[Advantage]
) -> tuple[list[Version], list[QuarantineItem]]:
    """Stages 6-9 in order for the step: route and screen the operations, one edit call per
    library (concurrently), screen the edits, apply them."""
    answers, sources = step_material(groups)
    routed, refused = screened(route(ctx, advantages), answers, sources)
    batches = await asyncio.gather(*(edit(ctx, library, ops) for library, ops in routed.items()))
    versions = []
    for library, parsed in zip(routed, batches):
        if parsed is not None:
            edits, bad = parsed
            edits, caught = screened_edits(library, edits, answers, sources)
            refused += caught
            versions.append(apply_edits(ctx, library, edits, bad))
    return versions, refused
