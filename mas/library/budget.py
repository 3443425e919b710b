"""Token budgets: what a role's prompt may carry, and how libraries stay within their caps.

Tokens are counted as words and punctuation marks (``tokens``): model-independent, needs no
tokenizer download, and close to what BPE tokenizers count for English lessons. Every cap
is checked with this one function, so "never above the budget" is exact.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal

from pydantic import Field

from mas.types import GLOBAL, Delete, Frozen, Version

_TOKEN = re.compile(r"\w+|[^\w\s]")


class Budget(Frozen):
    global_tokens: int = Field(300, ge=1)
    """The global library at most; it is injected whole into every role's prompt."""
    private_tokens: int = Field(600, ge=1)
    """Each role's private library at most; past it the weakest lessons are retired."""
    inject_tokens: int = Field(300, ge=1)
    """Private lessons injected into one prompt at most."""
    inject: Literal["relevant", "all"] = "relevant"
    """``relevant``: BM25 ranking against the task; ``all``: id order."""
    inject_global: bool = True
    """False leaves the global library out of every prompt (the private-only ablation)."""

    def cap(self, library: str) -> int:
        return self.global_tokens if library == GLOBAL else self.private_tokens


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
