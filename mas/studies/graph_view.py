"""A self-contained HTML view of the usage graph: roles, lessons, evidence, promotions.

Stage: none: evaluation and studies, after training (``mas graph``).

No script and nothing fetched: an inline SVG with roles on the left and lessons on the right
(global first; grey text: merged, demoted or pruned since), one line per role -> lesson edge:
green when the randomized evidence says the lesson helps the role, red when it hurts, grey
while it is not clear; dashed for a transfer trial. Hover a line or a lesson for its numbers.
Below it, the log of promotion passes with the evidence of each move.
"""

from __future__ import annotations

import html
import io
import math
import re

import networkx as nx

from mas.library.logs import StepKey
from mas.types.evidence import PromotionMove

ROW, TOP, LEFT, RIGHT, WIDTH = 26, 40, 150, 520, 1250


def export(store, fmt: str, *, tasks: bool = True) -> tuple[str, nx.DiGraph]:
    """The usage graph of a library file (``LibraryStore``) as GraphML or as this page, and the
    graph; ``tasks=False`` leaves out the lesson -> task edges."""
    from mas.config import PromotionPolicy
    from mas.library import graph as usage_graph
    from mas.library import hierarchy
    from mas.library.logs import SideFiles

    side = SideFiles(store.path)
    graph = usage_graph.build(
        hierarchy.effects(store, PromotionPolicy()),
        store.heads(),
        history=[v for name in store.libraries() for v in store.versions(name)],
        moves=[m for log in (side.promotions, side.prunings) for _, step in log.steps() for m in step],
        events=side.usage.items() if tasks else None,
    )
    if fmt == "graphml":
        return _graphml(graph), graph
    logged = sorted([*side.promotions.steps(), *side.prunings.steps()], key=lambda pair: (pair[0].epoch, pair[0].step))
    return render(graph, logged, title=f"Usage graph of {store.path.name}"), graph


_NOT_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
"""Characters no XML 1.0 document can hold, even escaped as ``&#27;``."""


def _graphml(graph: nx.DiGraph) -> str:
    """The GraphML document, with every character XML cannot hold written as its escape
    (``\\x1b``): a lesson or a task id may hold one (the screen lets an escape sequence pass, a
    library file is edited by hand), and networkx writes it as it is, which no GraphML reader
    (Gephi, yEd, networkx) then reads. None of them is part of the markup, so replacing them all
    is safe. Written whole (``nx.generate_graphml`` splits its lines at a form feed too, and
    joining them back would change the text)."""
    buffer = io.BytesIO()
    nx.write_graphml(graph, buffer)
    text = buffer.getvalue().decode("utf-8")
    return _NOT_XML.sub(lambda m: m[0].encode("unicode_escape", "backslashreplace").decode("ascii"), text)


def render(graph: nx.DiGraph, moves: list[tuple[StepKey, list[PromotionMove]]], *, title: str) -> str:
    """The page; ``moves`` are the promotion log's steps."""
    roles = sorted(n for n, d in graph.nodes(data=True) if d.get("kind") == "role")
    lessons = sorted((n for n, d in graph.nodes(data=True) if d.get("kind") == "lesson"), key=_lesson_order)
    y = {n: TOP + i * ROW for i, n in enumerate(lessons)}
    span = max(len(lessons), 1) * ROW
    y.update({n: TOP + (i + 0.5) * span / max(len(roles), 1) for i, n in enumerate(roles)})
    parts = [_edge(graph, r, l, y) for r, l in graph.edges() if r in roles and l in y]
    parts += [_label(LEFT - 10, y[r], graph.nodes[r]["label"], anchor="end", bold=True) for r in roles]
    for n in lessons:
        d = graph.nodes[n]
        moved = f"  (promoted to {d['promoted_to']})" if d.get("promoted_to") else "  (gone)" if d.get("gone") else ""
        moved += f"  (adopted as {d['adopted_as']})" if d.get("adopted_as") else ""
        text = f"{d['label']}  {d.get('text', '')}{moved}"
        parts.append(_label(RIGHT + 10, y[n], text[:110], title=d.get("text", ""), faded=d.get("gone", False)))
    height = TOP + span + ROW
    svg = f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}">{"".join(parts)}</svg>'
    return _PAGE.format(
        title=html.escape(title), svg=svg, moves=_moves_table(moves), roles=len(roles), lessons=len(lessons)
    )


