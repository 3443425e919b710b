"""Token budgets: what a role's prompt may carry, and how libraries stay within their caps.

Tokens are counted as words and punctuation marks (``tokens``): model-independent, needs no
tokenizer download, and close to what BPE tokenizers count for English lessons. Every cap
is checked with this one function, so "never above the budget" is exact.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from mas.types import Delete, Version

_TOKEN = re.compile(r"\w+|[^\w\s]")


def tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


def retirements(version: Version, *, cap: int, strength: Callable[[str], float]) -> list[Delete]:
    """Delete edits that bring ``version`` within ``cap`` tokens, weakest evidence first
    (ties: the older lesson goes first)."""
    total = sum(tokens(l.text) for l in version.lessons)
    edits = []
    for lesson in sorted(version.lessons, key=lambda l: (strength(l.id), l.id)):
        if total <= cap:
            break
        edits.append(Delete(op="delete", id=lesson.id))
        total -= tokens(lesson.text)
    return edits
