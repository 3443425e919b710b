"""Tools that roles may name in their ``tools`` list."""

from __future__ import annotations

from autogen_core.tools import FunctionTool

from .calculator import calculate


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression such as (12 + 7) * 3 and return the result."""
    return calculate(expression)


TOOLS = {"calculator": FunctionTool(calculator, description=calculator.__doc__ or "", strict=False)}
