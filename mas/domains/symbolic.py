"""Answers that are expressions (MATH-500): read the last boxed or marked answer, and reward
by symbolic equivalence with math-verify (sympy underneath), not by string match.

Stage: reward.

>>> symbolic_reward(Task(id="t", question="?", answer="\\\\frac{1}{2}"), "0.5")
1.0
"""

from __future__ import annotations

import re

from math_verify import parse, verify

from mas.domains.maths import numeric_reward
from mas.types.tasks import Task

_MARKER = re.compile(r"(?:final answer|answer)\s*[:=]\s*(.+)", re.I)


def extract_latex(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` (braces balanced), else the text after the last
    ``ANSWER:`` marker on its line, else the last non-empty line."""
    start = text.rfind("\\boxed{")
    if start >= 0:
        depth, i = 0, start + len("\\boxed")
        for j in range(i, len(text)):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                return text[i + 1 : j].strip()
    markers = _MARKER.findall(text)
    if markers:
        return markers[-1].strip().rstrip(".").strip("$ ")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:200] if lines else None


def symbolic_reward(task: Task, got: str | None) -> float:
    """1.0 when ``got`` equals the task's answer as mathematics (plain numbers compare exactly)."""
    if got is None or task.answer is None:
        return 0.0
    if numeric_reward(task.answer, got) == 1.0:
        return 1.0
    words = _words(task.answer)
    if words is not None:  # sympy reads a word as a product of letters: "Mali" was "Lima", "More" was "Rome"
        return float(_words(got) == words)
    gold = parse(f"${task.answer}$")
    for candidate in (f"${got}$", got, f"\\boxed{{{got}}}"):
        try:
            if verify(gold, parse(candidate)):
                return 1.0
        except Exception:  # math-verify on model junk: anything can go wrong, none of it is ours
            continue
    return 0.0


_TEXT = re.compile(r"\\(?:text|textbf|mbox|mathrm)\{(.*)\}", re.S)


def _words(text: str) -> str | None:
    """``text`` as plain words, casefolded with its spaces collapsed, when it is words and not
    mathematics (a name, a place, yes or no; bare or in ``\\text{}``); else None."""
    text = text.strip().strip("$").strip()
    wrapped = _TEXT.fullmatch(text)
    text = (wrapped.group(1) if wrapped else text).strip().rstrip(".").strip()
    if not all(c.isalpha() or c in " ,.'-" for c in text) or not re.search(r"[^\W\d_]{2}", text):
        return None
    return " ".join(text.casefold().split())
