"""Token budgets: what a role's prompt may carry, and how libraries stay within their caps.

Stage: rollout (what a prompt may carry) and evidence (budgets: libraries over their caps).

Tokens are the model's own (``Budget.tokenizer``, ``mas.models.tokens``): numbers, ids and
non-English text take many more of them than words. Every cap is checked with ``tokens``, so
"never above the budget" is exact in the tokenizer the budget names.
"""

from __future__ import annotations

from collections.abc import Callable

from mas.models.tokens import tokenizer
from mas.types.lessons import Delete, Version


def tokens(text: str, spec: str = "words") -> int:
    """Tokens of ``text`` for the tokenizer ``spec`` (words and punctuation marks by default)."""
    return tokenizer(spec).count(text)


def retirements(version: Version, *, cap: int, strength: Callable[[str], float], spec: str = "words") -> list[Delete]:
    """Delete edits that bring ``version`` within ``cap`` tokens (of tokenizer ``spec``),
    weakest evidence first (ties: the older lesson goes first)."""
    count = tokenizer(spec).count
    costs = {l.id: count(l.text) for l in version.lessons}
    total = sum(costs.values())
    edits = []
    # Older first by number: past solver/9999 an id's text sorts solver/10000 before solver/9999.
    for lesson in sorted(version.lessons, key=lambda l: (strength(l.id), len(l.id), l.id)):
        if total <= cap:
            break
        edits.append(Delete(op="delete", id=lesson.id))
        total -= costs[lesson.id]
    return edits
