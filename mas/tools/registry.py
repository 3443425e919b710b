"""The tools that roles may name in their ``tools`` list, by name (``mas.tools.TOOLS``).

Stage: rollout (the tools a role calls, built for each task).

Each name maps to a factory that builds the tool for one task, so a tool can see the task's
own material (a searcher's passages) and nothing shared between rollouts can leak.
"""

from __future__ import annotations

from collections.abc import Callable

from autogen_core.tools import BaseTool

from mas.tools import isolation
from mas.tools.calculator import calculate
from mas.tools.sandbox import run_python
from mas.tools.search import CachedTool, open_tool, search_tool
from mas.types.tasks import Task


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression such as (12 + 7) * 3 and return the result."""
    return calculate(expression)


async def python(code: str) -> str:
    """Run a short Python program in a sandbox (standard library only, no network) and return what it prints."""
    return await run_python(code)


def python_tool(task: Task) -> BaseTool:
    """The python tool; refuses at once (``UserError``) when it cannot be isolated here."""
    isolation.require()
    return _PYTHON


_CALCULATOR = CachedTool(calculator, description=calculator.__doc__ or "", strict=False)
_PYTHON = CachedTool(python, description=python.__doc__ or "", strict=False)

TOOLS: dict[str, Callable[[Task], BaseTool]] = {
    "calculator": lambda task: _CALCULATOR,
    "search": search_tool,
    "open": open_tool,
    "python": python_tool,
}
