"""``mas promote``: a promotion pass over a library file, outside training. Its options come
from ``PromotionPolicy`` and the run flags (``mas.cli.flags``: it may judge with a model), so
this module (not ``mas.cli.library``) imports the settings models.

Stage: none: the command line (the evidence's promotion pass, outside training).
"""

from __future__ import annotations

import math

import typer

from mas.cli import interrupt
from mas.cli.flags import RunFlags, judge_flags
from mas.cli.library import Which, out, say, store_of
from mas.cli.options import option, settings
from mas.cli.tracking import log_promote, tracker
from mas.config import PromotionPolicy

app = typer.Typer(rich_markup_mode=None)
"""``mas promote``, for ``mas.cli.main`` to list under ``mas``."""


@app.command("promote")
@judge_flags
def promote_command(
    which: Which,
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the moves and their evidence, change nothing."),
    min_roles: int = option(PromotionPolicy, "min_roles"),
    min_tasks: int = option(PromotionPolicy, "min_tasks"),
    alpha: float = option(PromotionPolicy, "alpha"),
    run: RunFlags = None,
) -> None:
    """A promotion pass on the randomized evidence: promote lessons shown to help several roles,
    demote global lessons that no longer do, prune lessons that no longer help their role.

    Name a model (--model, --model-config or --learner-config) to let it judge which lessons
    say the same thing; without one, only the judgements made in training are used and other
    pairs count as different."""
    from datetime import datetime

    from mas.types.lessons import Provenance

    store = store_of(which)
    policy = settings(PromotionPolicy, min_roles=min_roles, min_tasks=min_tasks, alpha=alpha)
    stamp = Provenance(run=f"promote-{datetime.now():%Y%m%d-%H%M%S}", epoch=0, step=0)
    if (run.executor or "local") != "local" or run.ray_address or run.workers:
        say("--executor, --ray-address and --workers are not used: mas promote runs no rollouts")
    judged = run.chosen or run.learner_config is not None
    clients = run.clients() if judged else None
    price = run.price(clients) if clients else None
    tracking = tracker(run.track, store.path.stem)
    moves, spent = interrupt.run(_promote(store, policy, stamp, run, clients, price, dry_run=dry_run))
    if spent is not None:
        say(f"judging cost ${spent:.4f}" if price.known else f"judging cost unknown (no price for {clients.label!r})")
    logged = {"library": str(store.path.resolve()), "model": clients.label if clients else "", "dry_run": dry_run}
    log_promote(tracking, params={**logged, **policy.model_dump(mode="json")}, moves=moves, spent=spent)
    _print_moves(moves, store, dry_run)


async def _promote(store, policy, stamp, run: RunFlags, clients, price, *, dry_run: bool):
    """The pass, judging with the model when one was named; the moves, and what judging cost."""
    from mas.library.hierarchy import promote
    from mas.models.limiter import Limited
    from mas.models.wrappers import Budgeted
    from mas.types.lessons import Budget

    if clients is None:
        return await promote(store, policy, stamp, budget=Budget(), dry_run=dry_run), None
    async with run.open(clients) as (client, learner):
        judge = Budgeted(Limited(learner or client, run.concurrency), price=price, budget_usd=run.budget_usd)
        moves = await promote(store, policy, stamp, budget=Budget(), client=judge, dry_run=dry_run)
        return moves, judge.spent


def _print_moves(moves, store, dry_run: bool) -> None:
    """Each move as a block of lines (its kind and lesson ids, the text, why, then one line of
    evidence per role): a table of six columns wrapped the evidence a word to a line at 80
    columns and cut the ids a user needs for ``mas library rollback``."""
    if not moves:
        out.print("no lesson meets the promotion, demotion or pruning rules yet")
        return
    for m in moves:
        roles = f" (roles: {', '.join(m.roles)})" if m.roles else ""
        say(f"{m.kind} {', '.join(m.lessons)}{roles}")
        say(f"  {m.text}")
        say(f"  why: {m.reason}")
        for e in m.evidence:
            say(
                f"  {e.role}: {e.effect:+.2f} [{_n(e.lcb)}, {_n(e.ucb)}] over {e.tasks} tasks, "
                f"e-value {e.e_now:.1f} (peak {e.e_value:.1f})"
            )
    say("evidence: the change in success when shown [90% interval] over tasks; e-value now (peak)")
    if dry_run:
        say("dry run: nothing changed; the same command without --dry-run applies these moves")
    else:
        say(f"applied to {store.path}")


def _n(value: float) -> str:
    return f"{value:+.2f}" if math.isfinite(value) else "n/a"
