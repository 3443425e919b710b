"""A self-contained HTML view of the usage graph: roles, lessons, evidence, promotions.

No script and nothing fetched: an inline SVG with roles on the left and lessons on the right
(global first; grey text: merged or retired), one line per role -> lesson edge, green when it reliably helps the
role, red when it reliably hurts, grey otherwise; hover a line or a lesson for its numbers.
Below it, the promotion and demotion log with the evidence of each move.
"""

from __future__ import annotations

import html
import math

import networkx as nx

from mas.library.logs import StepKey
from mas.types import PromotionMove

ROW, TOP, LEFT, RIGHT, WIDTH = 26, 40, 150, 520, 1250


def render(graph: nx.DiGraph, moves: list[tuple[StepKey, list[PromotionMove]]], *, title: str) -> str:
    """The page; ``moves`` are the promotion log's steps."""
    roles = sorted(n for n, d in graph.nodes(data=True) if d.get("kind") == "role")
    lessons = sorted((n for n, d in graph.nodes(data=True) if d.get("kind") == "lesson"), key=_lesson_order)
    y = {n: TOP + i * ROW for i, n in enumerate(lessons)}
    span = max(len(lessons), 1) * ROW
    y.update({n: TOP + (i + 0.5) * span / max(len(roles), 1) for i, n in enumerate(roles)})
    parts = [_edge(graph, r, l, y) for r, l in graph.edges() if r in roles and l in y]
    parts += [_label(LEFT - 10, y[r], graph.nodes[r]["name"], anchor="end", bold=True) for r in roles]
    for n in lessons:
        d = graph.nodes[n]
        text = f"{d['name']}  {d.get('text', '')}" + ("  (gone)" if d.get("gone") else "")
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
    colour = "#2a9d4b" if d["lcb"] > 0 else "#c8372d" if d["ucb"] < 0 else "#9aa0a6"
    width = 1 + math.log1p(d["uses"])
    tip = (
        f"{graph.nodes[role]['name']} applied {graph.nodes[lesson]['name']}: {d['uses']} uses, "
        f"mean advantage {d['mean']:+.2f}, bound {_n(d['lcb'])}..{_n(d['ucb'])}"
    )
    return (
        f'<line x1="{LEFT}" y1="{y[role]:.0f}" x2="{RIGHT}" y2="{y[lesson]:.0f}" stroke="{colour}" '
        f'stroke-width="{width:.1f}" stroke-opacity="0.7"><title>{html.escape(tip)}</title></line>'
    )


def _label(x, y, text: str, *, anchor: str = "start", bold: bool = False, title: str = "", faded: bool = False) -> str:
    weight = ' font-weight="bold"' if bold else ' fill="#888"' if faded else ""
    tip = f"<title>{html.escape(title)}</title>" if title else ""
    return (
        f'<text x="{x}" y="{y + 4:.0f}" text-anchor="{anchor}" font-size="13"{weight}>{html.escape(text)}{tip}</text>'
    )


def _moves_table(moves: list[tuple[StepKey, list[PromotionMove]]]) -> str:
    if not any(items for _, items in moves):
        return "<p>No promotion or demotion yet.</p>"
    rows = []
    for key, items in moves:
        for m in items:
            evidence = "; ".join(
                f"{role}: {e.uses} uses, mean {e.mean:+.2f}, bound {_n(e.lcb)}" for role, e in m.evidence.items()
            )
            cells = [
                m.kind,
                m.text,
                ", ".join(m.lessons),
                ", ".join(m.roles) or "-",
                evidence,
                f"{key.run} epoch {key.epoch}",
            ]
            rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in ("move", "lesson", "ids", "roles", "evidence", "when"))
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _n(value: float) -> str:
    return f"{value:+.2f}" if math.isfinite(value) else "n/a"


_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:system-ui,sans-serif;margin:24px;color:#222}}table{{border-collapse:collapse;font-size:13px}}
td,th{{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}}th{{background:#f4f4f4}}</style>
</head><body><h1>{title}</h1>
<p>{roles} roles, {lessons} lessons. Lines: a role applied a lesson; green = reliably helped
(lower bound of the mean advantage above 0), red = reliably hurt, grey = not yet clear.</p>
{svg}
<h2>Promotions and demotions</h2>
{moves}
</body></html>
"""
