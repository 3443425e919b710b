"""Token budgets: what a role's prompt may carry, and how libraries stay within their caps.

Tokens are counted as words and punctuation marks (``tokens``): model-independent, needs no
tokenizer download, and close to what BPE tokenizers count for English lessons. Every cap
below is checked with this one function, so "never above the budget" is exact.

Injection: the global library whole (it is kept within its own cap), then the role's private
lessons most relevant to the task (BM25 over the lesson texts) until ``inject_tokens`` is
spent. ``inject="all"`` takes the private lessons in id order instead.
"""

from __future__ import annotations

import logging
import re
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable, Literal

import bm25s
import numpy as np
from pydantic import Field

from .types import Delete, Frozen, Lesson, Version

_TOKEN = re.compile(r"\w+|[^\w\s]")
logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every index build at DEBUG


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
        return self.global_tokens if library == "global" else self.private_tokens


def tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


def select(version: Version | None, *, limit: int, query: str | None = None) -> list[Lesson]:
    """Lessons of ``version`` within ``limit`` tokens: most relevant to ``query`` first (id
    order without one), returned in id order so the prompt text stays stable."""
    if not version or not version.lessons:
        return []
    prepared = _prepare(version)
    order: Iterable[int] = range(len(prepared.ordered))
    if query:
        scores = _scores(version.library, version.number, prepared.texts, query)
        order = np.argsort(-scores, kind="stable").tolist()  # score descending, ties in id order
    chosen, spent, costs, least = [], 0, prepared.costs, prepared.least
    for i in order:
        if limit - spent < least:
            break  # no lesson left can fit
        if spent + costs[i] <= limit:
            chosen.append(i)
            spent += costs[i]
    return [prepared.ordered[i] for i in sorted(chosen)]


@dataclass(frozen=True)
class _Prepared:
    """What ``select`` needs of one version, computed once: lessons in id order, their token
    costs, the cheapest cost, and the texts (the BM25 index key)."""

    lessons: list[Lesson]
    """The version's own list, to check the cache entry belongs to it."""
    ordered: list[Lesson]
    costs: list[int]
    least: int
    texts: tuple[str, ...]


_PREPARED: OrderedDict[int, _Prepared] = OrderedDict()


def _prepare(version: Version) -> _Prepared:
    """Cached per version (versions are values: their lesson lists are never changed in place);
    the entry holds the list itself, so its id cannot be reused while the entry lives."""
    key = id(version.lessons)
    hit = _PREPARED.get(key)
    if hit is not None and hit.lessons is version.lessons and len(hit.ordered) == len(version.lessons):
        _PREPARED.move_to_end(key)
        return hit
    ordered = sorted(version.lessons, key=lambda l: l.id)
    costs = [tokens(l.text) for l in ordered]
    hit = _Prepared(version.lessons, ordered, costs, min(costs), tuple(l.text for l in ordered))
    _PREPARED[key] = hit
    while len(_PREPARED) > 64:
        _PREPARED.popitem(last=False)
    return hit


def _scores(library: str, number: int, texts: tuple[str, ...], query: str) -> np.ndarray:
    retriever = _index(library, number, texts)
    query_tokens = bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)[0]
    if not query_tokens:
        return np.zeros(len(texts))
    return np.asarray(retriever.get_scores(query_tokens), dtype=float)


@lru_cache(maxsize=64)
def _index(library: str, number: int, texts: tuple[str, ...]) -> bm25s.BM25:
    """One BM25 index per library version, reused by every rollout of a step."""
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(list(texts), stopwords="en", show_progress=False), show_progress=False)
    return retriever


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