def _lesson_order(node: str) -> tuple[bool, str]:
    name = node.removeprefix("lesson:")
    return (not name.startswith("global/"), name)


def _edge(graph: nx.DiGraph, role: str, lesson: str, y: dict) -> str:
    d = graph.edges[role, lesson]
    colour = "#2a9d4b" if d.get("helps") else "#c8372d" if d.get("hurts") else "#9aa0a6"
    width = 1 + math.log1p(d["tasks"])
    dash = ' stroke-dasharray="6 4"' if d["kind"] == "trial" else ""
    tip = (
        f"{graph.nodes[lesson]['label']} shown to {graph.nodes[role]['label']}"
        f"{' (transfer trial)' if d['kind'] == 'trial' else ''}: effect {d['effect']:+.2f} "
        f"[{_n(d.get('lcb'))}, {_n(d.get('ucb'))}] over {d['tasks']} tasks, {d['contrasts']} groups, "
        f"{d['exposures']} rollouts shown; judged applied in {d['judged']:.0%} (a description, not evidence)"
    )
    return (
        f'<line x1="{LEFT}" y1="{y[role]:.0f}" x2="{RIGHT}" y2="{y[lesson]:.0f}" stroke="{colour}" '
        f'stroke-width="{width:.1f}" stroke-opacity="0.7"{dash}><title>{html.escape(tip)}</title></line>'
    )


def _label(x, y, text: str, *, anchor: str = "start", bold: bool = False, title: str = "", faded: bool = False) -> str:
    weight = ' font-weight="bold"' if bold else ' fill="#888"' if faded else ""
    tip = f"<title>{html.escape(title)}</title>" if title else ""
    return (
        f'<text x="{x}" y="{y + 4:.0f}" text-anchor="{anchor}" font-size="13"{weight}>{html.escape(text)}{tip}</text>'
    )


def _moves_table(moves: list[tuple[StepKey, list[PromotionMove]]]) -> str:
    if not any(items for _, items in moves):
        return "<p>No promotion, demotion, merge or pruning yet.</p>"
    rows = []
    for key, items in moves:
        for m in items:
            evidence = "; ".join(
                f"{e.role}: {e.effect:+.2f} [{_n(e.lcb)}, {_n(e.ucb)}] n={e.tasks} e={e.e_value:.1f}"
                for e in m.evidence
            )
            ids = ", ".join(m.lessons) + (f" -> {m.into}" if m.into else "")
            cells = [m.kind, m.text, ids, ", ".join(m.roles) or "-", evidence, m.reason, f"{key.run} epoch {key.epoch}"]
            rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in ("move", "lesson", "ids", "roles", "evidence per role", "why", "when"))
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _n(value: float | None) -> str:
    return f"{value:+.2f}" if value is not None and math.isfinite(value) else "n/a"


_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:system-ui,sans-serif;margin:24px;color:#222}}table{{border-collapse:collapse;font-size:13px}}
td,th{{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}}th{{background:#f4f4f4}}</style>
</head><body><h1>{title}</h1>
<p>{roles} roles, {lessons} lessons. Lines: the lesson was shown at random to part of the role's
rollouts; green = showing it helped (lower bound of the effect above 0), red = it hurt (upper
bound below 0), grey = not yet clear; dashed = a transfer trial of another role's lesson.</p>
{svg}
<h2>Promotions, demotions and prunings</h2>
{moves}
</body></html>
"""
