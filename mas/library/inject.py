"""Which lessons go into a role's prompt, within budget, and the exact text they make.

Stage: rollout (a role's prompt); none: inference, after training (``LessonMemory``).

A role's prompt gets the whole global library (it is kept within its own cap), then the role's
private lessons most relevant to the task (BM25 over the lesson texts) until ``inject_tokens``
is spent; ``inject="all"`` takes the private lessons in id order instead. Training and
inference both build the block here, so a library is used the way it was trained.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import bm25s
import numpy as np

from mas.library.budget import tokens
from mas.library.exposure import RoleExposure
from mas.types.lessons import GLOBAL, Budget, Lesson, Version

logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every index build at DEBUG


def select(version: Version | None, *, limit: int, query: str | None = None, tokenizer: str = "words") -> list[Lesson]:
    """Lessons of ``version`` within ``limit`` tokens (of ``tokenizer``): most relevant to
    ``query`` first (id order without one), returned in id order so the prompt text stays stable."""
    if not version or not version.lessons:
        return []
    prepared = _prepare(version, tokenizer)
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


_PREPARED: OrderedDict[tuple[int, str], _Prepared] = OrderedDict()


def _prepare(version: Version, tokenizer: str) -> _Prepared:
    """Cached per version and tokenizer (versions are values: their lesson lists are never
    changed in place); the entry holds the list itself, so its id cannot be reused while the
    entry lives."""
    key = (id(version.lessons), tokenizer)
    hit = _PREPARED.get(key)
    if hit is not None and hit.lessons is version.lessons and len(hit.ordered) == len(version.lessons):
        _PREPARED.move_to_end(key)
        return hit
    ordered = sorted(version.lessons, key=lambda l: l.id)
    costs = [tokens(l.text, tokenizer) for l in ordered]
    hit = _Prepared(version.lessons, ordered, costs, min(costs), tuple(l.text for l in ordered))
    _PREPARED[key] = hit
    while len(_PREPARED) > 64:
        _PREPARED.popitem(last=False)
    return hit


def _scores(library: str, number: int, texts: tuple[str, ...], query: str) -> np.ndarray:
    retriever = _index(library, number, texts)
    query_tokens = bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)[0]
    if retriever is None or not query_tokens:
        return np.zeros(len(texts))
    return np.asarray(retriever.get_scores(query_tokens), dtype=float)


@lru_cache(maxsize=64)
def _index(library: str, number: int, texts: tuple[str, ...]) -> bm25s.BM25 | None:
    """One BM25 index per library version, reused by every rollout of a step; None when no
    lesson has a word that is not a stopword (nothing to index: every score is 0)."""
    tokenized = bm25s.tokenize(list(texts), stopwords="en", show_progress=False)
    if not tokenized.vocab:
        return None
    retriever = bm25s.BM25()
    retriever.index(tokenized, show_progress=False)
    return retriever


class Block(NamedTuple):
    """The lesson block of one prompt: its text, and the ids of the lessons in it, recorded on
    the role's trace (ids are never shown to the model, so it cannot write them into an
    answer, and nothing ever reads them back out of the text)."""

    text: str
    shown: list[str]


HEADER = "Lessons learned from earlier tasks of this kind; follow them when they apply."


TEAM, ROLE = "For the whole team:", "For your role:"


def render_block(
    shared: list[Lesson], own: list[Lesson], *, stable: tuple[str, ...] | None = None, varying: tuple[str, ...] = ()
) -> Block:
    """The exact text placed in a role's system message, what every call shows first and what
    varies last, so that providers' prompt caches (and llama.cpp's) reuse the longest prefix:

    1. the global lessons every rollout shows, then the role's own (``stable``, in its order:
       the step's, the same in every group; all of them in id order when None, as at inference);
    2. the role's lessons under evaluation and its transfer trials, which differ from rollout
       to rollout by design (randomized exposure), continuing the role's list (in the order of
       ``varying``, then by id);
    3. the global lessons under evaluation, under the global heading again.

    Training and inference both build it here; at inference (nothing under evaluation) it is
    the global lessons then the role's, in id order."""
    first = {} if stable is None else {lesson: n for n, lesson in enumerate(stable)}
    then = {lesson: n for n, lesson in enumerate(varying)}
    fixed = (lambda lesson: True) if stable is None else (lambda lesson: lesson.id in first)
    ordered = lambda lessons, place: sorted(lessons, key=lambda l: (place.get(l.id, len(place)), l.id))  # noqa: E731
    parts = [
        (TEAM, ordered((l for l in shared if fixed(l)), first)),
        (ROLE, ordered((l for l in own if fixed(l)), first) + ordered((l for l in own if not fixed(l)), then)),
        (TEAM, ordered((l for l in shared if not fixed(l)), then)),
    ]
    sections, shown = [], []
    for title, lessons in parts:
        if lessons:
            shown += [lesson.id for lesson in lessons]
            # One line each, whatever the text holds: a line break in a lesson (a model's, a hand-edited
            # file's) would start a line of the prompt's own, such as another heading.
            sections.append(title + "\n" + "\n".join(f"- {' '.join(lesson.text.split())}" for lesson in lessons))
    if not sections:
        return Block("", [])
    return Block(HEADER + "\n" + "\n".join(sections), shown)


def injected(
    heads: dict[str, Version], role: str, *, task: str | None, budget: Budget
) -> tuple[list[Lesson], list[Lesson]]:
    """The lessons ``budget`` lets into ``role``'s prompt for ``task``: the whole global library
    (up to its cap), and the private lessons most relevant to the task (or all, in id order)."""
    spec = budget.tokenizer
    shared = select(heads.get(GLOBAL), limit=budget.global_tokens, tokenizer=spec) if budget.inject_global else []
    query = task if budget.inject == "relevant" else None
    limit = budget.inject_tokens if budget.inject == "relevant" else budget.private_tokens
    return shared, select(heads.get(role), limit=limit, query=query, tokenizer=spec)


def role_block(
    heads: dict[str, Version],
    role: str,
    *,
    task: str | None = None,
    budget: Budget = Budget(),
    exposure: RoleExposure | None = None,
) -> Block:
    """The lesson block of ``role``'s prompt for ``task``, within ``budget``. In training,
    ``exposure`` withholds some injected lessons from this rollout and adds transfer trials
    (``mas.library.exposure``); at inference every injected lesson is shown."""
    shared, own = injected(heads, role, task=task, budget=budget)
    if exposure is None:
        return render_block(shared, own)
    shared = [l for l in shared if l.id not in exposure.hidden]
    own = [l for l in own if l.id not in exposure.hidden] + list(exposure.trials)
    return render_block(shared, own, stable=exposure.stable, varying=exposure.randomized)
