"""A calculator tool for small models that write junk, so it must survive hostile input.

Stage: rollout (a tool a role calls).

The expression is parsed with ``ast`` and walked by hand: only number literals, the
arithmetic operators and a few named functions are evaluated. Nothing is ever passed to
``eval``. Sizes are bounded at every step so ``9**9**9`` fails fast instead of hanging.

Worked example::

    >>> calculate(" `12 x 3 + 2^3 =` ")
    '44'
    >>> calculate("1,234 ÷ 4")
    '308.5'
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable
from decimal import Decimal

MAX_LENGTH = 200
MAX_EXPONENT = 100
MAX_MAGNITUDE = 10**100
"""Results beyond this are refused: no question the team gets needs them."""

Number = int | float

BINARY: dict[type, Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}

FUNCTIONS = ("sqrt", "abs", "round", "min", "max")
ALLOWED = "numbers, + - * / // % ** ( ) and " + ", ".join(FUNCTIONS)


def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression and return the result as text.

    Raises ``ValueError`` with a short message the model can read and act on.
    """
    if not isinstance(expression, str):
        raise ValueError("expression must be text")
    if len(expression) > 4 * MAX_LENGTH:
        raise ValueError(f"expression too long (max {MAX_LENGTH} characters)")
    text = normalize(expression)
    if not text:
        raise ValueError("empty expression")
    if len(text) > MAX_LENGTH:
        raise ValueError(f"expression too long (max {MAX_LENGTH} characters)")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise ValueError(f"could not parse {text!r}; use {ALLOWED}") from None
    try:
        result = evaluate(tree.body)
    except ZeroDivisionError:
        raise ValueError("division by zero") from None
    except (OverflowError, MemoryError):
        raise ValueError("result too large") from None
    except RecursionError:
        raise ValueError("expression nested too deeply") from None
    return format_number(result)


def normalize(expression: str) -> str:
    """Undo the usual ways a model decorates arithmetic before Python can parse it."""
    text = expression.strip().strip("`'\"").strip()
    text = text.removesuffix("=").strip()
    text = text.replace("×", "*").replace("÷", "/").replace("^", "**").replace("−", "-")
    text = text.translate(str.maketrans("[{", "((")).translate(str.maketrans("]}", "))"))
    text = re.sub(r"(?<![A-Za-z_])[xX](?![A-Za-z_])", "*", text)
    return drop_thousands_separators(text)


def drop_thousands_separators(text: str) -> str:
    """Remove commas in ``1,234`` but keep those that separate arguments of a call.

    A comma counts as a separator only when it follows a digit, is followed by exactly
    three digits, and does not sit directly inside a call's parentheses like ``max(1,234)``.
    """
    calls: list[bool] = []
    out: list[str] = []
    for i, char in enumerate(text):
        if char == "(":
            calls.append(bool(re.search(r"[A-Za-z_]\w*\s*$", text[:i])))
        elif char == ")" and calls:
            calls.pop()
        elif char == "," and not (calls and calls[-1]):
            if i > 0 and text[i - 1].isdigit() and re.match(r",\d{3}(?!\d)", text[i:]):
                continue
        out.append(char)
    return "".join(out)


def evaluate(node: ast.AST) -> Number:
    """Walk the tree, refusing every node that is not plain arithmetic."""
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"only numbers are allowed, not {value!r}")
        return check(value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd | ast.USub):
        value = evaluate(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = evaluate(node.left), evaluate(node.right)
        if isinstance(node.op, ast.Pow):
            return check(power(left, right))
        if type(node.op) in BINARY:
            return check(BINARY[type(node.op)](left, right))
    if isinstance(node, ast.Call):
        return check(call(node))
    if isinstance(node, ast.Name):
        raise ValueError(f"unknown name {node.id!r}; use {ALLOWED}")
    raise ValueError(f"{type(node).__name__} is not allowed; use {ALLOWED}")


def power(base: Number, exponent: Number) -> Number:
    """``base ** exponent``, refused before computing when the result would be huge."""
    if abs(exponent) > MAX_EXPONENT:
        raise ValueError(f"exponent too large (max {MAX_EXPONENT})")
    if base != 0 and exponent * math.log10(abs(base)) > 100:
        raise ValueError("result too large")
    if base < 0 and not float(exponent).is_integer():
        raise ValueError("fractional power of a negative number")
    return base**exponent


def call(node: ast.Call) -> Number:
    """One of the named functions, with positional number arguments only."""
    if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
        raise ValueError(f"only these functions are allowed: {', '.join(FUNCTIONS)}")
    if node.keywords:
        raise ValueError("keyword arguments are not allowed")
    name = node.func.id
    args = [evaluate(arg) for arg in node.args]
    if name in ("min", "max"):
        if not args:
            raise ValueError(f"{name} needs at least one number")
        return min(args) if name == "min" else max(args)
    if name == "round" and len(args) == 2:
        digits = args[1]
        if not isinstance(digits, int) or abs(digits) > 15:
            raise ValueError("round's digits must be a whole number from -15 to 15")
        return round(args[0], digits)
    if len(args) != 1:
        raise ValueError(f"{name} takes one number")
    if name == "sqrt":
        if args[0] < 0:
            raise ValueError("square root of a negative number")
        return math.sqrt(args[0])
    return abs(args[0]) if name == "abs" else round(args[0])


def check(value: object) -> Number:
    """Refuse complex, infinite, NaN and oversized intermediate results."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("result is not a real number")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("result too large")
    if abs(value) > MAX_MAGNITUDE:
        raise ValueError("result too large")
    return value


def format_number(value: Number) -> str:
    """Integers without ``.0``; other floats to 10 significant digits, no trailing zeros.

    The integral check runs on the rounded decimal text, so ``sqrt(2) ** 2`` prints ``2``
    and ``1.5e20`` prints its digits without binary noise.
    """
    if isinstance(value, int):
        return str(value)
    text = f"{value:.10g}"
    rounded = Decimal(text)
    if rounded == rounded.to_integral_value():
        return str(int(rounded))
    return text
