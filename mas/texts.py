"""What the learning prompts show, as text: the team, the libraries, a role's trace, a group's
attempts. Each function renders typed data; the templates in ``prompts/`` place the results.

Stage: summarize, advantage and edit (what their prompts show).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from mas.team.scenario import Role, Scenario
from mas.tools import TOOLS
from mas.types.lessons import GLOBAL, Lesson, Version
from mas.types.replies import RoleSteps, Summary
from mas.types.rollouts import Group, RoleTrace, Rollout
from mas.types.tasks import Task

_PLACEHOLDER = Task(id="-", question="-")


def team(scenario: Scenario) -> str:
    """Each role with its description and its tools (a lesson may only use those)."""
    return "\n".join(f"- {role_line(role)}" for role in scenario.roles)


def role_line(role: Role) -> str:
    return f"{role.name}: {role.description.strip()} Tools: {_tools(role)}."


def _tools(role: Role) -> str:
    if not role.tools:
        return "none"
    described = []
    for name in role.tools:
        doc = role.tool_docs.get(name) or TOOLS[name](_PLACEHOLDER).description
        doc = " ".join(doc.split())
        described.append(f"{name} ({doc})")
    return "; ".join(described)


def lessons(version: Version | None, describe: Callable[[Lesson], str] = lambda lesson: "") -> str:
    """A library's lessons, one per line with its id (and what ``describe`` adds), or (none)."""
    if not version or not version.lessons:
        return "(none)"
    return "\n".join(f"[{l.id}] {l.text}{describe(l)}" for l in sorted(version.lessons, key=lambda l: l.id))


def libraries(
    scenario: Scenario, heads: dict[str, Version], describe: Callable[[Lesson], str] = lambda lesson: ""
) -> str:
    """The global library and every role's, each with its lessons and ids."""
    parts = [f"global (every role):\n{lessons(heads.get(GLOBAL), describe)}"]
    parts += [f"{role}:\n{lessons(heads.get(role), describe)}" for role in scenario.role_names]
    return "\n\n".join(parts)


def shown_lessons(group: Group, roles: list[str], lesson: Callable[[str], Lesson | None]) -> str:
    """Every lesson any role was shown in the group's attempts, by role, with ids and texts:
    the same for every attempt of the group, so it goes before the traces (which name the ids
    each attempt showed), and a provider's prompt cache reuses it across the group."""
    parts = []
    for role in roles:
        ids = sorted({i for r in group.valid for t in r.traces if t.role == role for i in t.shown})
        lines = [f"  [{i}] {found.text}" for i in ids if (found := lesson(i))]
        parts.append(f"{role}:\n" + ("\n".join(lines) or "  (none)"))
    return "\n".join(parts)


def trace(t: RoleTrace) -> str:
    """A role's trace for the summary prompt: the ids of the lessons it was shown (their texts
    are listed once for the group, ``shown_lessons``), then its turns, each tool call with its
    arguments and result."""
    head = [f"## {t.role}", "Lessons shown: " + (", ".join(t.shown) or "none")]
    lines = []
    for turn in t.turns:
        for call in turn.tool_calls:
            status = "error" if call.is_error else "returned"
            lines.append(f"- called {call.name}({json.dumps(call.arguments)[1:-1]}) {status}: {call.result}")
        if turn.content:
            lines.append(f"- said: {turn.content.strip()}")
    return "\n".join(head + (lines or ["- (no output)"]))


def attempts(group: Group, summaries: list[Summary]) -> str:
    """Each valid rollout of a group: its reward and answer, the lessons each role was shown,
    and the step-by-step summary per role."""
    parts = []
    for r, s in zip(group.valid, summaries):
        lines = [f"## Attempt {r.index + 1}: reward {r.reward:g}, answer {r.answer or '(none)'}"]
        shown = {t.role: t.shown for t in r.traces}
        for role in s.roles:
            lines.append(f"### {role.role} (lessons shown: {', '.join(shown.get(role.role, [])) or 'none'})")
            lines += [f"{i}. {step}" for i, step in enumerate(role.steps, 1)]
            lines += [f"Missed: {role.missed}"] if role.missed else []
            lines += [f"Went wrong: {role.errors}"] if role.errors else []
        lines.append(f"Outcome: {s.outcome}")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def excerpt(r: Rollout) -> Summary:
    """Stands in for a summary the model failed to write (already counted): each role's
    messages, cut short, so the group can still be compared."""
    roles = [
        RoleSteps(
            role=t.role, steps=[(turn.content or "(tool call)")[:300] for turn in t.turns][:24] or ["(no output)"]
        )
        for t in r.traces
    ]
    return Summary(roles=roles, outcome=f"answer {r.answer or '(none)'}")
