"""Search tools over one task's passages: ``search`` ranks them with BM25, ``open`` shows one.

Stage: rollout (a tool a role calls).

Arguments come from small models, so nothing here trusts them: a number, a list, an empty
string, ten thousand characters of junk or an id that does not exist all get a short answer
the model can act on, never an exception. The BM25 index is built once per task and shared
by the task's rollouts.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import bm25s
from autogen_core import CancellationToken
from autogen_core.tools import FunctionTool, ToolSchema

from mas.types.tasks import Passage, Task

TOP = 3
SNIPPET = 160
MAX_QUERY = 500
"""Characters of a query that are read; the rest of a runaway argument is ignored."""
logging.getLogger("bm25s").setLevel(logging.WARNING)

ENDINGS = ("ings", "ing", "ers", "ors", "er", "or", "ed", "es", "s", "e")
ID = re.compile(r"[\s\[(\"'`]*(?:d|doc|document)?[\s_#]*(\d{1,6})(?![\w.])", re.IGNORECASE)


class CachedTool(FunctionTool):
    """A FunctionTool whose JSON schema is built once: autogen rebuilds it from the argument
    model at every call that offers the tool (a pydantic schema generation each time)."""

    @functools.cached_property
    def schema(self) -> ToolSchema:  # type: ignore[override]
        return super().schema


class LenientTool(CachedTool):
    """A FunctionTool that turns any argument into text before validation, so ``{"query": 5}``,
    ``{}`` or ``{"q": "..."}`` get an answer instead of a validation error."""

    async def run_json(
        self, args: Mapping[str, Any], cancellation_token: CancellationToken, call_id: str | None = None
    ) -> Any:
        args = args if isinstance(args, Mapping) else {}
        names = list(self.args_type().model_fields)
        fixed = {}
        for name in names:
            value = args.get(name)
            if value is None and len(names) == 1 and len(args) == 1:
                value = next(iter(args.values()))  # the right value under a wrong name
            fixed[name] = as_text(value)
        return await super().run_json(fixed, cancellation_token, call_id)


def as_text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple):
        return " ".join(as_text(v) for v in value)
    try:
        return json.dumps(value, ensure_ascii=False)[:MAX_QUERY] if isinstance(value, dict) else str(value)
    except (TypeError, ValueError):
        return ""


# -- search -------------------------------------------------------------------------------


def search_tool(task: Task) -> FunctionTool:
    passages = tuple(task.passages)

    def search(query: str) -> str:
        """Search the documents with key words or names, e.g. 'Velora Quint born'. Returns the
        best 3 as [doc_id] Title: start of text; open a doc_id to read it whole."""
        return run_search(task.id, passages, query)

    return LenientTool(search, description=" ".join((search.__doc__ or "").split()), name="search", strict=False)


def run_search(task_id: str, passages: tuple[Passage, ...], query: str) -> str:
    if not passages:
        return "no documents"
    if not isinstance(query, str) or not query.strip():
        return "empty query: search with names or key words from the question"
    words = bm25s.tokenize(
        [query[:MAX_QUERY]], stopwords="en", stemmer=stem_words, show_progress=False, return_ids=False
    )[0]
    index = _index(task_id, passages)
    if not words or index is None:
        return "no searchable words in the query: use names or key words from the question"
    scores = index.get_scores(words)
    ranked = sorted((i for i in range(len(passages)) if scores[i] > 0), key=lambda i: (-scores[i], i))
    if not ranked:
        return "no match; the documents are: " + "; ".join(f"[d{i}] {p.title}" for i, p in enumerate(passages))
    return "\n".join(line(i, passages[i]) for i in ranked[:TOP])


def stem(word: str) -> str:
    """A crude English stemmer, so 'founder' finds 'founded' and 'governs' finds 'governor';
    names are stemmed alike in documents and queries, so they still match themselves."""
    for ending in ENDINGS:
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            return word[: -len(ending)]
    return word


def stem_words(words: list[str]) -> list[str]:
    """``stem`` for each word: bm25s hands the stemmer the whole vocabulary at once."""
    return [stem(w) for w in words]


def tokenize(texts: list[str]) -> Any:
    return bm25s.tokenize(texts, stopwords="en", stemmer=stem_words, show_progress=False)


def line(i: int, passage: Passage) -> str:
    text = " ".join(passage.text.split())
    snippet = text if len(text) <= SNIPPET else text[:SNIPPET].rstrip() + "…"
    return f"[d{i}] {passage.title}: {snippet}"


@lru_cache(maxsize=128)
def _index(task_id: str, passages: tuple[Passage, ...]) -> bm25s.BM25 | None:
    """One index per task, shared by its rollouts; keyed by the passages too, so two packs
    that reuse an id never share one. None when no passage has a searchable word."""
    tokens = tokenize([f"{p.title} {p.text}" for p in passages])
    if not any(tokens.ids):  # bm25s fails or divides by zero on an empty vocabulary
        return None
    retriever = bm25s.BM25()
    retriever.index(tokens, show_progress=False)
    return retriever


# -- open ---------------------------------------------------------------------------------


def open_tool(task: Task) -> FunctionTool:
    passages = tuple(task.passages)

    def open_document(doc_id: str) -> str:
        """Read one whole document by its id from search, e.g. d3 (an exact title works too)."""
        return run_open(passages, doc_id)

    description = " ".join((open_document.__doc__ or "").split())
    return LenientTool(open_document, description=description, name="open", strict=False)


def run_open(passages: tuple[Passage, ...], doc_id: str) -> str:
    if not passages:
        return "no documents"
    i = find(passages, doc_id if isinstance(doc_id, str) else "")
    if i is None:
        shown = " ".join(str(doc_id).split())[:40]
        return f"unknown document {shown!r}; use an id from d0 to d{len(passages) - 1} (see search results)"
    return f"[d{i}] {passages[i].title}\n{passages[i].text}"


def find(passages: tuple[Passage, ...], doc_id: str) -> int | None:
    """The index ``doc_id`` names: ``d3``, ``3``, ``[d3]``, `` D3 ``, ``[d3] Title: ...`` or an
    exact title (any case); None for anything else."""
    doc_id = doc_id[: 4 * MAX_QUERY]
    title = " ".join(doc_id.split()).strip("\"'`[]").casefold()
    by_title = next((i for i, p in enumerate(passages) if p.title.casefold() == title), None)
    if by_title is not None:
        return by_title
    match = ID.match(doc_id)
    if match is None:
        return None
    i = int(match.group(1))
    return i if i < len(passages) else None
