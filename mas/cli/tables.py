"""The tables ``mas eval``, ``transfer`` and ``ablate`` print (or their JSON), with how a
study stopped early and the run folder that holds it.

Stage: none: the command line (evaluation and studies, after training).
"""

from __future__ import annotations

import json
from pathlib import Path

from mas.cli.commands import err, out


def print_eval(spec, results, *, keys, labels, config, price, stopped, run_dir, as_json: bool) -> None:
    """The evaluations side by side, each with its paired changes (``evaluate.deltas``); as JSON,
    one object per evaluation, named by its column (``label``) and journal key (``key``)."""
    from rich.table import Table

    from mas.cost import stage_costs
    from mas.studies.by_kind import failed_rollouts
    from mas.studies.evaluate import deltas

    changes = deltas(results, keys, seed=config.seed)
    if as_json:
        named = zip(keys, labels, results, changes)
        rows = [
            {"key": key, "label": label, **r.model_dump(mode="json"), **{n: e.model_dump() for n, e in c.items()}}
            for key, label, r, c in named
        ]
        print(json.dumps(rows, indent=1))
        if stopped:
            err.print(f"stopped early: {stopped}", markup=False, highlight=False)
        return
    table = Table("", *labels)
    table.add_row("injected", *(r.library for r in results))
    table.add_row(f"Mean@{config.k}", *(str(r.mean_at_k) for r in results))
    table.add_row(f"Pass@{config.k}", *(str(r.pass_at_k) for r in results))
    table.add_row("vs none (paired)", *(str(c.get("vs_none", "")) for c in changes))
    if any("vs_library" in c for c in changes):  # --compare: the A/B, on the same tasks and seeds
        library = labels[keys.index("library")]
        table.add_row(f"vs {library} (paired)", *(str(c.get("vs_library", "")) for c in changes))
    for role in spec.role_names:
        table.add_row(f"tool calls, {role}", *(r.tool_calls[role].format(".1f") for r in results))
    for role in spec.role_names:
        table.add_row(f"tokens, {role}", *(r.tokens[role].format(".0f") for r in results))
    if price.known:
        table.add_row("cost $", *(f"{sum(stage_costs(r.calls, price).values()):.4f}" for r in results))
    out.print(table)
    tasks = len(results[0].tasks) if results else 0
    out.print(f"{tasks} held-out tasks ({spec.split}), k={config.k}; per rollout; [95% bootstrap interval over tasks]")
    for label, r in zip(labels, results, strict=True):
        if failed := failed_rollouts(r.calls, len(r.tasks) * config.k):
            out.print(f"{label}: {failed}, each scored 0", markup=False, highlight=False)
    if stopped:
        out.print(f"stopped early: {stopped}", markup=False, highlight=False)
    out.print(f"run in {run_dir}", markup=False, highlight=False)


def print_transfer(roles: list[str], result, *, as_json: bool, run_dir: Path | None = None, price=None) -> None:
    from rich.table import Table

    if as_json:
        print(result.model_dump_json(indent=1))
        return
    title = (
        "success-rate change when shown, from transfer trials (n: the tasks of each cell's contrasts), 95% CI"
        if result.source == "trials"
        else f"Mean@{result.k} change on {result.tasks} tasks (baseline {result.baseline:.3f}), 95% CI"
    )
    table = Table("lessons of \\ into", *roles, title=title)
    for a in roles:
        cells = {c.target: c for c in result.cells if c.source == a}
        table.add_row(a, *(_cell(cells.get(b), trials=result.source == "trials") for b in roles))
    out.print(table)
    if price is not None and price.known:
        out.print(f"cost $ {result.cost_usd:.4f}", markup=False, highlight=False)
    if result.stopped:
        out.print(f"stopped early: {result.stopped}", markup=False, highlight=False)
    if run_dir is not None:
        out.print(f"run in {run_dir}", markup=False, highlight=False)


def _cell(c, *, trials: bool) -> str:
    """One cell of the matrix: a change with its interval, or why there is none. A role with no
    lessons (or none tried) gives nothing to measure: "+0.00 [+0.00,+0.00]" would read as a
    measured null, and an estimate from one task has no interval, not one of width zero."""
    if c is None:
        return "-"
    if c.lessons == 0 or c.delta is None:  # from trials: no lesson of A was ever tried on B
        return "no trials" if trials else "no lessons"
    n = f" n={c.tasks}" if trials and c.tasks is not None else ""
    if c.low is None or c.high is None:
        return f"{c.delta:+.2f} (no interval){n}"
    return f"{c.delta:+.2f} [{c.low:+.2f},{c.high:+.2f}]{n}"


def print_ablation(spec, done, *, tasks: int, test_tasks: int, k: int, run_dir: Path, as_json: bool) -> None:
    """The ablation's table; ``tasks`` and ``test_tasks``: those the scenario had to give, which
    may be fewer than asked."""
    from rich.table import Table

    if as_json:
        print(json.dumps([r.model_dump(mode="json") for r in done.rows], indent=1))
        if done.stopped:
            err.print(f"stopped early: {done.stopped}", markup=False, highlight=False)
        return
    title = f"{spec.name}: {tasks} training tasks, {test_tasks} held-out"
    table = Table("variant", f"Mean@{k}", "vs no library (paired)", "lessons", "cost $", title=title)
    for r in done.rows:
        delta = "" if r.delta is None else str(r.delta)  # none for no library: no change from itself
        table.add_row(r.variant, str(r.mean_at_k), delta, str(r.lessons), f"{r.cost_usd:.4f}")
    out.print(table)
    out.print(
        f"{test_tasks} held-out tasks ({spec.split}), k={k}; per rollout; [95% bootstrap interval over tasks]; "
        "vs no library: the paired difference on the same tasks and seeds",
        markup=False, highlight=False,
    )  # fmt: skip
    if done.stopped:
        out.print(f"stopped early: {done.stopped}", markup=False, highlight=False)
    out.print(f"run in {run_dir}", markup=False, highlight=False)
