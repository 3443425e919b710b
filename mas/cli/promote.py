"""``mas promote``: a promotion pass over a library file, outside training. Its options come
from ``PromotionPolicy``, so this module (not ``mas.cli.library``) imports the settings models."""

from __future__ import annotations

import math

import typer
from rich.markup import escape

from mas.cli.library import Which, out, say, shown, store_of
from mas.cli.options import option, settings
from mas.config import PromotionPolicy

app = typer.Typer(rich_markup_mode=None)
"""``mas promote``, for ``mas.cli.main`` to list under ``mas``."""


@app.command("promote")
def promote_command(
    which: Which,
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the moves and their evidence, change nothing."),
    min_roles: int = option(PromotionPolicy, "min_roles"),
    min_tasks: int = option(PromotionPolicy, "min_tasks"),
    alpha: float = option(PromotionPolicy, "alpha"),
    model: str | None = typer.Option(
        None,
        help="A model (as for train) to judge which lessons say the same thing; without one, only "
        "the judgements made in training are used and other pairs count as different.",
        show_default=False,
    ),
) -> None:
    """A promotion pass on the randomized evidence: promote lessons shown to help several roles,
    demote global lessons that no longer do, prune lessons that no longer help their role."""
    import asyncio
    from datetime import datetime

    from rich.table import Table

    from mas.library.hierarchy import promote
    from mas.models.clients import open_client
    from mas.types import Budget, Provenance

    store = store_of(which)
    policy = settings(PromotionPolicy, min_roles=min_roles, min_tasks=min_tasks, alpha=alpha)
    stamp = Provenance(run=f"promote-{datetime.now():%Y%m%d-%H%M%S}", epoch=0, step=0)

    async def run():
        if model is None:
            return await promote(store, policy, stamp, budget=Budget(), dry_run=dry_run)
        async with open_client(model) as client:
            return await promote(store, policy, stamp, budget=Budget(), client=client, dry_run=dry_run)

    moves = asyncio.run(run())
    if not moves:
        out.print("no lesson meets the promotion, demotion or pruning rules yet")
        return
    table = Table(
        "move", "lesson", "ids", "roles", "evidence per role: effect [90% interval] over tasks, e-value", "why"
    )
    for m in moves:
        evidence = "\n".join(
            f"{e.role}: {e.effect:+.2f} [{_n(e.lcb)}, {_n(e.ucb)}] n={e.tasks} e={e.e_value:.1f}" for e in m.evidence
        )
        cells = [shown(m.text), shown(", ".join(m.lessons)), shown(", ".join(m.roles)) or "-"]
        table.add_row(m.kind, *map(escape, cells), escape(evidence), escape(shown(m.reason)))  # cells are markup
    out.print(table)
    say("dry run: nothing changed" if dry_run else f"applied to {store.path}")


def _n(value: float) -> str:
    return f"{value:+.2f}" if math.isfinite(value) else "n/a"
